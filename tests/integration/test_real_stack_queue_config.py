"""A KaiwoQueueConfig's immutable change on the real Kueue (issue 25 item 1, decision 0048): the
whole operator on the whole real stack (Kueue's manager, webhooks and CEL rules, the
kube-scheduler, kwok's nodes). Nothing of Kueue is played by the test: Kueue admits the job,
holds the flavor with its ``resource-in-use`` finalizer, counts the admitted workload on the
ClusterQueue's status and releases it when the job is done.

The scenario: a ResourceFlavor with a topology (Kueue's topology-aware scheduling) and a
ClusterQueue using it; a KaiwoJob admitted on it and running; then the administrator removes the
flavor's ``topologyName``, a change Kueue refuses in place. While the job holds quota of the
flavor, the operator keeps the flavor and says ``KueueObjectInUse`` on the status, never
READY; once the job completed and Kueue released the quota, it deletes and recreates the
flavor, and the status turns READY only when Kueue's objects match.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any, Final

import pytest
import pytest_asyncio
from kaiwo_kube import NotFound, resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_sandbox.fleet import NODE_TYPES, NodeSpec

from tests.integration.pipeline import cluster_actors as actors
from tests.integration.pipeline.harness import (
    Pending,
    Pipeline,
    eventually,
    pipeline_on_kwok_nodes,
)
from tests.real_cluster import RealCluster
from tests.real_stack import end_running_pods

pytestmark = [
    pytest.mark.k8s,
    pytest.mark.nats,
    pytest.mark.slow,
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.timeout(600),
]

MI300X: Final = NODE_TYPES["amd-mi300x"]
FLEET: Final = (NodeSpec("kqc-mi300x-1", MI300X),)
STEP: Final = 90.0
RUN_SECONDS: Final = "sandbox.kaiwo.silogen.ai/run-seconds"
LONG_RUN: Final = "600"
"""A job's run that outlasts every step of a test; the test ends it (:func:`end_running_pods`)."""
TOPOLOGY: Final = "kqc-hosts"
IN_USE: Final = "kueue.x-k8s.io/resource-in-use"
MATCH: Final = "Kueue objects match the KaiwoQueueConfig"
HELD_BACK: Final = "kaiwo.silogen.ai/quota-held-back"


def queue_config_spec(flavor: str, queue: str, namespace: str, *, topology: bool) -> dict[str, Any]:
    node_labels = {"amd.com/gpu.product-name": MI300X.product}
    return {
        "topologies": [
            {
                "metadata": {"name": TOPOLOGY},
                "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]},
            }
        ],
        "resourceFlavors": [
            {
                "name": flavor,
                "nodeLabels": node_labels,
                **({"topologyName": TOPOLOGY} if topology else {}),
            }
        ],
        "clusterQueues": [
            {
                "name": queue,
                "namespaces": [namespace],
                "spec": {
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu", "memory", "amd.com/gpu"],
                            "flavors": [
                                {
                                    "name": flavor,
                                    "resources": [
                                        {"name": "cpu", "nominalQuota": "256"},
                                        {"name": "memory", "nominalQuota": "4Ti"},
                                        {"name": "amd.com/gpu", "nominalQuota": "8"},
                                    ],
                                }
                            ],
                        }
                    ]
                },
            }
        ],
    }


async def apply_queue_config(kube: KubernetesAsyncioAdapter, spec: dict[str, Any]) -> None:
    manifest = {
        "apiVersion": actors.KAIWO_API,
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": actors.QUEUE_CONFIG},
        "spec": spec,
    }
    await kube.apply(manifest, field_manager="cluster-admin", force=True)


