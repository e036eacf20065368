"""Nodes that change under workloads (decision 0132): the whole operator on the whole real
stack (the real kube-scheduler and Kueue's topology-aware admission honour taints; kwok's
nodes run the pods; the device plugin's count label is relabelled as a GPU operator does).

Two MI300X nodes of one pool, ``dynamicallyUpdateDefaultClusterQueue`` on, workloads in the
generated default queue ``kaiwo``:

* ``addTaintsToGpuNodes`` turned on, then off: the operator never removes its taint, so the
  nodes keep it; a GPU job created afterwards must still tolerate it and run. Before, Kueue
  kept it pending for good ("excluded: taint kaiwo.silogen.ai/gpu=true:NoSchedule: 2") while
  ``Schedulable`` said "Cluster has sufficient GPU resources".
* the nodes' count label relabelled from 8 to 4 under a running 8-GPU job: the job runs on,
  is told once, and completes. Before, it went ERROR (``InsufficientGPUsPerNode``: "the largest
  node has 4 GPUs") while its pod ran, and stayed ERROR after its Job completed.
* a 4-GPU node joins under a READY 16-GPU KaiwoService split by node size into 2 x 8: the
  Deployment keeps its 2 pods of 8 until the user edits the spec (decision 0137). Before,
  it was rolled to 4 pods of 4 though the user changed nothing.
* a service's pod admitted into the 4-GPU pool while the scheduler is stopped, the nodes then
  relabelled to 8: no node can take the pod (decision 0182); the service says so and what to
  do, and once the pod is deleted it is READY. Before, it stayed STARTING without a word.
* the same with a KaiwoJob, whose pods would wait for the gone pool however often made
  again: the operator makes its Job anew (decision 0183), and it completes. Before, it stayed
  STARTING for good.
* the same with a Ray KaiwoJob, whose RayJob is made anew while KubeRay starts its cluster;
  the new cluster runs in the 8-GPU pool.
* the same with a Ray KaiwoService, whose AppWrapper is made anew (decision 0185); the new
  one's cluster runs in the 8-GPU pool.
* a Job of two completions whose second pod is made after its nodes moved to another pool:
  its first pod ran, so the Job is not made anew; the workload says how to have Kueue admit
  it anew, and done as said, the Job completes with both completions.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Final

import pytest
import pytest_asyncio
from kaiwo_kube import resources
from kaiwo_kube.resources import ResourceType
from kaiwo_sandbox.fleet import NODE_TYPES, NodeSpec, NodeType

from tests.integration.pipeline import cluster_actors as actors
from tests.integration.pipeline.harness import (
    Pending,
    Pipeline,
    eventually,
    pipeline_on_kwok_nodes,
)
from tests.integration.test_ray_services_real_stack import ray_service
from tests.real_cluster import RealCluster
from tests.real_stack import end_running_pods, register_kwok_nodes, remove_nodes

pytestmark = [
    pytest.mark.k8s,
    pytest.mark.nats,
    pytest.mark.slow,
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.timeout(600),
]

MI300X: Final = NODE_TYPES["amd-mi300x"]
FLEET: Final = tuple(NodeSpec(name, MI300X) for name in ("nc-1", "nc-2"))
GPU_TAINT: Final = {"key": "kaiwo.silogen.ai/gpu", "value": "true", "effect": "NoSchedule"}
COUNT_LABEL: Final = "beta.amd.com/gpu.family.AI"
RUN_SECONDS: Final = "sandbox.kaiwo.silogen.ai/run-seconds"
NODEPOOL_LABEL: Final = "kaiwo/nodepool"
RAY_PODS: Final = "ray.io/node-type"
STEP: Final = 90.0
SMALL_NODE: Final = NodeSpec("nc-small", NodeType("amd", MI300X.product, 4, "64", "512Gi"))
WORKLOAD_AS_KUBECTL_PATCHES: Final = ResourceType(
    group="kueue.x-k8s.io", version="v1beta2", plural="workloads", kind="Workload", namespaced=True
)
"""Kueue's preferred version, which ``kubectl patch workload`` writes. Kueue 0.17 refuses a
v1beta1 patch of a Workload without a priority class while it holds quota: its v1beta1
rule reads a ``priorityClassSource`` that the conversion from the stored v1beta2 leaves out
("no such key: priorityClassSource")."""


def kaiwo_config(*, taints: bool) -> dict[str, Any]:
    return {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfig",
        "metadata": {"name": actors.KAIWO_CONFIG},
        "spec": {
            "dynamicallyUpdateDefaultClusterQueue": True,
            "nodes": {"addTaintsToGpuNodes": taints},
        },
    }


def eight_gpu_job(name: str, namespace: str, *, run_seconds: int) -> dict[str, Any]:
    return {
        "apiVersion": actors.KAIWO_API,
        "kind": "KaiwoJob",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": {RUN_SECONDS: str(run_seconds)},
        },
        "spec": {
            "user": "alice@example.com",
            "image": "ghcr.io/silogen/rocm-ray:6.4",
            "entrypoint": "python train.py",
            "gpus": 8,
            "gpuVendor": "amd",
        },
    }


def condition(workload: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in workload["status"]["conditions"] if c["type"] == kind)


async def every_node_tainted(pipeline: Pipeline) -> None:
    async def check() -> bool | Pending:
        for spec in FLEET:
            node = await pipeline.kube.get(resources.NODE, spec.name)
            if GPU_TAINT not in (node.get("spec") or {}).get("taints", []):
                return Pending(f"{spec.name} not tainted yet")
        return True

    await eventually(check, what="the GPU taint on every node", within=STEP)


async def warnings(pipeline: Pipeline, name: str, reason: str) -> list[dict[str, Any]]:
    events = await pipeline.kube.list(resources.EVENT, namespace=pipeline.namespace)
    return [
        e for e in events.items if e["involvedObject"]["name"] == name and e.get("reason") == reason
    ]


async def warned(pipeline: Pipeline, name: str, reason: str) -> list[dict[str, Any]]:
    """The Events :func:`warnings` finds, once there is one: the executor creates a plan's
    Events after it writes the status, so a test that saw the status may ask too early."""

    async def found() -> list[dict[str, Any]] | Pending:
        events = await warnings(pipeline, name, reason)
        return events if events else Pending(f"no {reason} Event about {name}")

    return await eventually(found, what=f"a {reason} Event about {name}", within=STEP)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(
    real_stack: RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Pipeline]:
    async with pipeline_on_kwok_nodes(
        real_stack, FLEET, tmp_path_factory.mktemp("kaiwo")
    ) as pipeline:
        yield pipeline


async def test_gpu_jobs_run_on_nodes_tainted_before_add_taints_was_turned_off(
    stack: Pipeline,
) -> None:
    pipeline, kube = stack, stack.kube
    await kube.apply(kaiwo_config(taints=True), field_manager="cluster-admin", force=True)
    await every_node_tainted(pipeline)
    await kube.apply(kaiwo_config(taints=False), field_manager="cluster-admin", force=True)

    await kube.create(eight_gpu_job("after-taints", pipeline.namespace, run_seconds=5))

    # Kueue's topology-aware admission and the kube-scheduler both see the taint the nodes
    # keep: the pod tolerates it, so the job runs and completes.
    done = await pipeline.reaches("after-taints", "COMPLETE", within=STEP)
    assert condition(done, "Schedulable")["message"] == "Cluster has sufficient GPU resources"
    for spec in FLEET:  # the taint is still there: the operator never removes it
        node = await kube.get(resources.NODE, spec.name)
        assert GPU_TAINT in node["spec"]["taints"]


async def test_a_running_job_outlives_a_relabel_of_its_nodes_and_completes(
    stack: Pipeline,
) -> None:
    pipeline, kube = stack, stack.kube
    # It runs until the test ends it, once the relabel was told.
    await kube.create(eight_gpu_job("relabelled", pipeline.namespace, run_seconds=600))
    await pipeline.reaches("relabelled", "RUNNING", within=STEP)

    # The GPU operator relabels the nodes: 4 GPUs each, 8 in all, no node of 8.
    await label_gpu_count(pipeline, 4)

    told = (
        "spec.gpus (8) asks for 8 GPUs in the single pod of a Job, but the largest node has 4 "
        "GPUs (vendor: amd): set ray: true to spread the GPUs across nodes, or lower "
        "spec.gpus; Kueue admitted the workload before the nodes changed, so its children are "
        "kept as they are and it goes on as far as its pods can (it would not be admitted "
        "again as it is)"
    )

    async def told_while_running() -> dict[str, Any] | Pending:
        workload = await pipeline.kaiwo_job("relabelled")
        schedulable = condition(workload, "Schedulable")
        if schedulable["reason"] != "AdmittedBeforeNodeChange":
            return Pending(f"{workload['status']['status']}: {schedulable['message']}")
        return workload

    running = await eventually(told_while_running, what="the relabel told", within=STEP)
    assert running["status"]["status"] == "RUNNING"
    assert condition(running, "Schedulable")["message"] == told

    # Its Job completes; so does the workload (an ERROR workload never looked again).
    await end_running_pods(kube, pipeline.namespace, "relabelled")
    await pipeline.reaches("relabelled", "COMPLETE", within=STEP)
    [event] = await warned(pipeline, "relabelled", "AdmittedBeforeNodeChange")
    assert (event["type"], event["message"], event.get("count", 1)) == ("Warning", told, 1)
    assert not await warnings(pipeline, "relabelled", "WorkloadError")


async def label_gpu_count(pipeline: Pipeline, gpus: int) -> None:
    """The GPU operator relabels both nodes to ``gpus`` GPUs (the device plugin's count)."""
    for spec in FLEET:
        patch = {"metadata": {"labels": {COUNT_LABEL: str(gpus)}}}
        await pipeline.kube.merge_patch(
            resources.NODE, spec.name, patch, field_manager="gpu-feature"
        )


async def relabel_fleet(pipeline: Pipeline, gpus: int) -> None:
    """:func:`label_gpu_count`, then wait until it is in force: every node in the pool of
    that size and the default queue listing that flavor alone. A pod Kueue admitted into the
    old pool meanwhile would wait for a pool no node is in any more (decision 0182)."""
    await label_gpu_count(pipeline, gpus)

    async def check() -> bool | Pending:
        pools = set()
        for spec in FLEET:
            node = await pipeline.kube.get(resources.NODE, spec.name)
            pools.add(node["metadata"].get("labels", {}).get(NODEPOOL_LABEL, ""))
        queue = await pipeline.kube.get(resources.KUEUE_CLUSTER_QUEUE, "kaiwo")
        flavors = {
            flavor["name"]
            for group in queue["spec"]["resourceGroups"]
            for flavor in group["flavors"]
        }
        if len(pools) == 1 and flavors == pools and f"-{gpus}gpu-" in next(iter(pools)):
            return True
        return Pending(f"nodes in {sorted(pools)}, queue flavors {sorted(flavors)}")

    await eventually(check, what=f"the {gpus}-GPU pool in force", within=STEP)


def sixteen_gpu_service(name: str, namespace: str) -> dict[str, Any]:
    """A Deployment-based KaiwoService that leaves the split to the nodes' size."""
    return {
        "apiVersion": actors.KAIWO_API,
        "kind": "KaiwoService",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "user": "erin@example.com",
            "image": "vllm/vllm-openai:v0.8.5",
            "entrypoint": "vllm serve Qwen/Qwen2.5-7B-Instruct --port 8000",
            "gpus": 16,
            "gpuVendor": "amd",
        },
    }


