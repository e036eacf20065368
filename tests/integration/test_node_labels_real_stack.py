"""An admin's node labels on the real API server (decision 0110): the whole operator on the whole
real stack (the real API server's field ownership, Kueue's manager, the kube-scheduler, kwok's
nodes). The executor's rule, "never replace a label value another field manager wrote", reads
``metadata.managedFields`` as the real API server writes them; the unit tests and the fake API
server only model it.

The scenario: three MI300X nodes of one pool, with ``dynamicallyUpdateDefaultClusterQueue`` on,
so the discovered pool's flavor is in force beside the user's own and the operator wants
``kaiwo/nodepool=<pool>`` on every node.

* ``nl-admin-before``: the admin labels it ``kaiwo/nodepool=admin-gpus`` by server-side apply
  (field manager ``admin``) before the operator starts;
* ``nl-admin-while``: the operator labels it with its pool first, then the admin relabels it
  with ``kubectl label --overwrite`` (a merge patch of field manager ``kubectl-label``), which
  takes the label's ownership from ``kaiwo`` on the real API server;
* ``nl-operator``: no admin label; it gets the operator's value.

The user's flavor selects ``kaiwo/nodepool=admin-gpus``: two 8-GPU KaiwoJobs admitted by Kueue
to it run one on each admin-labelled node, none on ``nl-operator``. The admin's values stay
after the operator has planned the nodes again (a node registered after the relabel is
labelled by a later plan), and the labels the admin did not set are still the operator's.

The default ClusterQueue's quota of the discovered pool counts only the nodes that carry, or
will carry, the pool's label (decision 0229): an admin-labelled node leaves it, and the
queue config's Ready message names the nodes left out. Kueue admits two 8-GPU jobs of the
default queue, which run on the two operator-labelled nodes, and keeps a third waiting for
quota: counted with the admin's nodes (32 GPUs) it would have admitted the third, and its pod
would have stayed Pending for ever.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Final

import pytest
import pytest_asyncio
from kaiwo_kube import resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_sandbox.fleet import NODE_TYPES, NodeSpec

from tests.integration.pipeline import cluster_actors as actors
from tests.integration.pipeline.harness import Pending, Pipeline, eventually, running_pipeline
from tests.real_cluster import RealCluster
from tests.real_stack import kwok_fleet, register_kwok_nodes

pytestmark = [
    pytest.mark.k8s,
    pytest.mark.nats,
    pytest.mark.slow,
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.timeout(600),
]

MI300X: Final = NODE_TYPES["amd-mi300x"]
ADMIN_BEFORE: Final = "nl-admin-before"
ADMIN_WHILE: Final = "nl-admin-while"
OPERATORS: Final = "nl-operator"
LATE: Final = "nl-registered-late"
FLEET: Final = tuple(NodeSpec(name, MI300X) for name in (ADMIN_BEFORE, ADMIN_WHILE, OPERATORS))
POOL: Final = "amd-mi300x-8gpu-172core-1843gi"
"""MI300X nodes of 192 cores and 2 TiB: 90 % of each, as the pool's name says."""
ADMIN_POOL: Final = "admin-gpus"
ADMIN_QUEUE: Final = "admin-queue"
NODEPOOL: Final = "kaiwo/nodepool"
STEP: Final = 90.0
RUN_SECONDS: Final = "sandbox.kaiwo.silogen.ai/run-seconds"
OPERATORS_LABELS: Final = {
    NODEPOOL: POOL,
    "kaiwo/gpu-model": "mi300x",
    "kaiwo/worker": "true",
    "kaiwo/topology-block": "block-a",
    "kaiwo/topology-rack": "rack-a",
}
"""What the operator writes on a node of the pool when its flavor is in force."""
ADMINS_LABELS: Final = {**OPERATORS_LABELS, NODEPOOL: ADMIN_POOL}


def queue_config_spec(namespace: str) -> dict[str, Any]:
    """The user's flavor selects the admin's label; their queue has room for two full nodes."""
    quota = [
        {"name": "cpu", "nominalQuota": "384"},
        {"name": "memory", "nominalQuota": "4Ti"},
        {"name": "amd.com/gpu", "nominalQuota": "16"},
    ]
    return {
        "resourceFlavors": [{"name": ADMIN_POOL, "nodeLabels": {NODEPOOL: ADMIN_POOL}}],
        "clusterQueues": [
            {
                "name": ADMIN_QUEUE,
                "namespaces": [namespace],
                "spec": {
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu", "memory", "amd.com/gpu"],
                            "flavors": [{"name": ADMIN_POOL, "resources": quota}],
                        }
                    ]
                },
            }
        ],
    }