def condition_of(obj: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """The object's condition of type ``kind``, or {} while it has none."""
    for found in (obj.get("status") or {}).get("conditions") or ():
        if found.get("type") == kind:
            return dict(found)
    return {}


def ready(queue_config: Mapping[str, Any]) -> dict[str, Any]:
    return condition_of(queue_config, "Ready")


async def queue_config_where(
    pipeline: Pipeline, what: str, holds: Any, *, within: float = STEP
) -> dict[str, Any]:
    async def check() -> dict[str, Any] | Pending:
        found = await pipeline.kube.get(resources.KAIWO_QUEUE_CONFIG, actors.QUEUE_CONFIG)
        status = found.get("status") or {}
        return found if holds(found) else Pending(f"{status}")

    return await eventually(check, what=what, within=within)


def is_ready(found: Mapping[str, Any]) -> bool:
    status = found.get("status") or {}
    return status.get("status") == "READY" and ready(found).get("message") == MATCH


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(
    real_stack: RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Pipeline]:
    async with pipeline_on_kwok_nodes(
        real_stack, FLEET, tmp_path_factory.mktemp("kaiwo")
    ) as pipeline:
        yield pipeline


async def test_an_immutable_flavor_change_waits_for_the_admitted_job_then_recreates(
    stack: Pipeline,
) -> None:
    pipeline, kube = stack, stack.kube
    namespace = pipeline.namespace
    flavor, queue = f"kqc-{uuid.uuid4().hex[:6]}", "kqc-queue"
    await apply_queue_config(kube, queue_config_spec(flavor, queue, namespace, topology=True))
    await queue_config_where(pipeline, "the queue config READY", is_ready)
    old = await kube.get(resources.KUEUE_RESOURCE_FLAVOR, flavor)
    assert old["spec"]["topologyName"] == TOPOLOGY

    # A job Kueue admits on the flavor, running until the change has met it.
    job = {
        "apiVersion": actors.KAIWO_API,
        "kind": "KaiwoJob",
        "metadata": {
            "name": "holds-quota",
            "namespace": namespace,
            "annotations": {RUN_SECONDS: LONG_RUN},
        },
        "spec": {
            "user": "alice@example.com",
            "image": "ghcr.io/silogen/rocm-ray:6.4",
            "entrypoint": "python train.py",
            "clusterQueue": queue,
            "gpus": 1,
            "gpuVendor": "amd",
        },
    }
    await kube.create(job)
    await pipeline.reaches("holds-quota", "RUNNING", within=STEP)

    async def kueue_counts_it() -> dict[str, Any] | Pending:
        found = await kube.get(resources.KUEUE_CLUSTER_QUEUE, queue)
        admitted = (found.get("status") or {}).get("admittedWorkloads")
        return found if admitted == 1 else Pending(f"admittedWorkloads {admitted}")

    await eventually(kueue_counts_it, what="Kueue counting the admitted job", within=STEP)
    held = await kube.get(resources.KUEUE_RESOURCE_FLAVOR, flavor)
    assert IN_USE in held["metadata"].get("finalizers", [])  # Kueue's own finalizer

    # Kueue refuses the change in place; the operator holds it while the job uses the flavor.
    await apply_queue_config(kube, queue_config_spec(flavor, queue, namespace, topology=False))
    waiting = await queue_config_where(
        pipeline,
        "KueueObjectInUse on the status",
        lambda found: ready(found).get("reason") == "KueueObjectInUse",
    )
    assert waiting["status"]["status"] == "PENDING"
    [admitted] = (await kube.list(resources.KUEUE_WORKLOAD, namespace=namespace)).items
    assert ready(waiting)["message"] == (
        f"ResourceFlavor {flavor}: spec.topologyName cannot change in place (topologyName is "
        "immutable when topologyName is set); spec.nodeLabels cannot change in place "
        "(nodeLabels are immutable when topologyName is set); it is not deleted to be created "
        f"again while admitted workloads use it (ClusterQueue {queue} holds quota of it; "
        f"Workloads {namespace}/{admitted['metadata']['name']})"
    )
    kept = await kube.get(resources.KUEUE_RESOURCE_FLAVOR, flavor)
    assert kept["metadata"]["uid"] == old["metadata"]["uid"]
    assert kept["spec"]["topologyName"] == TOPOLOGY
    assert await pipeline.kaiwo_job("holds-quota")  # untouched

    # The job completes, Kueue releases its quota, and the flavor is recreated: READY.
    await end_running_pods(kube, namespace, "holds-quota")
    await pipeline.reaches("holds-quota", "COMPLETE", within=STEP)
    settled = await queue_config_where(pipeline, "READY after the recreation", is_ready)
    new = await kube.get(resources.KUEUE_RESOURCE_FLAVOR, flavor)
    assert new["metadata"]["uid"] != old["metadata"]["uid"]
    assert "topologyName" not in new["spec"]
    # As the operator writes a flavor without a topology (its worker-node label added).
    assert new["spec"]["nodeLabels"] == {
        "amd.com/gpu.product-name": MI300X.product,
        "kaiwo/worker": "true",
    }
    assert ready(settled)["reason"] == "KueueObjectsMatch"

    # Kueue takes the new flavor: a second job is admitted on it and completes.
    second = {**job, "metadata": {**job["metadata"], "name": "after", "annotations": {}}}
    await kube.create(second)
    await pipeline.reaches("after", "COMPLETE", within=STEP)
    events = await kube.list(
        resources.EVENT,
        namespace="default",
        field_selector="reason=KaiwoQueueConfigResourceFlavorRecreated",
    )
    assert any(flavor in e["message"] for e in events.items)
    with_status = await kube.get(resources.KAIWO_QUEUE_CONFIG, actors.QUEUE_CONFIG)
    assert is_ready(with_status)


def long_job(name: str, namespace: str, queue: str, **spec: Any) -> dict[str, Any]:
    """A one-GPU KaiwoJob in ``queue`` that runs until the test ends it
    (:func:`end_running_pods`), once an edit has met it."""
    return {
        "apiVersion": actors.KAIWO_API,
        "kind": "KaiwoJob",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": {RUN_SECONDS: LONG_RUN},
        },
        "spec": {
            "user": "alice@example.com",
            "image": "ghcr.io/silogen/rocm-ray:6.4",
            "entrypoint": "python train.py",
            "clusterQueue": queue,
            "gpus": 1,
            "gpuVendor": "amd",
            **spec,
        },
    }