def deployment_split(deployment: dict[str, Any]) -> tuple[int, str, str]:
    """The Deployment's replicas, its container's GPU limit and its ``NUM_REPLICAS``."""
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    env = {v["name"]: v.get("value") for v in container.get("env") or ()}
    limit = container["resources"]["limits"]["amd.com/gpu"]
    return deployment["spec"]["replicas"], str(limit), str(env["NUM_REPLICAS"])


async def test_a_ready_service_keeps_its_split_when_a_smaller_node_joins(stack: Pipeline) -> None:
    pipeline, kube = stack, stack.kube
    await kube.apply(kaiwo_config(taints=False), field_manager="cluster-admin", force=True)
    await relabel_fleet(pipeline, 8)  # whatever an earlier test relabelled
    await kube.create(sixteen_gpu_service("split", pipeline.namespace))
    await pipeline.reaches("split", "READY", kind=resources.KAIWO_SERVICE, within=STEP)
    made = await pipeline.child(resources.DEPLOYMENT, "split")
    assert made is not None
    assert deployment_split(made) == (2, "8", "2")

    try:
        await register_kwok_nodes(kube, [SMALL_NODE])
        await pipeline.settled(within=STEP)

        # The user changed nothing: the running pods keep the split they were made with.
        kept = await pipeline.child(resources.DEPLOYMENT, "split")
        assert kept is not None
        assert deployment_split(kept) == (2, "8", "2")
        assert kept["metadata"]["generation"] == made["metadata"]["generation"]
        service = await kube.get(resources.KAIWO_SERVICE, "split", namespace=pipeline.namespace)
        assert service["status"]["status"] == "READY"
        assert condition(service, "Schedulable")["message"] == (
            "Cluster has sufficient GPU resources"
        )

        # An edit of the GPUs is split by the nodes as they are now: 12 over 4-GPU nodes.
        await kube.merge_patch(
            resources.KAIWO_SERVICE,
            "split",
            {"spec": {"gpus": 12}},
            namespace=pipeline.namespace,
            field_manager="kubectl-edit",
        )

        async def resplit() -> tuple[int, str, str] | Pending:
            deployment = await pipeline.child(resources.DEPLOYMENT, "split")
            found = deployment_split(deployment) if deployment else None
            return found if found == (3, "4", "3") else Pending(f"split {found}")

        await eventually(resplit, what="the edit split over the nodes", within=STEP)
    finally:
        await kube.delete(resources.KAIWO_SERVICE, "split", namespace=pipeline.namespace)
        await remove_nodes(kube, [SMALL_NODE.name])


