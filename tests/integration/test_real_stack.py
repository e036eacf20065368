"""The operator against the whole real stack (issue 22): the real Kueue admits, queues and
preempts under the quotas the KaiwoQueueConfig writes, the kube-scheduler with the
kaiwo-scheduler profile binds, kwok's nodes run the pods. Nothing is simulated by the tests
and no Pod status is written by them: they create workloads and read what happens.

One operator serves the module (the cluster singletons are one per cluster); each scenario has
a namespace and a ClusterQueue of its own, so scenarios do not wait for each other's quota:

========== ============ ====================================================================
queue      namespace    quota (GPUs of one flavor)
========== ============ ====================================================================
``gpu``    ``-gpu``     8 MI300X and 8 H100: the vendor decides the flavor, so the node
``small``  ``-quota``   8 MI300X: the second 8-GPU job waits for the first
``prio``   ``-prio``    8 MI300X, preemption of lower priorities within the queue
``dur``    ``-dur``     8 MI300X: the operator's own duration preemption
``pack``   ``-pack``    16 MI250X, on two nodes of their own: the scheduler's bin-packing
``svc``    ``-svc``     8 MI300X; the namespace is Kueue-managed, so Kueue admits each pod
``ray``    ``-ray``     8 MI300X, a RayJob's cluster
``ray``    ``-dflt``    (a hand-made LocalQueue ``default`` of ``ray``: Kueue's defaulting)
(none)     ``-model``   a KubeAI Model's server pods (no queue: KubeAI's pods are not Kueue's)
========== ============ ====================================================================

A pod runs for its workload's annotation ``sandbox.kaiwo.silogen.ai/run-seconds`` (copied onto
the pod template by the operator), or :data:`tests.real_stack.KWOK_TIMING`'s default.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

import pytest
import pytest_asyncio
from click.testing import CliRunner
from kaiwo_cli.main import app
from kaiwo_kube import KubernetesPort, NotFound, resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_planner.domain.scheduling.gpu_allocation import (
    allocated_gpus,
    gpu_stats,
    running_child_among,
)
from kaiwo_planner.domain.state.nodes import NodeInfo
from kaiwo_sandbox.fleet import NODE_TYPES, SIMULATED_LABEL, NodeSpec
from nats.js.api import DeliverPolicy

from tests.integration.pipeline import cluster_actors as actors
from tests.integration.pipeline.harness import (
    OPERATOR_USER,
    Pending,
    Pipeline,
    eventually,
    running_pipeline,
)
from tests.real_cluster import RealCluster
from tests.real_stack import ask_the_ray_stand_in, end_ray_job, end_running_pods, kwok_fleet
from tests.waiting import NotConvergedError

pytestmark = [
    pytest.mark.k8s,
    pytest.mark.nats,
    pytest.mark.slow,
    pytest.mark.asyncio(loop_scope="module"),
    # The first test starts the session's whole stack (20-45 s, minutes on a machine busy
    # with other work), and the module's operator.
    pytest.mark.timeout(600),
]

MI300X: Final = NODE_TYPES["amd-mi300x"]
MI250X: Final = NODE_TYPES["amd-mi250x"]
H100: Final = NODE_TYPES["nvidia-h100"]
FLEET: Final = (
    *(NodeSpec(f"stack-mi300x-{i}", MI300X) for i in range(1, 5)),
    NodeSpec("stack-mi250x-1", MI250X),
    NodeSpec("stack-mi250x-2", MI250X),
    NodeSpec("stack-h100-1", H100),
)
RUN_SECONDS: Final = "sandbox.kaiwo.silogen.ai/run-seconds"
FAIL: Final = "sandbox.kaiwo.silogen.ai/fail"
PERSISTENT_VOLUME: Final = resources.ResourceType(
    group="", version="v1", plural="persistentvolumes", kind="PersistentVolume", namespaced=False
)
STEP: Final = 90.0
"""The longest wait for one step (Kueue, the scheduler and kwok each act within seconds; a
loaded machine stretches that)."""
SCENARIOS: Final = ("gpu", "quota", "prio", "dur", "pack", "svc", "ray", "model")
KUEUE_MANAGED: Final = {"kueue-managed": "true"}
"""The label that makes Kueue manage a namespace's pods (and so a KaiwoService's), as upstream
Kaiwo configures Kueue (``kaiwo_envtest.kueue``)."""
CPU_AND_MEMORY: Final = (
    {"name": "cpu", "nominalQuota": "2000"},
    {"name": "memory", "nominalQuota": "64Ti"},
)


def flavor(name: str, **gpus: int) -> dict[str, Any]:
    """A flavor of a resource group covering cpu, memory and both GPU kinds."""
    return {
        "name": name,
        "resources": [
            *CPU_AND_MEMORY,
            {"name": "amd.com/gpu", "nominalQuota": str(gpus.get("amd", 0))},
            {"name": "nvidia.com/gpu", "nominalQuota": str(gpus.get("nvidia", 0))},
        ],
    }


def queue(name: str, namespace: str, *flavors: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "name": name,
        "namespaces": [namespace],
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory", "amd.com/gpu", "nvidia.com/gpu"],
                    "flavors": list(flavors),
                }
            ],
            **spec,
        },
    }


def queue_config(namespaces: Mapping[str, str]) -> dict[str, Any]:
    """The administrator's KaiwoQueueConfig: flavors by GPU product, a queue per scenario and
    two priority classes."""
    return {
        "apiVersion": actors.KAIWO_API,
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": actors.QUEUE_CONFIG},
        "spec": {
            "resourceFlavors": [
                {"name": "mi300x", "nodeLabels": {"amd.com/gpu.product-name": MI300X.product}},
                {"name": "mi250x", "nodeLabels": {"amd.com/gpu.product-name": MI250X.product}},
                {"name": "h100", "nodeLabels": {"nvidia.com/gpu.product": H100.product}},
            ],
            "clusterQueues": [
                queue("gpu", namespaces["gpu"], flavor("mi300x", amd=8), flavor("h100", nvidia=8)),
                queue("small", namespaces["quota"], flavor("mi300x", amd=8)),
                queue(
                    "prio",
                    namespaces["prio"],
                    flavor("mi300x", amd=8),
                    preemption={"withinClusterQueue": "LowerPriority"},
                ),
                queue("dur", namespaces["dur"], flavor("mi300x", amd=8)),
                queue("pack", namespaces["pack"], flavor("mi250x", amd=16)),
                queue("svc", namespaces["svc"], flavor("mi300x", amd=8)),
                queue("ray", namespaces["ray"], flavor("mi300x", amd=8)),
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
    """One operator on the real stack, the fleet registered, the queues made. The nodes go
    last, once the namespaces are gone: a pod on a removed node has no kubelet to stop it."""
    async with (
        await KubernetesAsyncioAdapter.from_kubeconfig(real_stack.kubeconfig) as admin,
        kwok_fleet(admin, FLEET),
        running_pipeline(
            tmp_path_factory.mktemp("kaiwo"), real=real_stack, gpu_cluster=False
        ) as pipeline,
    ):
        namespaces = {s: namespace_of(pipeline, s) for s in SCENARIOS}
        for namespace in namespaces.values():
            await actors.create_namespace(admin, namespace)
        await admin.merge_patch(
            resources.NAMESPACE,
            namespaces["svc"],
            {"metadata": {"labels": KUEUE_MANAGED}},
            field_manager="cluster-admin",
        )
        await admin.apply(queue_config(namespaces), field_manager="cluster-admin", force=False)
        yield pipeline


def namespace_of(pipeline: Pipeline, scenario: str) -> str:
    return f"{pipeline.namespace}-{scenario}"


def kaiwo_job(
    name: str,
    namespace: str,
    *,
    queue_name: str,
    gpus: int,
    vendor: str = "amd",
    run_seconds: float | None = None,
    fail: str | None = None,
    **spec: Any,
) -> dict[str, Any]:
    annotations = {}
    if run_seconds is not None:
        annotations[RUN_SECONDS] = f"{run_seconds:g}"
    if fail is not None:
        annotations[FAIL] = fail
    return {
        "apiVersion": actors.KAIWO_API,
        "kind": "KaiwoJob",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "spec": {
            "user": "alice@example.com",
            "image": "ghcr.io/silogen/rocm-ray:6.4",
            "entrypoint": "python train.py",
            "clusterQueue": queue_name,
            "gpus": gpus,
            "gpuVendor": vendor,
            **spec,
        },
    }


def vllm_service(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    """A Deployment-based KaiwoService in the ``svc`` queue: one AMD GPU per replica."""
    return {
        "apiVersion": actors.KAIWO_API,
        "kind": "KaiwoService",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "user": "erin@example.com",
            "image": "vllm/vllm-openai:v0.8.5",
            "entrypoint": "vllm serve Qwen/Qwen2.5-7B-Instruct --port 8000",
            "clusterQueue": "svc",
            "gpuVendor": "amd",
            "gpusPerReplica": 1,
            **spec,
        },
    }


async def kaiwo(state: str, *arguments: str) -> Any:
    """The ``kaiwo`` command, in a thread (it runs its own event loop), on the module's stack."""
    env = {**os.environ, "COLUMNS": "250", "KAIWO_STATE": state}
    return await asyncio.to_thread(CliRunner().invoke, app, list(arguments), env=env)


async def reaches(
    pipeline: Pipeline,
    name: str,
    namespace: str,
    phase: str,
    *,
    kind: resources.ResourceType = resources.KAIWO_JOB,
    within: float = STEP,
) -> dict[str, Any]:
    return await pipeline.reaches(name, phase, kind=kind, namespace=namespace, within=within)


async def gone(pipeline: Pipeline, kind: resources.ResourceType, name: str, namespace: str) -> None:
    async def check() -> bool | Pending:
        found = await actors.get_or_none(pipeline.kube, kind, name, namespace=namespace)
        return True if found is None else Pending("still there")

    await eventually(check, what=f"{kind.kind} {namespace}/{name} deleted", within=STEP)


def parse_rfc3339(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def condition(obj: Mapping[str, Any], kind: str) -> dict[str, Any]:
    for found in (obj.get("status") or {}).get("conditions") or ():
        if found.get("type") == kind:
            return dict(found)
    raise AssertionError(f"no {kind} condition in {obj.get('status')}")


async def job_pods(pipeline: Pipeline, namespace: str, job: str) -> list[dict[str, Any]]:
    listed = await pipeline.kube.list(
        resources.POD, namespace=namespace, label_selector=f"{actors.JOB_NAME_LABEL}={job}"
    )
    return listed.items


async def job_pods_running(
    pipeline: Pipeline, namespace: str, job: str, count: int, *, of: int
) -> None:
    """Waits until ``count`` of the ``of`` pods the Job asks for run (Kueue admitted part)."""

    async def running() -> list[dict[str, Any]] | Pending:
        pods = await job_pods(pipeline, namespace, job)
        found = [p for p in pods if p["status"].get("phase") == "Running"]
        return found if len(found) == count else Pending(f"{len(found)} running")

    await eventually(running, what=f"{count} of the {of} pods running", within=STEP)


async def events_of(
    pipeline: Pipeline, namespace: str, name: str, *, kind: str = "KaiwoJob"
) -> list[tuple[str, str]]:
    """The reasons and messages of the Events about the ``kind`` ``name``, oldest first."""
    listed = await pipeline.kube.list(resources.EVENT, namespace=namespace)
    about = [
        e
        for e in listed.items
        if (e.get("involvedObject") or {}).get("name") == name
        and (e.get("involvedObject") or {}).get("kind") == kind
    ]
    about.sort(key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")
    return [(str(e.get("reason")), str(e.get("message"))) for e in about]


async def has_events(
    pipeline: Pipeline, namespace: str, name: str, *reasons: str, kind: str = "KaiwoJob"
) -> list[tuple[str, str]]:
    """Wait until Events of each of ``reasons`` were posted about ``name``; returns them all."""

    async def check() -> list[tuple[str, str]] | Pending:
        found = await events_of(pipeline, namespace, name, kind=kind)
        missing = set(reasons) - {reason for reason, _ in found}
        return found if not missing else Pending(f"missing {sorted(missing)} in {found}")

    return await eventually(check, what=f"Events about {namespace}/{name}", within=STEP)


# ---------------------------------------------------------------------- the scenarios


async def test_a_gpu_kaiwojob_is_admitted_bound_to_its_vendor_run_and_complete(
    stack: Pipeline,
) -> None:
    """An AMD and an NVIDIA job in the ``gpu`` queue: Kueue admits each in its vendor's flavor,
    the kaiwo-scheduler binds its pod to a node of that vendor, kwok runs it to the end."""
    ns = namespace_of(stack, "gpu")
    await stack.kube.create(kaiwo_job("train-amd", ns, queue_name="gpu", gpus=4, run_seconds=4))
    await stack.kube.create(
        kaiwo_job("train-nvidia", ns, queue_name="gpu", gpus=2, vendor="nvidia", run_seconds=4)
    )

    async def runs_on_its_vendor_then_completes(name: str, label: str, product: str) -> None:
        running = await reaches(stack, name, ns, "RUNNING")
        assert condition(running, "Admitted")["status"] == "True"
        [pod] = await job_pods(stack, ns, name)
        assert pod["spec"]["schedulerName"] == "kaiwo-scheduler"
        node = await stack.kube.get(resources.NODE, pod["spec"]["nodeName"])
        assert node["metadata"]["labels"][label] == product
        done = await reaches(stack, name, ns, "COMPLETE")
        assert done["status"]["completionTime"]
        await has_events(stack, ns, name, "WorkloadPending", "WorkloadRunning", "WorkloadComplete")

    await asyncio.gather(
        runs_on_its_vendor_then_completes("train-amd", "amd.com/gpu.product-name", MI300X.product),
        runs_on_its_vendor_then_completes("train-nvidia", "nvidia.com/gpu.product", H100.product),
    )
    status = await kaiwo(str(stack.stack.options.state_dir), "status", "train-amd", "-n", ns)
    assert "Phase:     COMPLETE" in status.output, status.output
    [pod] = await job_pods(stack, ns, "train-amd")
    assert re.search(rf"Pod/{pod['metadata']['name']}\s+Succeeded", status.output), status.output
    # The latest Events: Kueue's admission, the Job's, the workload's steps.
    for told in ("Admitted by clusterQueue gpu", "WorkloadRunning", "WorkloadComplete"):
        assert told in status.output, status.output


async def test_a_failed_job_tells_the_jobs_reason_and_its_containers_exit(stack: Pipeline) -> None:
    """kwok ends the pod with exit code 1 and the annotation's message; the Job controller
    fails the Job (backoffLimit 0): the KaiwoJob names both, on its status and in the Event
    (decision 0134; it said only "Workload has failed")."""
    ns = namespace_of(stack, "gpu")
    await stack.kube.create(
        kaiwo_job("oom", ns, queue_name="gpu", gpus=1, run_seconds=2, fail="CUDA out of memory")
    )
    failed = await reaches(stack, "oom", ns, "FAILED")
    [pod] = await job_pods(stack, ns, "oom")
    cause = (
        "Job oom: Job has reached the specified backoff limit; pod"
        f" {pod['metadata']['name']}: container workload exited with code 1 (Error): CUDA out"
        " of memory"
    )
    healthy = condition(failed, "ChildHealthy")
    assert (healthy["status"], healthy["reason"], healthy["message"]) == (
        "False",
        "BackoffLimitExceeded",
        cause,
    )
    told = await has_events(stack, ns, "oom", "WorkloadFailed")
    assert ("WorkloadFailed", f"Workload has failed: BackoffLimitExceeded: {cause}") in told


async def test_a_full_queue_makes_the_next_job_wait_with_kueues_reason(stack: Pipeline) -> None:
    """The ``small`` queue holds 8 GPUs: the second 8-GPU job waits, its status naming why in
    Kueue's words, and runs once the first has ended and given the quota back."""
    ns = namespace_of(stack, "quota")
    # It runs until the test has read why the second waits, and ends it.
    await stack.kube.create(kaiwo_job("first", ns, queue_name="small", gpus=8, run_seconds=600))
    await reaches(stack, "first", ns, "RUNNING")
    await stack.kube.create(kaiwo_job("second", ns, queue_name="small", gpus=8, run_seconds=2))

    async def waits_with_kueues_reason() -> dict[str, Any] | Pending:
        found = await stack.kube.get(resources.KAIWO_JOB, "second", namespace=ns)
        admitted = next(
            (c for c in found.get("status", {}).get("conditions", []) if c["type"] == "Admitted"),
            {},
        )
        message = str(admitted.get("message", ""))
        return found if "insufficient unused quota" in message else Pending(message)

    waiting = await eventually(waits_with_kueues_reason, what="second waits with Kueue's reason")
    assert waiting["status"]["status"] == "PENDING"
    # A wait in vain on the real stack says what Kueue and the scheduler hold.
    with pytest.raises(NotConvergedError) as stalled:
        await reaches(stack, "second", ns, "RUNNING", within=0.1)
    headline, held, *trail = str(stalled.value).splitlines()
    assert headline == "KaiwoJob second in RUNNING: not within 0.1 s (phase PENDING)"
    assert held == f"what the cluster holds for {ns}:"
    [workload] = [line for line in trail if line.startswith("  Workload job-second-")]
    assert "QuotaReserved=False Pending: couldn't assign flavors to pod set main: " in workload
    [pod] = [line for line in trail if line.startswith("  Pod ")]  # second's Job is suspended
    assert pod.startswith("  Pod first-") and " phase=Running node=" in pod, pod
    status = await kaiwo(str(stack.stack.options.state_dir), "status", "second", "-n", ns)
    assert "insufficient unused quota for amd.com/gpu in flavor mi300x" in status.output, (
        status.output
    )
    assert condition(waiting, "Admitted")["message"] == (
        "Workload is pending admission into 'small': couldn't assign flavors to pod set main: "
        "insufficient unused quota for amd.com/gpu in flavor mi300x, 8 more needed"
    )
    await end_running_pods(stack.kube, ns, "first")
    first = await reaches(stack, "first", ns, "COMPLETE")
    second = await reaches(stack, "second", ns, "COMPLETE")
    assert second["status"]["startTime"] >= first["status"]["completionTime"]


async def preempt_for_jobs_waiting_a_second(pipeline: Pipeline) -> None:
    """The administrator's KaiwoConfig: a GPU job that waited 1 s is demand enough for the
    operator to terminate a job past its ``duration``."""
    await preempt_for_jobs_waiting(pipeline, "1s")


async def preempt_for_jobs_waiting(pipeline: Pipeline, threshold: str) -> None:
    """The administrator's KaiwoConfig: a GPU job that waited ``threshold`` is demand enough
    for the operator to terminate a job past its ``duration``."""
    await pipeline.kube.apply(
        {
            "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
            "kind": "KaiwoConfig",
            "metadata": {"name": actors.KAIWO_CONFIG},
            "spec": {"scheduling": {"pendingThresholdForPreemption": threshold}},
        },
        field_manager="cluster-admin",
        force=True,
    )


async def kueue_workload_of(pipeline: Pipeline, namespace: str, job: str) -> dict[str, Any]:
    """The Kueue Workload of the KaiwoJob's Job."""
    return await kueue_workload_owned(pipeline, resources.JOB, job, namespace)


async def kueue_workload_owned(
    pipeline: Pipeline, kind: resources.ResourceType, name: str, namespace: str
) -> dict[str, Any]:
    """The Kueue Workload Kueue labels with the uid of ``kind``/``name``. Kueue's job controller
    makes it some time after the object appears (CI once listed none right after the KaiwoJob's
    PENDING), so this waits for it."""
    owner = await pipeline.kube.get(kind, name, namespace=namespace)

    async def made() -> dict[str, Any] | Pending:
        listed = await pipeline.kube.list(
            resources.KUEUE_WORKLOAD,
            namespace=namespace,
            label_selector=f"{actors.KUEUE_JOB_UID_LABEL}={owner['metadata']['uid']}",
        )
        if len(listed.items) != 1:
            return Pending(f"{len(listed.items)} Workloads")
        workload: dict[str, Any] = listed.items[0]
        return workload

    return await eventually(made, what=f"Kueue's Workload of {kind.kind} {namespace}/{name}")


async def test_kueue_preempts_a_lower_priority_job_and_the_operator_shows_it(
    stack: Pipeline,
) -> None:
    """Priorities are the KaiwoQueueConfig's WorkloadPriorityClasses; in the ``prio`` queue a
    high-priority job takes the GPUs of a running low-priority one. The victim shows Kueue's
    preemption (condition, Event, waiting reason) and runs again once the quota is back."""
    ns = namespace_of(stack, "prio")
    await stack.kube.create(
        kaiwo_job("victim", ns, queue_name="prio", gpus=8, run_seconds=300, priorityClass="low")
    )
    await reaches(stack, "victim", ns, "RUNNING")
    assert (await kueue_workload_of(stack, ns, "victim"))["spec"]["priority"] == 100
    await stack.kube.create(
        kaiwo_job("urgent", ns, queue_name="prio", gpus=8, run_seconds=5, priorityClass="high")
    )

    async def shows_the_preemption() -> dict[str, Any] | Pending:
        found = await stack.kube.get(resources.KAIWO_JOB, "victim", namespace=ns)
        preempted = [
            c
            for c in (found.get("status") or {}).get("conditions") or ()
            if c["type"] == "Preempted" and c["status"] == "True"
        ]
        return found if preempted else Pending(str((found.get("status") or {}).get("status")))

    victim = await eventually(shows_the_preemption, what="the victim shows Kueue's preemption")
    preempted = condition(victim, "Preempted")
    assert preempted["reason"] == "InClusterQueue", preempted
    assert preempted["message"].startswith("Preempted to accommodate a workload"), preempted
    waiting = await reaches(stack, "victim", ns, "PENDING")
    assert "Preempted to accommodate" in condition(waiting, "Admitted")["message"]
    [(_, warning)] = [
        event
        for event in await has_events(stack, ns, "victim", "WorkloadPreempted")
        if event[0] == "WorkloadPreempted"
    ]
    assert warning.startswith("Kueue preempted the workload (InClusterQueue)"), warning
    urgent = await reaches(stack, "urgent", ns, "COMPLETE")
    assert (await kueue_workload_of(stack, ns, "urgent"))["spec"]["priority"] == 1000
    assert urgent["status"]["completionTime"]
    # The quota is back: Kueue admits the victim again, and it runs.
    await reaches(stack, "victim", ns, "RUNNING")
    await stack.kube.delete(resources.KAIWO_JOB, "victim", namespace=ns)


async def test_the_operators_duration_preemption_frees_quota_kueue_gives_to_the_waiting_job(
    stack: Pipeline,
) -> None:
    """A job past its ``duration`` is terminated by the operator once a GPU job of its queue has
    waited longer than the KaiwoConfig's threshold; Kueue then admits the waiting job."""
    ns = namespace_of(stack, "dur")
    await terminated_past_its_duration_for_the_waiting_one(
        stack,
        kaiwo_job("overtime", ns, queue_name="dur", gpus=8, run_seconds=300, duration="4s"),
        kaiwo_job("waiting", ns, queue_name="dur", gpus=8, run_seconds=2),
        child=resources.JOB,
    )


async def terminated_past_its_duration_for_the_waiting_one(
    stack: Pipeline,
    overtime: dict[str, Any],
    waiting: dict[str, Any],
    *,
    child: resources.ResourceType,
    end_waiting: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """``overtime`` (with a short ``duration``) runs, then ``waiting`` waits for its queue's
    GPUs: the operator terminates ``overtime`` for it (its ``child`` goes), and Kueue admits
    ``waiting``, which starts after the termination and runs to the end (``end_waiting``
    ends it once it runs, for a job whose run the test does not set)."""
    ns = overtime["metadata"]["namespace"]
    over, wait = overtime["metadata"]["name"], waiting["metadata"]["name"]
    await preempt_for_jobs_waiting_a_second(stack)
    await stack.kube.create(overtime)
    await reaches(stack, over, ns, "RUNNING")
    await stack.kube.create(waiting)
    await reaches(stack, wait, ns, "PENDING")

    stopped = await reaches(stack, over, ns, "TERMINATED")
    early = condition(stopped, "WorkloadTerminatedEarly")
    assert early["reason"] == "DurationExceededWithActiveGpuDemand", early
    assert stopped["status"]["preemptedFor"]["name"] == wait
    await gone(stack, child, over, ns)
    if end_waiting is not None:
        await end_waiting()
    done = await reaches(stack, wait, ns, "COMPLETE")
    assert done["status"]["startTime"] >= early["lastTransitionTime"]


async def test_the_kaiwo_scheduler_packs_gpu_pods_onto_one_node_before_the_next(
    stack: Pipeline,
) -> None:
    """Two empty 8-GPU MI250X nodes, four 4-GPU jobs one after the other: the second joins the
    first on its node (bin-packing, not spreading), the third and fourth fill the other."""
    ns = namespace_of(stack, "pack")
    placed: list[str] = []
    for index in range(4):
        name = f"pack-{index}"
        await stack.kube.create(kaiwo_job(name, ns, queue_name="pack", gpus=4, run_seconds=120))
        await reaches(stack, name, ns, "RUNNING")
        [pod] = await job_pods(stack, ns, name)
        placed.append(pod["spec"]["nodeName"])
    assert placed[0] == placed[1], placed
    assert placed[2] == placed[3] != placed[0], placed
    assert set(placed) == {"stack-mi250x-1", "stack-mi250x-2"}
    for index in range(4):
        await stack.kube.delete(resources.KAIWO_JOB, f"pack-{index}", namespace=ns)


async def test_a_kaiwoservice_becomes_ready_and_rolls_on_a_spec_change(stack: Pipeline) -> None:
    """In a Kueue-managed namespace Kueue admits each of the Deployment's pods; the real
    controllers, scheduler and kwok make them Ready; a new image rolls them."""
    ns = namespace_of(stack, "svc")
    await stack.kube.create(vllm_service("chat", ns, replicas=2))
    ready = await reaches(stack, "chat", ns, "READY", kind=resources.KAIWO_SERVICE)
    assert condition(ready, "Admitted")["status"] == "True"
    first = await serving_pods(stack, ns, "chat", image="vllm/vllm-openai:v0.8.5")
    workloads = await stack.kube.list(resources.KUEUE_WORKLOAD, namespace=ns)
    admitted_pods = {
        w["metadata"]["labels"].get(actors.KUEUE_JOB_UID_LABEL)
        for w in workloads.items
        if any(c["type"] == "Admitted" and c["status"] == "True" for c in w["status"]["conditions"])
    }
    assert {p["metadata"]["uid"] for p in first} <= admitted_pods
    told_before = await events_of(stack, ns, "chat", kind="KaiwoService")

    await stack.kube.merge_patch(
        resources.KAIWO_SERVICE,
        "chat",
        {"spec": {"image": "vllm/vllm-openai:v0.9.0"}},
        namespace=ns,
        field_manager="kubectl-edit",
    )
    second = await serving_pods(stack, ns, "chat", image="vllm/vllm-openai:v0.9.0")
    assert not {p["metadata"]["name"] for p in first} & {p["metadata"]["name"] for p in second}

    async def ready_again() -> dict[str, Any] | Pending:
        found = await stack.kube.get(resources.KAIWO_SERVICE, "chat", namespace=ns)
        status = found.get("status") or {}
        settled = status.get("status") == "READY" and status.get("observedGeneration") == 2
        return (
            found
            if settled
            else Pending(f"{status.get('status')} {status.get('observedGeneration')}")
        )

    await eventually(ready_again, what="chat READY at generation 2", within=STEP)
    # It served throughout: each new pod waited for Kueue's admission while the old ones
    # served, and no phase but READY was told (decision 0135; before, READY -> PENDING ->
    # STARTING -> READY on every rollout, each with its Event and public event).
    told = await events_of(stack, ns, "chat", kind="KaiwoService")
    assert len(told) == len(told_before), told
    await stack.kube.delete(resources.KAIWO_SERVICE, "chat", namespace=ns)


async def test_a_services_own_deployment_gpus_are_counted_and_freed_past_its_duration(
    stack: Pipeline,
) -> None:
    """A KaiwoService whose given Deployment asks for its GPUs in its container (no
    ``gpus`` nor ``gpusPerReplica``) runs its pods with them, as Kueue reserves them: the
    operator counts them too (decision 0163). Before, it counted none: the pods were told
    ``NUM_GPUS_PER_REPLICA=0``, ``Schedulable`` said "Workload does not require GPU
    resources", and a GPU job waiting for them past the service's ``duration`` waited for
    ever, since stopping a service that holds nothing frees nothing."""
    ns = namespace_of(stack, "svc")
    await preempt_for_jobs_waiting_a_second(stack)
    service = vllm_service("own-gpus", ns, duration="4s")
    del service["spec"]["gpusPerReplica"]
    container = {
        "name": "vllm",
        "image": "vllm/vllm-openai:v0.8.5",
        "resources": {"limits": {"amd.com/gpu": 8}},
    }
    service["spec"]["deployment"] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "spec": {"template": {"spec": {"containers": [container]}}},
    }
    await stack.kube.create(service)
    ready = await reaches(stack, "own-gpus", ns, "READY", kind=resources.KAIWO_SERVICE)
    assert condition(ready, "Schedulable")["message"] == "Cluster has sufficient GPU resources"
    listed = await stack.kube.list(resources.POD, namespace=ns, label_selector="app=own-gpus")
    [pod] = [p for p in listed.items if "deletionTimestamp" not in p["metadata"]]
    assert pod["spec"]["containers"][0]["resources"]["limits"]["amd.com/gpu"] == "8"
    assert {k: v for k, v in _env_of(pod).items() if k.startswith("NUM_")} == {
        "NUM_GPUS": "8",
        "NUM_REPLICAS": "1",
        "NUM_GPUS_PER_REPLICA": "8",
    }

    async def past_duration() -> bool | Pending:
        found = await stack.kube.get(resources.KAIWO_SERVICE, "own-gpus", namespace=ns)
        said = [c for c in found["status"].get("conditions") or () if c["type"] == "Preemptable"]
        return True if said and said[0]["status"] == "True" else Pending(f"{said}")

    await eventually(past_duration, what="own-gpus past its duration", within=STEP)
    await stack.kube.create(kaiwo_job("after-service", ns, queue_name="svc", gpus=8, run_seconds=2))

    stopped = await reaches(stack, "own-gpus", ns, "TERMINATED", kind=resources.KAIWO_SERVICE)
    early = condition(stopped, "WorkloadTerminatedEarly")
    assert early["reason"] == "DurationExceededWithActiveGpuDemand", early
    assert stopped["status"]["preemptedFor"]["name"] == "after-service"
    await reaches(stack, "after-service", ns, "COMPLETE")
    await stack.kube.delete(resources.KAIWO_SERVICE, "own-gpus", namespace=ns)
    await stack.kube.delete(resources.KAIWO_JOB, "after-service", namespace=ns)


async def test_a_jobs_own_template_gpus_are_counted_and_freed_past_its_duration(
    stack: Pipeline,
) -> None:
    """A KaiwoJob whose given ``spec.job`` runs 2 pods at once whose container asks for 4
    GPUs itself (no ``gpus`` nor ``gpusPerReplica``) runs them with those, as Kueue reserves
    2 x 4 = 8: the operator counts them too (decision 0166, rule ``template`` of 0163).
    Before, it counted none: the pods were told ``NUM_GPUS=0``, ``Schedulable`` said
    "Workload does not require GPU resources", and a GPU job waiting for them past the job's
    ``duration`` waited for ever, since stopping a job that holds nothing frees nothing."""
    ns = namespace_of(stack, "dur")
    await preempt_for_jobs_waiting_a_second(stack)
    job = kaiwo_job("own-gpus-job", ns, queue_name="dur", gpus=0, run_seconds=300)
    del job["spec"]["gpus"]
    container = {
        "name": "trainer",
        "image": "ghcr.io/silogen/rocm-ray:6.4",
        "resources": {"limits": {"amd.com/gpu": 4}},
    }
    job["spec"] |= {
        "duration": "4s",
        "job": {"spec": {"parallelism": 2, "template": {"spec": {"containers": [container]}}}},
    }
    await stack.kube.create(job)
    running = await reaches(stack, "own-gpus-job", ns, "RUNNING")
    assert condition(running, "Schedulable")["message"] == "Cluster has sufficient GPU resources"
    workload = await kueue_workload_of(stack, ns, "own-gpus-job")
    [assigned] = workload["status"]["admission"]["podSetAssignments"]
    assert (assigned["count"], assigned["resourceUsage"]["amd.com/gpu"]) == (2, "8"), assigned
    pods = await job_pods(stack, ns, "own-gpus-job")
    assert len(pods) == 2, pods
    for pod in pods:
        assert pod["spec"]["containers"][0]["resources"]["limits"]["amd.com/gpu"] == "4"
        assert {k: v for k, v in _env_of(pod).items() if k.startswith("NUM_")} == {
            "NUM_GPUS": "8",
            "NUM_REPLICAS": "2",
            "NUM_GPUS_PER_REPLICA": "4",
        }

    await past_its_duration(stack, ns, "own-gpus-job")
    await stack.kube.create(kaiwo_job("after-own-job", ns, queue_name="dur", gpus=8, run_seconds=2))

    stopped = await reaches(stack, "own-gpus-job", ns, "TERMINATED")
    early = condition(stopped, "WorkloadTerminatedEarly")
    assert early["reason"] == "DurationExceededWithActiveGpuDemand", early
    assert stopped["status"]["preemptedFor"]["name"] == "after-own-job"
    await reaches(stack, "after-own-job", ns, "COMPLETE")
    await stack.kube.delete(resources.KAIWO_JOB, "own-gpus-job", namespace=ns)
    await stack.kube.delete(resources.KAIWO_JOB, "after-own-job", namespace=ns)


async def test_a_serving_service_scaled_past_its_quota_keeps_its_pods_and_serves(
    stack: Pipeline,
) -> None:
    """``replicas`` 2 -> 3 of a READY service holding the queue's 8 GPUs: the Deployment
    scales, its two serving pods stay, the third waits for quota and the service is RUNNING
    (decision 0163). Before, the replica counts in the pods' env changed the template, so the
    Deployment replaced every pod to scale; the new ones waited for the quota the old ones
    held, the rollout passed its progress deadline and the service was ERROR."""
    ns = namespace_of(stack, "svc")
    service = vllm_service("scaled", ns, replicas=2, gpusPerReplica=4)
    service["spec"]["deployment"] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "spec": {"progressDeadlineSeconds": 5},
    }
    await stack.kube.create(service)
    await reaches(stack, "scaled", ns, "READY", kind=resources.KAIWO_SERVICE)

    async def pods() -> list[dict[str, Any]]:
        listed = await stack.kube.list(resources.POD, namespace=ns, label_selector="app=scaled")
        return [p for p in listed.items if "deletionTimestamp" not in p["metadata"]]

    serving = {p["metadata"]["name"] for p in await pods()}
    await stack.kube.merge_patch(
        resources.KAIWO_SERVICE,
        "scaled",
        {"spec": {"replicas": 3}},
        namespace=ns,
        field_manager="kubectl-edit",
    )

    async def third_waits() -> dict[str, Any] | Pending:
        found = await stack.kube.get(resources.KAIWO_SERVICE, "scaled", namespace=ns)
        admitted = [c for c in found["status"]["conditions"] if c["type"] == "Admitted"]
        partly = bool(admitted) and admitted[0]["reason"] == "PartlyAdmitted"
        return found if partly else Pending(f"{found['status']['status']} {admitted}")

    await eventually(third_waits, what="the third pod waits for quota", within=STEP)
    await asyncio.sleep(10)  # twice the progress deadline
    found = await stack.kube.get(resources.KAIWO_SERVICE, "scaled", namespace=ns)
    assert found["status"]["status"] == "RUNNING", found["status"]
    assert condition(found, "Admitted")["message"].startswith(
        "2 of 3 pods are admitted; 1 pending admission into 'svc'"
    )
    now = await pods()
    assert serving < {p["metadata"]["name"] for p in now}, (serving, now)
    assert len(now) == 3
    told = [reason for reason, _ in await events_of(stack, ns, "scaled", kind="KaiwoService")]
    assert "WorkloadError" not in told, told
    await stack.kube.delete(resources.KAIWO_SERVICE, "scaled", namespace=ns)


async def test_a_serving_services_rollout_waiting_for_quota_stays_ready_and_is_told(
    stack: Pipeline,
) -> None:
    """A new image for a READY service of 2 x 4 GPUs holding the queue's 8: the Deployment's
    new pod waits, gated by Kueue, for the quota its old pods hold, and the rollout passes
    its progress deadline while the old pods serve. The service stays READY and is told the
    rollout waits for quota, naming the pod and Kueue's words (decision 0168). Before, it went
    ERROR with a ``WorkloadError`` "ReplicaSet ... has timed out progressing"."""
    ns = namespace_of(stack, "svc")
    service = vllm_service("rolled", ns, replicas=2, gpusPerReplica=4)
    service["spec"]["deployment"] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "spec": {"progressDeadlineSeconds": 5},
    }
    await stack.kube.create(service)
    await reaches(stack, "rolled", ns, "READY", kind=resources.KAIWO_SERVICE)
    serving = await serving_pods(stack, ns, "rolled", image="vllm/vllm-openai:v0.8.5")

    await stack.kube.merge_patch(
        resources.KAIWO_SERVICE,
        "rolled",
        {"spec": {"image": "vllm/vllm-openai:v0.9.0"}},
        namespace=ns,
        field_manager="kubectl-edit",
    )

    async def past_deadline() -> dict[str, Any] | Pending:
        found = await stack.kube.get(resources.DEPLOYMENT, "rolled", namespace=ns)
        said = [
            c
            for c in (found.get("status") or {}).get("conditions") or ()
            if c["type"] == "Progressing" and c.get("reason") == "ProgressDeadlineExceeded"
        ]
        return found if said else Pending(f"{(found.get('status') or {}).get('conditions')}")

    await eventually(past_deadline, what="the rollout past its progress deadline", within=STEP)
    listed = await stack.kube.list(resources.POD, namespace=ns, label_selector="app=rolled")
    [new_pod] = [p for p in listed.items if p["spec"]["containers"][0]["image"].endswith("v0.9.0")]
    assert {g["name"] for g in new_pod["spec"]["schedulingGates"]} >= {"kueue.x-k8s.io/admission"}
    told = await has_events(stack, ns, "rolled", "RolloutWaitingForQuota", kind="KaiwoService")
    await asyncio.sleep(3)  # the operator has seen the deadline; nothing else is to come
    found = await stack.kube.get(resources.KAIWO_SERVICE, "rolled", namespace=ns)
    assert found["status"]["status"] == "READY", found["status"]
    admitted = condition(found, "Admitted")
    expected = (
        f"The rollout of Deployment rolled waits for quota: pod {new_pod['metadata']['name']} "
        "pending admission into 'svc': couldn't assign flavors to pod set main: insufficient "
        "unused quota for amd.com/gpu in flavor mi300x, 4 more needed; 2 of 2 replicas are "
        "available and serve meanwhile (the Deployment keeps its old pods until their "
        "successors are available; it passed its progressDeadlineSeconds of 5 and goes on "
        "once Kueue admits the new pods)"
    )
    assert (admitted["status"], admitted["reason"], admitted["message"]) == (
        "True",
        "RolloutWaitingForQuota",
        expected,
    )
    told = await events_of(stack, ns, "rolled", kind="KaiwoService")
    assert ("RolloutWaitingForQuota", expected) in told, told
    # Subscribers learn it too: the new pod's Workload waits in the queue (it is owned by the
    # pod, which names the service by its run-id label).
    public = await public_events(stack, ns, found["metadata"]["uid"], kind="kaiwoservice")
    queued = [e for e in public if e["transition"] == "queued"]
    # The first pods' waits, if the planner saw them (Kueue may admit them at once), came
    # before READY; the rollout's pod waits while the service is READY.
    *first, rollout = queued
    assert (rollout["queue"], rollout["phase"], rollout["reason"]) == ("svc", "READY", None)
    assert all(e["phase"] != "READY" for e in first), public
    assert "WorkloadError" not in {reason for reason, _ in told}, told
    assert all(c["type"] != "ChildHealthy" for c in found["status"]["conditions"]), found
    live = await stack.kube.list(resources.POD, namespace=ns, label_selector="app=rolled")
    assert {p["metadata"]["name"] for p in serving} < {p["metadata"]["name"] for p in live.items}
    await stack.kube.delete(resources.KAIWO_SERVICE, "rolled", namespace=ns)