async def test_a_running_job_whose_priority_class_is_removed_runs_to_completion(
    stack: Pipeline,
) -> None:
    # Decision 0126: the administrator removes a WorkloadPriorityClass a running job uses.
    # Kueue keeps the job running; the KaiwoJob went ERROR and never reached COMPLETE.
    pipeline, kube = stack, stack.kube
    namespace = pipeline.namespace
    flavor, queue = f"kqc-{uuid.uuid4().hex[:6]}", "kqc-prio"
    spec = queue_config_spec(flavor, queue, namespace, topology=False)
    await apply_queue_config(
        kube,
        {**spec, "workloadPriorityClasses": [{"metadata": {"name": "kqc-high"}, "value": 100}]},
    )
    await queue_config_where(pipeline, "the queue config READY", is_ready)
    await kube.create(long_job("prio-run", namespace, queue, priorityClass="kqc-high"))
    await pipeline.reaches("prio-run", "RUNNING", within=STEP)

    await apply_queue_config(kube, spec)  # the priority class removed

    async def told() -> dict[str, Any] | Pending:
        found = await pipeline.kaiwo_job("prio-run")
        condition = condition_of(found, "Schedulable")
        return (
            found
            if condition.get("reason") == "AdmittedBeforeQueueChange"
            else Pending(f"{found.get('status')}")
        )

    running = await eventually(told, what="the job told, not ERROR", within=STEP)
    assert running["status"]["status"] == "RUNNING"
    assert condition_of(running, "Schedulable")["status"] == "True"
    assert condition_of(running, "Schedulable")["message"].startswith(
        "spec.priorityClass 'kqc-high' names"
    )
    await end_running_pods(kube, namespace, "prio-run")
    done = await pipeline.reaches("prio-run", "COMPLETE", within=STEP)
    assert done["status"]["status"] == "COMPLETE"