async def test_a_pod_admitted_into_a_pool_its_nodes_left_is_told_and_runs_once_deleted(
    stack: Pipeline, real_stack: RealCluster
) -> None:
    """Decision 0182: Kueue admits a service's pod into the 4-GPU pool, and before the
    scheduler binds it (stopped here, as one being moved to another node is) the nodes are
    relabelled to 8 GPUs and the operator moves them to the 8-GPU pool. No node can
    take the pod, and Kueue never looks at it again: the service tells why and what to do;
    done, it is READY."""
    pipeline, kube, ns = stack, stack.kube, stack.namespace
    await kube.apply(kaiwo_config(taints=False), field_manager="cluster-admin", force=True)
    await relabel_fleet(pipeline, 4)
    service = sixteen_gpu_service("stranded", ns)
    service["spec"]["gpus"] = 4
    try:
        stranded = await started_in_the_4gpu_pool_then_moved(
            pipeline, real_stack, service, pods="app=stranded"
        )
        name = stranded["metadata"]["name"]
        found = await pool_gone_told(pipeline, resources.KAIWO_SERVICE, "stranded", "app=stranded")
        pool = stranded["spec"]["nodeSelector"][NODEPOOL_LABEL]
        message = condition(found, "ChildHealthy")["message"]
        assert message == (
            f"pod {name}: Kueue admitted it into node pool {pool}, which no node is in any "
            "more (its nodes moved to another pool before the scheduler bound the pod), so no "
            "node can take it, and Kueue, which counts it admitted, does not admit it again; "
            "delete the pod: its ReplicaSet makes a new one, which Kueue admits anew"
        )
        assert found["status"]["status"] == "STARTING"
        [event] = await warned(pipeline, "stranded", "ChildUnhealthy")
        assert event["message"] == f"NodePoolGone: {message}"

        # As told: the pod deleted, its replacement is admitted into the 8-GPU pool and runs.
        await kube.delete(resources.POD, name, namespace=ns)
        ready = await pipeline.reaches(
            "stranded", "READY", kind=resources.KAIWO_SERVICE, within=STEP
        )
        assert condition(ready, "ChildHealthy")["status"] == "True"
    finally:
        await kube.delete(resources.KAIWO_SERVICE, "stranded", namespace=ns)