NO_START_NODE: Final = NodeSpec("stack-mi300x-nostart", MI300X)
"""An MI300X node whose kubelet registers it and renews its Lease but starts no pod (the
test plays it; kwok plays only nodes labelled simulated): a pod bound to it stays Pending
and nothing changes it, as on a node whose kubelet hangs."""
NO_START_TAINT: Final = {"key": "kaiwo-tests/no-start", "effect": "NoSchedule"}
HOSTNAME: Final = "kubernetes.io/hostname"


async def register_node_that_starts_no_pod(kube: KubernetesPort, spec: NodeSpec) -> None:
    """The Node, Ready, tainted so that only a pod asking for it goes there."""
    node = spec.manifest()
    labels = node["metadata"]["labels"]
    del labels[SIMULATED_LABEL]
    labels.update({HOSTNAME: spec.name, actors.TEST_NODE_LABEL: "true"})
    node["spec"] = {"taints": [NO_START_TAINT]}
    await kube.create(node, field_manager="kubelet")
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    await kube.patch_status(
        resources.NODE, spec.name, spec.status(now=now), field_manager="kubelet", method="merge"
    )


async def test_a_rollout_whose_admitted_pod_never_starts_while_another_waits_is_an_error(
    stack: Pipeline,
) -> None:
    """A READY service of 3 x 2 GPUs and a KaiwoJob of 2 fill the queue's 8. The service is
    rolled (``maxSurge: 2``, deadline 5 s) to a template placed on a node that starts no pod:
    its two new pods wait for quota and the rollout passes its deadline, a wait for quota
    (0168). The job is deleted: Kueue admits one new pod, bound to that node, never started,
    while the other still waits. The service goes ERROR, naming the admitted pod, when the
    deadline counted from its admission passes (decision 0176): no event arrives then, the
    planner asked to be woken. Before, it stayed READY, a rollout waiting for quota."""
    ns = namespace_of(stack, "svc")
    service = vllm_service("stalled", ns, replicas=3, gpusPerReplica=2)
    # Two new pods at once, the old ones kept; a deadline of seconds, not the default 600.
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 2, "maxUnavailable": 0}}
    service["spec"]["deployment"] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "spec": {"progressDeadlineSeconds": 5, "strategy": strategy},
    }
    holder = kaiwo_job("quota-holder", ns, queue_name="svc", gpus=2, run_seconds=600)
    await register_node_that_starts_no_pod(stack.kube, NO_START_NODE)
    try:
        # Its kubelet renews its Lease: the node controller never marks its pods not Ready.
        async with actors.node_heartbeat(stack.kube):
            await stack.kube.create(service)
            await stack.kube.create(holder)
            await reaches(stack, "stalled", ns, "READY", kind=resources.KAIWO_SERVICE)
            await reaches(stack, "quota-holder", ns, "RUNNING")
            placed = {
                "nodeSelector": {HOSTNAME: NO_START_NODE.name},
                "tolerations": [{**NO_START_TAINT, "operator": "Exists"}],
            }
            await stack.kube.merge_patch(
                resources.KAIWO_SERVICE,
                "stalled",
                {"spec": {"deployment": {"spec": {"template": {"spec": placed}}}}},
                namespace=ns,
                field_manager="kubectl-edit",
            )
            await has_events(stack, ns, "stalled", "RolloutWaitingForQuota", kind="KaiwoService")
            await stack.kube.delete(resources.KAIWO_JOB, "quota-holder", namespace=ns)
            error = await reaches(stack, "stalled", ns, "ERROR", kind=resources.KAIWO_SERVICE)

            listed = await stack.kube.list(
                resources.POD, namespace=ns, label_selector="app=stalled"
            )
            old, bound, gated = _old_bound_and_gated(listed.items, NO_START_NODE.name)
            # Nobody wrote the pod's status after the scheduler bound it: no change of it could
            # have made the operator plan again, its own wake-up did.
            assert bound["status"]["phase"] == "Pending", bound["status"]
            assert {c["type"] for c in bound["status"]["conditions"]} == {"PodScheduled"}, bound
            assert {g["name"] for g in gated["spec"].get("schedulingGates") or ()} >= {
                "kueue.x-k8s.io/admission"
            }, gated["spec"]
            workloads = await stack.kube.list(
                resources.KUEUE_WORKLOAD,
                namespace=ns,
                label_selector=f"{actors.KUEUE_JOB_UID_LABEL}={bound['metadata']['uid']}",
            )
            [workload] = workloads.items
            admitted_at = condition(workload, "Admitted")["lastTransitionTime"]
            told = (
                f"pod {bound['metadata']['name']} was admitted by Kueue at {admitted_at} and is "
                f"not Ready within the deadline (Pending on node {NO_START_NODE.name})"
            )
            health = condition(error, "ChildHealthy")
            assert (health["status"], health["reason"]) == ("False", "ProgressDeadlineExceeded")
            assert health["message"].endswith(f"(progressDeadlineSeconds: 5); {told}"), health
            assert parse_rfc3339(health["lastTransitionTime"]) >= parse_rfc3339(admitted_at)
            events = await has_events(stack, ns, "stalled", "WorkloadError", kind="KaiwoService")
            assert ("WorkloadError", health["message"]) in events, events
            assert len(old) == 3 and all(_ready(p) for p in old), old
    finally:
        await stack.kube.delete(resources.KAIWO_SERVICE, "stalled", namespace=ns)
        with contextlib.suppress(NotFound):
            await stack.kube.delete(resources.KAIWO_JOB, "quota-holder", namespace=ns)
        await _remove_pods_on(stack, ns, NO_START_NODE.name)
        await actors.remove_node(stack.kube, NO_START_NODE.name)


def _old_bound_and_gated(
    pods: list[dict[str, Any]], node: str
) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """The old pods, and of the two new ones (those asking for ``node``) the one bound to it
    and the one still gated."""
    new = [p for p in pods if p["spec"].get("nodeSelector", {}).get(HOSTNAME) == node]
    [bound] = [p for p in new if p["spec"].get("nodeName") == node]
    [gated] = [p for p in new if p is not bound]
    return [p for p in pods if p not in new], bound, gated


async def _remove_pods_on(pipeline: Pipeline, namespace: str, node: str) -> None:
    """Delete at once the pods bound to ``node``: no kubelet ends them, and Kueue keeps their
    quota until they are gone (the pod garbage collector would take 40 s)."""
    listed = await pipeline.kube.list(resources.POD, namespace=namespace)
    now = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
    for pod in listed.items:
        if pod["spec"].get("nodeName") == node:
            path = resources.POD.path(namespace=namespace, name=pod["metadata"]["name"])
            with contextlib.suppress(NotFound):
                await pipeline.kube.transport.request("DELETE", path, body=now)


async def test_a_ready_service_scaled_up_is_told_how_many_replicas_serve(stack: Pipeline) -> None:
    """``replicas`` 1 -> 2 of a READY service with quota to spare: READY -> RUNNING -> READY,
    and the Event of RUNNING says how many replicas serve, not "Workload has started", which
    it had long before (decision 0168)."""
    ns = namespace_of(stack, "svc")
    await stack.kube.create(vllm_service("grown", ns, replicas=1, gpusPerReplica=4))
    await reaches(stack, "grown", ns, "READY", kind=resources.KAIWO_SERVICE)
    await stack.kube.merge_patch(
        resources.KAIWO_SERVICE,
        "grown",
        {"spec": {"replicas": 2}},
        namespace=ns,
        field_manager="kubectl-edit",
    )
    await serving_pods(stack, ns, "grown", image="vllm/vllm-openai:v0.8.5")
    await reaches(stack, "grown", ns, "READY", kind=resources.KAIWO_SERVICE)
    scaled = (
        "WorkloadRunning",
        "Workload serves with 1 of 2 replicas available; 1 not available yet",
    )

    async def told_scaled() -> list[tuple[str, str]] | Pending:
        told = await events_of(stack, ns, "grown", kind="KaiwoService")
        return told if scaled in told else Pending(f"{told}")

    # Before: only "Workload has started" (the creation's, and the scale-up's again).
    await eventually(told_scaled, what="the scale-up's Event", within=STEP)
    await stack.kube.delete(resources.KAIWO_SERVICE, "grown", namespace=ns)


async def serving_pods(
    pipeline: Pipeline, namespace: str, app: str, *, image: str
) -> list[dict[str, Any]]:
    """Wait until the only live pods of the Deployment ``app`` are its two replicas running
    ``image``, Ready, bound to MI300X nodes; returns them."""

    async def check() -> list[dict[str, Any]] | Pending:
        listed = await pipeline.kube.list(
            resources.POD, namespace=namespace, label_selector=f"app={app}"
        )
        live = [p for p in listed.items if "deletionTimestamp" not in p["metadata"]]
        images = [c["image"] for p in live for c in p["spec"]["containers"]]
        ready = [p for p in live if _ready(p)]
        if images == [image, image] and len(ready) == 2:
            return live
        return Pending(f"images {images}, {len(ready)} ready")

    pods = await eventually(check, what=f"two Ready pods of {app} running {image}", within=STEP)
    for pod in pods:
        node = await pipeline.kube.get(resources.NODE, pod["spec"]["nodeName"])
        assert node["metadata"]["labels"]["amd.com/gpu.product-name"] == MI300X.product
    return pods