async def test_a_removed_queue_kueue_keeps_for_a_running_job_is_told_until_it_is_gone(
    stack: Pipeline,
) -> None:
    # Decision 0126: a ClusterQueue removed from the KaiwoQueueConfig while a job runs in it.
    # Kueue's finalizer keeps it (being deleted) until the job is done; the status said READY
    # ("Kueue objects match") all along. Now it names the queue and why, once gone READY.
    pipeline, kube = stack, stack.kube
    namespace = pipeline.namespace
    flavor = f"kqc-{uuid.uuid4().hex[:6]}"
    spec = queue_config_spec(flavor, "kqc-stay", namespace, topology=False)
    [stay] = spec["clusterQueues"]
    both = {**spec, "clusterQueues": [stay, {**stay, "name": "kqc-gone"}]}
    await apply_queue_config(kube, both)
    await queue_config_where(pipeline, "the queue config READY", is_ready)
    await kube.create(long_job("in-gone", namespace, "kqc-gone"))
    await pipeline.reaches("in-gone", "RUNNING", within=STEP)

    await apply_queue_config(kube, spec)  # kqc-gone removed
    waiting = await queue_config_where(
        pipeline,
        "KueueObjectInUse naming the removed queue",
        lambda found: ready(found).get("reason") == "KueueObjectInUse",
    )
    assert waiting["status"]["status"] == "PENDING"
    message = ready(waiting)["message"]
    assert message.startswith(
        "ClusterQueue kqc-gone is no longer in the KaiwoQueueConfig and is being deleted; Kueue "
        "keeps it while admitted workloads use it ("
    )
    assert message.endswith("); it is gone once they finish")
    # The users as observed then: the queue's own count, its admitted Workloads, or both
    # (which of Kueue's two writes the operator has seen first varies).
    assert "ClusterQueue kqc-gone: 1 admitted" in message or "/job-in-gone-" in message
    kept = await kube.get(resources.KUEUE_CLUSTER_QUEUE, "kqc-gone")
    assert kept["metadata"].get("deletionTimestamp")
    events = await kube.list(
        resources.EVENT, namespace="default", field_selector="reason=KueueObjectInUse"
    )
    assert sum(1 for e in events.items if "kqc-gone is no longer" in e["message"]) >= 1

    # The job runs on (not ERROR), completes, Kueue lets the queue go: READY.
    assert (await pipeline.kaiwo_job("in-gone"))["status"]["status"] == "RUNNING"
    await end_running_pods(kube, namespace, "in-gone")
    await pipeline.reaches("in-gone", "COMPLETE", within=STEP)
    await queue_config_where(pipeline, "READY once the queue is gone", is_ready)
    remaining = await kube.list(resources.KUEUE_CLUSTER_QUEUE)
    assert "kqc-gone" not in [q["metadata"]["name"] for q in remaining.items]


async def set_default_queue_name(kube: KubernetesAsyncioAdapter, name: str) -> None:
    """The administrator's KaiwoConfig edit: ``spec.defaultClusterQueueName``."""
    await kube.apply(
        {
            "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
            "kind": "KaiwoConfig",
            "metadata": {"name": actors.KAIWO_CONFIG},
            "spec": {"defaultClusterQueueName": name},
        },
        field_manager="cluster-admin",
        force=True,
    )


def gpu_quota(queue: Mapping[str, Any]) -> dict[str, str]:
    """The ClusterQueue's ``amd.com/gpu`` nominal quota per flavor."""
    return {
        flavor["name"]: resource["nominalQuota"]
        for group in queue["spec"]["resourceGroups"]
        for flavor in group["flavors"]
        for resource in flavor["resources"]
        if resource["name"] == "amd.com/gpu"
    }


def is_ready_generated(found: Mapping[str, Any]) -> bool:
    """READY with the default queue ``kaiwo`` the operator generated from the nodes."""
    status = found.get("status") or {}
    message = str(ready(found).get("message"))
    return (
        status.get("status") == "READY"
        and message.startswith(MATCH + " (generated from the nodes: ClusterQueues kaiwo")
        and ready(found).get("observedGeneration") == found["metadata"].get("generation")
    )