async def test_a_job_admitted_into_a_pool_its_nodes_left_is_made_anew_and_completes(
    stack: Pipeline, real_stack: RealCluster
) -> None:
    """Decision 0183: as above, with a KaiwoJob. Kueue started its Job in the 4-GPU pool
    (the pool written into the Job's template, so every pod the Job makes waits for it), and
    the nodes moved to the 8-GPU pool before the scheduler bound the pod. None of its pods
    ran: the operator makes the Job anew, Kueue admits the new one into the 8-GPU pool, and
    it completes."""
    pipeline, kube, ns = stack, stack.kube, stack.namespace
    await kube.apply(kaiwo_config(taints=False), field_manager="cluster-admin", force=True)
    await relabel_fleet(pipeline, 4)
    job = eight_gpu_job("remade", ns, run_seconds=5)
    job["spec"]["gpus"] = 4
    try:
        stranded = await started_in_the_4gpu_pool_then_moved(
            pipeline, real_stack, job, pods="batch.kubernetes.io/job-name=remade"
        )
        [first_run] = [
            ref["uid"] for ref in stranded["metadata"]["ownerReferences"] if ref["kind"] == "Job"
        ]

        await pipeline.reaches("remade", "COMPLETE", within=STEP)
        pool = stranded["spec"]["nodeSelector"][NODEPOOL_LABEL]
        [event] = await warned(pipeline, "remade", "ChildReplacing")
        assert (event["type"], event["message"]) == (
            "Normal",
            f"Job remade: Kueue admitted it into node pool {pool}, which no node is in any "
            "more, before any of its pods ran: the Job is made anew, and Kueue admits it again",
        )
        assert not await warnings(pipeline, "remade", "ChildDeleted")
        [unhealthy] = await warned(pipeline, "remade", "ChildUnhealthy")
        assert unhealthy["message"].endswith(
            "; the operator makes the Job anew, which Kueue admits again"
        )
        second_run = await kube.get(resources.JOB, "remade", namespace=ns)
        assert second_run["metadata"]["uid"] != first_run
        selector = second_run["spec"]["template"]["spec"].get("nodeSelector", {})
        assert "-8gpu-" in selector.get(NODEPOOL_LABEL, "")
    finally:
        await kube.delete(resources.KAIWO_JOB, "remade", namespace=ns)