def _conditions(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list((obj.get("status") or {}).get("conditions") or ())


def _live(pod: Mapping[str, Any]) -> bool:
    return "deletionTimestamp" not in pod["metadata"] and (pod.get("status") or {}).get(
        "phase"
    ) not in ("Succeeded", "Failed")


def _ready(pod: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or ()
    )


async def test_kueues_labels_of_a_running_job_are_kept_and_the_edit_is_told(
    stack: Pipeline,
) -> None:
    """Kueue's webhook refuses a priority class added to a running Job (and a queue changed
    on one): the operator keeps the Job's labels as Kueue admitted it, and says so, instead
    of an update the webhook refuses on every plan."""
    ns = namespace_of(stack, "gpu")
    await stack.kube.create(
        kaiwo_job("reprioritised", ns, queue_name="gpu", gpus=2, run_seconds=60)
    )
    await reaches(stack, "reprioritised", ns, "RUNNING")

    await stack.kube.merge_patch(
        resources.KAIWO_JOB,
        "reprioritised",
        {"spec": {"priorityClass": "low"}},
        namespace=ns,
        field_manager="kubectl-edit",
    )

    async def told() -> dict[str, Any] | Pending:
        found = await stack.kube.get(resources.KAIWO_JOB, "reprioritised", namespace=ns)
        status = found.get("status") or {}
        applied = [c for c in status.get("conditions") or () if c["type"] == "ChildSpecApplied"]
        if status.get("observedGeneration") != 2 or not applied:
            return Pending(f"generation {status.get('observedGeneration')}")
        return found

    found = await eventually(told, what="the edit planned", within=STEP)
    await stack.settled(within=STEP)
    found = await stack.kube.get(resources.KAIWO_JOB, "reprioritised", namespace=ns)
    types = [c["type"] for c in found["status"]["conditions"]]
    assert "ApplyRefused" not in types, found["status"]["conditions"]
    applied = condition(found, "ChildSpecApplied")
    assert (applied["status"], applied["reason"]) == ("False", "JobFieldsImmutable")
    assert "metadata.labels[kueue.x-k8s.io/priority-class]" in applied["message"]
    assert found["status"]["status"] == "RUNNING"
    job = await stack.kube.get(resources.JOB, "reprioritised", namespace=ns)
    assert "kueue.x-k8s.io/priority-class" not in job["metadata"]["labels"]
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpu"
    await stack.kube.delete(resources.KAIWO_JOB, "reprioritised", namespace=ns)


async def test_a_ray_kaiwojob_is_admitted_runs_its_ray_job_and_completes(
    stack: Pipeline, real_stack: RealCluster
) -> None:
    """Kueue admits the RayJob, KubeRay makes its RayCluster, the scheduler and kwok run the
    head and the GPU worker, and KubeRay follows the Ray job on the head's dashboard (the
    stand-in, ``kaiwo_envtest.ray_head``: it runs until the test ends it, then succeeds). The
    KaiwoJob is RUNNING while KubeRay says the job runs and COMPLETE once it succeeded;
    KubeRay then shuts the cluster down (``shutdownAfterJobFinishes``) and Kueue finishes the
    Workload."""
    ns = namespace_of(stack, "ray")
    await stack.kube.create(kaiwo_job("ray-train", ns, queue_name="ray", gpus=2, ray=True))
    starting = await reaches(stack, "ray-train", ns, "STARTING")
    assert condition(starting, "Admitted")["status"] == "True"

    async def resumed_by_kueue() -> dict[str, Any] | Pending:
        found = await stack.kube.get(resources.RAY_JOB, "ray-train", namespace=ns)
        return found if found["spec"].get("suspend") is not True else Pending("suspended")

    await eventually(resumed_by_kueue, what="Kueue resumes the admitted RayJob", within=STEP)

    async def cluster_pods_running() -> list[dict[str, Any]] | Pending:
        listed = await stack.kube.list(
            resources.POD, namespace=ns, label_selector="ray.io/node-type"
        )
        running = [p for p in listed.items if (p.get("status") or {}).get("phase") == "Running"]
        kinds = sorted(p["metadata"]["labels"]["ray.io/node-type"] for p in running)
        return running if kinds == ["head", "worker"] else Pending(f"running {kinds}")

    pods = await eventually(cluster_pods_running, what="the RayCluster's head and worker run")
    [worker] = [p for p in pods if p["metadata"]["labels"]["ray.io/node-type"] == "worker"]
    [container] = worker["spec"]["containers"]
    assert container["resources"]["limits"]["amd.com/gpu"] == "2"
    node = await stack.kube.get(resources.NODE, worker["spec"]["nodeName"])
    assert node["metadata"]["labels"]["amd.com/gpu.product-name"] == MI300X.product

    await reaches(stack, "ray-train", ns, "RUNNING")
    ray_job = await stack.kube.get(resources.RAY_JOB, "ray-train", namespace=ns)
    assert (ray_job["status"]["jobStatus"], ray_job["status"]["jobDeploymentStatus"]) == (
        "RUNNING",
        "Running",
    )
    cluster = ray_job["status"]["rayClusterName"]
    await end_ray_job(stack.kube, real_stack, ns, "ray-train")
    complete = await reaches(stack, "ray-train", ns, "COMPLETE")
    assert complete["status"].get("completionTime"), complete["status"]
    ray_job = await stack.kube.get(resources.RAY_JOB, "ray-train", namespace=ns)
    assert (ray_job["status"]["jobStatus"], ray_job["status"]["jobDeploymentStatus"]) == (
        "SUCCEEDED",
        "Complete",
    )
    await has_events(stack, ns, "ray-train", "WorkloadRunning", "WorkloadComplete")
    await gone(stack, resources.RAY_CLUSTER, cluster, ns)

    async def finished() -> dict[str, Any] | Pending:
        workload = await kueue_workload_of_ray_job(stack, ns, "ray-train")
        status = workload.get("status") or {}
        says = {c["type"]: c["status"] for c in status.get("conditions") or ()}
        return workload if says.get("Finished") == "True" else Pending(f"conditions {says}")

    await eventually(finished, what="Kueue finishes the RayJob's Workload", within=STEP)
    # The cluster's pods going away after the end is no trouble, and COMPLETE stays.
    await stack.settled(within=STEP)
    after = await stack.kube.get(resources.KAIWO_JOB, "ray-train", namespace=ns)
    assert after["status"]["status"] == "COMPLETE"
    assert "ChildHealthy" not in {c["type"] for c in after["status"]["conditions"]}
    told = {reason for reason, _ in await events_of(stack, ns, "ray-train")}
    assert not told & {"ChildUnhealthy", "ChildReplacing", "ChildDeleted", "WorkloadFailed"}, told
    await stack.kube.delete(resources.KAIWO_JOB, "ray-train", namespace=ns)


async def test_a_ray_job_its_user_stops_on_the_dashboard_is_terminated_and_told(
    stack: Pipeline, real_stack: RealCluster
) -> None:
    """A scientist stops the running Ray job on the Ray dashboard (``ray job stop``, sent to
    the stand-in of the head here): KubeRay reports it ``STOPPED``, and the KaiwoJob is
    TERMINATED with why, on its status and in an Event, and its children go as for any
    terminated workload. Before, TERMINATED came with no condition and no Event (decision
    0188)."""
    ns = namespace_of(stack, "ray")
    await stack.kube.create(kaiwo_job("ray-stopped", ns, queue_name="ray", gpus=1, ray=True))
    await reaches(stack, "ray-stopped", ns, "RUNNING")
    answer = await ask_the_ray_head(stack, real_stack, "ray-stopped", ns, "POST", "/stop")
    assert answer == {"stopped": True}

    stopped = await reaches(stack, "ray-stopped", ns, "TERMINATED")
    why = condition(stopped, "WorkloadTerminatedEarly")
    told = (
        "RayJob ray-stopped: its Ray job was stopped on its Ray cluster: "
        "Job was intentionally stopped."
    )
    assert (why["status"], why["reason"], why["message"]) == ("True", "RayJobStopped", told)
    assert "ChildHealthy" not in {c["type"] for c in stopped["status"]["conditions"]}
    events = await has_events(stack, ns, "ray-stopped", "WorkloadTerminated")
    assert ("WorkloadTerminated", f"Workload has been terminated: {told}") in events
    await gone(stack, resources.RAY_JOB, "ray-stopped", ns)
    await stack.settled(within=STEP)
    settled = await stack.kube.get(resources.KAIWO_JOB, "ray-stopped", namespace=ns)
    assert settled["status"]["status"] == "TERMINATED"
    assert (
        await actors.get_or_none(stack.kube, resources.RAY_JOB, "ray-stopped", namespace=ns) is None
    )
    await stack.kube.delete(resources.KAIWO_JOB, "ray-stopped", namespace=ns)


async def failed_as_kuberay_says(
    stack: Pipeline, name: str, namespace: str, reason: str
) -> dict[str, Any]:
    """The Ray KaiwoJob ``name`` FAILED as KubeRay failed its RayJob (``Failed`` for
    ``reason``), with ``ChildHealthy`` False carrying KubeRay's reason and message and a
    ``WorkloadFailed`` Event; the RayJob's status."""
    failed = await reaches(stack, name, namespace, "FAILED")
    status = (await stack.kube.get(resources.RAY_JOB, name, namespace=namespace))["status"]
    assert (status["jobDeploymentStatus"], status["reason"]) == ("Failed", reason), status
    health = condition(failed, "ChildHealthy")
    assert (health["status"], health["reason"], health["message"]) == (
        "False",
        reason,
        status["message"],
    )
    await has_events(stack, namespace, name, "WorkloadFailed")
    return dict(status)


async def ask_the_ray_head(
    stack: Pipeline,
    real_stack: RealCluster,
    name: str,
    namespace: str,
    method: str,
    action: str = "",
) -> Any:
    """``method`` on the Ray job of the RayJob ``name`` (``action`` after its path, e.g.
    ``/stop``) at its cluster's dashboard, as ``ray job`` asks it: through the stand-in of the
    head the real stack starts (:mod:`kaiwo_envtest.ray_head`); the JSON answer."""
    status = (await stack.kube.get(resources.RAY_JOB, name, namespace=namespace))["status"]
    url = f"http://{status['dashboardURL']}/api/jobs/{status['jobId']}{action}"
    return await ask_the_ray_stand_in(real_stack, method, url)


HTTP_MODE: Final = {"spec": {"submissionMode": "HTTPMode", "shutdownAfterJobFinishes": True}}


async def test_a_ray_job_submitted_over_http_runs_its_entrypoint_and_completes(
    stack: Pipeline, real_stack: RealCluster
) -> None:
    """In ``HTTPMode`` KubeRay sends the Ray job to the head's dashboard itself, with the
    KaiwoJob's entrypoint, and makes no submitter pod: the job runs there and the KaiwoJob is
    COMPLETE. Before, the stand-in of the head took every job asked for as submitted, so
    KubeRay never sent one and the entrypoint went nowhere."""
    ns = namespace_of(stack, "ray")
    entrypoint = "python train.py --epochs 2"
    await stack.kube.create(
        kaiwo_job(
            "ray-http",
            ns,
            queue_name="ray",
            gpus=1,
            ray=True,
            entrypoint=entrypoint,
            rayJob=HTTP_MODE,
        )
    )
    await reaches(stack, "ray-http", ns, "RUNNING")
    info = await ask_the_ray_head(stack, real_stack, "ray-http", ns, "GET")
    assert (info["entrypoint"], info["status"]) == (entrypoint, "RUNNING"), info
    assert await actors.get_or_none(stack.kube, resources.JOB, "ray-http", namespace=ns) is None

    await end_ray_job(stack.kube, real_stack, ns, "ray-http")
    await reaches(stack, "ray-http", ns, "COMPLETE")
    ray_job = await stack.kube.get(resources.RAY_JOB, "ray-http", namespace=ns)
    assert (ray_job["status"]["jobStatus"], ray_job["status"]["jobDeploymentStatus"]) == (
        "SUCCEEDED",
        "Complete",
    )
    await stack.kube.delete(resources.KAIWO_JOB, "ray-http", namespace=ns)


async def test_a_ray_job_whose_entrypoint_fails_on_its_cluster_is_failed_with_rays_why(
    stack: Pipeline,
) -> None:
    """The Ray job's entrypoint fails on the cluster (it imports a module the image lacks;
    the stand-in of the head fails it as Ray does): KubeRay fails the RayJob (``AppFailed``)
    with Ray's message, and the KaiwoJob is FAILED with it, on its status and in an Event."""
    ns = namespace_of(stack, "ray")
    await stack.kube.create(
        kaiwo_job(
            "ray-broken",
            ns,
            queue_name="ray",
            gpus=1,
            ray=True,
            entrypoint="python -c 'import not_installed'",
            rayJob=HTTP_MODE,
        )
    )
    status = await failed_as_kuberay_says(stack, "ray-broken", ns, "AppFailed")
    assert status["jobStatus"] == "FAILED"
    assert status["message"].startswith("Job entrypoint command failed with exit code 1")
    assert "ModuleNotFoundError: No module named 'not_installed'" in status["message"]
    await stack.kube.delete(resources.KAIWO_JOB, "ray-broken", namespace=ns)


async def test_a_ray_job_past_its_duration_is_terminated_for_a_waiting_one(
    stack: Pipeline, real_stack: RealCluster
) -> None:
    """The operator's duration preemption of a Ray KaiwoJob: running past its ``duration``
    while a GPU job of its queue waits, it is TERMINATED, its RayJob deleted (KubeRay takes
    the cluster down with it), and Kueue admits the waiting job, which runs to the end."""
    ns = namespace_of(stack, "ray")
    await terminated_past_its_duration_for_the_waiting_one(
        stack,
        kaiwo_job("ray-overtime", ns, queue_name="ray", gpus=8, ray=True, duration="4s"),
        kaiwo_job("ray-waiting", ns, queue_name="ray", gpus=8, ray=True),
        child=resources.RAY_JOB,
        end_waiting=lambda: end_ray_job(stack.kube, real_stack, ns, "ray-waiting"),
    )
    for name in ("ray-overtime", "ray-waiting"):
        await stack.kube.delete(resources.KAIWO_JOB, name, namespace=ns)


async def test_a_ray_job_whose_submission_fails_is_failed_with_kuberays_why(
    stack: Pipeline,
) -> None:
    """KubeRay's submitter pod (``ray job submit``) fails, and its Job has no retry left
    (``submitterConfig.backoffLimit: 0``): KubeRay fails the RayJob (``SubmissionFailed``)
    though the Ray job ran, and the KaiwoJob is FAILED with KubeRay's why."""
    ns = namespace_of(stack, "ray")
    submitter = {
        "metadata": {"annotations": {FAIL: "ConnectionError: the dashboard refused the job"}},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "ray-job-submitter", "image": "rayproject/ray:2.40.0"}],
        },
    }
    await stack.kube.create(
        kaiwo_job(
            "ray-unsent",
            ns,
            queue_name="ray",
            gpus=1,
            ray=True,
            rayJob={
                "spec": {
                    "shutdownAfterJobFinishes": True,
                    "submitterPodTemplate": submitter,
                    "submitterConfig": {"backoffLimit": 0},
                }
            },
        )
    )
    status = await failed_as_kuberay_says(stack, "ray-unsent", ns, "SubmissionFailed")
    assert status["message"].startswith("Job submission has failed. Reason: BackoffLimitExceeded")
    await stack.kube.delete(resources.KAIWO_JOB, "ray-unsent", namespace=ns)


def ray_group(name: str, replicas: int, container: str, **sizes: int) -> dict[str, Any]:
    """A user's worker group, sized by the user (Kaiwo replaces the sizes)."""
    return {
        "groupName": name,
        "replicas": replicas,
        "minReplicas": sizes.get("min_replicas", replicas),
        "maxReplicas": sizes.get("max_replicas", replicas),
        "rayStartParams": {},
        "template": {"spec": {"containers": [{"name": container}]}},
    }


async def test_every_worker_group_of_a_given_ray_cluster_holds_its_gpus(stack: Pipeline) -> None:
    """A KaiwoJob with ``gpus: 2`` and a ``rayJob`` of two worker groups (decision 0146):
    Kaiwo sizes both groups 1 x 2 (upstream); Kueue makes a pod set per group and admits
    2 GPUs for each, 4 of the queue's 8; both workers run with 2 GPUs; and the Schedulable
    condition says the workload holds 4 GPUs, not 2."""
    ns = namespace_of(stack, "ray")
    cluster = {
        "headGroupSpec": {
            "rayStartParams": {},
            "template": {"spec": {"containers": [{"name": "ray-head"}]}},
        },
        "workerGroupSpecs": [
            ray_group("trainers", 3, "trainer"),
            ray_group("evaluators", 1, "evaluator", min_replicas=0, max_replicas=2),
        ],
    }
    await stack.kube.create(
        kaiwo_job(
            "ray-groups",
            ns,
            queue_name="ray",
            gpus=2,
            ray=True,
            # Kueue's RayJob webhook refuses a managed RayJob that keeps its cluster.
            rayJob={"spec": {"shutdownAfterJobFinishes": True, "rayClusterSpec": cluster}},
        )
    )
    starting = await reaches(stack, "ray-groups", ns, "STARTING")
    assert condition(starting, "Admitted")["status"] == "True"
    assert condition(starting, "Schedulable")["message"] == (
        "Cluster has sufficient GPU resources: each of the 2 worker groups of the Ray cluster "
        "runs 1 replica of 2 GPUs (spec.replicas and the GPU fields size every group), so "
        "the workload holds 4 GPUs"
    )

    workload = await kueue_workload_of_ray_job(stack, ns, "ray-groups")
    assert sorted((p["name"], p["count"]) for p in workload["spec"]["podSets"]) == [
        ("evaluators", 1),
        ("head", 1),
        ("submitter", 1),  # KubeRay's submitter Job (K8sJobMode)
        ("trainers", 1),
    ]
    admitted_gpus = {
        a["name"]: (a.get("resourceUsage") or {}).get("amd.com/gpu")
        for a in workload["status"]["admission"]["podSetAssignments"]
    }
    assert admitted_gpus == {"head": None, "submitter": None, "trainers": "2", "evaluators": "2"}

    async def workers_running() -> list[dict[str, Any]] | Pending:
        pods = await stack.kube.list(resources.POD, namespace=ns, label_selector="ray.io/group")
        running = [
            p
            for p in pods.items
            if p["metadata"]["labels"].get("ray.io/cluster", "").startswith("ray-groups")
            and (p.get("status") or {}).get("phase") == "Running"
        ]
        groups = sorted(p["metadata"]["labels"]["ray.io/group"] for p in running)
        if groups != ["evaluators", "headgroup", "trainers"]:
            return Pending(f"running {groups}")
        return running

    pods = await eventually(workers_running, what="the head and both worker groups run")
    limits = {
        p["metadata"]["labels"]["ray.io/group"]: p["spec"]["containers"][0]["resources"]
        .get("limits", {})
        .get("amd.com/gpu")
        for p in pods
    }
    assert limits == {"headgroup": None, "trainers": "2", "evaluators": "2"}
    await stack.kube.delete(resources.KAIWO_JOB, "ray-groups", namespace=ns)


async def test_a_group_meant_to_run_without_gpus_runs_the_split_and_is_told(
    stack: Pipeline, real_stack: RealCluster
) -> None:
    """A KaiwoJob ``gpus: 2`` whose ``rayJob`` has a group ``trainers`` with the split's own
    2 GPUs and a group ``loaders`` the user wrote ``amd.com/gpu: 0`` for: Kaiwo sizes every
    group alike (upstream, decision 0146), so both run with 2, and the replaced zeros are told
    once, with their paths, in a ``SettingsIgnored`` Warning Event (decision 0154; before,
    nothing said so)."""
    ns = namespace_of(stack, "ray")

    def group(name: str, gpus: int) -> dict[str, Any]:
        resources_ = {"limits": {"amd.com/gpu": gpus}, "requests": {"amd.com/gpu": gpus}}
        container = {"name": name, "resources": resources_}
        return {**ray_group(name, 1, name), "template": {"spec": {"containers": [container]}}}

    cluster = {
        "headGroupSpec": {
            "rayStartParams": {},
            "template": {"spec": {"containers": [{"name": "ray-head"}]}},
        },
        "workerGroupSpecs": [group("trainers", 2), group("loaders", 0)],
    }
    await stack.kube.create(
        kaiwo_job(
            "ray-loaders",
            ns,
            queue_name="ray",
            gpus=2,
            rayJob={"spec": {"shutdownAfterJobFinishes": True, "rayClusterSpec": cluster}},
        )
    )
    starting = await reaches(stack, "ray-loaders", ns, "STARTING")
    assert condition(starting, "Admitted")["status"] == "True"
    pods = await ray_pods_running(stack, ns, "ray-loaders", ["headgroup", "loaders", "trainers"])
    limits = {
        p["metadata"]["labels"]["ray.io/group"]: p["spec"]["containers"][0]["resources"]
        .get("limits", {})
        .get("amd.com/gpu")
        for p in pods
    }
    assert limits == {"headgroup": None, "trainers": "2", "loaders": "2"}
    await has_events(stack, ns, "ray-loaders", "SettingsIgnored")
    # Its Ray job ends: settled, nothing changes any more.
    await end_ray_job(stack.kube, real_stack, ns, "ray-loaders")
    await reaches(stack, "ray-loaders", ns, "COMPLETE")
    await stack.settled(within=STEP)
    writes = await stack.operator_writes_while_idle()
    assert [w for w in writes if str(w[3]).startswith("ray-loaders")] == [], writes
    told = [m for r, m in await events_of(stack, ns, "ray-loaders") if r == "SettingsIgnored"]
    path = "spec.rayJob.spec.rayClusterSpec.workerGroupSpecs[1].template.spec.containers[0]"
    assert told == [
        f'{path}.resources.limits["amd.com/gpu"] (0), '
        f'{path}.resources.requests["amd.com/gpu"] (0) are replaced by 2, from spec.gpus, '
        "spec.gpusPerReplica and spec.gpuVendor, which give every worker group's pods the "
        "same GPUs (no group runs without them); set those fields instead"
    ]
    await stack.kube.delete(resources.KAIWO_JOB, "ray-loaders", namespace=ns)


async def app_wrapper_made(pipeline: Pipeline, name: str, namespace: str) -> dict[str, Any]:
    """The AppWrapper the operator makes for a Ray KaiwoService, once it is there."""

    async def made() -> dict[str, Any] | Pending:
        found = await actors.get_or_none(
            pipeline.kube, resources.APP_WRAPPER, name, namespace=namespace
        )
        return found if found is not None else Pending("no AppWrapper")

    return await eventually(made, what=f"the AppWrapper {name} made", within=STEP)


async def ray_pods_running(
    pipeline: Pipeline, namespace: str, cluster_of: str, groups: list[str]
) -> list[dict[str, Any]]:
    """The running pods of the Ray cluster of the RayJob ``cluster_of``, once their groups
    (``ray.io/group``, the head's ``headgroup``) are ``groups``, sorted."""

    async def check() -> list[dict[str, Any]] | Pending:
        pods = await pipeline.kube.list(
            resources.POD, namespace=namespace, label_selector="ray.io/group"
        )
        running = [
            p
            for p in pods.items
            if p["metadata"]["labels"].get("ray.io/cluster", "").startswith(cluster_of)
            and (p.get("status") or {}).get("phase") == "Running"
        ]
        found = sorted(p["metadata"]["labels"]["ray.io/group"] for p in running)
        return running if found == groups else Pending(f"running {found}")

    return await eventually(check, what=f"the Ray cluster of {cluster_of} runs {groups}")


async def two_hosts_of_two_gpus_run(pipeline: Pipeline, namespace: str, cluster_of: str) -> None:
    """The Ray cluster of ``cluster_of`` runs its head and both hosts of its ``hosts`` group
    (``numOfHosts: 2``, one replica of ``gpus: 2``), each host with 2 GPUs and the env of the
    whole group: 4 GPUs in 2 replicas of 2 (decision 0151)."""
    pods = await ray_pods_running(pipeline, namespace, cluster_of, ["headgroup", "hosts", "hosts"])
    workers = [p for p in pods if p["metadata"]["labels"]["ray.io/group"] == "hosts"]
    assert [w["spec"]["containers"][0]["resources"]["limits"]["amd.com/gpu"] for w in workers] == [
        "2",
        "2",
    ]
    env = _env_of(workers[0])
    assert (env["NUM_GPUS"], env["NUM_REPLICAS"], env["NUM_GPUS_PER_REPLICA"]) == ("4", "2", "2")


async def kueue_workload_of_ray_job(
    pipeline: Pipeline, namespace: str, name: str
) -> dict[str, Any]:
    return await kueue_workload_owned(pipeline, resources.RAY_JOB, name, namespace)


def _env_of(pod: Mapping[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0].get("env") or ()}


async def test_a_multi_host_worker_group_holds_the_gpus_of_every_host(stack: Pipeline) -> None:
    """A KaiwoJob with ``gpus: 2`` whose ``rayJob`` has one worker group of ``numOfHosts: 2``
    (decision 0151): KubeRay runs each replica as 2 pods, Kueue counts the group's pod set as
    replicas x numOfHosts = 2 pods and admits 4 GPUs; both hosts run with 2 GPUs; the
    Schedulable condition and the env count the 4 GPUs, not 2."""
    ns = namespace_of(stack, "ray")
    group = {**ray_group("hosts", 1, "trainer"), "numOfHosts": 2}
    cluster = {
        "headGroupSpec": {
            "rayStartParams": {},
            "template": {"spec": {"containers": [{"name": "ray-head"}]}},
        },
        "workerGroupSpecs": [group],
    }
    await stack.kube.create(
        kaiwo_job(
            "ray-hosts",
            ns,
            queue_name="ray",
            gpus=2,
            ray=True,
            rayJob={"spec": {"shutdownAfterJobFinishes": True, "rayClusterSpec": cluster}},
        )
    )
    starting = await reaches(stack, "ray-hosts", ns, "STARTING")
    assert condition(starting, "Admitted")["status"] == "True"

    workload = await kueue_workload_of_ray_job(stack, ns, "ray-hosts")
    assert sorted((p["name"], p["count"]) for p in workload["spec"]["podSets"]) == [
        ("head", 1),
        ("hosts", 2),
        ("submitter", 1),
    ]
    admitted_gpus = {
        a["name"]: ((a.get("resourceUsage") or {}).get("amd.com/gpu"), a.get("count"))
        for a in workload["status"]["admission"]["podSetAssignments"]
    }
    assert admitted_gpus == {"head": (None, 1), "submitter": (None, 1), "hosts": ("4", 2)}

    await two_hosts_of_two_gpus_run(stack, ns, "ray-hosts")
    assert condition(starting, "Schedulable")["message"] == (
        "Cluster has sufficient GPU resources: the worker group of the Ray cluster runs "
        "1 replica of 2 hosts (numOfHosts) with 2 GPUs each, so the workload holds 4 GPUs"
    )
    await stack.kube.delete(resources.KAIWO_JOB, "ray-hosts", namespace=ns)


