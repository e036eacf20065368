"""Ray KaiwoJobs on the whole real stack (decision 0247): what Kueue admits, preempts and
admits again, what KubeRay runs and removes, and what the operator says of it, read from the
real components (Kueue, KubeRay, kube-scheduler, kwok; ``kaiwo_envtest.ray_head`` answers for
the Ray processes kwok does not run, decision 0187).

Each scenario has a namespace and a ClusterQueue of its own:

=========== =========== ===============================================================
queue       namespace   quota
=========== =========== ===============================================================
``rprio``   ``-rprio``  8 MI300X, preemption of lower priorities within the queue
``rwait``   ``-rwait``  8 MI300X: a Ray job waits for the GPUs a batch job holds
``rays``    ``-rays``   16 MI300X
=========== =========== ===============================================================
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any, Final

import pytest
import pytest_asyncio
from kaiwo_kube import resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_sandbox.fleet import NODE_TYPES, NodeSpec

from tests.integration.pipeline import cluster_actors as actors
from tests.integration.pipeline.harness import Pending, Pipeline, eventually, running_pipeline
from tests.real_cluster import RealCluster
from tests.real_stack import end_ray_job, kwok_fleet

pytestmark = [
    pytest.mark.k8s,
    pytest.mark.nats,
    pytest.mark.slow,
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.timeout(600),
]

MI300X: Final = NODE_TYPES["amd-mi300x"]
FLEET: Final = tuple(NodeSpec(f"rw-mi300x-{i}", MI300X) for i in range(1, 5))
SCENARIOS: Final = ("rprio", "rwait", "rays")
STEP: Final = 90.0
RUN_SECONDS: Final = "sandbox.kaiwo.silogen.ai/run-seconds"
RAY_CLUSTER_LABEL: Final = "ray.io/cluster"


def _queue(name: str, namespace: str, gpus: int, **spec: Any) -> dict[str, Any]:
    return {
        "name": name,
        "namespaces": [namespace],
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory", "amd.com/gpu"],
                    "flavors": [
                        {
                            "name": "mi300x",
                            "resources": [
                                {"name": "cpu", "nominalQuota": "2000"},
                                {"name": "memory", "nominalQuota": "64Ti"},
                                {"name": "amd.com/gpu", "nominalQuota": str(gpus)},
                            ],
                        }
                    ],
                }
            ],
            **spec,
        },
    }


def _queue_config(namespaces: Mapping[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": actors.KAIWO_API,
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": actors.QUEUE_CONFIG},
        "spec": {
            "resourceFlavors": [
                {"name": "mi300x", "nodeLabels": {"amd.com/gpu.product-name": MI300X.product}}
            ],
            "clusterQueues": [
                _queue(
                    "rprio",
                    namespaces["rprio"],
                    8,
                    preemption={"withinClusterQueue": "LowerPriority"},
                ),
                _queue("rwait", namespaces["rwait"], 8),
                _queue("rays", namespaces["rays"], 16),
            ],
            "workloadPriorityClasses": [
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta1",
                    "kind": "WorkloadPriorityClass",
                    "metadata": {"name": "low"},
                    "value": 100,
                },
                {
                    "apiVersion": "kueue.x-k8s.io/v1beta1",
                    "kind": "WorkloadPriorityClass",
                    "metadata": {"name": "high"},
                    "value": 1000,
                },
            ],
        },
    }


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(
    real_stack: RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Pipeline]:
    async with (
        await KubernetesAsyncioAdapter.from_kubeconfig(real_stack.kubeconfig) as admin,
        kwok_fleet(admin, FLEET),
        running_pipeline(
            tmp_path_factory.mktemp("kaiwo"), real=real_stack, gpu_cluster=False
        ) as pipeline,
    ):
        namespaces = {s: _namespace(pipeline, s) for s in SCENARIOS}
        for namespace in namespaces.values():
            await actors.create_namespace(admin, namespace)
        await admin.apply(_queue_config(namespaces), field_manager="cluster-admin", force=False)
        yield pipeline


def _namespace(pipeline: Pipeline, scenario: str) -> str:
    return f"{pipeline.namespace}-{scenario}"


def _kaiwo_job(
    name: str,
    namespace: str,
    *,
    queue_name: str,
    run_seconds: float | None = None,
    **spec: Any,
) -> dict[str, Any]:
    annotations = {RUN_SECONDS: f"{run_seconds:g}"} if run_seconds is not None else {}
    return {
        "apiVersion": actors.KAIWO_API,
        "kind": "KaiwoJob",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "spec": {
            "user": "alice@example.com",
            "image": "ghcr.io/silogen/rocm-ray:6.4",
            "entrypoint": "python train.py",
            "clusterQueue": queue_name,
            "gpuVendor": "amd",
            **spec,
        },
    }


def _condition(obj: Mapping[str, Any], kind: str) -> dict[str, Any] | None:
    for found in (obj.get("status") or {}).get("conditions") or ():
        if found.get("type") == kind:
            return dict(found)
    return None


async def _cluster_running(
    pipeline: Pipeline, namespace: str, name: str, workers: int
) -> list[dict[str, Any]]:
    """The pods of the RayJob ``name``'s cluster, once its head and ``workers`` workers run."""

    async def check() -> list[dict[str, Any]] | Pending:
        ray_job = await actors.get_or_none(pipeline.kube, resources.RAY_JOB, name, namespace=ns)
        cluster = ((ray_job or {}).get("status") or {}).get("rayClusterName")
        if not cluster:
            return Pending("no cluster yet")
        listed = await pipeline.kube.list(
            resources.POD, namespace=ns, label_selector=f"{RAY_CLUSTER_LABEL}={cluster}"
        )
        running = [p for p in listed.items if (p.get("status") or {}).get("phase") == "Running"]
        kinds = sorted(p["metadata"]["labels"]["ray.io/node-type"] for p in running)
        wanted = ["head", *(["worker"] * workers)]
        return running if kinds == wanted else Pending(f"running {kinds}")

    ns = namespace
    return await eventually(check, what=f"the cluster of {name} running", within=STEP)


