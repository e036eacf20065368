"""A renamed ``defaultGpuTaintKey`` moves the operator's taint (decision 0145): the whole
operator on the whole real stack (the real kube-scheduler and Kueue's topology-aware admission
honour taints; kwok's nodes run the pods).

Two MI300X nodes, ``addTaintsToGpuNodes`` on with the default key, so both nodes carry
``kaiwo.silogen.ai/gpu=true:NoSchedule``; an administrator taints one node for themselves;
then the key is renamed. The nodes must end with the new key's taint only, the admin's taint
untouched, and a GPU job created after the rename must complete. Before, the old key's taint
stayed on both nodes next to the new one, the job's pod tolerated only the new key, and Kueue
kept it pending for good.

Then (decision 0149) the setting is turned off and the key renamed in one edit: the operator's
recorded taint stays on the nodes (off means "stop tainting"), and a GPU job created after
must still complete. Before, its pod tolerated only the new key, which no node carried, and
Kueue kept it pending ("excluded: taint ...") until an administrator untainted the nodes.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any, Final

import pytest
import pytest_asyncio
from kaiwo_kube import NotFound, resources
from kaiwo_sandbox.fleet import NODE_TYPES, NodeSpec

from tests.integration.pipeline import cluster_actors as actors
from tests.integration.pipeline.harness import (
    Pending,
    Pipeline,
    eventually,
    pipeline_on_kwok_nodes,
)
from tests.real_cluster import RealCluster

pytestmark = [
    pytest.mark.k8s,
    pytest.mark.nats,
    pytest.mark.slow,
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.timeout(600),
]

MI300X: Final = NODE_TYPES["amd-mi300x"]
FLEET: Final = tuple(NodeSpec(name, MI300X) for name in ("rk-1", "rk-2"))
OLD_KEY: Final = "kaiwo.silogen.ai/gpu"
NEW_KEY: Final = "example.com/gpu-node"
OLD_TAINT: Final = {"key": OLD_KEY, "value": "true", "effect": "NoSchedule"}
NEW_TAINT: Final = {"key": NEW_KEY, "value": "true", "effect": "NoSchedule"}
ADMINS_TAINT: Final = {
    "key": "example.com/maintenance",
    "value": "sunday",
    "effect": "PreferNoSchedule",
}
RUN_SECONDS: Final = "sandbox.kaiwo.silogen.ai/run-seconds"
STEP: Final = 90.0


def kaiwo_config(*, taint_key: str, add_taints: bool = True) -> dict[str, Any]:
    return {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfig",
        "metadata": {"name": actors.KAIWO_CONFIG},
        "spec": {
            "dynamicallyUpdateDefaultClusterQueue": True,
            "nodes": {"addTaintsToGpuNodes": add_taints, "defaultGpuTaintKey": taint_key},
        },
    }


def eight_gpu_job(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": actors.KAIWO_API,
        "kind": "KaiwoJob",
        "metadata": {"name": name, "namespace": namespace, "annotations": {RUN_SECONDS: "5"}},
        "spec": {
            "user": "alice@example.com",
            "image": "ghcr.io/silogen/rocm-ray:6.4",
            "entrypoint": "python train.py",
            "gpus": 8,
            "gpuVendor": "amd",
        },
    }


def without_time(taints: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in t.items() if k != "timeAdded"} for t in taints]


def owns_taints(node: dict[str, Any], manager: str) -> bool:
    return any(
        entry["manager"] == manager and "f:taints" in entry["fieldsV1"].get("f:spec", {})
        for entry in node["metadata"]["managedFields"]
    )


async def node_taints(pipeline: Pipeline, name: str) -> list[dict[str, Any]]:
    node = await pipeline.kube.get(resources.NODE, name)
    return without_time((node.get("spec") or {}).get("taints") or [])


async def every_node_carries(pipeline: Pipeline, wanted: dict[str, list[dict[str, Any]]]) -> None:
    async def check() -> bool | Pending:
        for name, taints in wanted.items():
            found = await node_taints(pipeline, name)
            if sorted(found, key=str) != sorted(taints, key=str):
                return Pending(f"{name} has {found}")
        return True

    await eventually(check, what=f"the taints {wanted}", within=STEP)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(
    real_stack: RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Pipeline]:
    async with pipeline_on_kwok_nodes(
        real_stack, FLEET, tmp_path_factory.mktemp("kaiwo")
    ) as pipeline:
        yield pipeline


async def test_a_renamed_taint_key_moves_the_operators_taint_and_gpu_jobs_run(
    stack: Pipeline,
) -> None:
    pipeline, kube = stack, stack.kube
    first, second = (spec.name for spec in FLEET)
    await kube.apply(kaiwo_config(taint_key=OLD_KEY), field_manager="cluster-admin", force=True)
    await every_node_carries(pipeline, {first: [OLD_TAINT], second: [OLD_TAINT]})

    # The admin adds a taint of their own, as `kubectl taint` does: the whole list is sent
    # back, so the admin's manager now owns spec.taints (an atomic list).
    await kube.merge_patch(
        resources.NODE,
        first,
        {"spec": {"taints": [OLD_TAINT, ADMINS_TAINT]}},
        field_manager="kubectl-taint",
    )
    # So managedFields cannot tell who added which taint: the operator's record can.
    node = await kube.get(resources.NODE, first)
    assert owns_taints(node, "kubectl-taint")
    assert not owns_taints(node, "kaiwo")

    await kube.apply(kaiwo_config(taint_key=NEW_KEY), field_manager="cluster-admin", force=True)
    await every_node_carries(pipeline, {first: [ADMINS_TAINT, NEW_TAINT], second: [NEW_TAINT]})

    await kube.create(eight_gpu_job("after-rename", pipeline.namespace))
    await pipeline.reaches("after-rename", "COMPLETE", within=STEP)
    await pipeline.settled(within=STEP)
    assert await node_taints(pipeline, first) == [ADMINS_TAINT, NEW_TAINT]
    assert await node_taints(pipeline, second) == [NEW_TAINT]


TAINT_RECORD: Final = "kaiwo/gpu-taint"
OFF_KEY: Final = "example.com/gpu-after-off"


async def gpu_taints_recorded(pipeline: Pipeline, key: str) -> None:
    """Every node carries ``<key>=true:NoSchedule`` as the operator's recorded taint and no
    other GPU taint of these tests (whichever test ran before)."""
    others = {OLD_KEY, NEW_KEY, OFF_KEY} - {key}

    async def check() -> bool | Pending:
        for spec in FLEET:
            node = await pipeline.kube.get(resources.NODE, spec.name)
            taints = without_time((node.get("spec") or {}).get("taints") or [])
            record = (node["metadata"].get("annotations") or {}).get(TAINT_RECORD)
            if {"key": key, "value": "true", "effect": "NoSchedule"} not in taints:
                return Pending(f"{spec.name} has {taints}")
            if record != key or any(t["key"] in others for t in taints):
                return Pending(f"{spec.name} has {taints}, recorded {record!r}")
        return True

    await eventually(check, what=f"the operator's {key} taint on every node", within=STEP)


async def test_gpu_jobs_run_on_the_operators_taint_after_it_is_turned_off_and_renamed(
    stack: Pipeline,
) -> None:
    pipeline, kube = stack, stack.kube
    await kube.apply(kaiwo_config(taint_key=OLD_KEY), field_manager="cluster-admin", force=True)
    await gpu_taints_recorded(pipeline, OLD_KEY)
    before = {spec.name: await node_taints(pipeline, spec.name) for spec in FLEET}

    # One edit: stop tainting, and name another key. Once the planner has taken it in (the
    # pipeline settled), a new GPU job is planned with it.
    await kube.apply(
        kaiwo_config(taint_key=OFF_KEY, add_taints=False),
        field_manager="cluster-admin",
        force=True,
    )
    await pipeline.settled(within=STEP)

    await kube.create(eight_gpu_job("after-off-and-rename", pipeline.namespace))
    async with pipeline.stall_explained("after-off-and-rename"):
        await pipeline.reaches("after-off-and-rename", "COMPLETE", within=STEP)
    await pipeline.settled(within=STEP)
    # Off means "stop tainting": the operator's taint stays, nothing is added.
    assert {spec.name: await node_taints(pipeline, spec.name) for spec in FLEET} == before


TOO_LARGE: Final = "9999999999999999999999"
"""A quantity the CRD's pattern takes and the operator's models refuse (past 2**63 - 1)."""


async def invalid_config_events(pipeline: Pipeline) -> list[dict[str, Any]]:
    """The Warning Events ``InvalidConfig`` about the KaiwoConfig, as the API server holds
    them (a cluster-scoped object's Events are in ``default``)."""
    events = await pipeline.kube.list(
        resources.EVENT, namespace="default", field_selector="reason=InvalidConfig"
    )
    return [e for e in events.items if e["involvedObject"].get("kind") == "KaiwoConfig"]


async def test_an_invalid_kaiwo_config_gets_one_warning_event_naming_the_field(
    stack: Pipeline,
) -> None:
    # Decision 0206: the KaiwoConfig has no status; the API server takes the quantity, the
    # models refuse it, the planner takes the defaults, and an Event on the object says so, once.
    pipeline, kube = stack, stack.kube
    invalid = kaiwo_config(taint_key=OLD_KEY)
    invalid["spec"]["ray"] = {"headPodMemory": TOO_LARGE}
    stored = await kube.apply(invalid, field_manager="cluster-admin", force=True)

    async def told() -> list[dict[str, Any]] | Pending:
        found = await invalid_config_events(pipeline)
        return found or Pending("no InvalidConfig Event on the KaiwoConfig yet")

    await eventually(told, what="the InvalidConfig Event", within=STEP)
    await pipeline.settled(within=STEP)
    (event,) = await invalid_config_events(pipeline)
    assert event["type"] == "Warning"
    assert event["involvedObject"]["name"] == actors.KAIWO_CONFIG
    assert event["involvedObject"]["uid"] == stored["metadata"]["uid"]
    assert event["message"] == (
        f"The KaiwoConfig '{actors.KAIWO_CONFIG}' is invalid, so until it is fixed workloads "
        "are planned with the defaults and the monitor judges no GPU use (no findings, no "
        "preemption): spec.ray.headPodMemory: must be at most "
        "9223372036854775807 (2**63 - 1, the largest Kubernetes quantity), got "
        f"'{TOO_LARGE}'"
    )
    assert "status" not in await kube.get(resources.KAIWO_CONFIG, actors.KAIWO_CONFIG)

    # Fixed: nothing more is said.
    await kube.apply(kaiwo_config(taint_key=OLD_KEY), field_manager="cluster-admin", force=True)
    await pipeline.settled(within=STEP)
    assert len(await invalid_config_events(pipeline)) == 1


def namespace_config(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "AIMNamespaceConfig",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"images": {"imagePullSecrets": [f"{name}-registry"]}},
    }