async def test_a_job_whose_next_pod_waits_for_a_pool_its_nodes_left_completes_as_told(
    stack: Pipeline,
) -> None:
    """Decision 0183: a Job of two completions, one pod at a time, started in the 4-GPU
    pool. Its nodes move to the 8-GPU pool while the first pod runs; the second, made from
    the template Kueue wrote the old pool into, waits for good. Its first pod ran, so the
    Job is not made anew: the workload tells what to do, and done, the Job completes with
    both completions, the first kept."""
    pipeline, kube, ns = stack, stack.kube, stack.namespace
    await kube.apply(kaiwo_config(taints=False), field_manager="cluster-admin", force=True)
    await relabel_fleet(pipeline, 4)
    # Its first pod runs until the test ends it, once the relabel is in force; so does the
    # second, once Kueue admitted it anew.
    job = eight_gpu_job("second", ns, run_seconds=600)
    job["spec"]["gpus"] = 4
    job["spec"]["job"] = {"spec": {"completions": 2, "parallelism": 1}}
    pods_of_the_job = "batch.kubernetes.io/job-name=second"
    try:
        await kube.create(job)

        async def first_pod_runs() -> dict[str, Any] | Pending:
            pods = await kube.list(resources.POD, namespace=ns, label_selector=pods_of_the_job)
            running = [p for p in pods.items if p["status"].get("phase") == "Running"]
            return running[0] if running else Pending(f"{len(pods.items)} pods, none running")

        first: dict[str, Any] = await eventually(
            first_pod_runs, what="the first pod running", within=STEP
        )
        pool = first["spec"]["nodeSelector"][NODEPOOL_LABEL]
        assert "-4gpu-" in pool
        await relabel_fleet(pipeline, 8)
        first_now = await kube.get(resources.POD, first["metadata"]["name"], namespace=ns)
        assert first_now["status"]["phase"] == "Running", "the relabel took the first pod's run"
        await end_running_pods(kube, ns, "second")
        found = await pool_gone_told(pipeline, resources.KAIWO_JOB, "second", pods_of_the_job)
        [workload] = [
            w
            for w in (await kube.list(resources.KUEUE_WORKLOAD, namespace=ns)).items
            if any(r["name"] == "second" for r in w["metadata"].get("ownerReferences", ()))
        ]
        name = workload["metadata"]["name"]
        message = condition(found, "ChildHealthy")["message"]
        assert message.startswith("pod second-")
        assert message.endswith(
            f": Kueue admitted it into node pool {pool}, which no node is in any more (its "
            "nodes moved to another pool before the scheduler bound the pod), so no node can "
            "take it, and Kueue, which counts it admitted, does not admit it again; set "
            f"spec.active of its Kueue Workload {name} to false, and once the Job is "
            "suspended back to true: Kueue admits it anew, and what its pods finished is kept"
        )

        # As told, as `kubectl patch workload` does it.
        await kube.merge_patch(
            WORKLOAD_AS_KUBECTL_PATCHES,
            name,
            {"spec": {"active": False}},
            namespace=ns,
            field_manager="platform-team",
        )

        async def suspended() -> bool | Pending:
            found = await kube.get(resources.JOB, "second", namespace=ns)
            if found["spec"].get("suspend") is True:
                return True
            return Pending(f"Job {found['spec'].get('suspend')}, {found.get('status')}")

        await eventually(suspended, what="the Job suspended", within=STEP)
        await kube.merge_patch(
            WORKLOAD_AS_KUBECTL_PATCHES,
            name,
            {"spec": {"active": True}},
            namespace=ns,
            field_manager="platform-team",
        )
        await end_running_pods(kube, ns, "second")
        await pipeline.reaches("second", "COMPLETE", within=STEP)
        done = await pipeline.finished_job("second")
        assert done["status"]["succeeded"] == 2, done["status"]
        assert not await warnings(pipeline, "second", "ChildReplacing")
    finally:
        await kube.delete(resources.KAIWO_JOB, "second", namespace=ns)