async def test_a_running_ray_job_kueue_preempts_waits_and_runs_again(
    stack: Pipeline, real_stack: RealCluster
) -> None:
    """A running Ray job a higher priority one preempts waits, suspended, and runs again to the
    end once Kueue admits it again."""
    ns = _namespace(stack, "rprio")
    await stack.kube.create(
        _kaiwo_job("ray-victim", ns, queue_name="rprio", gpus=8, ray=True, priorityClass="low")
    )
    await stack.reaches("ray-victim", "RUNNING", namespace=ns, within=STEP)
    await stack.kube.create(
        _kaiwo_job("ray-urgent", ns, queue_name="rprio", gpus=8, ray=True, priorityClass="high")
    )

    async def preempted() -> dict[str, Any] | Pending:
        found = await stack.kube.get(resources.KAIWO_JOB, "ray-victim", namespace=ns)
        said = _condition(found, "Preempted")
        if said and said["status"] == "True":
            return found
        return Pending(str((found.get("status") or {}).get("status")))

    await eventually(preempted, what="the victim shows Kueue's preemption", within=STEP)
    await stack.reaches("ray-victim", "PENDING", namespace=ns, within=STEP)

    async def suspended() -> bool | Pending:
        # The operator may tell PENDING from Kueue's eviction a moment before Kueue's job
        # controller has written the RayJob's suspend.
        ray_job = await stack.kube.get(resources.RAY_JOB, "ray-victim", namespace=ns)
        return True if ray_job["spec"].get("suspend") is True else Pending("not suspended")

    await eventually(suspended, what="Kueue suspends the victim's RayJob", within=STEP)
    await end_ray_job(stack.kube, real_stack, ns, "ray-urgent")
    await stack.reaches("ray-urgent", "COMPLETE", namespace=ns, within=STEP)
    # The quota back, Kueue admits the victim again: its Ray job runs anew, to the end.
    again = await stack.reaches("ray-victim", "RUNNING", namespace=ns, within=STEP)
    evicted = _condition(again, "Evicted")
    assert evicted is not None and (evicted["status"], evicted["reason"]) == (
        "False",
        "Readmitted",
    )
    await end_ray_job(stack.kube, real_stack, ns, "ray-victim")
    await stack.reaches("ray-victim", "COMPLETE", namespace=ns, within=STEP)
    for name in ("ray-victim", "ray-urgent"):
        await stack.kube.delete(resources.KAIWO_JOB, name, namespace=ns)


async def test_a_running_ray_job_deleted_leaves_nothing_behind(stack: Pipeline) -> None:
    """Deleted while it runs, a Ray KaiwoJob leaves no RayJob, RayCluster, submitter Job, pod or
    Kueue Workload."""
    ns = _namespace(stack, "rays")
    await stack.kube.create(_kaiwo_job("ray-gone", ns, queue_name="rays", gpus=2, ray=True))
    await stack.reaches("ray-gone", "RUNNING", namespace=ns, within=STEP)
    await _cluster_running(stack, ns, "ray-gone", 1)
    await stack.kube.delete(resources.KAIWO_JOB, "ray-gone", namespace=ns)

    async def nothing_left() -> bool | Pending:
        left = []
        for kind in (
            resources.KAIWO_JOB,
            resources.RAY_JOB,
            resources.RAY_CLUSTER,
            resources.JOB,
            resources.POD,
            resources.KUEUE_WORKLOAD,
        ):
            listed = await stack.kube.list(kind, namespace=ns)
            left += [f"{kind.kind}/{o['metadata']['name']}" for o in listed.items]
        return True if not left else Pending(f"left {left}")

    await eventually(nothing_left, what="nothing of ray-gone left", within=STEP)