async def test_a_ray_jobs_own_group_gpus_are_counted_and_each_group_told_its_own(
    stack: Pipeline,
) -> None:
    """A Ray KaiwoJob with no ``gpus`` and ``replicas: 2`` whose ``rayJob`` groups limit their
    own GPUs: ``trainers`` 2 per pod, ``evaluators`` 1 per pod on 2 hosts (decision 0167).
    Kueue admits trainers 2 pods of 2 and evaluators 4 pods of 1, 8 GPUs (the queue's
    whole quota); the operator counts 8 too: the Schedulable message, each group's env, and
    what the preemption counts and ``kaiwo gpus`` read of the objects the API server holds.
    Before, it counted none: "Workload does not require GPU resources", ``NUM_GPUS=0``."""
    ns = namespace_of(stack, "ray")

    def own(name: str, gpus: int, **more: int) -> dict[str, Any]:
        group = ray_group(name, 1, name)
        group["template"]["spec"]["containers"][0]["resources"] = {"limits": {"amd.com/gpu": gpus}}
        return {**group, **more}

    cluster = {
        "headGroupSpec": {
            "rayStartParams": {},
            "template": {"spec": {"containers": [{"name": "ray-head"}]}},
        },
        "workerGroupSpecs": [own("trainers", 2), own("evaluators", 1, numOfHosts=2)],
    }
    job = kaiwo_job(
        "ray-own",
        ns,
        queue_name="ray",
        gpus=0,
        replicas=2,
        rayJob={"spec": {"shutdownAfterJobFinishes": True, "rayClusterSpec": cluster}},
    )
    del job["spec"]["gpus"]
    await stack.kube.create(job)
    starting = await reaches(stack, "ray-own", ns, "STARTING")
    assert condition(starting, "Schedulable")["message"] == (
        "Cluster has sufficient GPU resources: the spec asks for no GPUs, so the Ray "
        "cluster's own templates give them: each of its 2 worker groups runs 2 replicas "
        "(spec.replicas) of 2, 1 GPUs per pod by group, every replica on numOfHosts pods "
        "(1, 2), so the workload holds 8 GPUs"
    )

    workload = await kueue_workload_of_ray_job(stack, ns, "ray-own")
    admitted_gpus = {
        a["name"]: ((a.get("resourceUsage") or {}).get("amd.com/gpu"), a.get("count"))
        for a in workload["status"]["admission"]["podSetAssignments"]
    }
    assert admitted_gpus == {
        "head": (None, 1),
        "submitter": (None, 1),
        "trainers": ("4", 2),
        "evaluators": ("4", 4),
    }
    groups = ["evaluators"] * 4 + ["headgroup"] + ["trainers"] * 2
    pods = await ray_pods_running(stack, ns, "ray-own", groups)
    seen = {
        (
            p["metadata"]["labels"]["ray.io/group"],
            (p["spec"]["containers"][0]["resources"].get("limits") or {}).get("amd.com/gpu"),
            tuple(v for k, v in sorted(_env_of(p).items()) if k.startswith("NUM_")),
        )
        for p in pods
    }
    # (NUM_GPUS, NUM_GPUS_PER_REPLICA, NUM_REPLICAS): each group its own; the head the first's.
    assert seen == {
        ("trainers", "2", ("4", "2", "2")),
        ("evaluators", "1", ("4", "1", "4")),
        ("headgroup", None, ("4", "2", "2")),
    }

    # What duration and idle preemption, and kaiwo gpus, count of the objects as stored.
    found = await stack.kube.get(resources.KAIWO_JOB, "ray-own", namespace=ns)
    ray_job = await stack.kube.get(resources.RAY_JOB, "ray-own", namespace=ns)
    nodes = (await stack.kube.list(resources.NODE)).items
    stats = [NodeInfo.from_wire(node) for node in nodes]
    held = allocated_gpus(
        found,
        lambda vendor: gpu_stats(stats, vendor),
        running_child=running_child_among([ray_job], found),
    )
    assert held == 8
    await stack.kube.delete(resources.KAIWO_JOB, "ray-own", namespace=ns)


async def test_a_given_ray_job_spec_without_shutdown_is_completed_and_runs(
    stack: Pipeline, real_stack: RealCluster
) -> None:
    """A ``rayJob.spec`` that leaves out ``shutdownAfterJobFinishes`` (upstream's default spec
    sets it; a given one did not): Kueue's RayJob webhook refuses a queued RayJob without it,
    so Kaiwo sets it true and the job is admitted, its cluster runs, and KubeRay shuts the
    cluster down once the Ray job ended (decision 0151)."""
    ns = namespace_of(stack, "ray")
    cluster = {
        "headGroupSpec": {
            "rayStartParams": {},
            "template": {"spec": {"containers": [{"name": "ray-head"}]}},
        },
        "workerGroupSpecs": [ray_group("workers", 1, "worker")],
    }
    await stack.kube.create(
        kaiwo_job(
            "ray-noshutdown",
            ns,
            queue_name="ray",
            gpus=1,
            rayJob={"spec": {"rayClusterSpec": cluster}},
        )
    )

    async def admitted() -> dict[str, Any] | Pending:
        found = await stack.kube.get(resources.KAIWO_JOB, "ray-noshutdown", namespace=ns)
        conditions = {c["type"]: c for c in (found.get("status") or {}).get("conditions") or ()}
        if "ApplyRefused" in conditions:
            raise AssertionError(conditions["ApplyRefused"]["message"])
        if (conditions.get("Admitted") or {}).get("status") != "True":
            return Pending(f"conditions {sorted(conditions)}")
        return found

    await eventually(admitted, what="the RayJob admitted", within=STEP)
    ray_job = await stack.kube.get(resources.RAY_JOB, "ray-noshutdown", namespace=ns)
    assert ray_job["spec"]["shutdownAfterJobFinishes"] is True
    await ray_pods_running(stack, ns, "ray-noshutdown", ["headgroup", "workers"])
    cluster = (await stack.kube.get(resources.RAY_JOB, "ray-noshutdown", namespace=ns))["status"]
    await end_ray_job(stack.kube, real_stack, ns, "ray-noshutdown")
    await reaches(stack, "ray-noshutdown", ns, "COMPLETE")
    await gone(stack, resources.RAY_CLUSTER, cluster["rayClusterName"], ns)
    # Settled, the completed spec is what ran: nothing is written again.
    await stack.settled(within=STEP)
    writes = await stack.operator_writes_while_idle()
    assert [w for w in writes if str(w[3]).startswith("ray-noshutdown")] == [], writes
    await stack.kube.delete(resources.KAIWO_JOB, "ray-noshutdown", namespace=ns)


async def test_a_ray_job_given_as_false_shutdown_is_refused_naming_the_field(
    stack: Pipeline,
) -> None:
    """``shutdownAfterJobFinishes: false`` set by the user is kept, not fought: Kueue never
    admits such a RayJob, so the KaiwoJob is refused with the user's own field named, and no
    RayJob is made (decision 0151)."""
    ns = namespace_of(stack, "ray")
    await stack.kube.create(
        kaiwo_job(
            "ray-keep",
            ns,
            queue_name="ray",
            gpus=1,
            rayJob={"spec": {"shutdownAfterJobFinishes": False}},
        )
    )

    found = await refused_as_invalid(stack, "ray-keep", ns)
    valid = condition(found, "Valid")
    assert (valid["status"], valid["reason"]) == ("False", "InvalidSpec"), found["status"]
    assert "spec.rayJob: spec.shutdownAfterJobFinishes" in valid["message"], valid["message"]
    assert await actors.get_or_none(stack.kube, resources.RAY_JOB, "ray-keep", namespace=ns) is None
    await has_events(stack, ns, "ray-keep", "InvalidSpec")
    # The user's false is not fought: settled, nothing is written again.
    await stack.settled(within=STEP)
    writes = await stack.operator_writes_while_idle()
    assert [w for w in writes if str(w[3]).startswith("ray-keep")] == [], writes
    await stack.kube.delete(resources.KAIWO_JOB, "ray-keep", namespace=ns)


async def test_a_ray_job_given_without_a_cluster_runs_kaiwos_cluster(stack: Pipeline) -> None:
    """``rayJob: {}`` names no cluster (neither ``rayClusterSpec`` nor ``clusterSelector``):
    KubeRay could not run it; Kaiwo gives its default cluster, as for ``ray: true``, and its
    head and GPU worker run (decision 0151)."""
    ns = namespace_of(stack, "ray")
    await stack.kube.create(kaiwo_job("ray-empty", ns, queue_name="ray", gpus=1, rayJob={}))
    starting = await reaches(stack, "ray-empty", ns, "STARTING")
    assert condition(starting, "Admitted")["status"] == "True"
    ray_job = await stack.kube.get(resources.RAY_JOB, "ray-empty", namespace=ns)
    assert ray_job["spec"]["shutdownAfterJobFinishes"] is True
    [group] = ray_job["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    assert group["groupName"] == "default-worker-group"
    pods = await ray_pods_running(stack, ns, "ray-empty", ["default-worker-group", "headgroup"])
    [worker] = [p for p in pods if p["metadata"]["labels"]["ray.io/group"] != "headgroup"]
    assert worker["spec"]["containers"][0]["resources"]["limits"]["amd.com/gpu"] == "1"
    assert "spec.rayJob.spec gives no Ray cluster" in condition(starting, "Schedulable")["message"]
    await stack.kube.delete(resources.KAIWO_JOB, "ray-empty", namespace=ns)


def shared_ray_cluster(name: str, namespace: str) -> dict[str, Any]:
    """A RayCluster a user made by hand in the ``ray`` queue: a head and one worker of 2 GPUs.
    Kueue admits it (its own pod sets, 2 GPUs of the queue's 8) and KubeRay runs it."""
    gpus = {"amd.com/gpu": "2"}
    image = "rayproject/ray:2.40.0"
    worker = {"name": "ray-worker", "image": image, "resources": {"limits": gpus, "requests": gpus}}
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"kueue.x-k8s.io/queue-name": "ray"},
        },
        "spec": {
            "headGroupSpec": {
                "rayStartParams": {},
                "template": {"spec": {"containers": [{"name": "ray-head", "image": image}]}},
            },
            "workerGroupSpecs": [
                {
                    **ray_group("gpu-workers", 1, "ray-worker"),
                    "template": {"spec": {"containers": [worker]}},
                }
            ],
        },
    }


async def test_a_ray_job_sent_to_an_existing_cluster_runs_there_outside_kueue(
    stack: Pipeline, real_stack: RealCluster
) -> None:
    """A KaiwoJob whose ``rayJob.spec`` names a RayCluster that exists (``clusterSelector``,
    ``ray.io/cluster: shared``), with ``gpus: 2`` as a user may leave it: the RayJob is made
    without Kueue's queue label and not suspended, since Kueue does not manage a RayJob on
    an existing cluster (the cluster's pods were admitted with it) and KubeRay refuses a
    suspended one in that mode; KubeRay submits it on ``shared``, Kueue makes no Workload
    for it, the KaiwoJob runs and completes, holds no GPUs of its own and says so (decision
    0156), and the cluster outlives the job.
    Before, the RayJob carried the queue label and ``suspend: true``, KubeRay failed it
    (ValidationFailed: a suspended RayJob that keeps its cluster) and the KaiwoJob stayed
    PENDING, "pending admission into 'ray'", for good."""
    ns = namespace_of(stack, "ray")
    await stack.kube.create(shared_ray_cluster("shared", ns))
    await ray_pods_running(stack, ns, "shared", ["gpu-workers", "headgroup"])
    await stack.kube.create(
        kaiwo_job(
            "ray-on-shared",
            ns,
            queue_name="ray",
            gpus=2,
            rayJob={"spec": {"clusterSelector": {"ray.io/cluster": "shared"}}},
        )
    )

    async def submitted() -> dict[str, Any] | Pending:
        found = await actors.get_or_none(
            stack.kube, resources.RAY_JOB, "ray-on-shared", namespace=ns
        )
        status = (found or {}).get("status") or {}
        if status.get("jobDeploymentStatus") in ("Failed", "ValidationFailed"):
            owner = await stack.kube.get(resources.KAIWO_JOB, "ray-on-shared", namespace=ns)
            raise AssertionError(
                f"KubeRay failed the RayJob {found}; the KaiwoJob's status: {owner['status']}"
            )
        if status.get("jobDeploymentStatus") != "Running":
            return Pending(f"RayJob status {status}")
        return dict(found or {})

    ray_job = await eventually(submitted, what="KubeRay submits the RayJob", within=STEP)
    assert ray_job["status"]["rayClusterName"] == "shared"
    assert ray_job["status"]["dashboardURL"] == f"shared-head-svc.{ns}.svc.cluster.local:8265"
    assert "kueue.x-k8s.io/queue-name" not in (ray_job["metadata"].get("labels") or {})
    assert ray_job["spec"].get("suspend") is not True
    assert "rayClusterSpec" not in ray_job["spec"]
    # KubeRay's submitter Job sends the entrypoint to the shared cluster.
    submitter = await stack.kube.get(resources.JOB, "ray-on-shared", namespace=ns)
    assert submitter["metadata"]["ownerReferences"][0]["kind"] == "RayJob"
    listed = await stack.kube.list(
        resources.KUEUE_WORKLOAD,
        namespace=ns,
        label_selector=f"{actors.KUEUE_JOB_UID_LABEL}={ray_job['metadata']['uid']}",
    )
    assert listed.items == []
    # The stand-in of the shared cluster's head runs the Ray job.
    found = await reaches(stack, "ray-on-shared", ns, "RUNNING")
    types = [c["type"] for c in found["status"]["conditions"]]
    assert "ApplyRefused" not in types, found["status"]["conditions"]
    admitted = condition(found, "Admitted")
    assert (admitted["status"], admitted["reason"]) == ("True", "NotQueued"), admitted
    assert admitted["message"] == (
        "Kueue does not queue a RayJob sent to an existing Ray cluster "
        "(spec.rayJob.spec.clusterSelector): it runs on that cluster's pods, queued with the "
        "cluster"
    )
    schedulable = condition(found, "Schedulable")
    assert (schedulable["status"], schedulable["reason"]) == ("True", "Schedulable")
    assert schedulable["message"] == (
        "Workload does not require GPU resources; spec.rayJob.spec.clusterSelector sends the "
        "RayJob to the existing Ray cluster shared, whose pods run it: the workload holds no "
        "GPUs of its own (spec.gpus, spec.gpusPerReplica and spec.replicas size nothing) and "
        "is not queued in Kueue, which queues the cluster's pods with the cluster"
    )
    await end_ray_job(stack.kube, real_stack, ns, "ray-on-shared")
    await reaches(stack, "ray-on-shared", ns, "COMPLETE")
    # The shared cluster is the user's: running the job there changes nothing of it.
    cluster = await stack.kube.get(resources.RAY_CLUSTER, "shared", namespace=ns)
    assert not [
        r for r in cluster["metadata"].get("ownerReferences") or () if r["kind"] == "KaiwoJob"
    ]
    await stack.settled(within=STEP)
    writes = await stack.operator_writes_while_idle()
    assert [w for w in writes if str(w[3]).startswith(("ray-on-shared", "shared"))] == [], writes
    await stack.kube.delete(resources.KAIWO_JOB, "ray-on-shared", namespace=ns)
    await gone(stack, resources.RAY_JOB, "ray-on-shared", ns)
    # The cluster outlives the job (KubeRay deletes only a cluster it made for the RayJob).
    assert await actors.get_or_none(stack.kube, resources.RAY_CLUSTER, "shared", namespace=ns)
    await stack.kube.delete(resources.RAY_CLUSTER, "shared", namespace=ns)


async def refused_as_invalid(
    pipeline: Pipeline, name: str, namespace: str, *, or_else: str = "ApplyRefused"
) -> dict[str, Any]:
    """The KaiwoJob ``name`` once it has a ``Valid`` condition (refused as invalid), or the
    condition ``or_else`` that shows it was not (so a test of the refusal fails at once)."""

    async def refused() -> dict[str, Any] | Pending:
        found = await pipeline.kube.get(resources.KAIWO_JOB, name, namespace=namespace)
        conditions = {c["type"]: c for c in (found.get("status") or {}).get("conditions") or ()}
        if "Valid" not in conditions and or_else not in conditions:
            return Pending(f"conditions {sorted(conditions)}")
        return found

    return await eventually(refused, what=f"the KaiwoJob {name} refused", within=STEP)


async def ray_job_deployment(
    pipeline: Pipeline, name: str, namespace: str, *, reached: str
) -> dict[str, Any]:
    """The RayJob ``name`` once KubeRay set its ``jobDeploymentStatus`` to ``reached``;
    failing at once on another status KubeRay never leaves (``ValidationFailed``)."""

    async def check() -> dict[str, Any] | Pending:
        found = await actors.get_or_none(
            pipeline.kube, resources.RAY_JOB, name, namespace=namespace
        )
        status = (found or {}).get("status") or {}
        deployment = status.get("jobDeploymentStatus")
        if deployment == reached:
            return dict(found or {})
        if deployment == "ValidationFailed":
            raise AssertionError(f"KubeRay refused the RayJob {name}: {status}")
        return Pending(f"RayJob status {status}")

    return await eventually(check, what=f"RayJob {name} {reached}", within=STEP)


async def test_a_ray_job_kuberay_refuses_on_an_existing_cluster_is_refused_offline(
    stack: Pipeline,
) -> None:
    """On an existing cluster (``clusterSelector``) KubeRay v1.6.0 fails for good
    (``ValidationFailed``) a RayJob in ``SidecarMode`` and one whose deletion policy deletes
    the cluster or its workers, in the legacy ``onSuccess``/``onFailure`` form or in
    ``deletionRules`` (decision 0159, measured). Such KaiwoJobs are refused as invalid, naming
    the field, and no RayJob is made; what KubeRay accepts there (another submission mode, a
    policy that deletes only the RayJob or nothing) is made and passes KubeRay's validation:
    it waits (``Initializing``) for the cluster ``absent``, which does not exist. Before, the
    refused ones were made and went FAILED with KubeRay's message."""
    ns = namespace_of(stack, "ray")
    absent = {"ray.io/cluster": "absent"}
    refused = {
        "sel-sidecar": ({"submissionMode": "SidecarMode"}, "spec.submissionMode"),
        "sel-legacy": (
            {
                "deletionStrategy": {
                    "onSuccess": {"policy": "DeleteCluster"},
                    "onFailure": {"policy": "DeleteNone"},
                }
            },
            "spec.deletionStrategy.onSuccess.policy",
        ),
        "sel-rules": (
            {
                "deletionStrategy": {
                    "deletionRules": [
                        {"policy": "DeleteSelf", "condition": {"jobStatus": "SUCCEEDED"}},
                        {"policy": "DeleteWorkers", "condition": {"jobStatus": "FAILED"}},
                    ]
                }
            },
            "spec.deletionStrategy.deletionRules[1].policy",
        ),
    }
    accepted = {
        "sel-keeps-legacy": {
            "submissionMode": "InteractiveMode",
            "deletionStrategy": {
                "onSuccess": {"policy": "DeleteSelf"},
                "onFailure": {"policy": "DeleteNone"},
            },
        },
        "sel-keeps-rules": {
            "submissionMode": "HTTPMode",
            "deletionStrategy": {
                "deletionRules": [
                    {
                        "policy": "DeleteSelf",
                        "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": 60},
                    },
                    {"policy": "DeleteNone", "condition": {"jobStatus": "FAILED"}},
                ]
            },
        },
    }
    given = {**{n: extra for n, (extra, _) in refused.items()}, **accepted}
    for name, extra in given.items():
        ray_job = {"spec": {"clusterSelector": absent, **extra}}
        await stack.kube.create(kaiwo_job(name, ns, queue_name="ray", gpus=2, rayJob=ray_job))

    for name, (_, field) in refused.items():
        found = await refused_as_invalid(stack, name, ns)
        valid = condition(found, "Valid")
        assert (valid["status"], valid["reason"]) == ("False", "InvalidSpec"), found["status"]
        assert f"spec.rayJob: {field} must not be " in valid["message"], valid["message"]
        await has_events(stack, ns, name, "InvalidSpec")
    for name in accepted:
        ray_job = await ray_job_deployment(stack, name, ns, reached="Initializing")
        strategy = ray_job["spec"]["deletionStrategy"]
        given_policies = accepted[name]["deletionStrategy"]
        assert [r["policy"] for r in strategy.get("deletionRules") or ()] == [
            r["policy"] for r in given_policies.get("deletionRules") or ()
        ]
        assert strategy.get("onSuccess") == given_policies.get("onSuccess")
        # No split by node size is marked on it: its GPUs are the cluster's.
        annotations = ray_job["metadata"].get("annotations") or {}
        assert "kaiwo.silogen.ai/gpus-split-by-node-size" not in annotations, annotations
    for name in refused:
        assert await actors.get_or_none(stack.kube, resources.RAY_JOB, name, namespace=ns) is None
    await stack.settled(within=STEP)
    writes = await stack.operator_writes_while_idle()
    assert [w for w in writes if str(w[3]).startswith("sel-")] == [], writes
    for name in given:
        await stack.kube.delete(resources.KAIWO_JOB, name, namespace=ns)


async def test_a_ray_job_on_an_existing_cluster_waits_while_a_default_local_queue_is_there(
    stack: Pipeline,
) -> None:
    """Kueue 0.17's webhook puts a RayJob made without a queue label in its namespace's
    LocalQueue ``default`` (``LocalQueueDefaulting``): it labels it and suspends it, and
    KubeRay fails a suspended RayJob on an existing cluster for good. Measured before this
    decision (0159): the RayJob carried ``kueue.x-k8s.io/queue-name: default`` and
    ``suspend: true``, ``ValidationFailed``, and the KaiwoJob went FAILED. Now the RayJob is
    not made while the LocalQueue is there (ERROR, Schedulable False, ``DefaultLocalQueue``),
    and is made, unqueued and unsuspended, once it is gone. (The LocalQueue is made by hand:
    Kueue treats it as the one Kaiwo makes for a ClusterQueue named ``default``.)"""
    ns = f"{stack.namespace}-dflt"
    await actors.create_namespace(stack.kube, ns)
    default_queue = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "LocalQueue",
        "metadata": {"name": "default", "namespace": ns},
        "spec": {"clusterQueue": "ray"},
    }
    await stack.kube.create(default_queue)
    # The operator has taken the LocalQueue in before the KaiwoJob comes.
    await stack.settled(within=STEP)
    ray_job = {"spec": {"clusterSelector": {"ray.io/cluster": "absent"}}}
    await stack.kube.create(
        kaiwo_job("beside-default", ns, queue_name="ray", gpus=1, rayJob=ray_job)
    )

    found = await reaches(stack, "beside-default", ns, "ERROR")
    schedulable = condition(found, "Schedulable")
    assert (schedulable["status"], schedulable["reason"]) == ("False", "DefaultLocalQueue")
    assert schedulable["message"].startswith(
        "spec.rayJob.spec.clusterSelector sends the RayJob to an existing Ray cluster, which "
        f"Kueue does not queue, but namespace '{ns}' has a Kueue LocalQueue named 'default'"
    ), schedulable["message"]
    await stack.settled(within=STEP)
    assert (
        await actors.get_or_none(stack.kube, resources.RAY_JOB, "beside-default", namespace=ns)
        is None
    )

    await stack.kube.delete(resources.KUEUE_LOCAL_QUEUE, "default", namespace=ns)
    made = await ray_job_deployment(stack, "beside-default", ns, reached="Initializing")
    assert "kueue.x-k8s.io/queue-name" not in (made["metadata"].get("labels") or {})
    assert made["spec"].get("suspend") is not True
    await reaches(stack, "beside-default", ns, "STARTING")
    await stack.kube.delete(resources.KAIWO_JOB, "beside-default", namespace=ns)
    await gone(stack, resources.RAY_JOB, "beside-default", ns)
    await stack.kube.delete(resources.NAMESPACE, ns)


async def test_a_multi_host_group_of_a_ray_service_is_reserved_on_every_host(
    stack: Pipeline,
) -> None:
    """A KaiwoService ``gpus: 2`` whose ``rayService`` has one worker group of
    ``numOfHosts: 2``: the AppWrapper declares the group as 2 pods, so Kueue reserves 4 GPUs
    for it (decision 0151; before, 1 pod and 2 GPUs). The AppWrapper controller then makes the
    RayService, and KubeRay runs both hosts with 2 GPUs each and the env of the whole group
    (decision 0184)."""
    ns = namespace_of(stack, "ray")
    group = {**ray_group("hosts", 1, "server"), "numOfHosts": 2}
    service = {
        "apiVersion": actors.KAIWO_API,
        "kind": "KaiwoService",
        "metadata": {"name": "serve-hosts", "namespace": ns},
        "spec": {
            "user": "dave@example.com",
            "image": "rayproject/ray:2.40.0",
            "clusterQueue": "ray",
            "gpuVendor": "amd",
            "gpus": 2,
            "rayService": {
                "spec": {
                    "rayClusterConfig": {
                        "headGroupSpec": {
                            "rayStartParams": {},
                            "template": {"spec": {"containers": [{"name": "ray-head"}]}},
                        },
                        "workerGroupSpecs": [group],
                    }
                }
            },
        },
    }
    await stack.kube.create(service)

    async def admitted() -> dict[str, Any] | Pending:
        wrapper = await actors.get_or_none(
            stack.kube, resources.APP_WRAPPER, "serve-hosts", namespace=ns
        )
        if wrapper is None:
            return Pending("no AppWrapper")
        listed = await stack.kube.list(
            resources.KUEUE_WORKLOAD,
            namespace=ns,
            label_selector=f"{actors.KUEUE_JOB_UID_LABEL}={wrapper['metadata']['uid']}",
        )
        done = [w for w in listed.items if (w.get("status") or {}).get("admission")]
        return done[0] if done else Pending("not admitted")

    workload = await eventually(admitted, what="the AppWrapper admitted", within=STEP)
    assert sorted(p["count"] for p in workload["spec"]["podSets"]) == [1, 2]
    reserved = sorted(
        ((a.get("resourceUsage") or {}).get("amd.com/gpu") or "0", a.get("count"))
        for a in workload["status"]["admission"]["podSetAssignments"]
    )
    assert reserved == [("0", 1), ("4", 2)]
    await two_hosts_of_two_gpus_run(stack, ns, "serve-hosts")
    await stack.kube.delete(resources.KAIWO_SERVICE, "serve-hosts", namespace=ns)