def eight_gpu_job(name: str, namespace: str, queue: str = ADMIN_QUEUE) -> dict[str, Any]:
    """A KaiwoJob of one 8-GPU pod in ``queue``, running (on kwok) until clean-up."""
    return {
        "apiVersion": actors.KAIWO_API,
        "kind": "KaiwoJob",
        "metadata": {"name": name, "namespace": namespace, "annotations": {RUN_SECONDS: "3600"}},
        "spec": {
            "user": "alice@example.com",
            "image": "ghcr.io/silogen/rocm-ray:6.4",
            "entrypoint": "python train.py",
            "clusterQueue": queue,
            "gpus": 8,
            "gpuVendor": "amd",
        },
    }


async def admin_applies_pool_label(kube: KubernetesAsyncioAdapter, node: str) -> None:
    """``kubectl apply --server-side --field-manager=admin`` of the node's pool label."""
    manifest = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": node, "labels": {NODEPOOL: ADMIN_POOL}},
    }
    await kube.apply(manifest, field_manager="admin", force=False)


async def admin_relabels(kube: KubernetesAsyncioAdapter, node: str) -> None:
    """``kubectl label --overwrite node <node> kaiwo/nodepool=admin-gpus``."""
    patch = {"metadata": {"labels": {NODEPOOL: ADMIN_POOL}}}
    await kube.merge_patch(resources.NODE, node, patch, field_manager="kubectl-label")


def kaiwo_labels(node: dict[str, Any]) -> dict[str, str]:
    labels = node["metadata"].get("labels") or {}
    return {key: value for key, value in labels.items() if key.startswith("kaiwo/")}


def labels_owned_by(node: dict[str, Any], manager: str) -> set[str]:
    """The label keys ``manager`` owns, read from the real API server's ``managedFields``."""
    owned: set[str] = set()
    for entry in node["metadata"].get("managedFields") or ():
        if entry.get("manager") == manager:
            labels = entry.get("fieldsV1", {}).get("f:metadata", {}).get("f:labels", {})
            owned.update(key.removeprefix("f:") for key in labels)
    return owned


async def node_labelled(pipeline: Pipeline, name: str, labels: dict[str, str]) -> dict[str, Any]:
    """The node, once its ``kaiwo/`` labels are ``labels``."""

    async def check() -> dict[str, Any] | Pending:
        node = await pipeline.kube.get(resources.NODE, name)
        found = kaiwo_labels(node)
        return node if found == labels else Pending(f"{name}: {found}")

    return await eventually(check, what=f"{name} labelled {labels}", within=STEP)


async def queue_config_ready(pipeline: Pipeline) -> None:
    async def check() -> bool | Pending:
        found = await pipeline.kube.get(resources.KAIWO_QUEUE_CONFIG, actors.QUEUE_CONFIG)
        status = found.get("status") or {}
        return True if status.get("status") == "READY" else Pending(f"{status}")

    await eventually(check, what="the queue config READY", within=STEP)


async def default_queue_counts(pipeline: Pipeline, gpus: str, *, left_out: list[str]) -> None:
    """The default ClusterQueue ``kaiwo`` holds ``gpus`` of the discovered pool's flavor (8 a
    node counted) while the queue config is READY naming ``left_out`` as the nodes left out
    of the pools: both at once, so a state the operator passes through on its way (a plan
    made before every node was seen) is not taken for the settled one."""
    note = (
        f"; left out of the node pools, their kaiwo/nodepool set elsewhere: {', '.join(left_out)}"
    )

    async def check() -> bool | Pending:
        config = await pipeline.kube.get(resources.KAIWO_QUEUE_CONFIG, actors.QUEUE_CONFIG)
        status = config.get("status") or {}
        ready = next((c for c in status.get("conditions") or () if c["type"] == "Ready"), {})
        said = str(ready.get("message", ""))
        queue = await pipeline.kube.get(resources.KUEUE_CLUSTER_QUEUE, actors.QUEUE)
        quotas = {
            (flavor["name"], resource["name"]): resource["nominalQuota"]
            for group in queue["spec"].get("resourceGroups") or ()
            for flavor in group["flavors"]
            for resource in flavor["resources"]
        }
        found = str(quotas.get((POOL, "amd.com/gpu")))
        if status.get("status") == "READY" and said.endswith(note) and found == gpus:
            return True
        return Pending(f"{status.get('status')}: {said!r}; {quotas}")

    await eventually(
        check, what=f"the default queue with {gpus} GPUs, {left_out} left out", within=STEP
    )