def default_queue_job(name: str, namespace: str, *, run_seconds: str) -> dict[str, Any]:
    """An 8-GPU KaiwoJob (every GPU of the node) naming no queue: the default one."""
    job = long_job(name, namespace, "unused", gpus=8)
    del job["spec"]["clusterQueue"]
    job["metadata"]["annotations"][RUN_SECONDS] = run_seconds
    return job


async def kueue_workload_of(pipeline: Pipeline, job: str) -> dict[str, Any] | Pending:
    """The Kueue Workload of the KaiwoJob's Job (Kueue labels it with the Job's uid)."""
    namespace = pipeline.namespace
    try:
        child = await pipeline.kube.get(resources.JOB, job, namespace=namespace)
    except NotFound:
        return Pending(f"no Job {job} yet")
    listed = await pipeline.kube.list(
        resources.KUEUE_WORKLOAD,
        namespace=namespace,
        label_selector=f"{actors.KUEUE_JOB_UID_LABEL}={child['metadata']['uid']}",
    )
    return listed.items[0] if listed.items else Pending(f"no Workload for Job {job} yet")


async def test_a_renamed_default_queue_gets_no_quota_the_old_queues_job_still_holds(
    stack: Pipeline,
) -> None:
    # Decision 0142: the default queue renamed while a job using all the node's GPUs runs in
    # it. Kueue keeps the old queue for that job; the new one got the nodes' full quota, so
    # Kueue admitted a second 8-GPU job onto GPUs that were taken. Now the new queue's quota
    # is lowered by what the old queue holds until Kueue lets it go.
    pipeline, kube = stack, stack.kube
    # No ClusterQueues: the default queue over the discovered node pool. (An empty spec the
    # API server takes for null once earlier tests' fields are given up: a priority class.)
    await apply_queue_config(
        kube, {"workloadPriorityClasses": [{"metadata": {"name": "kqc-any"}, "value": 1}]}
    )
    await queue_config_where(pipeline, "the default queue READY", is_ready_generated)
    full = await kube.get(resources.KUEUE_CLUSTER_QUEUE, "kaiwo")
    [flavor] = gpu_quota(full)
    assert gpu_quota(full) == {flavor: "8"}
    # The pool's flavor without a Topology, as an administrator who does not use Kueue's
    # topology-aware scheduling writes it: then Kueue's quota is all that stands between a
    # workload and GPUs that are taken. (With the generated flavor's default Topology, Kueue's
    # topology-aware scheduling also sees the node full and refuses the second job: measured,
    # "topology default-topology doesn't allow to fit any of 1 pod(s)".)
    user_flavor = {"name": flavor, "nodeLabels": {"amd.com/gpu.product-name": MI300X.product}}
    await apply_queue_config(kube, {"resourceFlavors": [user_flavor]})

    async def flavor_without_topology() -> dict[str, Any] | Pending:
        try:
            found = await kube.get(resources.KUEUE_RESOURCE_FLAVOR, flavor)
        except NotFound:  # a flavor's topology is immutable: it is deleted, then made anew
            return Pending(f"flavor {flavor} being made anew")
        spec = found.get("spec") or {}
        return found if "topologyName" not in spec else Pending(f"{spec}")

    await eventually(flavor_without_topology, what="the flavor without a Topology", within=STEP)
    await queue_config_where(pipeline, "the queue config READY", is_ready_generated)
    # It runs until the test deletes it, past every step below however loaded the machine.
    await kube.create(default_queue_job("all-gpus", pipeline.namespace, run_seconds="3600"))
    await pipeline.reaches("all-gpus", "RUNNING", within=STEP)

    async def kueue_counts_its_gpus() -> dict[str, Any] | Pending:
        found = await kube.get(resources.KUEUE_CLUSTER_QUEUE, "kaiwo")
        usage = (found.get("status") or {}).get("flavorsUsage") or []
        gpus = [r["total"] for f in usage for r in f["resources"] if r["name"] == "amd.com/gpu"]
        return found if gpus == ["8"] else Pending(f"flavorsUsage {usage}")

    await eventually(kueue_counts_its_gpus, what="Kueue counting the job's GPUs", within=STEP)

    try:
        await set_default_queue_name(kube, "kqc-renamed")

        async def renamed_queue() -> dict[str, Any] | Pending:
            found = await kube.list(resources.KUEUE_CLUSTER_QUEUE)
            named = {q["metadata"]["name"]: q for q in found.items}
            return named.get("kqc-renamed") or Pending(f"queues {sorted(named)}")

        await eventually(renamed_queue, what="the renamed default queue", within=STEP)
        await kube.create(default_queue_job("waits-for-gpus", pipeline.namespace, run_seconds="2"))

        async def kueue_decided() -> dict[str, Any] | Pending:
            workload = await kueue_workload_of(pipeline, "waits-for-gpus")
            if isinstance(workload, Pending):
                return workload
            reserved = condition_of(workload, "QuotaReserved")
            if reserved.get("status") == "True" or "insufficient unused quota" in str(
                reserved.get("message")
            ):
                return workload
            return Pending(f"QuotaReserved {reserved}")

        decided = await eventually(kueue_decided, what="Kueue's verdict on the second job")
        reserved = condition_of(decided, "QuotaReserved")
        assert reserved["status"] == "False", (
            f"Kueue admitted the second 8-GPU job while the first holds the node's GPUs: {reserved}"
        )
        assert (
            f"insufficient unused quota for amd.com/gpu in flavor {flavor}, 8 more needed"
            in reserved["message"]
        )
        assert (await pipeline.kaiwo_job("all-gpus"))["status"]["status"] == "RUNNING"
        lowered = await kube.get(resources.KUEUE_CLUSTER_QUEUE, "kqc-renamed")
        assert gpu_quota(lowered) == {flavor: "0"}
        told = await queue_config_where(
            pipeline,
            "the status saying why the quota is lower",
            lambda found: "nominal quota is lowered" in str(ready(found).get("message")),
        )
        assert told["status"]["status"] == "PENDING"
        assert ready(told)["reason"] == "KueueObjectInUse"
        message = ready(told)["message"]
        assert (
            "ClusterQueue kqc-renamed's nominal quota is lowered by what admitted workloads of "
            "a ClusterQueue no longer in force still hold of the same nodes: ClusterQueue "
            f"kaiwo ({flavor}: amd.com/gpu 8, cpu "
        ) in message, message
        assert message.endswith("it comes back once Kueue lets them go"), message

        # The first job is deleted and Kueue lets the old queue go. Kueue may admit the second
        # job before the quota comes back: the old queue, kept for a moment by Kueue's
        # finalizer, is still in the cohort, and its freed GPUs are lent (measured: admitted
        # with "borrowed: 8" while the new queue's nominal quota was still 0). The quota
        # comes back once the old queue is gone (decision 0181: at once; before, the
        # planner waited CHILD_GONE_GRACE, and a CI run read 0 right after the second job's
        # 2 s run).
        await kube.delete(resources.KAIWO_JOB, "all-gpus", namespace=pipeline.namespace)
        await pipeline.reaches("waits-for-gpus", "COMPLETE", within=STEP * 2)

        async def quota_back() -> dict[str, Any] | Pending:
            found = await kube.get(resources.KUEUE_CLUSTER_QUEUE, "kqc-renamed")
            held = (found["metadata"].get("annotations") or {}).get(HELD_BACK)
            if gpu_quota(found) == {flavor: "8"} and held is None:
                return found
            return Pending(f"quota {gpu_quota(found)}, held back {held}")

        await eventually(quota_back, what="the full quota back, nothing held", within=STEP)
        await queue_config_where(
            pipeline,
            "READY once the old queue is gone",
            lambda found: (found.get("status") or {}).get("status") == "READY",
        )
        remaining = await kube.list(resources.KUEUE_CLUSTER_QUEUE)
        assert "kaiwo" not in [q["metadata"]["name"] for q in remaining.items]
    finally:
        await set_default_queue_name(kube, "kaiwo")