async def test_a_ray_service_given_without_a_cluster_runs_kaiwos_cluster(
    stack: Pipeline,
) -> None:
    """A KaiwoService ``gpus: 2`` whose ``rayService.spec`` gives only the Serve applications
    (no ``rayClusterConfig``): KubeRay cannot run a RayService without a cluster, so Kaiwo
    gives its default one, as for ``ray: true`` (decision 0154). The AppWrapper's RayService
    has Kaiwo's head and ``default-worker-group`` and the user's serve config; Kueue admits
    the head's pod set and the worker's with its 2 GPUs; the condition says it. The AppWrapper
    controller makes the RayService, whose head and worker run (decision 0184), and the
    service serves once Ray Serve deploys the application (decision 0186)."""
    ns = namespace_of(stack, "ray")
    serve_config = "applications:\n  - name: echo\n    import_path: echo:app\n"
    service = {
        "apiVersion": actors.KAIWO_API,
        "kind": "KaiwoService",
        "metadata": {"name": "serve-default", "namespace": ns},
        "spec": {
            "user": "dave@example.com",
            "image": "rayproject/ray:2.40.0",
            "clusterQueue": "ray",
            "gpuVendor": "amd",
            "gpus": 2,
            "rayService": {"spec": {"serveConfigV2": serve_config}},
        },
    }
    await stack.kube.create(service)

    wrapper = await app_wrapper_made(stack, "serve-default", ns)
    [component] = wrapper["spec"]["components"]
    ray_service = component["template"]["spec"]
    assert ray_service["serveConfigV2"] == serve_config
    [group] = ray_service["rayClusterConfig"]["workerGroupSpecs"]
    assert (group["groupName"], group["replicas"]) == ("default-worker-group", 1)

    async def admitted() -> dict[str, Any] | Pending:
        listed = await stack.kube.list(
            resources.KUEUE_WORKLOAD,
            namespace=ns,
            label_selector=f"{actors.KUEUE_JOB_UID_LABEL}={wrapper['metadata']['uid']}",
        )
        done = [w for w in listed.items if (w.get("status") or {}).get("admission")]
        return done[0] if done else Pending("not admitted")

    workload = await eventually(admitted, what="the AppWrapper admitted", within=STEP)
    reserved = sorted(
        ((a.get("resourceUsage") or {}).get("amd.com/gpu") or "0", a.get("count"))
        for a in workload["status"]["admission"]["podSetAssignments"]
    )
    assert reserved == [("0", 1), ("2", 1)]
    await ray_pods_running(stack, ns, "serve-default", ["default-worker-group", "headgroup"])
    # Ray Serve (the stack's stand-in, decision 0186) deploys the user's application on it.
    found = await reaches(stack, "serve-default", ns, "READY", kind=resources.KAIWO_SERVICE)
    assert condition(found, "Schedulable")["message"] == (
        "Cluster has sufficient GPU resources; spec.rayService.spec gives no Ray cluster (no "
        "rayClusterConfig), so the RayService runs Kaiwo's default cluster: one head and the "
        "worker group default-worker-group, sized by spec.replicas and the GPU fields"
    )
    # The default cluster is a function of the spec: settled, nothing is written again.
    await stack.settled(within=STEP)
    writes = await stack.operator_writes_while_idle()
    assert [w for w in writes if str(w[3]).startswith("serve-default")] == [], writes
    await stack.kube.delete(resources.KAIWO_SERVICE, "serve-default", namespace=ns)


async def test_a_ray_services_own_group_gpus_are_reserved_counted_and_told(
    stack: Pipeline,
) -> None:
    """A KaiwoService with no ``gpus`` whose ``rayService`` cluster has a group ``servers``
    limiting 2 GPUs and a group ``routers`` with none (decision 0167): the AppWrapper keeps
    both as written, Kueue reserves 2 for ``servers``, and the operator counts 2 (the
    Schedulable message, each group's env in the AppWrapper's RayService, and what the
    preemption counts read of the stored service); settled, it writes nothing again. Before,
    it counted none ("Workload does not require GPU resources"). The AppWrapper controller
    makes the RayService, whose head and both groups run (decision 0184)."""
    ns = namespace_of(stack, "ray")

    def group(name: str, limits: dict[str, Any]) -> dict[str, Any]:
        container = {"name": name, "resources": {"limits": limits}}
        return {
            "groupName": name,
            "rayStartParams": {},
            "template": {"spec": {"containers": [container]}},
        }

    cluster = {
        "headGroupSpec": {
            "rayStartParams": {},
            "template": {"spec": {"containers": [{"name": "ray-head"}]}},
        },
        "workerGroupSpecs": [
            group("servers", {"amd.com/gpu": 2}),
            group("routers", {"memory": "1Gi"}),
        ],
    }
    service = {
        "apiVersion": actors.KAIWO_API,
        "kind": "KaiwoService",
        "metadata": {"name": "serve-own", "namespace": ns},
        "spec": {
            "user": "dave@example.com",
            "image": "rayproject/ray:2.40.0",
            "clusterQueue": "ray",
            "gpuVendor": "amd",
            "rayService": {"spec": {"rayClusterConfig": cluster}},
        },
    }
    await stack.kube.create(service)

    wrapper = await app_wrapper_made(stack, "serve-own", ns)
    [component] = wrapper["spec"]["components"]
    servers, routers = component["template"]["spec"]["rayClusterConfig"]["workerGroupSpecs"]
    told = {
        g["groupName"]: (
            g["template"]["spec"]["containers"][0]["resources"]["limits"].get("amd.com/gpu"),
            tuple(
                v
                for k, v in sorted(
                    (e["name"], e.get("value"))
                    for e in g["template"]["spec"]["containers"][0]["env"]
                )
                if k.startswith("NUM_")
            ),
        )
        for g in (servers, routers)
    }
    # (limit as written; NUM_GPUS, NUM_GPUS_PER_REPLICA, NUM_REPLICAS): each group its own.
    assert told == {"servers": ("2", ("2", "2", "1")), "routers": (None, ("0", "0", "1"))}

    async def admitted() -> dict[str, Any] | Pending:
        listed = await stack.kube.list(
            resources.KUEUE_WORKLOAD,
            namespace=ns,
            label_selector=f"{actors.KUEUE_JOB_UID_LABEL}={wrapper['metadata']['uid']}",
        )
        done = [w for w in listed.items if (w.get("status") or {}).get("admission")]
        return done[0] if done else Pending("not admitted")

    workload = await eventually(admitted, what="the AppWrapper admitted", within=STEP)
    reserved = sorted(
        ((a.get("resourceUsage") or {}).get("amd.com/gpu") or "0", a.get("count"))
        for a in workload["status"]["admission"]["podSetAssignments"]
    )
    assert reserved == [("0", 1), ("0", 1), ("2", 1)]
    found = await stack.kube.get(resources.KAIWO_SERVICE, "serve-own", namespace=ns)
    assert condition(found, "Schedulable")["message"] == (
        "Cluster has sufficient GPU resources: the spec asks for no GPUs, so the Ray "
        "cluster's own templates give them: each of its 2 worker groups runs 1 replica "
        "(spec.replicas) of 2, 0 GPUs per pod by group, so the workload holds 2 GPUs"
    )
    nodes = [NodeInfo.from_wire(node) for node in (await stack.kube.list(resources.NODE)).items]
    assert allocated_gpus(found, lambda vendor: gpu_stats(nodes, vendor)) == 2
    pods = await ray_pods_running(stack, ns, "serve-own", ["headgroup", "routers", "servers"])
    assert {
        p["metadata"]["labels"]["ray.io/group"]: p["spec"]["containers"][0]["resources"][
            "limits"
        ].get("amd.com/gpu")
        for p in pods
    } == {"headgroup": None, "routers": None, "servers": "2"}
    await stack.settled(within=STEP)
    writes = await stack.operator_writes_while_idle()
    assert [w for w in writes if str(w[3]).startswith("serve-own")] == [], writes
    await stack.kube.delete(resources.KAIWO_SERVICE, "serve-own", namespace=ns)


async def test_a_models_server_pods_are_scheduled_and_running(stack: Pipeline) -> None:
    """A KubeAI Model on one AMD GPU per replica (``amd-gpu-mi300x``, which asks for
    ``amd.com/gpu`` and, as upstream's, selects no node): its two server pods are bound to AMD
    nodes by the default scheduler, run by kwok, and the Model counts them Ready. Which AMD
    node is the scheduler's choice: MI250X ones too, as the other tests leave them."""
    ns = namespace_of(stack, "model")
    await stack.kube.create(
        {
            "apiVersion": "kubeai.org/v1",
            "kind": "Model",
            "metadata": {"name": "llama", "namespace": ns},
            "spec": {
                "features": ["TextGeneration"],
                "url": "hf://meta-llama/Llama-3.1-8B-Instruct",
                "engine": "VLLM",
                "resourceProfile": "amd-gpu-mi300x:1",
                "replicas": 2,
                "autoscalingDisabled": True,
            },
        }
    )

    async def serving() -> dict[str, Any] | Pending:
        found = await stack.kube.get(resources.KUBEAI_MODEL, "llama", namespace=ns)
        counted = (found.get("status") or {}).get("replicas")
        return found if counted == {"all": 2, "ready": 2} else Pending(f"replicas {counted}")

    await eventually(serving, what="the Model serves two ready replicas", within=STEP)
    listed = await stack.kube.list(resources.POD, namespace=ns, label_selector="model=llama")
    assert len(listed.items) == 2
    for pod in listed.items:
        assert pod["status"]["phase"] == "Running"
        node = await stack.kube.get(resources.NODE, pod["spec"]["nodeName"])
        product = node["metadata"]["labels"]["amd.com/gpu.product-name"]
        assert product in {MI300X.product, MI250X.product}
    await stack.kube.delete(resources.KUBEAI_MODEL, "llama", namespace=ns)


async def edit_told(
    pipeline: Pipeline, kind: resources.ResourceType, name: str, namespace: str, patch: Any
) -> dict[str, Any]:
    """Apply a user's edit (generation 2) and wait until it is planned and everything settled;
    returns the workload then."""
    await pipeline.kube.merge_patch(
        kind, name, patch, namespace=namespace, field_manager="kubectl-edit"
    )

    async def planned() -> dict[str, Any] | Pending:
        found = await pipeline.kube.get(kind, name, namespace=namespace)
        status = found.get("status") or {}
        applied = [c for c in status.get("conditions") or () if c["type"] == "ChildSpecApplied"]
        if status.get("observedGeneration") != 2 or not applied:
            return Pending(f"generation {status.get('observedGeneration')}")
        return found

    await eventually(planned, what=f"the edit of {name} planned", within=STEP)
    await pipeline.settled(within=STEP)
    return await pipeline.kube.get(kind, name, namespace=namespace)


async def test_a_ready_services_priority_class_is_kept_and_the_rest_of_the_edit_rolls(
    stack: Pipeline,
) -> None:
    """Kueue's webhook for Deployments refuses a priority class added to one with a Ready
    pod: the operator keeps the Deployment's labels as Kueue admitted it, says so, and
    applies the rest of the edit (the new image rolls), instead of an update the webhook
    refuses on every plan (decision 0123)."""
    ns = namespace_of(stack, "svc")
    await stack.kube.create(vllm_service("reprioritised", ns))
    await reaches(stack, "reprioritised", ns, "READY", kind=resources.KAIWO_SERVICE)

    found = await edit_told(
        stack,
        resources.KAIWO_SERVICE,
        "reprioritised",
        ns,
        {"spec": {"priorityClass": "low", "image": "vllm/vllm-openai:v0.9.0"}},
    )

    types = [c["type"] for c in found["status"]["conditions"]]
    assert "ApplyRefused" not in types, found["status"]["conditions"]
    applied = condition(found, "ChildSpecApplied")
    assert (applied["status"], applied["reason"]) == ("False", "JobFieldsImmutable")
    assert "metadata.labels[kueue.x-k8s.io/priority-class]" in applied["message"]
    deployment = await stack.kube.get(resources.DEPLOYMENT, "reprioritised", namespace=ns)
    assert "kueue.x-k8s.io/priority-class" not in deployment["metadata"]["labels"]
    template = deployment["spec"]["template"]
    assert "kueue.x-k8s.io/priority-class" not in template["metadata"]["labels"]
    assert template["spec"]["containers"][0]["image"] == "vllm/vllm-openai:v0.9.0"
    await stack.kube.delete(resources.KAIWO_SERVICE, "reprioritised", namespace=ns)


def selected_by_tier(tier: str, image: str) -> dict[str, Any]:
    """A user's own Deployment spec whose pods are selected by ``tier``."""
    return {
        "spec": {
            "selector": {"matchLabels": {"tier": tier}},
            "template": {
                "metadata": {"labels": {"tier": tier}},
                "spec": {"containers": [{"name": "vllm", "image": image}]},
            },
        }
    }


async def test_a_services_selector_edit_is_kept_and_told_and_the_rest_of_the_edit_rolls(
    stack: Pipeline,
) -> None:
    """apps/v1 refuses any change of a Deployment's selector: the operator keeps it (and the
    pods' label it reads), says so, and applies the rest of the edit (the new image), instead
    of an update refused on every plan (decision 0216)."""
    ns = namespace_of(stack, "svc")
    service = vllm_service("reselected", ns)
    service["spec"]["deployment"] = selected_by_tier("web", "vllm/vllm-openai:v0.8.5")
    await stack.kube.create(service)
    await reaches(stack, "reselected", ns, "READY", kind=resources.KAIWO_SERVICE)

    edit = {"deployment": selected_by_tier("api", "vllm/vllm-openai:v0.9.0")}
    found = await edit_told(stack, resources.KAIWO_SERVICE, "reselected", ns, {"spec": edit})

    types = [c["type"] for c in found["status"]["conditions"]]
    assert "ApplyRefused" not in types, found["status"]["conditions"]
    applied = condition(found, "ChildSpecApplied")
    assert (applied["status"], applied["reason"]) == ("False", "JobFieldsImmutable")
    kept = "spec.selector.matchLabels[tier], spec.template.metadata.labels[tier]"
    assert kept in applied["message"], applied["message"]
    deployment = await stack.kube.get(resources.DEPLOYMENT, "reselected", namespace=ns)
    assert deployment["spec"]["selector"]["matchLabels"]["tier"] == "web"
    template = deployment["spec"]["template"]
    assert template["metadata"]["labels"]["tier"] == "web"
    assert template["spec"]["containers"][0]["image"] == "vllm/vllm-openai:v0.9.0"
    await stack.kube.delete(resources.KAIWO_SERVICE, "reselected", namespace=ns)


async def why_restarted(stack: Pipeline, namespace: str) -> str:
    """What Kueue, KubeRay and the operator said in ``namespace``: a restart names who
    stopped the job (the one CI saw was a name KubeRay dropped before it made that cluster)."""
    events = (await stack.kube.list(resources.EVENT, namespace=namespace)).items
    said = sorted(
        (
            str(e.get("lastTimestamp") or e.get("eventTime") or ""),
            f"{e['involvedObject'].get('kind')}/{e['involvedObject'].get('name')}",
            str(e.get("reason")),
            str(e.get("message"))[:200],
        )
        for e in events
    )
    return "the Ray job started over; the namespace's Events:\n" + "\n".join(
        " ".join(line) for line in said
    )


async def test_an_edit_of_a_running_ray_job_does_not_start_it_over(stack: Pipeline) -> None:
    """Kueue stops a running RayJob whose pod sets no longer match its Workload, queues it
    again, and KubeRay makes a new Ray cluster: an env edit started the job over. The operator
    keeps the running RayJob's spec and says so (decision 0123)."""
    ns = namespace_of(stack, "ray")
    await stack.kube.create(kaiwo_job("ray-edited", ns, queue_name="ray", gpus=2, ray=True))
    await reaches(stack, "ray-edited", ns, "STARTING")

    async def cluster_made() -> dict[str, Any] | Pending:
        # KubeRay names the cluster in the status before it creates it, and a RayJob it first
        # saw suspended drops that name once it sees the suspension, then names a new one when
        # Kueue's admission reaches it: only a cluster that exists was made for this run.
        found = await stack.kube.get(resources.RAY_JOB, "ray-edited", namespace=ns)
        named = (found.get("status") or {}).get("rayClusterName")
        running = found["spec"].get("suspend") is not True
        made = named and await actors.get_or_none(
            stack.kube, resources.RAY_CLUSTER, named, namespace=ns
        )
        return found if made and running else Pending(f"cluster {named}, made {bool(made)}")

    before = await eventually(cluster_made, what="the RayJob runs its cluster", within=STEP)

    async def admission_seen() -> bool | Pending:
        # What the operator has seen: the RayJob it last observed may still be suspended,
        # but Kueue admitted its Workload first, so that is enough to keep its spec.
        found = await stack.kube.get(resources.KAIWO_JOB, "ray-edited", namespace=ns)
        admitted = [c for c in found["status"].get("conditions") or () if c["type"] == "Admitted"]
        return True if admitted and admitted[0]["status"] == "True" else Pending(f"{admitted}")

    await eventually(admission_seen, what="the operator saw the admission", within=STEP)
    found = await edit_told(
        stack,
        resources.KAIWO_JOB,
        "ray-edited",
        ns,
        {"spec": {"env": [{"name": "EXTRA", "value": "1"}]}},
    )

    types = [c["type"] for c in found["status"]["conditions"]]
    assert "ApplyRefused" not in types, found["status"]["conditions"]
    applied = condition(found, "ChildSpecApplied")
    assert (applied["status"], applied["reason"]) == ("False", "JobFieldsImmutable")
    assert "spec.rayClusterSpec." in applied["message"]
    after = await stack.kube.get(resources.RAY_JOB, "ray-edited", namespace=ns)
    assert after["spec"].get("suspend") is not True
    assert after["status"]["rayClusterName"] == before["status"]["rayClusterName"], (
        await why_restarted(stack, ns)
    )
    envs = [
        c.get("env") or []
        for group in after["spec"]["rayClusterSpec"]["workerGroupSpecs"]
        for c in group["template"]["spec"]["containers"]
    ]
    assert all(e.get("name") != "EXTRA" for env in envs for e in env)
    await stack.kube.delete(resources.KAIWO_JOB, "ray-edited", namespace=ns)