async def waits_for_quota(pipeline: Pipeline, job_name: str) -> str:
    """The KaiwoJob's Admitted message, once it says Kueue has no quota left for it."""

    async def check() -> str | Pending:
        found = await pipeline.kube.get(resources.KAIWO_JOB, job_name, namespace=pipeline.namespace)
        conditions = (found.get("status") or {}).get("conditions") or ()
        admitted = next((c for c in conditions if c["type"] == "Admitted"), {})
        message = str(admitted.get("message", ""))
        return message if "insufficient unused quota" in message else Pending(message)

    return await eventually(check, what=f"{job_name} waiting for quota", within=STEP)


async def admission(pipeline: Pipeline, job_name: str) -> dict[str, Any]:
    """The real Kueue's admission of the Job ``job_name``'s Workload."""

    async def check() -> dict[str, Any] | Pending:
        workloads = await pipeline.kube.list(resources.KUEUE_WORKLOAD, namespace=pipeline.namespace)
        for workload in workloads.items:
            owners = workload["metadata"].get("ownerReferences") or ()
            if any(o["kind"] == "Job" and o["name"] == job_name for o in owners):
                admitted = (workload.get("status") or {}).get("admission") or {}
                return dict(admitted) if admitted else Pending("its Workload is not admitted")
        return Pending("no Workload for it")

    return await eventually(check, what=f"Kueue admitting {job_name}", within=STEP)


async def running_on(pipeline: Pipeline, job_name: str, pool: str = ADMIN_POOL) -> str:
    """The node the kube-scheduler bound the Job ``job_name``'s Running pod to, which selects
    ``pool`` by the node selector Kueue put in from the flavor."""

    async def check() -> str | Pending:
        pods = await pipeline.kube.list(
            resources.POD,
            namespace=pipeline.namespace,
            label_selector=f"{actors.JOB_NAME_LABEL}={job_name}",
        )
        running = [p for p in pods.items if (p.get("status") or {}).get("phase") == "Running"]
        if not running:
            return Pending(f"{[(p.get('status') or {}).get('phase') for p in pods.items]}")
        [pod] = running
        assert pod["spec"]["nodeSelector"][NODEPOOL] == pool
        return str(pod["spec"]["nodeName"])

    return await eventually(check, what=f"the pod of {job_name} running", within=STEP)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(
    real_stack: RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Pipeline]:
    async with (
        await KubernetesAsyncioAdapter.from_kubeconfig(real_stack.kubeconfig) as admin,
        kwok_fleet(admin, FLEET, also_removed=[LATE]),
    ):
        await admin_applies_pool_label(admin, ADMIN_BEFORE)
        async with running_pipeline(
            tmp_path_factory.mktemp("kaiwo"), real=real_stack, gpu_cluster=False
        ) as pipeline:
            yield pipeline