async def namespace_config_events(pipeline: Pipeline, name: str) -> list[dict[str, Any]]:
    """The Events about the AIMNamespaceConfig ``name`` of the test's namespace, as the API
    server holds them."""
    events = await pipeline.kube.list(resources.EVENT, namespace=pipeline.namespace)
    return [
        e
        for e in events.items
        if e["involvedObject"].get("kind") == "AIMNamespaceConfig"
        and e["involvedObject"].get("name") == name
    ]


async def test_a_second_namespace_config_gets_one_warning_event_naming_the_one_in_force(
    stack: Pipeline,
) -> None:
    # Decision 0209: only the first valid AIMNamespaceConfig by name is in force; the other is
    # told so by one Warning Event on itself, and nothing more once the first is deleted.
    pipeline, kube, ns = stack, stack.kube, stack.namespace
    try:
        await kube.create(namespace_config("a-first", ns))
        second = await kube.create(namespace_config("b-second", ns))

        async def told() -> list[dict[str, Any]] | Pending:
            found = await namespace_config_events(pipeline, "b-second")
            return found or Pending("no Event on the AIMNamespaceConfig b-second yet")

        await eventually(told, what="the NotInForce Event", within=STEP)
        await pipeline.settled(within=STEP)
        (event,) = await namespace_config_events(pipeline, "b-second")
        assert (event["type"], event["reason"]) == ("Warning", "NotInForce")
        assert event["involvedObject"]["uid"] == second["metadata"]["uid"]
        assert event["message"] == (
            f"Another AIMNamespaceConfig of namespace '{ns}', 'a-first', is in force (the first "
            "valid one by name), so none of this one's settings reach the workloads and Models "
            "of the namespace while it exists: keep one AIMNamespaceConfig per namespace, or "
            "delete 'a-first' to put this one in force"
        )
        # The one in force is valid: nothing to say about it.
        assert await namespace_config_events(pipeline, "a-first") == []

        # The one in force deleted: the other is in force, valid, and nothing more is said.
        await kube.delete(resources.AIM_NAMESPACE_CONFIG, "a-first", namespace=ns)
        await pipeline.settled(within=STEP)
        (after,) = await namespace_config_events(pipeline, "b-second")
        assert (after["metadata"]["name"], after.get("count")) == (
            event["metadata"]["name"],
            event.get("count"),
        )
        assert after["metadata"]["resourceVersion"] == event["metadata"]["resourceVersion"]
    finally:
        # The stack serves the whole module: leave the test's namespace without a config.
        for name in ("a-first", "b-second"):
            with contextlib.suppress(NotFound):
                await kube.delete(resources.AIM_NAMESPACE_CONFIG, name, namespace=ns)
        await pipeline.settled(within=STEP)