async def test_a_label_removed_from_a_running_kaiwojob_leaves_its_job(stack: Pipeline) -> None:
    """The Job was created under ``kaiwo-create`` and updated under ``kaiwo``: before decision
    0128 a label removed from the KaiwoJob stayed on its Job, held by the creation's manager,
    though every later apply left it out."""
    ns = namespace_of(stack, "gpu")
    job = kaiwo_job("relabelled", ns, queue_name="gpu", gpus=1, run_seconds=120)
    job["metadata"]["labels"] = {"team": "a", "project": "p"}
    await stack.kube.create(job)
    await reaches(stack, "relabelled", ns, "RUNNING")

    await stack.kube.merge_patch(
        resources.KAIWO_JOB,
        "relabelled",
        {"metadata": {"labels": {"team": None, "project": "q"}}},
        namespace=ns,
        field_manager="kubectl-edit",
    )

    async def relabelled() -> dict[str, Any] | Pending:
        child = await stack.kube.get(resources.JOB, "relabelled", namespace=ns)
        labels = child["metadata"]["labels"]
        if labels.get("project") != "q" or "team" in labels:
            return Pending(f"labels {labels}")
        return child

    child = await eventually(relabelled, what="the Job relabelled", within=STEP)
    assert child["spec"]["suspend"] is False
    [controller] = child["metadata"]["ownerReferences"]  # still the KaiwoJob's
    assert (controller["kind"], controller["name"]) == ("KaiwoJob", "relabelled")
    assert child["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpu"
    await stack.settled(within=STEP)
    found = await stack.kube.get(resources.KAIWO_JOB, "relabelled", namespace=ns)
    assert found["status"]["status"] == "RUNNING"
    assert "ApplyRefused" not in [c["type"] for c in found["status"]["conditions"]]
    await stack.kube.delete(resources.KAIWO_JOB, "relabelled", namespace=ns)


async def test_a_running_jobs_deleted_job_is_made_again_runs_and_is_told(stack: Pipeline) -> None:
    """Someone deletes the Job of a running KaiwoJob (decision 0139). Made again at once, the
    new Job started on the deleted Job's admitted Kueue Workload (Kueue finds a Workload by
    its job's name), and Kueue suspended it for good when the garbage collector removed that
    Workload (the new one ``Finished``, ``FailedToStart``): the KaiwoJob stayed PENDING with
    ``Admitted`` True and nothing running, and nobody was told the run had started over."""
    ns = namespace_of(stack, "gpu")
    await stack.kube.create(kaiwo_job("restarted", ns, queue_name="gpu", gpus=1, run_seconds=300))
    await reaches(stack, "restarted", ns, "RUNNING")
    first = await stack.kube.get(resources.JOB, "restarted", namespace=ns)
    await stack.settled(within=STEP)

    await stack.kube.delete(resources.JOB, "restarted", namespace=ns)

    async def running_again() -> dict[str, Any] | Pending:
        child = await actors.get_or_none(stack.kube, resources.JOB, "restarted", namespace=ns)
        if child is None or child["metadata"]["uid"] == first["metadata"]["uid"]:
            return Pending("not made again yet")
        if child["spec"].get("suspend") or not (child.get("status") or {}).get("ready"):
            return Pending(f"suspend {child['spec'].get('suspend')}, {child.get('status')}")
        return child

    child = await eventually(running_again, what="a new Job running", within=STEP)
    await reaches(stack, "restarted", ns, "RUNNING")
    await stack.settled(within=STEP)
    # Kueue's own record agrees: the new Job runs on a Workload of its own, admitted and
    # not finished (before: on the deleted Job's, and then on none).
    listed = await stack.kube.list(
        resources.KUEUE_WORKLOAD,
        namespace=ns,
        label_selector=f"{actors.KUEUE_JOB_UID_LABEL}={child['metadata']['uid']}",
    )
    assert len(listed.items) == 1, [w["metadata"]["name"] for w in listed.items]
    [workload] = listed.items
    kueue_says = {c["type"]: c["status"] for c in workload["status"]["conditions"]}
    assert kueue_says.get("Admitted") == "True" and kueue_says.get("Finished") != "True"
    told = [m for r, m in await events_of(stack, ns, "restarted") if r == "ChildDeleted"]
    # Once; "once Kueue's Workload of the deleted one is gone" when the operator observed the
    # Job's removal before its Workload's, as the garbage collector's order makes likely.
    assert len(told) == 1, told
    assert told[0].startswith(
        "The Job restarted was deleted while the workload was RUNNING: the operator creates "
        "it again"
    ), told
    assert told[0].endswith("and its run starts over from the beginning"), told
    await stack.kube.delete(resources.KAIWO_JOB, "restarted", namespace=ns)


async def test_a_deployment_whose_operator_label_is_removed_gets_it_back(stack: Pipeline) -> None:
    """Someone removes ``app.kubernetes.io/managed-by`` from a READY KaiwoService's Deployment
    (decision 0139). The watcher selects children by it, so to the planner the Deployment was
    gone; the executor found it there and left it so: the label never came back, and the
    Deployment deleted afterwards was not made again until the next resync (10 minutes)."""
    ns = namespace_of(stack, "svc")
    await stack.kube.create(vllm_service("unlabelled", ns, replicas=1))
    await reaches(stack, "unlabelled", ns, "READY", kind=resources.KAIWO_SERVICE)
    await stack.settled(within=STEP)

    await stack.kube.merge_patch(
        resources.DEPLOYMENT,
        "unlabelled",
        {"metadata": {"labels": {actors.MANAGED_BY_LABEL: None, "mine": "x"}}},
        namespace=ns,
        field_manager="kubectl-edit",
    )

    async def labelled_again() -> dict[str, Any] | Pending:
        found = await stack.kube.get(resources.DEPLOYMENT, "unlabelled", namespace=ns)
        labels = found["metadata"]["labels"]
        return found if labels.get(actors.MANAGED_BY_LABEL) == "kaiwo" else Pending(f"{labels}")

    first = await eventually(labelled_again, what="the label back", within=STEP)
    assert first["metadata"]["labels"]["mine"] == "x"  # the user's own label stays
    await reaches(stack, "unlabelled", ns, "READY", kind=resources.KAIWO_SERVICE)
    await stack.settled(within=STEP)

    # Observed again: deleted now, it is made again at once.
    await stack.kube.delete(resources.DEPLOYMENT, "unlabelled", namespace=ns)

    async def made_again() -> dict[str, Any] | Pending:
        found = await actors.get_or_none(
            stack.kube, resources.DEPLOYMENT, "unlabelled", namespace=ns
        )
        if found is None or found["metadata"]["uid"] == first["metadata"]["uid"]:
            return Pending("not made again")
        return found

    await eventually(made_again, what="the Deployment made again", within=STEP)
    await reaches(stack, "unlabelled", ns, "READY", kind=resources.KAIWO_SERVICE)
    await stack.kube.delete(resources.KAIWO_SERVICE, "unlabelled", namespace=ns)


async def create_volume_for_a_claim(stack: Pipeline, volume: str) -> None:
    """A 10Gi ``standard`` PersistentVolume named ``volume`` for a data claim to bind to: the
    stack has no provisioner."""
    await stack.kube.create(
        {
            "apiVersion": "v1",
            "kind": PERSISTENT_VOLUME.kind,
            "metadata": {"name": volume},
            "spec": {
                "capacity": {"storage": "10Gi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "standard",
                "hostPath": {"path": f"/tmp/{volume}"},
            },
        }
    )


async def test_a_volume_deleted_under_a_running_job_is_told(stack: Pipeline) -> None:
    """Someone deletes the data PVC of a running KaiwoJob (decision 0139): Kubernetes keeps
    it while the pod uses it. The status said "All PersistentVolumeClaims are bound"."""
    ns = namespace_of(stack, "gpu")
    volume = f"{ns}-unclaimed-data"  # the data claim binds to it: no provisioner here
    await create_volume_for_a_claim(stack, volume)
    storage = actors.training_job("unclaimed")["spec"]["storage"]
    await stack.kube.create(
        kaiwo_job("unclaimed", ns, queue_name="gpu", gpus=1, run_seconds=300, storage=storage)
    )
    await reaches(stack, "unclaimed", ns, "RUNNING")
    await stack.settled(within=STEP)

    await stack.kube.delete(resources.PERSISTENT_VOLUME_CLAIM, "unclaimed-data", namespace=ns)

    told = await has_events(stack, ns, "unclaimed", "PvcDeleting")
    message = (
        "PersistentVolumeClaim unclaimed-data is being deleted: it is kept while pods use it, "
        "then goes with its data, and a new, empty one is made"
    )
    assert [m for r, m in told if r == "PvcDeleting"] == [message]
    await stack.settled(within=STEP)
    found = await stack.kube.get(resources.KAIWO_JOB, "unclaimed", namespace=ns)
    assert found["status"]["status"] == "RUNNING"
    pvc_ready = condition(found, "PvcReady")
    assert (pvc_ready["status"], pvc_ready["reason"], pvc_ready["message"]) == (
        "False",
        "Deleting",
        message,
    )
    await stack.kube.delete(resources.KAIWO_JOB, "unclaimed", namespace=ns)
    await gone(stack, resources.KAIWO_JOB, "unclaimed", ns)
    await stack.kube.delete(PERSISTENT_VOLUME, volume)


async def test_a_deadline_removed_from_a_running_kaiwojob_leaves_its_job(stack: Pipeline) -> None:
    """The Job was created with ``activeDeadlineSeconds`` under ``kaiwo-create``: before
    decision 0133 the deadline removed from the KaiwoJob stayed on the running Job, held by
    the creation's manager, and would still have ended it."""
    ns = namespace_of(stack, "gpu")
    container = {"name": "workload", "image": "ghcr.io/silogen/rocm-ray:6.4"}
    spec = {"activeDeadlineSeconds": 3600, "template": {"spec": {"containers": [container]}}}
    job = kaiwo_job(
        "undeadlined", ns, queue_name="gpu", gpus=1, run_seconds=120, job={"spec": spec}
    )
    await stack.kube.create(job)
    await reaches(stack, "undeadlined", ns, "RUNNING")

    await stack.kube.merge_patch(
        resources.KAIWO_JOB,
        "undeadlined",
        {"spec": {"job": {"spec": {"activeDeadlineSeconds": None}}}},
        namespace=ns,
        field_manager="kubectl-edit",
    )

    async def without_deadline() -> dict[str, Any] | Pending:
        child = await stack.kube.get(resources.JOB, "undeadlined", namespace=ns)
        deadline = child["spec"].get("activeDeadlineSeconds")
        return child if deadline is None else Pending(f"activeDeadlineSeconds {deadline}")

    child = await eventually(without_deadline, what="the deadline gone from the Job", within=STEP)
    assert child["spec"]["suspend"] is False
    assert child["spec"]["template"]["spec"]["containers"][0]["image"] == container["image"]
    await stack.settled(within=STEP)
    found = await stack.kube.get(resources.KAIWO_JOB, "undeadlined", namespace=ns)
    assert found["status"]["status"] == "RUNNING"
    conditions = {c["type"]: c for c in found["status"]["conditions"]}
    assert "ApplyRefused" not in conditions
    assert conditions["ChildSpecApplied"]["status"] == "True"
    await stack.kube.delete(resources.KAIWO_JOB, "undeadlined", namespace=ns)


async def test_a_ray_service_waiting_in_its_queue_is_replaced_to_take_an_edit(
    stack: Pipeline,
) -> None:
    """16 GPUs asked of the ``ray`` queue's 8: Kueue keeps the AppWrapper waiting. An edit of
    the image cannot reach its components (the AppWrapper operator's webhook refuses any
    change of them), so the waiting AppWrapper is replaced by one of the edited spec, which
    waits in turn (decision 0129), where before the service said to re-create it by hand."""
    ns = namespace_of(stack, "ray")
    service = {
        "apiVersion": actors.KAIWO_API,
        "kind": "KaiwoService",
        "metadata": {"name": "waiting-serve", "namespace": ns},
        "spec": {
            "user": "dave@example.com",
            "image": "rayproject/ray:2.40.0",
            "clusterQueue": "ray",
            "ray": True,
            "gpuVendor": "amd",
            "replicas": 2,
            "gpusPerReplica": 8,
        },
    }
    await stack.kube.create(service)

    async def waiting_wrapper(image: str) -> dict[str, Any] | Pending:
        found = await actors.get_or_none(
            stack.kube, resources.APP_WRAPPER, "waiting-serve", namespace=ns
        )
        if found is None or found["metadata"].get("deletionTimestamp"):
            return Pending("no AppWrapper")
        if image not in str(found["spec"]["components"]):
            return Pending("the AppWrapper of the earlier spec")
        return found if found["spec"].get("suspend") is True else Pending("not suspended")

    first = await eventually(
        lambda: waiting_wrapper("ray:2.40.0"), what="the AppWrapper waiting", within=STEP
    )
    await stack.kube.merge_patch(
        resources.KAIWO_SERVICE,
        "waiting-serve",
        {"spec": {"image": "rayproject/ray:2.41.0"}},
        namespace=ns,
        field_manager="kubectl-edit",
    )

    second = await eventually(
        lambda: waiting_wrapper("ray:2.41.0"), what="the edited AppWrapper", within=STEP
    )
    assert second["metadata"]["uid"] != first["metadata"]["uid"]

    async def applied() -> dict[str, Any] | Pending:
        found = await stack.kube.get(resources.KAIWO_SERVICE, "waiting-serve", namespace=ns)
        told = [
            c for c in found["status"].get("conditions") or () if c["type"] == "ChildSpecApplied"
        ]
        return found if told and told[0]["status"] == "True" else Pending(f"{told}")

    found = await eventually(applied, what="the edit applied", within=STEP)
    assert "ApplyRefused" not in [c["type"] for c in found["status"]["conditions"]]
    reasons = [
        reason for reason, _ in await events_of(stack, ns, "waiting-serve", kind="KaiwoService")
    ]
    assert "ChildReplacing" in reasons and "ChildSpecNotApplied" not in reasons
    await stack.kube.delete(resources.KAIWO_SERVICE, "waiting-serve", namespace=ns)


async def test_a_running_jobs_template_outlives_its_namespace_configs_edits(
    stack: Pipeline,
) -> None:
    """The namespace's AIMNamespaceConfig gives a running Job a pull secret and ``HF_TOKEN``.
    Changed, the Job keeps them and says so; changed back, nothing is refused; deleted, the
    Job keeps them and says so. Before decision 0131 the change back and the deletion were
    refused by the API server on every plan (``ApplyRefused``) while ``ChildSpecApplied``
    said the Job matched: the first took away the labels the server puts on a Job's
    template, the second the variable and the pull secret. The message names where the kept
    change comes from (decision 0144): before, it named the paths alone, which read as an
    edit of the KaiwoJob."""
    ns = namespace_of(stack, "gpu")
    await stack.kube.create(
        {
            "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
            "kind": "AIMNamespaceConfig",
            "metadata": {"name": "tenant", "namespace": ns},
            "spec": {
                "images": {"imagePullSecrets": ["reg-a"]},
                "credentials": {"huggingFaceToken": {"secretName": "hf-a", "secretKey": "t"}},
            },
        }
    )
    await stack.kube.create(kaiwo_job("tenant-job", ns, queue_name="gpu", gpus=1, run_seconds=300))
    await reaches(stack, "tenant-job", ns, "RUNNING")

    async def told_after(patch: Any | None, *, says: str, naming: str) -> dict[str, Any]:
        """Make the edit (None: delete the config), wait until ``ChildSpecApplied`` has
        status ``says`` and a message with ``naming``, and everything settled."""
        if patch is None:
            await stack.kube.delete(resources.AIM_NAMESPACE_CONFIG, "tenant", namespace=ns)
        else:
            await stack.kube.merge_patch(
                resources.AIM_NAMESPACE_CONFIG,
                "tenant",
                patch,
                namespace=ns,
                field_manager="kubectl-edit",
            )

        async def told() -> dict[str, Any] | Pending:
            found = await stack.kube.get(resources.KAIWO_JOB, "tenant-job", namespace=ns)
            applied = condition(found, "ChildSpecApplied")
            if applied["status"] != says or naming not in applied["message"]:
                return Pending(f"{applied}")
            return found

        await eventually(told, what=f"ChildSpecApplied {says} naming {naming}", within=STEP)
        await stack.settled(within=STEP)
        found = await stack.kube.get(resources.KAIWO_JOB, "tenant-job", namespace=ns)
        assert "ApplyRefused" not in [c["type"] for c in found["status"]["conditions"]], found
        assert found["status"]["status"] == "RUNNING"
        return condition(found, "ChildSpecApplied")

    kept = (
        "Not applied to the existing Job, because a Job's pod template, selector and "
        "completion settings cannot change after it is created: "
    )
    recreate = ". Delete and re-create the KaiwoJob to run with these changes."
    hf_b = {"spec": {"credentials": {"huggingFaceToken": {"secretName": "hf-b"}}}}
    changed = await told_after(hf_b, says="False", naming="env[0].valueFrom.secretKeyRef.name")
    assert changed["reason"] == "JobFieldsImmutable"
    changed_message = (
        kept + "spec.template.spec.containers[0].env[0].valueFrom.secretKeyRef.name "
        f"(from AIMNamespaceConfig {ns}/tenant, changed since the Job was made)" + recreate
    )
    assert changed["message"] == changed_message

    hf_a = {"spec": {"credentials": {"huggingFaceToken": {"secretName": "hf-a"}}}}
    back = await told_after(hf_a, says="True", naming="matches")
    assert back["reason"] == "Applied"

    gone_config = await told_after(None, says="False", naming="env[name=HF_TOKEN]")
    assert gone_config["reason"] == "JobFieldsImmutable"
    gone_message = (
        kept + "spec.template.spec.containers[0].env[name=HF_TOKEN], "
        "spec.template.spec.imagePullSecrets[name=reg-a] (each given by neither the "
        f"workload's spec nor an AIMNamespaceConfig any more: namespace {ns} has none now)"
        + recreate
    )
    assert gone_config["message"] == gone_message

    async def warned() -> list[str] | Pending:
        found = await events_of(stack, ns, "tenant-job")
        messages = [message for reason, message in found if reason == "ChildSpecNotApplied"]
        return messages if gone_message in messages else Pending(f"{found}")

    # One Warning per message, each naming the cause as the condition does.
    assert await eventually(warned, what="the Warning of the deletion", within=STEP) == [
        changed_message,
        gone_message,
    ]
    job = await stack.kube.get(resources.JOB, "tenant-job", namespace=ns)
    template = job["spec"]["template"]
    assert template["spec"]["imagePullSecrets"] == [{"name": "reg-a"}]
    assert template["metadata"]["labels"]["batch.kubernetes.io/job-name"] == "tenant-job"
    await stack.kube.delete(resources.KAIWO_JOB, "tenant-job", namespace=ns)


async def test_a_job_waiting_in_a_full_queue_is_replaced_to_take_an_edit(stack: Pipeline) -> None:
    """A Job's pod template cannot change, but nothing of a Job waiting in its queue runs: an
    edit of its KaiwoJob's env makes a new Job of the edited spec, which waits in turn
    (decision 0129), where before the workload said to re-create it by hand."""
    ns = namespace_of(stack, "quota")
    await stack.kube.create(kaiwo_job("holder", ns, queue_name="small", gpus=8, run_seconds=120))
    await reaches(stack, "holder", ns, "RUNNING")
    await stack.kube.create(kaiwo_job("queued", ns, queue_name="small", gpus=8, run_seconds=2))
    await reaches(stack, "queued", ns, "PENDING")
    waiting = await stack.kube.get(resources.JOB, "queued", namespace=ns)

    await stack.kube.merge_patch(
        resources.KAIWO_JOB,
        "queued",
        {"spec": {"env": [{"name": "LEARNING_RATE", "value": "0.1"}]}},
        namespace=ns,
        field_manager="kubectl-edit",
    )

    async def replaced() -> dict[str, Any] | Pending:
        found = await actors.get_or_none(stack.kube, resources.JOB, "queued", namespace=ns)
        if found is None or found["metadata"]["uid"] == waiting["metadata"]["uid"]:
            return Pending("the Job of the earlier spec, or none yet")
        return found

    job = await eventually(replaced, what="the waiting Job replaced", within=STEP)
    env = job["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "LEARNING_RATE", "value": "0.1"} in env
    assert job["spec"]["suspend"] is True  # still waiting: the queue is full
    await stack.settled(within=STEP)
    found = await stack.kube.get(resources.KAIWO_JOB, "queued", namespace=ns)
    assert found["status"]["status"] == "PENDING"
    assert (condition(found, "ChildSpecApplied")["status"]) == "True"
    assert "ApplyRefused" not in [c["type"] for c in found["status"]["conditions"]]
    reasons = [reason for reason, _ in await events_of(stack, ns, "queued")]
    assert "ChildReplacing" in reasons and "ChildSpecNotApplied" not in reasons
    for name in ("queued", "holder"):
        await stack.kube.delete(resources.KAIWO_JOB, name, namespace=ns)


async def test_a_job_deleted_in_the_foreground_is_left_to_the_garbage_collector(
    stack: Pipeline,
) -> None:
    """``kubectl delete --cascade=foreground``: the garbage collector deletes the children and
    keeps the KaiwoJob (finalizer ``foregroundDeletion``) until they are gone. Planned
    meanwhile as a live workload, the operator created its data PVC and download Job again
    and moved it back to DOWNLOADING, with the Event of a start (decision 0130)."""
    ns = namespace_of(stack, "gpu")
    audit = stack.audit_log
    assert audit is not None
    volume = f"{ns}-cascaded-data"  # the data claim binds to it: no provisioner here
    await create_volume_for_a_claim(stack, volume)
    storage = actors.training_job("cascaded")["spec"]["storage"]
    await stack.kube.create(
        kaiwo_job("cascaded", ns, queue_name="gpu", gpus=1, run_seconds=300, storage=storage)
    )
    running = await reaches(stack, "cascaded", ns, "RUNNING")
    assert condition(running, "DownloadJobSucceeded")["status"] == "True"
    await stack.settled(within=STEP)  # the writes of the start are done
    mark = audit.mark()

    await stack.kube.delete(resources.KAIWO_JOB, "cascaded", namespace=ns, propagation="Foreground")

    await gone(stack, resources.KAIWO_JOB, "cascaded", ns)
    await stack.settled(within=STEP)
    writes = [
        (e.verb, e.resource, e.subresource, e.name)
        for e in audit.events(since=mark)
        if e.user == OPERATOR_USER and e.namespace == ns
    ]
    assert writes == [], (writes, await events_of(stack, ns, "cascaded"))
    owned = f"{actors.OWNER_UID_LABEL}={running['metadata']['uid']}"
    for kind in (resources.JOB, resources.PERSISTENT_VOLUME_CLAIM, resources.CONFIG_MAP):
        left = await stack.kube.list(kind, namespace=ns, label_selector=owned)
        assert left.items == [], [i["metadata"]["name"] for i in left.items]
    reasons = [reason for reason, _ in await events_of(stack, ns, "cascaded")]
    assert reasons.count("WorkloadDownloading") == 1, reasons
    await stack.kube.delete(PERSISTENT_VOLUME, volume)


async def test_a_waiting_job_being_deleted_has_no_expired_job_terminated_for_it(
    stack: Pipeline,
) -> None:
    """A waiting job deleted while another controller's finalizer holds it stays PENDING, its
    ``deletionTimestamp`` set, until that finalizer goes: counted as demand for GPUs, it had
    the operator terminate a job past its ``duration`` for GPUs nobody would use (decision
    0130)."""
    ns = namespace_of(stack, "dur")
    held = "example.com/archive"
    await preempt_for_jobs_waiting_a_second(stack)
    await stack.kube.create(
        kaiwo_job("expiring", ns, queue_name="dur", gpus=8, run_seconds=300, duration="15s")
    )
    await reaches(stack, "expiring", ns, "RUNNING")
    withdrawn = kaiwo_job("withdrawn", ns, queue_name="dur", gpus=8, run_seconds=2)
    withdrawn["metadata"]["finalizers"] = [held]
    await stack.kube.create(withdrawn)
    await reaches(stack, "withdrawn", ns, "PENDING")
    await stack.kube.delete(resources.KAIWO_JOB, "withdrawn", namespace=ns)
    try:
        await _expired_job_keeps_running(stack, ns)
    finally:
        await stack.kube.merge_patch(
            resources.KAIWO_JOB,
            "withdrawn",
            {"metadata": {"finalizers": None}},
            namespace=ns,
            field_manager="cluster-admin",
        )
    await gone(stack, resources.KAIWO_JOB, "withdrawn", ns)
    await stack.kube.delete(resources.KAIWO_JOB, "expiring", namespace=ns)


async def _expired_job_keeps_running(stack: Pipeline, ns: str) -> None:
    async def past_its_duration() -> dict[str, Any] | Pending:
        found = await stack.kube.get(resources.KAIWO_JOB, "expiring", namespace=ns)
        told = [c for c in found["status"].get("conditions") or () if c["type"] == "Preemptable"]
        return found if told and told[0]["status"] == "True" else Pending(f"{told}")

    await eventually(past_its_duration, what="the job past its duration", within=STEP)
    await stack.settled(within=STEP)

    found = await stack.kube.get(resources.KAIWO_JOB, "expiring", namespace=ns)
    assert found["status"]["status"] == "RUNNING", found["status"]
    types = [c["type"] for c in found["status"]["conditions"]]
    assert "WorkloadTerminatedEarly" not in types, found["status"]["conditions"]
    withdrawing = await stack.kube.get(resources.KAIWO_JOB, "withdrawn", namespace=ns)
    assert withdrawing["metadata"]["deletionTimestamp"]
    assert withdrawing["status"]["status"] == "PENDING"


async def test_a_job_parameter_alone_in_spec_job_runs_kaiwos_template(stack: Pipeline) -> None:
    """``spec.job`` that sets a Job parameter only, as the API reference offers it
    (``backoffLimit``, a deadline): the Job runs Kaiwo's own pod template with the image and
    entrypoint (decision 0136). Before, the Job had no container, and the API server refused
    it on every plan: PENDING for good, with ``ApplyRefused``."""
    ns = namespace_of(stack, "gpu")
    job = kaiwo_job("parameters-only", ns, queue_name="gpu", gpus=1, run_seconds=300)
    job["spec"]["job"] = {"spec": {"activeDeadlineSeconds": 3600, "backoffLimit": 1}}
    await stack.kube.create(job)

    running = await reaches(stack, "parameters-only", ns, "RUNNING")

    assert "ApplyRefused" not in [c["type"] for c in running["status"]["conditions"]]
    made = await stack.kube.get(resources.JOB, "parameters-only", namespace=ns)
    assert (made["spec"]["activeDeadlineSeconds"], made["spec"]["backoffLimit"]) == (3600, 1)
    [container] = made["spec"]["template"]["spec"]["containers"]
    assert (container["name"], container["image"]) == ("workload", job["spec"]["image"])
    await stack.kube.delete(resources.KAIWO_JOB, "parameters-only", namespace=ns)


async def test_duration_preemption_counts_every_pod_of_a_parallel_job(stack: Pipeline) -> None:
    """In the ``dur`` queue (8 GPUs) a Job of 2 pods x 4 runs past its ``duration`` and
    another of 2 pods x 4 waits: the operator terminates the one for the other, which waited
    for 8 GPUs, the 8 Kueue admits it with once they are free (decision 0147). Before, it was
    counted, and told, as waiting for 4."""
    ns = namespace_of(stack, "dur")
    two_pods = {"spec": {"parallelism": 2}}
    await preempt_for_jobs_waiting_a_second(stack)
    overtime = kaiwo_job("wide-overtime", ns, queue_name="dur", gpus=4, run_seconds=300)
    overtime["spec"] |= {"duration": "4s", "job": two_pods}
    await stack.kube.create(overtime)
    await reaches(stack, "wide-overtime", ns, "RUNNING")
    waiting = kaiwo_job("wide-waiting", ns, queue_name="dur", gpus=4, run_seconds=300)
    waiting["spec"]["job"] = two_pods
    await stack.kube.create(waiting)
    await reaches(stack, "wide-waiting", ns, "PENDING")

    stopped = await reaches(stack, "wide-overtime", ns, "TERMINATED")
    early = condition(stopped, "WorkloadTerminatedEarly")
    assert early["reason"] == "DurationExceededWithActiveGpuDemand", early
    assert early["message"] == (
        "Terminated since duration was exceeded and there is active GPU demand: "
        f"KaiwoJob/{ns}/wide-waiting has waited for 8 amd GPUs longer than 1s"
    ), early
    await reaches(stack, "wide-waiting", ns, "RUNNING")
    workload = await kueue_workload_of(stack, ns, "wide-waiting")
    [assigned] = workload["status"]["admission"]["podSetAssignments"]
    assert (assigned["count"], assigned["resourceUsage"]["amd.com/gpu"]) == (2, "8"), assigned
    for name in ("wide-overtime", "wide-waiting"):
        await stack.kube.delete(resources.KAIWO_JOB, name, namespace=ns)


async def test_duration_preemption_terminates_one_expired_job_for_one_waiting_job(
    stack: Pipeline,
) -> None:
    """In the ``dur`` queue (8 GPUs) two Jobs of 4 run past their ``duration`` and one of 4
    waits: either expired Job alone frees enough, so the operator terminates exactly one, Kueue
    admits the waiting Job, and the other keeps running (decision 0148). Before, the second
    was terminated too, for the same waiting Job, in the seconds between the first one's
    termination and Kueue's admission of the waiting Job: its status still said PENDING."""
    ns = namespace_of(stack, "dur")
    expired = ("overtime-a", "overtime-b")
    await preempt_for_jobs_waiting_a_second(stack)
    for name in expired:
        await stack.kube.create(
            kaiwo_job(name, ns, queue_name="dur", gpus=4, run_seconds=300, duration="4s")
        )
    for name in expired:
        await past_its_duration(stack, ns, name)
    await stack.kube.create(kaiwo_job("one-waiting", ns, queue_name="dur", gpus=4, run_seconds=300))

    await reaches(stack, "one-waiting", ns, "RUNNING")
    phases: dict[str, str] = {}
    for name in expired:
        found = await stack.kube.get(resources.KAIWO_JOB, name, namespace=ns)
        phases[name] = found["status"]["status"]
    assert sorted(phases.values()) == ["RUNNING", "TERMINATED"], phases
    [victim] = [name for name, phase in phases.items() if phase == "TERMINATED"]
    [kept] = [name for name, phase in phases.items() if phase == "RUNNING"]
    stopped = await stack.kube.get(resources.KAIWO_JOB, victim, namespace=ns)
    assert stopped["status"]["preemptedFor"]["name"] == "one-waiting"
    # Still so once the victim's Job is gone and every observation since is planned.
    await gone(stack, resources.JOB, victim, ns)
    await stack.settled(within=STEP)
    survivor = await stack.kube.get(resources.KAIWO_JOB, kept, namespace=ns)
    assert survivor["status"]["status"] == "RUNNING", survivor["status"]
    types = [c["type"] for c in survivor["status"]["conditions"]]
    assert "WorkloadTerminatedEarly" not in types, survivor["status"]["conditions"]
    assert condition(survivor, "Preemptable")["status"] == "True"
    assert (await job_pods(stack, ns, kept))[0]["status"]["phase"] == "Running"
    for name in (*expired, "one-waiting"):
        await stack.kube.delete(resources.KAIWO_JOB, name, namespace=ns)


async def past_its_duration(pipeline: Pipeline, namespace: str, name: str) -> None:
    """Wait until the operator tells that the KaiwoJob ``name`` ran past its duration."""

    async def told() -> bool | Pending:
        found = await pipeline.kube.get(resources.KAIWO_JOB, name, namespace=namespace)
        said = [
            c
            for c in (found.get("status") or {}).get("conditions") or ()
            if c["type"] == "Preemptable"
        ]
        return True if said and said[0]["status"] == "True" else Pending(f"{said}")

    await eventually(told, what=f"{name} past its duration", within=STEP)


async def test_a_jobs_parallel_pods_are_what_kueue_reserves_and_the_operator_counts(
    stack: Pipeline,
) -> None:
    """``spec.job`` with ``parallelism: 3, completions: 2``: Kubernetes runs 2 pods at once
    (never more than the completions), and Kueue 0.17 counts the Job's pod set so, reserving
    2 x 4 GPUs, the ``gpu`` queue's 8 MI300X. The operator counts the same pods (decision
    0147): each pod's env says 2 replicas of 4, 8 GPUs, and Schedulable tells that the 8 are
    2 pods of ``spec.gpus`` 4. Before, the env said one pod of 4 while 8 were held."""
    ns = namespace_of(stack, "gpu")
    job = kaiwo_job("sweep", ns, queue_name="gpu", gpus=4, run_seconds=300)
    job["spec"]["job"] = {"spec": {"parallelism": 3, "completions": 2}}
    await stack.kube.create(job)

    running = await reaches(stack, "sweep", ns, "RUNNING")

    workload = await kueue_workload_of(stack, ns, "sweep")
    [pod_set] = workload["spec"]["podSets"]
    assert pod_set["count"] == 2, pod_set
    [assigned] = workload["status"]["admission"]["podSetAssignments"]
    assert (assigned["count"], assigned["resourceUsage"]["amd.com/gpu"]) == (2, "8"), assigned

    async def both_pods() -> list[dict[str, Any]] | Pending:
        pods = await job_pods(stack, ns, "sweep")
        return pods if len(pods) == 2 else Pending(f"{len(pods)} pods")

    for pod in await eventually(both_pods, what="the Job's 2 pods", within=STEP):
        [container] = pod["spec"]["containers"]
        assert container["resources"]["limits"]["amd.com/gpu"] == "4"
        told = {
            e["name"]: e.get("value")
            for e in container.get("env") or ()
            if e["name"] in ("NUM_GPUS", "NUM_REPLICAS", "NUM_GPUS_PER_REPLICA")
        }
        assert told == {"NUM_GPUS": "8", "NUM_REPLICAS": "2", "NUM_GPUS_PER_REPLICA": "4"}, told
    schedulable = condition(running, "Schedulable")
    assert (schedulable["status"], schedulable["reason"]) == ("True", "GpusRecalculated")
    assert "the Job runs 2 pods at once" in schedulable["message"], schedulable
    assert "the workload holds 8 GPUs" in schedulable["message"], schedulable
    await stack.kube.delete(resources.KAIWO_JOB, "sweep", namespace=ns)


async def test_a_jobs_finished_pods_free_no_gpus_when_duration_preemption_stops_it(
    stack: Pipeline,
) -> None:
    """In the ``dur`` queue (8 GPUs) a sweep of 2 pods x 4 (3 completions) runs its first 2:
    one pod is left, and Kueue 0.17 writes ``reclaimablePods: main 1`` on its Workload and
    releases that pod's quota (the ClusterQueue's usage goes from 8 to 4). An expired Job of
    4 is admitted into the released quota; both run past their ``duration`` when a Job of 8
    comes to wait. The sweep holds 4, so the operator terminates both for it, in the same
    decision, and Kueue admits the waiting Job (decision 0152). Before, the sweep was counted
    as 8, terminated alone, and those 8 counted as on their way kept the other expired Job
    running for two minutes while the waiting one still waited."""
    ns = namespace_of(stack, "dur")
    # Until the waiter of 8 comes, nobody waits long enough to have anything terminated:
    # the expired sweep is not terminated for the Job of 4 in the seconds Kueue takes to
    # admit it.
    await preempt_for_jobs_waiting(stack, "1h")
    sweep = kaiwo_job("sweep-overtime", ns, queue_name="dur", gpus=4, run_seconds=600)
    sweep["spec"] |= {"duration": "4s", "job": {"spec": {"parallelism": 2, "completions": 3}}}
    await stack.kube.create(sweep)
    await reaches(stack, "sweep-overtime", ns, "RUNNING")
    # Its first 2 pods end now; the third runs on until the operator terminates the sweep.
    await end_running_pods(stack.kube, ns, "sweep-overtime", count=2)

    async def released() -> dict[str, Any] | Pending:
        workload = await kueue_workload_of(stack, ns, "sweep-overtime")
        reclaimable = (workload.get("status") or {}).get("reclaimablePods")
        return workload if reclaimable else Pending("no reclaimablePods yet")

    workload = await eventually(released, what="Kueue releases a finished pod's quota", within=STEP)
    assert workload["status"]["reclaimablePods"] == [{"name": "main", "count": 1}]
    [assigned] = workload["status"]["admission"]["podSetAssignments"]
    assert (assigned["count"], assigned["resourceUsage"]["amd.com/gpu"]) == (2, "8"), assigned

    async def usage_of_four() -> bool | Pending:
        queue = await stack.kube.get(resources.KUEUE_CLUSTER_QUEUE, "dur")
        used = [
            r.get("total")
            for f in (queue.get("status") or {}).get("flavorsUsage") or ()
            for r in f.get("resources") or ()
            if r["name"] == "amd.com/gpu"
        ]
        return True if used == ["4"] else Pending(f"amd.com/gpu used {used}")

    await eventually(usage_of_four, what="the ClusterQueue uses 4 GPUs", within=STEP)
    # Admitted only into the quota the finished pods released.
    expired = kaiwo_job("single-overtime", ns, queue_name="dur", gpus=4, run_seconds=300)
    expired["spec"]["duration"] = "4s"
    await stack.kube.create(expired)
    await reaches(stack, "single-overtime", ns, "RUNNING")
    for name in ("sweep-overtime", "single-overtime"):
        await past_its_duration(stack, ns, name)
    await preempt_for_jobs_waiting_a_second(stack)
    await stack.kube.create(kaiwo_job("waits-for-8", ns, queue_name="dur", gpus=8, run_seconds=2))

    stopped = await reaches(stack, "sweep-overtime", ns, "TERMINATED")
    assert stopped["status"]["preemptedFor"]["name"] == "waits-for-8"
    # Decided with the sweep: already told when the sweep's Job is gone.
    other = await stack.kube.get(resources.KAIWO_JOB, "single-overtime", namespace=ns)
    assert other["status"]["status"] in ("TERMINATING", "TERMINATED"), other["status"]
    assert other["status"]["preemptedFor"]["name"] == "waits-for-8"
    await reaches(stack, "waits-for-8", ns, "COMPLETE")
    for name in ("sweep-overtime", "single-overtime", "waits-for-8"):
        await stack.kube.delete(resources.KAIWO_JOB, name, namespace=ns)


async def test_kueue_admits_part_of_a_jobs_pods_and_the_operator_keeps_its_parallelism(
    stack: Pipeline,
) -> None:
    """A sweep of 4 pods x 4 GPUs in the ``gpu`` queue (8 MI300X), allowed to start with 2
    (``kueue.x-k8s.io/job-min-parallelism: "2"`` in ``spec.job.metadata.annotations``): Kueue
    0.17 (PartialAdmission on by default) admits 2 of the 4 pods, 8 GPUs, and lowers the
    Job's parallelism to 2 as it unsuspends it. The operator carries the annotation onto the
    Job, keeps Kueue's parallelism, tells "admitted 2 of 4 pods", and, settled, writes nothing
    (decision 0153). Before, the annotation was dropped: the Workload asked for 16 GPUs and
    waited for good; put on the Job by hand, the operator's put-back of 4 was refused by
    Kueue's webhook and told as ApplyRefused."""
    ns = namespace_of(stack, "gpu")
    job = kaiwo_job("partial-sweep", ns, queue_name="gpu", gpus=4, run_seconds=300)
    job["spec"]["job"] = {
        "metadata": {"annotations": {"kueue.x-k8s.io/job-min-parallelism": "2"}},
        "spec": {"parallelism": 4, "completions": 4},
    }
    await stack.kube.create(job)

    await reaches(stack, "partial-sweep", ns, "RUNNING")

    workload = await kueue_workload_of(stack, ns, "partial-sweep")
    [pod_set] = workload["spec"]["podSets"]
    assert (pod_set["count"], pod_set["minCount"]) == (4, 2), pod_set
    [assigned] = workload["status"]["admission"]["podSetAssignments"]
    assert (assigned["count"], assigned["resourceUsage"]["amd.com/gpu"]) == (2, "8"), assigned

    await job_pods_running(stack, ns, "partial-sweep", 2, of=4)
    await stack.settled(within=STEP)
    assert await stack.operator_writes_while_idle() == Counter()
    child = await stack.kube.get(resources.JOB, "partial-sweep", namespace=ns)
    assert child["spec"]["parallelism"] == 2, child["spec"]
    found = await stack.kube.get(resources.KAIWO_JOB, "partial-sweep", namespace=ns)
    types = [c["type"] for c in found["status"]["conditions"]]
    assert "ApplyRefused" not in types, found["status"]["conditions"]
    admitted = condition(found, "Admitted")
    assert (admitted["status"], admitted["reason"]) == ("True", "PartlyAdmitted"), admitted
    assert admitted["message"].startswith("Kueue admitted 2 of 4 pods of the Job"), admitted
    assert condition(found, "ChildSpecApplied")["status"] == "True"
    assert len(await job_pods(stack, ns, "partial-sweep")) == 2
    await stack.kube.delete(resources.KAIWO_JOB, "partial-sweep", namespace=ns)


async def test_a_partly_admitted_indexed_sweep_runs_as_many_completions_as_pods_kueue_admits(
    stack: Pipeline,
) -> None:
    """An Indexed sweep of 4 pods x 4 GPUs (4 completions) in the ``gpu`` queue (8 MI300X),
    allowed to start with 2 and to keep its completions equal to its parallelism
    (``kueue.x-k8s.io/job-completions-equal-parallelism: "true"`` in
    ``spec.job.metadata.annotations``): Kueue admits 2 pods and sets both ``parallelism`` and
    ``completions`` of the Job to 2, so the Job completes once its 2 indexes succeed. The
    operator carries the annotation, keeps both of Kueue's counts without telling them as
    edits it could not apply, writes nothing while settled, and the KaiwoJob completes
    (decision 0157). Before, the annotation was dropped: Kueue kept ``completions: 4``, and the
    Job ran 4 indexes on 2 pods at a time."""
    ns = namespace_of(stack, "gpu")
    # Its pods run until the test has watched the operator settle, and ends them.
    job = kaiwo_job("indexed-sweep", ns, queue_name="gpu", gpus=4, run_seconds=600)
    job["spec"]["job"] = {
        "metadata": {
            "annotations": {
                "kueue.x-k8s.io/job-min-parallelism": "2",
                "kueue.x-k8s.io/job-completions-equal-parallelism": "true",
            }
        },
        "spec": {"parallelism": 4, "completions": 4, "completionMode": "Indexed"},
    }
    await stack.kube.create(job)

    await reaches(stack, "indexed-sweep", ns, "RUNNING")
    child = await stack.kube.get(resources.JOB, "indexed-sweep", namespace=ns)
    assert child["metadata"]["annotations"]["kueue.x-k8s.io/job-completions-equal-parallelism"] == (
        "true"
    )
    assert (child["spec"]["parallelism"], child["spec"]["completions"]) == (2, 2), child["spec"]
    await stack.settled(within=STEP)
    assert await stack.operator_writes_while_idle() == Counter()
    found = await stack.kube.get(resources.KAIWO_JOB, "indexed-sweep", namespace=ns)
    applied = condition(found, "ChildSpecApplied")
    assert applied["status"] == "True", applied
    admitted = condition(found, "Admitted")
    assert admitted["message"].startswith("Kueue admitted 2 of 4 pods of the Job"), admitted

    await end_running_pods(stack.kube, ns, "indexed-sweep", count=2)
    done = await reaches(stack, "indexed-sweep", ns, "COMPLETE")
    child = await stack.finished_job("indexed-sweep", namespace=ns)
    assert child["status"]["succeeded"] == 2, child["status"]
    assert condition(done, "ChildSpecApplied")["status"] == "True"
    await stack.kube.delete(resources.KAIWO_JOB, "indexed-sweep", namespace=ns)


async def test_job_annotations_kueue_refuses_are_refused_by_the_operator_naming_the_field(
    stack: Pipeline,
) -> None:
    """Kueue's partial-admission annotations that its Job webhook refuses, given in
    ``spec.job``: ``job-completions-equal-parallelism: "true"`` on a Job left NonIndexed, and a
    ``job-min-parallelism`` of 1 on a Job of Kaiwo's parallelism 1 (no ``spec.job.spec``).
    Before (measured), the Job was never made and each KaiwoJob waited PENDING for good,
    ``Admitted`` "pending admission", ``ChildSpecApplied`` True, told only by ``ApplyRefused``
    and ``ApplyFailed`` Events in Kueue's words. Now the operator refuses the spec, naming the
    field, in ``Valid`` and a Warning Event; no Job is made and nothing is written again
    (decision 0160)."""
    ns = namespace_of(stack, "gpu")
    nonindexed = kaiwo_job("sweep-nonindexed", ns, queue_name="gpu", gpus=1)
    nonindexed["spec"]["job"] = {
        "metadata": {
            "annotations": {
                "kueue.x-k8s.io/job-min-parallelism": "2",
                "kueue.x-k8s.io/job-completions-equal-parallelism": "true",
            }
        },
        "spec": {"parallelism": 4, "completions": 4},
    }
    single = kaiwo_job("sweep-of-one", ns, queue_name="gpu", gpus=1)
    single["spec"]["job"] = {
        "metadata": {"annotations": {"kueue.x-k8s.io/job-min-parallelism": "1"}}
    }
    await stack.kube.create(nonindexed)
    await stack.kube.create(single)

    expected = {
        "sweep-nonindexed": (
            "spec.job: spec.completionMode must be Indexed with metadata.annotations"
            '["kueue.x-k8s.io/job-completions-equal-parallelism"] "true"'
        ),
        "sweep-of-one": (
            'spec.job: metadata.annotations["kueue.x-k8s.io/job-min-parallelism"] (1) must be '
            "at least 1 and below the 1 pod the Job runs at once (spec.parallelism not given"
        ),
    }
    for name, message in expected.items():
        found = await refused_as_invalid(stack, name, ns)
        types = [c["type"] for c in found["status"]["conditions"]]
        assert "ApplyRefused" not in types, found["status"]["conditions"]
        valid = condition(found, "Valid")
        assert (valid["status"], valid["reason"]) == ("False", "InvalidSpec"), found["status"]
        assert message in valid["message"], valid["message"]
        assert await actors.get_or_none(stack.kube, resources.JOB, name, namespace=ns) is None
        events = await has_events(stack, ns, name, "InvalidSpec")
        assert [r for r, _ in events if r == "ApplyFailed"] == [], events
    await stack.settled(within=STEP)
    writes = await stack.operator_writes_while_idle()
    assert [w for w in writes if str(w[3]).startswith("sweep-")] == [], writes
    for name in expected:
        await stack.kube.delete(resources.KAIWO_JOB, name, namespace=ns)


async def test_a_sweep_larger_than_the_cluster_runs_when_kueue_may_start_it_with_fewer_pods(
    stack: Pipeline,
) -> None:
    """A sweep of 13 pods x 4 GPUs (52) in the ``gpu`` queue (8 MI300X), on a cluster of 48 AMD
    GPUs (four MI300X and two MI250X nodes of 8), allowed to start with 2: ``Schedulable``
    holds it to its minimum, 2 x 4 = 8, so its Job is made and Kueue admits 2 of its pods,
    which run (decision 0155). Before, it went ERROR (``InsufficientGPUs``, 48 < 52) and its
    Job was never made."""
    ns = namespace_of(stack, "gpu")
    job = kaiwo_job("wide-sweep", ns, queue_name="gpu", gpus=4, run_seconds=300)
    job["spec"]["job"] = {
        "metadata": {"annotations": {"kueue.x-k8s.io/job-min-parallelism": "2"}},
        "spec": {"parallelism": 13, "completions": 13},
    }
    await stack.kube.create(job)

    async def schedulable() -> dict[str, Any] | Pending:
        found = await actors.get_or_none(
            stack.kube, resources.KAIWO_JOB, "wide-sweep", namespace=ns
        )
        conditions = (found or {}).get("status", {}).get("conditions") or ()
        said = [c for c in conditions if c.get("type") == "Schedulable"]
        return said[0] if said else Pending("no Schedulable condition yet")

    said = await eventually(schedulable, what="the sweep's Schedulable condition", within=STEP)
    assert said["status"] == "True", said
    assert said["message"].startswith(
        "Cluster has sufficient GPU resources: the Job runs 13 pods of 4 GPUs (52) and Kueue "
        "may start it with 2 (kueue.x-k8s.io/job-min-parallelism), which fit the cluster's 48"
    ), said

    await reaches(stack, "wide-sweep", ns, "RUNNING")

    workload = await kueue_workload_of(stack, ns, "wide-sweep")
    [pod_set] = workload["spec"]["podSets"]
    assert (pod_set["count"], pod_set["minCount"]) == (13, 2), pod_set
    [assigned] = workload["status"]["admission"]["podSetAssignments"]
    assert (assigned["count"], assigned["resourceUsage"]["amd.com/gpu"]) == (2, "8"), assigned

    await job_pods_running(stack, ns, "wide-sweep", 2, of=13)
    await stack.settled(within=STEP)
    assert await stack.operator_writes_while_idle() == Counter()
    child = await stack.kube.get(resources.JOB, "wide-sweep", namespace=ns)
    assert child["spec"]["parallelism"] == 2, child["spec"]
    assert len(await job_pods(stack, ns, "wide-sweep")) == 2
    await stack.kube.delete(resources.KAIWO_JOB, "wide-sweep", namespace=ns)
    await gone(stack, resources.KAIWO_JOB, "wide-sweep", ns)


async def test_a_job_asking_for_another_vendors_gpus_is_refused_naming_the_field(
    stack: Pipeline,
) -> None:
    """An AMD KaiwoJob (``gpus: 1``, vendor left out) whose ``spec.job`` container limits
    ``nvidia.com/gpu: 1``. Before (measured), its Job's pod asked for both ``amd.com/gpu: 1``
    and ``nvidia.com/gpu: 1``; Kueue kept it pending for good ("insufficient quota for
    nvidia.com/gpu in flavor mi300x ... maximum capacity (0)"), the KaiwoJob PENDING with
    ``ChildSpecApplied`` True and nothing naming the field. Now the operator refuses the spec,
    naming the field, in ``Valid`` and a Warning Event, and makes no Job; with ``gpuVendor:
    nvidia`` the same template runs on the H100 (decision 0161)."""
    ns = namespace_of(stack, "gpu")
    job = kaiwo_job("two-vendors", ns, queue_name="gpu", gpus=1, run_seconds=300)
    del job["spec"]["gpuVendor"]
    job["spec"]["job"] = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": 1}}}]
                }
            }
        }
    }
    await stack.kube.create(job)

    found = await refused_as_invalid(stack, "two-vendors", ns, or_else="Admitted")
    valid = condition(found, "Valid")
    assert (valid["status"], valid["reason"]) == ("False", "InvalidSpec"), found["status"]
    assert valid["message"].startswith(
        "The spec is invalid, nothing was changed: spec.job: spec.template.spec.containers[0]"
        '.resources.limits["nvidia.com/gpu"] (1) must not be given: the KaiwoJob asks Kaiwo '
        "for AMD GPUs (gpus 1, gpuVendor amd, the default when left out), which Kaiwo gives "
        "its pods under amd.com/gpu"
    ), valid["message"]
    assert await actors.get_or_none(stack.kube, resources.JOB, "two-vendors", namespace=ns) is None
    events = await has_events(stack, ns, "two-vendors", "InvalidSpec")
    assert [r for r, _ in events if r in ("ApplyFailed", "WorkloadPending")] == [], events
    await stack.settled(within=STEP)
    writes = await stack.operator_writes_while_idle()
    assert [w for w in writes if str(w[3]) == "two-vendors"] == [], writes

    await stack.kube.merge_patch(
        resources.KAIWO_JOB,
        "two-vendors",
        {"spec": {"gpuVendor": "nvidia"}},
        namespace=ns,
        field_manager="kubectl-edit",
    )
    await reaches(stack, "two-vendors", ns, "RUNNING")
    child = await stack.kube.get(resources.JOB, "two-vendors", namespace=ns)
    limits = child["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert (limits.get("nvidia.com/gpu"), "amd.com/gpu" in limits) == ("1", False), limits
    [pod] = await job_pods(stack, ns, "two-vendors")
    assert pod["spec"]["nodeName"] == "stack-h100-1", pod["spec"]
    await stack.kube.delete(resources.KAIWO_JOB, "two-vendors", namespace=ns)
    await gone(stack, resources.KAIWO_JOB, "two-vendors", ns)


async def test_replay_reproduces_every_plan_of_the_whole_stack(stack: Pipeline) -> None:
    """Last in the module: every plan the operator made for the scenarios above (Kueue's
    admissions, preemptions, edits, replacements, deletions, a Model) is made again, byte for
    byte, from the recorded observations alone: the event log explains each decision."""
    await stack.settled(within=STEP)
    assert await stack.dead_letters() == 0
    env = {**os.environ, "COLUMNS": "250"}
    replayed = await asyncio.to_thread(
        CliRunner().invoke, app, ["events", "replay", "--store", stack.store_url], env=env
    )
    assert replayed.exit_code == 0, replayed.output[-3000:]
    summary = replayed.stdout.strip().splitlines()[-1]
    plans = int(summary.split()[0])
    assert plans > 100, summary
    assert summary.startswith(f"{plans} plans, {plans} reproduced, 0 differ, 0 skipped"), summary


async def edit_job_annotations(
    pipeline: Pipeline, name: str, namespace: str, annotations: dict[str, str | None]
) -> None:
    """A user's edit of Kueue's Job annotations in the KaiwoJob's ``spec.job``."""
    await pipeline.kube.merge_patch(
        resources.KAIWO_JOB,
        name,
        {"spec": {"job": {"metadata": {"annotations": annotations}}}},
        namespace=namespace,
        field_manager="kubectl-edit",
    )


async def planned(
    pipeline: Pipeline, name: str, namespace: str, generation: int, applied: str
) -> dict[str, Any]:
    """The KaiwoJob once its ``generation`` is planned and ``ChildSpecApplied`` is ``applied``."""

    async def check() -> dict[str, Any] | Pending:
        found = await pipeline.kube.get(resources.KAIWO_JOB, name, namespace=namespace)
        status = found.get("status") or {}
        said = [c for c in status.get("conditions") or () if c["type"] == "ChildSpecApplied"]
        if status.get("observedGeneration") != generation or not said:
            return Pending(f"generation {status.get('observedGeneration')}")
        return found if said[0]["status"] == applied else Pending(f"{said[0]}")

    return await eventually(check, what=f"generation {generation} planned", within=STEP)


async def test_kueues_job_annotations_edited_on_a_running_job_are_kept_and_told(
    stack: Pipeline,
) -> None:
    """An Indexed sweep of 4 pods x 1 GPU allowed to start with 2, running whole. Before
    (measured on main): the minimum raised to 3 reached the Job, and Kueue, finding the Job
    no longer matched its Workload, stopped it, made a new Workload and started every pod
    again, while the KaiwoJob said "The Job matches the workload's spec"; the completions
    annotation added was refused by Kueue's webhook ("field is immutable while the job is not
    suspended"), told only as ``ApplyRefused`` and ``ApplyFailed`` Events, on every plan. Now
    the running Job keeps both annotations as it has them, runs on with the same pods and
    Workload, and ``ChildSpecApplied`` names what was kept (decision 0162)."""
    ns = namespace_of(stack, "gpu")
    job = kaiwo_job("annotated-sweep", ns, queue_name="gpu", gpus=1, run_seconds=600)
    job["spec"]["job"] = {
        "metadata": {"annotations": {"kueue.x-k8s.io/job-min-parallelism": "2"}},
        "spec": {"parallelism": 4, "completions": 4, "completionMode": "Indexed"},
    }
    await stack.kube.create(job)
    await reaches(stack, "annotated-sweep", ns, "RUNNING")
    await job_pods_running(stack, ns, "annotated-sweep", 4, of=4)
    workload = await kueue_workload_of(stack, ns, "annotated-sweep")
    pods = sorted(p["metadata"]["name"] for p in await job_pods(stack, ns, "annotated-sweep"))

    await edit_job_annotations(
        stack, "annotated-sweep", ns, {"kueue.x-k8s.io/job-min-parallelism": "3"}
    )
    found = await planned(stack, "annotated-sweep", ns, 2, "False")
    applied = condition(found, "ChildSpecApplied")
    assert applied["reason"] == "JobFieldsImmutable", applied
    assert applied["message"] == (
        "Not applied to the existing Job, because Kueue stops a running Job and queues it anew "
        "when its minimum of pods changes, and refuses a change of whether its completions "
        "follow its parallelism while it runs: "
        'metadata.annotations[kueue.x-k8s.io/job-min-parallelism] ("2" kept, "3" asked). '
        "Delete and re-create the KaiwoJob to run with these changes."
    ), applied

    await edit_job_annotations(
        stack,
        "annotated-sweep",
        ns,
        {"kueue.x-k8s.io/job-completions-equal-parallelism": "true"},
    )
    found = await planned(stack, "annotated-sweep", ns, 3, "False")
    assert '(none kept, "true" asked)' in condition(found, "ChildSpecApplied")["message"]
    await stack.settled(within=STEP)
    writes = await stack.operator_writes_while_idle()
    assert [w for w in writes if w[3] == "annotated-sweep"] == [], writes
    found = await stack.kube.get(resources.KAIWO_JOB, "annotated-sweep", namespace=ns)
    assert found["status"]["status"] == "RUNNING"
    types = [c["type"] for c in found["status"]["conditions"]]
    assert "ApplyRefused" not in types, found["status"]["conditions"]
    events = await has_events(stack, ns, "annotated-sweep", "ChildSpecNotApplied")
    assert [r for r, _ in events if r == "ApplyFailed"] == [], events
    child = await stack.kube.get(resources.JOB, "annotated-sweep", namespace=ns)
    kueues = {k: v for k, v in child["metadata"]["annotations"].items() if "kueue" in k}
    assert kueues == {"kueue.x-k8s.io/job-min-parallelism": "2"}, kueues
    assert child["spec"]["suspend"] is False
    after = await kueue_workload_of(stack, ns, "annotated-sweep")
    assert after["metadata"]["uid"] == workload["metadata"]["uid"]
    assert after["spec"]["podSets"][0]["minCount"] == 2
    assert sorted(p["metadata"]["name"] for p in await job_pods(stack, ns, "annotated-sweep")) == (
        pods
    )
    await stack.kube.delete(resources.KAIWO_JOB, "annotated-sweep", namespace=ns)


async def test_kueues_job_annotations_edited_on_a_waiting_job_reach_it(stack: Pipeline) -> None:
    """An Indexed sweep of 4 pods x 4 GPUs in the ``small`` queue (8 GPUs), allowed to start
    with 3: 12 GPUs, so it waits. The minimum lowered to 2 and the completions annotation
    added reach the suspended Job, Kueue updates its Workload and admits 2 of the 4 pods, with
    both counts set to 2 (measured as such on main too: pinned, decision 0162)."""
    ns = namespace_of(stack, "quota")
    job = kaiwo_job("waiting-sweep", ns, queue_name="small", gpus=4, run_seconds=600)
    job["spec"]["job"] = {
        "metadata": {"annotations": {"kueue.x-k8s.io/job-min-parallelism": "3"}},
        "spec": {"parallelism": 4, "completions": 4, "completionMode": "Indexed"},
    }
    await stack.kube.create(job)
    found = await planned(stack, "waiting-sweep", ns, 1, "True")
    assert found["status"]["status"] == "PENDING"
    workload = await kueue_workload_of(stack, ns, "waiting-sweep")
    assert workload["spec"]["podSets"][0]["minCount"] == 3

    await edit_job_annotations(
        stack,
        "waiting-sweep",
        ns,
        {
            "kueue.x-k8s.io/job-min-parallelism": "2",
            "kueue.x-k8s.io/job-completions-equal-parallelism": "true",
        },
    )
    await reaches(stack, "waiting-sweep", ns, "RUNNING")
    await job_pods_running(stack, ns, "waiting-sweep", 2, of=4)
    await stack.settled(within=STEP)
    found = await stack.kube.get(resources.KAIWO_JOB, "waiting-sweep", namespace=ns)
    types = [c["type"] for c in found["status"]["conditions"]]
    assert "ApplyRefused" not in types, found["status"]["conditions"]
    assert condition(found, "ChildSpecApplied")["status"] == "True"
    assert condition(found, "Admitted")["message"].startswith(
        "Kueue admitted 2 of 4 pods of the Job"
    )
    child = await stack.kube.get(resources.JOB, "waiting-sweep", namespace=ns)
    kueues = {k: v for k, v in child["metadata"]["annotations"].items() if "kueue" in k}
    assert kueues == {
        "kueue.x-k8s.io/job-min-parallelism": "2",
        "kueue.x-k8s.io/job-completions-equal-parallelism": "true",
    }, kueues
    assert (child["spec"]["parallelism"], child["spec"]["completions"]) == (2, 2)
    after = await kueue_workload_of(stack, ns, "waiting-sweep")
    assert after["spec"]["podSets"][0]["minCount"] == 2
    await stack.kube.delete(resources.KAIWO_JOB, "waiting-sweep", namespace=ns)


async def test_a_job_deleted_and_submitted_again_waits_for_its_previous_runs_volume(
    stack: Pipeline,
) -> None:
    """``kubectl delete kaiwojob`` and the same manifest applied at once: the first run's
    claim, still used by its terminating pod (``kubernetes.io/pvc-protection``; a kubelet's
    grace period, here a finalizer on the pod), names the deleted KaiwoJob as its
    controller. The new KaiwoJob was told a ``NameConflict`` Warning ("rename or remove
    it"), and once the claim went nothing planned it again: it stayed DOWNLOADING until the
    resync, 10 minutes later (decision 0165)."""
    ns = namespace_of(stack, "gpu")
    held = "example.com/grace-period"
    volumes = (f"{ns}-rerun-first", f"{ns}-rerun-second")  # one per run: no provisioner
    for volume in volumes:
        await create_volume_for_a_claim(stack, volume)
    storage = actors.training_job("rerun")["spec"]["storage"]
    manifest = kaiwo_job("rerun", ns, queue_name="gpu", gpus=1, run_seconds=300, storage=storage)
    first = await stack.kube.create(manifest)
    await reaches(stack, "rerun", ns, "RUNNING")
    await stack.settled(within=STEP)
    (pod,) = [p for p in await job_pods(stack, ns, "rerun") if p["status"]["phase"] == "Running"]
    await stack.kube.merge_patch(
        resources.POD,
        pod["metadata"]["name"],
        {"metadata": {"finalizers": [held]}},
        namespace=ns,
        field_manager="cluster-admin",
    )

    await stack.kube.delete(resources.KAIWO_JOB, "rerun", namespace=ns)
    again = await stack.kube.create(manifest)

    message = (
        "PersistentVolumeClaim rerun-data of the previous KaiwoJob rerun "
        f"(uid {first['metadata']['uid']}) is still being removed: this run goes on once it "
        "is gone"
    )

    async def waiting() -> dict[str, Any] | Pending:
        found = await stack.kube.get(resources.KAIWO_JOB, "rerun", namespace=ns)
        conditions = (found.get("status") or {}).get("conditions") or ()
        told = [c for c in conditions if c["type"] in ("PreviousRunRemoving", "NameConflict")]
        return found if told else Pending(f"{found.get('status')}")

    async def only_the_claim_told() -> dict[str, Any] | Pending:
        found = await stack.kube.get(resources.KAIWO_JOB, "rerun", namespace=ns)
        conditions = (found.get("status") or {}).get("conditions") or ()
        told = [c["message"] for c in conditions if c["type"] == "PreviousRunRemoving"]
        return found if told == [message] else Pending(f"{told}")

    try:
        await eventually(waiting, what="the previous run's children told", within=STEP)
        # The old Job, download Job, ConfigMap and Kueue Workload go; the held pod keeps
        # the claim.
        await gone(stack, resources.JOB, "rerun", ns)
        await gone(stack, resources.JOB, "rerun-download", ns)
        await gone(stack, resources.CONFIG_MAP, "rerun-download", ns)
        # Their deletions re-plan the KaiwoJob (at once when its plan makes nothing
        # missing, decision 0181; CHILD_GONE_GRACE later otherwise): then the condition
        # names only the claim, while the pod still holds it.
        found = await eventually(only_the_claim_told, what="only the held claim told", within=STEP)
        claim = await actors.get_or_none(
            stack.kube, resources.PERSISTENT_VOLUME_CLAIM, "rerun-data", namespace=ns
        )
        assert claim is not None  # still held: the condition went on its own, not with it
    finally:
        await stack.kube.merge_patch(
            resources.POD,
            pod["metadata"]["name"],
            {"metadata": {"finalizers": None}},
            namespace=ns,
            field_manager="cluster-admin",
        )
    assert found["status"]["status"] == "DOWNLOADING"
    assert "NameConflict" not in [c["type"] for c in found["status"]["conditions"]]
    removing = condition(found, "PreviousRunRemoving")
    assert (removing["status"], removing["reason"]) == ("True", "StillBeingRemoved")
    assert removing["message"] == message, removing

    running = await reaches(stack, "rerun", ns, "RUNNING")
    assert running["metadata"]["uid"] == again["metadata"]["uid"]
    assert "PreviousRunRemoving" not in [c["type"] for c in running["status"]["conditions"]]
    told = await events_of(stack, ns, "rerun")
    assert "NameConflict" not in [reason for reason, _ in told], told
    waited = [m for r, m in told if r == "PreviousRunRemoving"]
    assert message in waited, told
    of_previous = f"of the previous KaiwoJob rerun (uid {first['metadata']['uid']}) is still"
    assert all(of_previous in m for m in waited), waited  # the download Job, its ConfigMap
    await stack.kube.delete(resources.KAIWO_JOB, "rerun", namespace=ns)
    await gone(stack, resources.KAIWO_JOB, "rerun", ns)
    for volume in volumes:
        await stack.kube.delete(PERSISTENT_VOLUME, volume)


async def test_a_plain_job_deleted_and_submitted_again_runs_without_a_conflict(
    stack: Pipeline,
) -> None:
    """The same without storage: the new KaiwoJob's Job waits for the first run's Job and
    its Kueue Workload to go (decision 0139's wait), then runs; nothing alarming is told."""
    ns = namespace_of(stack, "gpu")
    manifest = kaiwo_job("rerun-plain", ns, queue_name="gpu", gpus=1, run_seconds=300)
    await stack.kube.create(manifest)
    await reaches(stack, "rerun-plain", ns, "RUNNING")
    await stack.settled(within=STEP)

    await stack.kube.delete(resources.KAIWO_JOB, "rerun-plain", namespace=ns)
    again = await stack.kube.create(manifest)

    running = await reaches(stack, "rerun-plain", ns, "RUNNING")
    assert running["metadata"]["uid"] == again["metadata"]["uid"]
    job = await stack.kube.get(resources.JOB, "rerun-plain", namespace=ns)
    assert job["metadata"]["ownerReferences"][0]["uid"] == again["metadata"]["uid"]
    told = await events_of(stack, ns, "rerun-plain")
    assert not [reason for reason, _ in told if reason in ("NameConflict", "ChildDeleted")], told
    await stack.kube.delete(resources.KAIWO_JOB, "rerun-plain", namespace=ns)
    await gone(stack, resources.KAIWO_JOB, "rerun-plain", ns)


async def test_a_job_kueue_preempted_gets_its_whole_duration_once_readmitted(
    stack: Pipeline,
) -> None:
    """Kueue preempts a job with a ``duration`` for a higher-priority one and admits it again
    once that one is done: the Job is the same, its pods start over, and the run counted
    against ``spec.duration`` starts again with them (decision 0169). Before, the deadline
    counted from the first start, the time evicted included: readmitted past its duration
    while another job waited, the job was terminated by the operator within seconds of
    running again."""
    ns = namespace_of(stack, "prio")
    await preempt_for_jobs_waiting_a_second(stack)
    duration = 10
    victim = kaiwo_job(
        "readmitted",
        ns,
        queue_name="prio",
        gpus=8,
        run_seconds=600,
        priorityClass="low",
        duration=f"{duration}s",
    )
    await stack.kube.create(victim)
    first = await reaches(stack, "readmitted", ns, "RUNNING")
    job_uid = (await stack.kube.get(resources.JOB, "readmitted", namespace=ns))["metadata"]["uid"]
    await stack.kube.create(
        kaiwo_job("preemptor", ns, queue_name="prio", gpus=8, run_seconds=600, priorityClass="high")
    )
    evicted = await reaches(stack, "readmitted", ns, "PENDING")
    await has_events(stack, ns, "readmitted", "WorkloadPreempted")
    # Another job of the same priority waits behind it (Kueue requeues the victim at its
    # eviction, before this one) and presses the operator's duration preemption.
    await stack.kube.create(
        kaiwo_job("behind", ns, queue_name="prio", gpus=8, run_seconds=2, priorityClass="low")
    )
    # The preemptor ends once the victim's duration, counted from its first start, is past:
    # readmitted, it would be past it at once were the time evicted counted.
    since_first_start = datetime.now(UTC) - parse_rfc3339(first["status"]["startTime"])
    await asyncio.sleep(max(0.0, duration + 1 - since_first_start.total_seconds()))
    await end_running_pods(stack.kube, ns, "preemptor")
    await reaches(stack, "preemptor", ns, "COMPLETE")
    again = await reaches(stack, "readmitted", ns, "RUNNING")
    assert again["status"]["startTime"] == first["status"]["startTime"]  # the first start
    readmitted_at = condition(again, "Admitted")["lastTransitionTime"]
    assert readmitted_at > evicted["status"]["startTime"]
    assert condition(again, "Preemptable")["status"] == "False", again["status"]
    job = await stack.kube.get(resources.JOB, "readmitted", namespace=ns)
    assert job["metadata"]["uid"] == job_uid  # the same Job, resumed by Kueue

    stopped = await reaches(stack, "readmitted", ns, "TERMINATED", within=STEP + 20)
    early = condition(stopped, "WorkloadTerminatedEarly")
    assert early["reason"] == "DurationExceededWithActiveGpuDemand", early
    assert stopped["status"]["preemptedFor"]["name"] == "behind"
    ran_again = parse_rfc3339(early["lastTransitionTime"]) - parse_rfc3339(readmitted_at)
    assert ran_again.total_seconds() >= duration, (readmitted_at, early)
    await reaches(stack, "behind", ns, "COMPLETE")


async def stop_queue(pipeline: Pipeline, name: str, policy: str) -> None:
    """The administrator sets ``stopPolicy`` of the ClusterQueue ``name`` in the
    KaiwoQueueConfig (``HoldAndDrain``: Kueue evicts what runs in it; ``None``: it admits
    again)."""
    config = queue_config({s: namespace_of(pipeline, s) for s in SCENARIOS})
    for cluster_queue in config["spec"]["clusterQueues"]:
        if cluster_queue["name"] == name:
            cluster_queue["spec"]["stopPolicy"] = policy
    await pipeline.kube.apply(config, field_manager="cluster-admin", force=True)


async def test_a_job_kueue_evicts_from_a_stopped_queue_is_warned_and_resumes_its_job(
    stack: Pipeline,
) -> None:
    """The administrator stops the ClusterQueue a job runs in, then starts it again: Kueue
    evicts the job (its Job suspended, its pods deleted) and admits it again, the same Job
    resumed with new pods. The KaiwoJob waits meanwhile with Kueue's reason and a Warning
    ``WorkloadEvicted`` in Kueue's words (decision 0169; before, only the Normal "Workload is
    pending admission"); the operator writes nothing to the Job while Kueue suspends it."""
    ns = namespace_of(stack, "quota")
    audit = stack.audit_log
    assert audit is not None
    await stack.kube.create(kaiwo_job("drained", ns, queue_name="small", gpus=8, run_seconds=600))
    first = await reaches(stack, "drained", ns, "RUNNING")
    job = await stack.kube.get(resources.JOB, "drained", namespace=ns)
    [first_pod] = [p["metadata"]["uid"] for p in await job_pods(stack, ns, "drained")]
    await stack.settled(within=STEP)
    mark = audit.mark()
    try:
        await stop_queue(stack, "small", "HoldAndDrain")
        waiting = await reaches(stack, "drained", ns, "PENDING")
        assert condition(waiting, "Admitted")["message"] == (
            "Workload is pending admission into 'small': The ClusterQueue is stopped"
        )
        told = await has_events(stack, ns, "drained", "WorkloadEvicted")
        assert [m for r, m in told if r == "WorkloadEvicted"] == [
            "Kueue evicted the workload (ClusterQueueStopped): The ClusterQueue is stopped"
        ], told
        status = await kaiwo(str(stack.stack.options.state_dir), "status", "drained", "-n", ns)
        assert "Kueue evicted the workload (ClusterQueueStopped)" in status.output, status.output
    finally:
        await stop_queue(stack, "small", "None")
    again = await reaches(stack, "drained", ns, "RUNNING")
    assert again["status"]["startTime"] == first["status"]["startTime"]
    resumed = await stack.kube.get(resources.JOB, "drained", namespace=ns)
    assert resumed["metadata"]["uid"] == job["metadata"]["uid"]
    pods = [p["metadata"]["uid"] for p in await job_pods(stack, ns, "drained")]
    assert first_pod not in pods, pods
    await stack.settled(within=STEP)
    writes = [
        (e.verb, e.resource, e.subresource, e.name)
        for e in audit.events(since=mark)
        if e.user == OPERATOR_USER and e.namespace == ns and e.resource != "events"
    ]
    assert set(writes) == {("patch", "kaiwojobs", "status", "drained")}, writes
    await stack.kube.delete(resources.KAIWO_JOB, "drained", namespace=ns)
    await gone(stack, resources.KAIWO_JOB, "drained", ns)


async def public_events(
    pipeline: Pipeline, namespace: str, uid: str, *, kind: str = "kaiwojob"
) -> list[dict[str, Any]]:
    """The public events (payloads) told so far about the workload ``uid`` (a KaiwoJob unless
    ``kind`` says otherwise), oldest first."""
    subject = f"kaiwo.public.workload.{namespace}.{kind}.{uid}"
    # As many as the stream holds now, each waited for as long as a loaded machine needs:
    # stopping at the first silence would lose those a slow delivery held back.
    info = await pipeline.js.stream_info("KAIWO_PUBLIC", subjects_filter=subject)
    stored = sum((info.state.subjects or {}).values())
    subscription = await pipeline.js.subscribe(
        subject, stream="KAIWO_PUBLIC", ordered_consumer=True, deliver_policy=DeliverPolicy.ALL
    )
    try:
        return [json.loads((await subscription.next_msg(timeout=30)).data) for _ in range(stored)]
    finally:
        await subscription.unsubscribe()


async def test_a_job_evicted_by_a_stopped_queue_is_not_told_running_and_subscribers_learn_why(
    stack: Pipeline,
) -> None:
    """A job with a ``duration`` drained from a stopped queue, then admitted again: while it
    waits its ``Preemptable`` condition says it is not running and why, and the public
    ``queued`` event carries Kueue's reason and words (decision 0171; before, the condition
    kept "Workload is running and the duration has not been exceeded", and a subscriber saw
    only a move to PENDING with no reason). Admitted again, it is running with its duration
    counted from then."""
    ns = namespace_of(stack, "quota")
    job = kaiwo_job("stopped", ns, queue_name="small", gpus=8, run_seconds=600, duration="10m")
    await stack.kube.create(job)
    first = await reaches(stack, "stopped", ns, "RUNNING")
    uid = first["metadata"]["uid"]
    assert condition(first, "Preemptable")["reason"] == "DurationNotExceeded"
    await stack.settled(within=STEP)
    try:
        await stop_queue(stack, "small", "HoldAndDrain")
        await reaches(stack, "stopped", ns, "PENDING")

        async def told_evicted() -> dict[str, Any] | Pending:
            found = await stack.kube.get(resources.KAIWO_JOB, "stopped", namespace=ns)
            said = condition(found, "Preemptable")
            return found if said["reason"] == "Evicted" else Pending(str(said))

        waiting = await eventually(told_evicted, what="Preemptable Evicted", within=STEP)
        preemptable = condition(waiting, "Preemptable")
        assert preemptable["status"] == "False"
        assert preemptable["message"] == (
            "Workload is not running: Kueue evicted it (ClusterQueueStopped) and it waits to "
            "be admitted again; its duration counts again from its readmission"
        )

        async def queued_with_reason() -> list[dict[str, Any]] | Pending:
            told = await public_events(stack, ns, uid)
            queued = [e for e in told if e["transition"] == "queued"]
            evicted = [e for e in queued if e["reason"] is not None]
            return queued if evicted else Pending(f"no queued with a reason in {told}")

        *before, again = await eventually(
            queued_with_reason, what="queued after the eviction", within=STEP
        )
        # Its first wait, if the planner saw it (Kueue may admit it at once), has none.
        assert [(e["reason"], e["message"]) for e in before] in ([], [(None, None)]), before
        assert (again["reason"], again["message"], again["phase"]) == (
            "ClusterQueueStopped",
            "The ClusterQueue is stopped",
            "PENDING",
        )
    finally:
        await stop_queue(stack, "small", "None")
    running = await reaches(stack, "stopped", ns, "RUNNING")
    preemptable = condition(running, "Preemptable")
    assert (preemptable["status"], preemptable["reason"], preemptable["message"]) == (
        "False",
        "DurationNotExceeded",
        "Workload is running and the duration has not been exceeded",
    )
    readmitted = parse_rfc3339(condition(running, "Admitted")["lastTransitionTime"])
    assert readmitted > parse_rfc3339(first["status"]["startTime"])
    await stack.kube.delete(resources.KAIWO_JOB, "stopped", namespace=ns)
    await gone(stack, resources.KAIWO_JOB, "stopped", ns)


async def test_a_ready_service_drained_from_a_stopped_queue_tells_kueues_reason_while_it_waits(
    stack: Pipeline,
) -> None:
    """A READY service of 2 x 2 GPUs whose ClusterQueue is stopped (``HoldAndDrain``): Kueue
    evicts each pod's Workload and deletes the pods, and the ReplicaSet's new pods wait with
    fresh Workloads that only say "ClusterQueue svc is inactive". The service keeps Kueue's
    reason all the wait: its ``Evicted`` condition, the ``phase-changed`` READY -> PENDING and
    every ``queued`` told for its pods after it carry ``ClusterQueueStopped`` (decision 0180;
    before, the phase change and the new pods' ``queued`` had none, and nothing on the
    service said it once its pods were replaced). Started again, it is READY, readmitted."""
    ns = namespace_of(stack, "svc")
    await stack.kube.create(vllm_service("drained", ns, replicas=2, gpusPerReplica=2))
    ready = await reaches(stack, "drained", ns, "READY", kind=resources.KAIWO_SERVICE)
    uid = ready["metadata"]["uid"]
    first = await serving_pods(stack, ns, "drained", image="vllm/vllm-openai:v0.8.5")
    await stack.settled(within=STEP)
    stopped = ("ClusterQueueStopped", "The ClusterQueue is stopped")
    try:
        await stop_queue(stack, "svc", "HoldAndDrain")

        async def replaced() -> list[dict[str, Any]] | Pending:
            """The Workloads of the pods the ReplicaSet made in place of the evicted ones."""
            listed = await stack.kube.list(
                resources.POD, namespace=ns, label_selector="app=drained"
            )
            live = {p["metadata"]["uid"] for p in listed.items if _live(p)}
            workloads = await stack.kube.list(resources.KUEUE_WORKLOAD, namespace=ns)
            of_live = [
                w
                for w in workloads.items
                if w["metadata"]["labels"].get(actors.KUEUE_JOB_UID_LABEL) in live
                # Kueue has looked at it: it says why it waits.
                and any(c["type"] == "QuotaReserved" for c in _conditions(w))
            ]
            new = not live & {p["metadata"]["uid"] for p in first}
            done = new and len(live) == 2 and len(of_live) == 2
            return of_live if done else Pending(f"{len(live)} live, {len(of_live)} Workloads")

        fresh = await eventually(replaced, what="the pods replaced", within=STEP)
        # Their Workloads say nothing of the eviction, only that the queue is inactive.
        assert all(c["type"] != "Evicted" for w in fresh for c in _conditions(w)), fresh
        await stack.settled(within=STEP)
        waiting = await stack.kube.get(resources.KAIWO_SERVICE, "drained", namespace=ns)
        assert waiting["status"]["status"] == "PENDING"
        assert condition(waiting, "Admitted")["message"] == (
            "Workload is pending admission into 'svc': ClusterQueue svc is inactive"
        )
        evicted = condition(waiting, "Evicted")
        assert (evicted["status"], evicted["reason"], evicted["message"]) == ("True", *stopped)

        async def told_why() -> list[dict[str, Any]] | Pending:
            told = await public_events(stack, ns, uid, kind="kaiwoservice")
            [drained] = [
                i
                for i, e in enumerate(told)
                if e["transition"] == "phase-changed" and e["previousPhase"] == "READY"
            ] or [None]
            if drained is None:
                return Pending(f"no READY -> PENDING in {told}")
            since = told[drained:]
            queued = [e for e in since if e["transition"] == "queued"]
            return since if len(queued) >= 2 else Pending(f"{len(queued)} queued in {since}")

        moved, *after = await eventually(told_why, what="the wait told", within=STEP)
        assert (moved["phase"], moved["reason"], moved["message"]) == ("PENDING", *stopped)
        queued = [
            (e["phase"], e["reason"], e["message"]) for e in after if e["transition"] == "queued"
        ]
        assert set(queued) == {("PENDING", *stopped)}, after
    finally:
        await stop_queue(stack, "svc", "None")
    again = await reaches(stack, "drained", ns, "READY", kind=resources.KAIWO_SERVICE)
    readmitted = condition(again, "Evicted")
    assert (readmitted["status"], readmitted["reason"]) == ("False", "Readmitted")
    told = [reason for reason, _ in await events_of(stack, ns, "drained", kind="KaiwoService")]
    assert told.count("WorkloadEvicted") == 1, told
    await stack.kube.delete(resources.KAIWO_SERVICE, "drained", namespace=ns)
    await gone(stack, resources.KAIWO_SERVICE, "drained", ns)


async def set_gpu_quota(pipeline: Pipeline, cluster_queue: str, amd: int) -> None:
    """The administrator sets the AMD GPUs of ``cluster_queue``'s flavor in the
    KaiwoQueueConfig."""
    config = queue_config({s: namespace_of(pipeline, s) for s in SCENARIOS})
    for queue_spec in config["spec"]["clusterQueues"]:
        if queue_spec["name"] == cluster_queue:
            for flavor_spec in queue_spec["spec"]["resourceGroups"][0]["flavors"]:
                for resource in flavor_spec["resources"]:
                    if resource["name"] == "amd.com/gpu":
                        resource["nominalQuota"] = str(amd)
    await pipeline.kube.apply(config, field_manager="cluster-admin", force=True)


async def test_a_lowered_quota_keeps_the_running_job_and_the_next_waits_with_kueues_reason(
    stack: Pipeline,
) -> None:
    """The administrator lowers the queue's GPUs from 8 to 4 under a job of 8 (decisions
    0126, 0142; measured for decision 0171): Kueue evicts nothing (its ClusterQueue uses 8 of
    4, still active), so the job runs on, told nothing, and the KaiwoQueueConfig is READY;
    a job of 4 submitted then waits with Kueue's reason, and still waits once the quota is
    back at 8, since the running job holds it all. The operator neither evicts nor warns."""
    ns = namespace_of(stack, "quota")
    await stack.kube.create(kaiwo_job("over", ns, queue_name="small", gpus=8, run_seconds=600))
    await reaches(stack, "over", ns, "RUNNING")
    await stack.settled(within=STEP)
    told_before = await events_of(stack, ns, "over")
    try:
        await set_gpu_quota(stack, "small", 4)

        async def lowered() -> dict[str, Any] | Pending:
            found = await stack.kube.get(resources.KUEUE_CLUSTER_QUEUE, "small")
            [group] = found["spec"]["resourceGroups"]
            [mi300x] = group["flavors"]
            gpus = {r["name"]: r["nominalQuota"] for r in mi300x["resources"]}["amd.com/gpu"]
            return found if gpus == "4" else Pending(f"amd.com/gpu {gpus}")

        cluster_queue = await eventually(lowered, what="small lowered to 4 GPUs", within=STEP)
        await stack.settled(within=STEP)
        await asyncio.sleep(5)  # Kueue's chance to evict
        workload = await kueue_workload_of(stack, ns, "over")
        kinds = {c["type"]: c["status"] for c in workload["status"]["conditions"]}
        assert kinds.get("Admitted") == "True" and kinds.get("Evicted") != "True", kinds
        cluster_queue = await stack.kube.get(resources.KUEUE_CLUSTER_QUEUE, "small")
        [usage] = cluster_queue["status"]["flavorsUsage"]
        used = {r["name"]: r["total"] for r in usage["resources"]}["amd.com/gpu"]
        assert used == "8"
        over = await stack.kube.get(resources.KAIWO_JOB, "over", namespace=ns)
        assert over["status"]["status"] == "RUNNING"
        assert condition(over, "Admitted")["reason"] == "Admitted"
        assert await events_of(stack, ns, "over") == told_before
        config = await stack.kube.get(resources.KAIWO_QUEUE_CONFIG, actors.QUEUE_CONFIG)
        assert config["status"]["status"] == "READY"
        await stack.kube.create(kaiwo_job("next", ns, queue_name="small", gpus=4, run_seconds=5))
        waiting = await reaches(stack, "next", ns, "PENDING")

        async def kueues_reason() -> str | Pending:
            found = await stack.kube.get(resources.KAIWO_JOB, "next", namespace=ns)
            said = str(condition(found, "Admitted")["message"])
            return said if "insufficient unused quota" in said else Pending(said)

        said = await eventually(kueues_reason, what="next waits for quota", within=STEP)
        assert said.startswith(
            "Workload is pending admission into 'small': couldn't assign flavors to pod set "
            "main: insufficient unused quota for amd.com/gpu in flavor mi300x"
        ), said
        assert waiting["status"]["status"] == "PENDING"
    finally:
        await set_gpu_quota(stack, "small", 8)
    await stack.settled(within=STEP)
    still = await stack.kube.get(resources.KAIWO_JOB, "next", namespace=ns)
    assert still["status"]["status"] == "PENDING"
    for name in ("over", "next"):
        await stack.kube.delete(resources.KAIWO_JOB, name, namespace=ns)
        await gone(stack, resources.KAIWO_JOB, name, ns)