async def test_the_admins_pool_labels_stay_and_schedule_the_admins_flavor(stack: Pipeline) -> None:
    pipeline, kube = stack, stack.kube
    # The discovered pool's flavor in force beside the user's: the operator labels every node.
    kaiwo_config = {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfig",
        "metadata": {"name": actors.KAIWO_CONFIG},
        "spec": {"dynamicallyUpdateDefaultClusterQueue": True},
    }
    await kube.apply(kaiwo_config, field_manager="cluster-admin", force=True)
    manifest = {
        "apiVersion": actors.KAIWO_API,
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": actors.QUEUE_CONFIG},
        "spec": queue_config_spec(pipeline.namespace),
    }
    await kube.apply(manifest, field_manager="cluster-admin", force=True)
    await queue_config_ready(pipeline)
    discovered = await kube.get(resources.KUEUE_RESOURCE_FLAVOR, POOL)
    assert discovered["spec"]["nodeLabels"] == {NODEPOOL: POOL}

    # The operator's labels where no admin set the pool; the admin's pool label kept, the
    # operator's other labels written beside it.
    operators = await node_labelled(pipeline, OPERATORS, OPERATORS_LABELS)
    assert NODEPOOL in labels_owned_by(operators, "kaiwo")
    await node_labelled(pipeline, ADMIN_WHILE, OPERATORS_LABELS)
    before = await node_labelled(pipeline, ADMIN_BEFORE, ADMINS_LABELS)
    assert NODEPOOL in labels_owned_by(before, "admin")
    assert NODEPOOL not in labels_owned_by(before, "kaiwo")
    assert "kaiwo/gpu-model" in labels_owned_by(before, "kaiwo")
    # The default queue counts the two nodes that carry the pool's label, not the one the
    # admin labelled before the operator started.
    await default_queue_counts(pipeline, "16", left_out=[ADMIN_BEFORE])

    # The admin relabels a node the operator labelled: the label is no longer the operator's.
    await admin_relabels(kube, ADMIN_WHILE)
    relabelled = await kube.get(resources.NODE, ADMIN_WHILE)
    assert NODEPOOL in labels_owned_by(relabelled, "kubectl-label")
    assert NODEPOOL not in labels_owned_by(relabelled, "kaiwo")
    # The relabelled node's quota leaves the pool.
    await default_queue_counts(pipeline, "8", left_out=[ADMIN_BEFORE, ADMIN_WHILE])
    # A node registered after the relabel is labelled by a plan made with the relabel seen:
    # that plan's node intents left both admin values alone.
    await register_kwok_nodes(kube, (NodeSpec(LATE, MI300X),))
    await node_labelled(pipeline, LATE, OPERATORS_LABELS)
    for name in (ADMIN_BEFORE, ADMIN_WHILE):
        node = await kube.get(resources.NODE, name)
        assert kaiwo_labels(node) == ADMINS_LABELS, name
    await default_queue_counts(pipeline, "16", left_out=[ADMIN_BEFORE, ADMIN_WHILE])

    # Kueue admits both jobs to the user's flavor; each pod lands on an admin-labelled node,
    # none on the operator-labelled ones with free GPUs of the same kind.
    for name in ("first", "second"):
        await kube.create(eight_gpu_job(name, pipeline.namespace))
    for name in ("first", "second"):
        admitted = await admission(pipeline, name)
        assert admitted["clusterQueue"] == ADMIN_QUEUE
        [pod_set] = admitted["podSetAssignments"]
        assert pod_set["flavors"]["amd.com/gpu"] == ADMIN_POOL
    assert {await running_on(pipeline, "first"), await running_on(pipeline, "second")} == {
        ADMIN_BEFORE,
        ADMIN_WHILE,
    }
    for name in (ADMIN_BEFORE, ADMIN_WHILE):
        node = await kube.get(resources.NODE, name)
        assert kaiwo_labels(node) == ADMINS_LABELS, name
    for name in (OPERATORS, LATE):
        node = await kube.get(resources.NODE, name)
        assert kaiwo_labels(node) == OPERATORS_LABELS, name

    # The default queue's 16 GPUs are the two operator-labelled nodes': two 8-GPU jobs run on
    # them, and Kueue keeps a third waiting rather than admitting it to nodes it cannot use.
    for name in ("third", "fourth"):
        await kube.create(eight_gpu_job(name, pipeline.namespace, queue=actors.QUEUE))
    for name in ("third", "fourth"):
        admitted = await admission(pipeline, name)
        assert admitted["clusterQueue"] == actors.QUEUE
    assert {
        await running_on(pipeline, "third", pool=POOL),
        await running_on(pipeline, "fourth", pool=POOL),
    } == {OPERATORS, LATE}
    await kube.create(eight_gpu_job("fifth", pipeline.namespace, queue=actors.QUEUE))
    assert await waits_for_quota(pipeline, "fifth") == (
        f"Workload is pending admission into '{actors.QUEUE}': couldn't assign flavors to pod "
        f"set main: insufficient unused quota for amd.com/gpu in flavor {POOL}, 8 more needed"
    )