async def test_a_ray_job_admitted_into_a_pool_its_nodes_left_is_made_anew_and_its_cluster_runs(
    stack: Pipeline, real_stack: RealCluster
) -> None:
    """Decision 0183, for a RayJob: Kueue wrote the 4-GPU pool into its cluster's templates,
    and the nodes moved to the 8-GPU pool before the scheduler bound a pod. KubeRay still
    starts the cluster, so none of its pods ran: the operator makes the RayJob anew, and the
    new one's cluster runs in the 8-GPU pool."""
    job = eight_gpu_job("ray-remade", stack.namespace, run_seconds=600)
    job["spec"].update(gpus=4, ray=True)
    try:
        await ray_child_made_anew_in_the_8gpu_pool(
            stack,
            real_stack,
            job,
            resources.RAY_JOB,
            told="RayJob ray-remade: Kueue admitted it into node pool {pool}, which no node is "
            "in any more, before any of its pods ran: the RayJob is made anew, and Kueue admits "
            "it again",
        )
    finally:
        await stack.kube.delete(resources.KAIWO_JOB, "ray-remade", namespace=stack.namespace)


async def test_a_ray_service_admitted_into_a_pool_its_nodes_left_is_made_anew_and_runs(
    stack: Pipeline, real_stack: RealCluster
) -> None:
    """Decision 0185, for a Ray KaiwoService: Kueue admitted its AppWrapper into the 4-GPU
    pool, and the AppWrapper controller wrote the pool into its RayService's templates; the
    nodes moved to the 8-GPU pool before the scheduler bound a pod. Every pod of the service
    waits for good: the operator makes the AppWrapper anew, Kueue admits the new one into the
    8-GPU pool, and its cluster runs there. (Under kwok no Ray Serve answers, so the service
    never says READY.)"""
    service = ray_service("serve-remade", stack.namespace)
    service["spec"]["gpus"] = 4
    try:
        await ray_child_made_anew_in_the_8gpu_pool(
            stack,
            real_stack,
            service,
            resources.APP_WRAPPER,
            told="AppWrapper serve-remade: Kueue admitted it into node pool {pool}, which no "
            "node is in any more, and none of its pods can run: the AppWrapper is made anew, "
            "and Kueue admits it again",
        )
    finally:
        await stack.kube.delete(resources.KAIWO_SERVICE, "serve-remade", namespace=stack.namespace)