async def test_a_waiting_ray_job_edited_to_fit_the_free_quota_runs(stack: Pipeline) -> None:
    """A Ray job waiting for GPUs a batch job holds, edited down to what is free, is admitted and
    runs with the edited GPUs."""
    ns = _namespace(stack, "rwait")
    await stack.kube.create(_kaiwo_job("holder", ns, queue_name="rwait", gpus=6, run_seconds=300))
    await stack.reaches("holder", "RUNNING", namespace=ns, within=STEP)
    await stack.kube.create(_kaiwo_job("ray-wait", ns, queue_name="rwait", gpus=4, ray=True))
    await stack.reaches("ray-wait", "PENDING", namespace=ns, within=STEP)
    await stack.kube.merge_patch(
        resources.KAIWO_JOB,
        "ray-wait",
        {"spec": {"gpus": 2}},
        namespace=ns,
        field_manager="alice",
    )
    await stack.reaches("ray-wait", "RUNNING", namespace=ns, within=STEP)
    pods = await _cluster_running(stack, ns, "ray-wait", 1)
    [worker] = [p for p in pods if p["metadata"]["labels"]["ray.io/node-type"] == "worker"]
    assert worker["spec"]["containers"][0]["resources"]["limits"]["amd.com/gpu"] == "2"
    for name in ("ray-wait", "holder"):
        await stack.kube.delete(resources.KAIWO_JOB, name, namespace=ns)


async def test_a_running_ray_job_switched_to_a_batch_job_runs_on_and_is_told(
    stack: Pipeline, real_stack: RealCluster
) -> None:
    """``ray: false`` set on a running Ray KaiwoJob (decision 0247). Before, the RayJob was
    pruned (its cluster and Ray job went), a batch Job was made once KubeRay's submitter Job
    of the same name was gone (a ``NameConflict`` Warning meanwhile), a ``ChildDeleted``
    Warning blamed a deletion nobody made, and the work started over as a batch Job while
    ``ChildSpecApplied`` said the Job matched the spec. Now the RayJob runs on to the end and
    the switch is told."""
    ns = _namespace(stack, "rays")
    await stack.kube.create(_kaiwo_job("ray-switch", ns, queue_name="rays", gpus=2, ray=True))
    await stack.reaches("ray-switch", "RUNNING", namespace=ns, within=STEP)
    ray_job = await stack.kube.get(resources.RAY_JOB, "ray-switch", namespace=ns)
    await stack.kube.merge_patch(
        resources.KAIWO_JOB,
        "ray-switch",
        {"spec": {"ray": False}},
        namespace=ns,
        field_manager="kubectl-edit",
    )

    async def told() -> dict[str, Any] | Pending:
        found = await stack.kube.get(resources.KAIWO_JOB, "ray-switch", namespace=ns)
        applied = _condition(found, "ChildSpecApplied")
        if applied is None or applied.get("observedGeneration") != 2:
            return Pending(f"{applied}")
        return found

    found = await eventually(told, what="the switch told", within=STEP)
    applied = _condition(found, "ChildSpecApplied")
    assert applied is not None
    assert (applied["status"], applied["reason"], applied["message"]) == (
        "False",
        "JobFieldsImmutable",
        "Not applied to the running RayJob: spec.ray (with spec.rayJob) asks for a batch Job "
        "now, and switched while it runs the RayJob would be deleted and its work started over "
        "as a batch Job; the RayJob runs on as it started. Delete and re-create the workload "
        "to run it as a batch Job.",
    )
    await end_ray_job(stack.kube, real_stack, ns, "ray-switch")
    done = await stack.reaches("ray-switch", "COMPLETE", namespace=ns, within=STEP)
    assert done["status"]["startTime"] == found["status"]["startTime"]
    after = await stack.kube.get(resources.RAY_JOB, "ray-switch", namespace=ns)
    assert after["metadata"]["uid"] == ray_job["metadata"]["uid"]
    assert after["status"]["jobStatus"] == "SUCCEEDED"
    jobs = (await stack.kube.list(resources.JOB, namespace=ns)).items
    assert [
        j["metadata"]["name"]
        for j in jobs
        if any(o["kind"] == "KaiwoJob" for o in j["metadata"].get("ownerReferences") or ())
    ] == []
    events = await stack.kube.list(resources.EVENT, namespace=ns)
    reasons = sorted(
        e["reason"]
        for e in events.items
        if e["involvedObject"]["name"] == "ray-switch" and e["involvedObject"]["kind"] == "KaiwoJob"
    )
    assert "ChildSpecNotApplied" in reasons
    assert not {"ChildDeleted", "NameConflict"} & set(reasons), reasons
    await stack.kube.delete(resources.KAIWO_JOB, "ray-switch", namespace=ns)