HOLD: Final = "kaiwo-test/hold"
LOOKED_AGAIN: Final = "kaiwo.silogen.ai/removal-looked-at"


async def test_a_queue_config_made_again_touches_its_previous_runs_topology_until_it_goes(
    stack: Pipeline,
) -> None:
    # Decision 0200: a KaiwoQueueConfig deleted and made again waits for the previous run's
    # Kueue objects (PreviousRunRemoving). Kueue can miss the moment to drop a Topology's
    # finalizer, and the new one then waited for good. Now the executor touches a previous
    # run's terminating Kueue object, and the planner hands the plan over again every 30 s
    # while it waits. The test's own finalizer stands in for Kueue's missed moment: the
    # Topology stays terminating until the test lets it go.
    pipeline, kube = stack, stack.kube
    flavor = f"kqc-{uuid.uuid4().hex[:6]}"
    await apply_queue_config(
        kube, queue_config_spec(flavor, "kqc-again", pipeline.namespace, topology=True)
    )
    first = await queue_config_where(pipeline, "the queue config READY", is_ready)
    topology = await kube.get(resources.KUEUE_TOPOLOGY, TOPOLOGY)
    finalizers = topology["metadata"].get("finalizers") or []
    await kube.merge_patch(
        resources.KUEUE_TOPOLOGY,
        TOPOLOGY,
        {"metadata": {"finalizers": [*finalizers, HOLD]}},
        field_manager="kaiwo-test",
    )
    try:
        await kube.delete(resources.KAIWO_QUEUE_CONFIG, actors.QUEUE_CONFIG)

        async def topology_terminating() -> dict[str, Any] | Pending:
            found = await kube.get(resources.KUEUE_TOPOLOGY, TOPOLOGY)
            return found if found["metadata"].get("deletionTimestamp") else Pending("not yet")

        await eventually(topology_terminating, what="the old Topology terminating", within=STEP)
        await apply_queue_config(
            kube, queue_config_spec(flavor, "kqc-again", pipeline.namespace, topology=True)
        )
        waiting = await queue_config_where(
            pipeline,
            "PreviousRunRemoving naming the Topology",
            lambda found: TOPOLOGY in str(condition_of(found, "PreviousRunRemoving")),
        )
        assert waiting["metadata"]["uid"] != first["metadata"]["uid"]
        assert waiting["status"]["status"] != "READY"

        async def touched(after: str | None) -> str | Pending:
            found = await kube.get(resources.KUEUE_TOPOLOGY, TOPOLOGY)
            looked = (found["metadata"].get("annotations") or {}).get(LOOKED_AGAIN)
            return looked if looked and looked != after else Pending(f"looked at {looked}")

        await eventually(lambda: touched(None), what="the Topology touched", within=STEP)

        async def only_the_topology_left() -> str | Pending:
            left = {
                kind.kind: [item["metadata"]["name"] for item in listed.items]
                for kind in actors.KUEUE_CLUSTER_KINDS
                if (listed := await kube.list(kind)).items
            }
            return "" if left == {"Topology": [TOPOLOGY]} else Pending(f"left: {left}")

        await eventually(only_the_topology_left, what="the old flavor and queue gone", within=STEP)
        # Nothing else changes from here: a touch now comes from the planner's 30 s timer.
        since = await touched(None)
        assert isinstance(since, str)
        again = await eventually(
            lambda: touched(since), what="the Topology touched again", within=STEP
        )
        assert again > since
    finally:
        with contextlib.suppress(NotFound):
            held = await kube.get(resources.KUEUE_TOPOLOGY, TOPOLOGY)
            left = [f for f in held["metadata"].get("finalizers") or [] if f != HOLD]
            await kube.merge_patch(
                resources.KUEUE_TOPOLOGY,
                TOPOLOGY,
                {"metadata": {"finalizers": left}},
                field_manager="kaiwo-test",
            )
    settled = await queue_config_where(pipeline, "READY once the old Topology went", is_ready)
    made = await kube.get(resources.KUEUE_TOPOLOGY, TOPOLOGY)
    assert made["metadata"]["uid"] != topology["metadata"]["uid"]
    assert made["metadata"]["ownerReferences"][0]["uid"] == settled["metadata"]["uid"]
    assert "PreviousRunRemoving" not in str(settled["status"].get("conditions"))