async def ray_child_made_anew_in_the_8gpu_pool(
    pipeline: Pipeline,
    real_stack: RealCluster,
    workload: dict[str, Any],
    child: ResourceType,
    *,
    told: str,
) -> None:
    """``workload``, a Ray workload of 4 GPUs, started in the 4-GPU pool, then its nodes
    moved (:func:`started_in_the_4gpu_pool_then_moved`): its main child (``child``) is made
    anew (another uid), with one ``ChildReplacing`` Event saying ``told`` (``{pool}``: the
    pool gone) and no ``ChildDeleted``, and the new one's Ray cluster runs its head and
    worker in the 8-GPU pool."""
    kube, ns, name = pipeline.kube, pipeline.namespace, workload["metadata"]["name"]
    await kube.apply(kaiwo_config(taints=False), field_manager="cluster-admin", force=True)
    await gpu_taint_taken_off(pipeline)
    await relabel_fleet(pipeline, 4)
    stranded = await started_in_the_4gpu_pool_then_moved(
        pipeline, real_stack, workload, pods=RAY_PODS
    )
    first_run = (await kube.get(child, name, namespace=ns))["metadata"]["uid"]

    async def runs_anew() -> list[dict[str, Any]] | Pending:
        listed = await kube.list(resources.POD, namespace=ns, label_selector=RAY_PODS)
        running = [
            p
            for p in listed.items
            if p["status"].get("phase") == "Running"
            and "-8gpu-" in p["spec"].get("nodeSelector", {}).get(NODEPOOL_LABEL, "")
        ]
        kinds = sorted(p["metadata"]["labels"]["ray.io/node-type"] for p in running)
        return running if kinds == ["head", "worker"] else Pending(f"running {kinds}")

    await eventually(runs_anew, what="the new cluster running in the 8-GPU pool", within=STEP)
    second_run = await kube.get(child, name, namespace=ns)
    assert second_run["metadata"]["uid"] != first_run
    [event] = await warned(pipeline, name, "ChildReplacing")
    pool = stranded["spec"]["nodeSelector"][NODEPOOL_LABEL]
    assert (event["type"], event["message"]) == ("Normal", told.format(pool=pool))
    assert not await warnings(pipeline, name, "ChildDeleted")


async def gpu_taint_taken_off(pipeline: Pipeline) -> None:
    """The Ray head is a CPU pod, which does not tolerate the GPU taint the first test left:
    the platform team takes it off, so that these GPU nodes take CPU pods too."""
    for spec in FLEET:
        node = await pipeline.kube.get(resources.NODE, spec.name)
        taints = [t for t in node["spec"].get("taints", ()) if t != GPU_TAINT]
        await pipeline.kube.merge_patch(
            resources.NODE, spec.name, {"spec": {"taints": taints}}, field_manager="cluster-admin"
        )


async def started_in_the_4gpu_pool_then_moved(
    pipeline: Pipeline, real_stack: RealCluster, workload: dict[str, Any], *, pods: str
) -> dict[str, Any]:
    """``workload`` created while the scheduler is stopped (as one moving a pod to another
    node would be), until Kueue starts one of its pods (``pods``: their label selector) in
    the 4-GPU pool; then the nodes relabelled to 8 GPUs, and the scheduler started anew
    once the operator moved them to the 8-GPU pool. The pod, as Kueue started it."""
    kube, ns = pipeline.kube, pipeline.namespace
    assert real_stack.plane is not None
    with real_stack.plane.scheduler_stopped():
        await kube.create(workload)

        async def started() -> dict[str, Any] | Pending:
            found = await kube.list(resources.POD, namespace=ns, label_selector=pods)
            for pod in found.items:
                spec = pod["spec"]
                if not spec.get("schedulingGates") and "-4gpu-" in str(
                    spec.get("nodeSelector", {}).get(NODEPOOL_LABEL)
                ):
                    return pod
            return Pending(f"{len(found.items)} pods, none started in the 4-GPU pool")

        stranded: dict[str, Any] = await eventually(started, what="a pod started", within=STEP)
        await relabel_fleet(pipeline, 8)
    return stranded


async def pool_gone_told(
    pipeline: Pipeline, kind: ResourceType, name: str, pods: str
) -> dict[str, Any]:
    """The workload once its ``ChildHealthy`` says ``NodePoolGone`` (its pods, ``pods``
    their selector, in the message of a wait that runs out)."""
    kube, ns = pipeline.kube, pipeline.namespace

    async def told() -> dict[str, Any] | Pending:
        found = await kube.get(kind, name, namespace=ns)
        health = next(
            (c for c in found["status"].get("conditions", ()) if c["type"] == "ChildHealthy"),
            None,
        )
        if health is not None and health["reason"] == "NodePoolGone":
            return found
        seen = [
            (
                p["metadata"]["name"],
                p["spec"].get("nodeName"),
                p["spec"].get("nodeSelector", {}).get(NODEPOOL_LABEL),
                p["status"].get("phase"),
            )
            for p in (await kube.list(resources.POD, namespace=ns, label_selector=pods)).items
        ]
        return Pending(f"{found['status'].get('status')}, ChildHealthy {health}, {seen}")

    found: dict[str, Any] = await eventually(told, what="the pool gone told", within=STEP)
    return found
