"""A ClusterQueue of the KaiwoQueueConfig edited by hand is put back by the running operator,
and the KaiwoQueueConfig is READY only once it is (decision 0226): the whole operator on the
real stack (Kueue's manager, webhooks and conversion, the API server). Nothing of Kueue is
played by the test.

The edits are a ``kubectl edit``'s (a merge patch under another field manager): the flavors
of a resource group in the other order (Kueue tries them in that order) and a narrower
``namespaceSelector``. Each field is one the operator's forced apply
sets whole (atomic in Kueue's CRD), so its next apply undoes the edit; the test fails if the
edit is never seen (the status stays READY on the edited queue) or never undone.

A ``cohort`` the spec leaves unset, added by hand, is left, and told (decision 0274).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any, Final

import pytest
import pytest_asyncio
from kaiwo_kube import NotFound, resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter

from tests.integration.pipeline import cluster_actors as actors
from tests.integration.pipeline.harness import Pending, Pipeline, eventually, running_pipeline
from tests.integration.test_real_stack import events_of, has_events
from tests.real_cluster import RealCluster

pytestmark = [
    pytest.mark.k8s,
    pytest.mark.nats,
    pytest.mark.slow,
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.timeout(600),
]

STEP: Final = 90.0
MATCH: Final = "Kueue objects match the KaiwoQueueConfig"
QUEUE: Final = "hand-edited-q"
HAND: Final = "kubectl-edit"


def queue_config_spec(first: str, second: str) -> dict[str, Any]:
    return {
        "resourceFlavors": [
            {"name": first, "nodeLabels": {"kaiwo-test/pool": "a"}},
            {"name": second, "nodeLabels": {"kaiwo-test/pool": "b"}},
        ],
        "clusterQueues": [
            {
                "name": QUEUE,
                "spec": {
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu"],
                            "flavors": [
                                {
                                    "name": first,
                                    "resources": [{"name": "cpu", "nominalQuota": "8"}],
                                },
                                {
                                    "name": second,
                                    "resources": [{"name": "cpu", "nominalQuota": "4"}],
                                },
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


def ready(queue_config: Mapping[str, Any]) -> dict[str, Any]:
    for found in (queue_config.get("status") or {}).get("conditions") or ():
        if found.get("type") == "Ready":
            return dict(found)
    return {}


def is_ready(found: Mapping[str, Any]) -> bool:
    status = found.get("status") or {}
    return status.get("status") == "READY" and ready(found).get("message") == MATCH


def flavor_names(queue: Mapping[str, Any]) -> list[str]:
    [group] = queue["spec"]["resourceGroups"]
    return [flavor["name"] for flavor in group["flavors"]]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(
    real_stack: RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Pipeline]:
    async with running_pipeline(
        tmp_path_factory.mktemp("kaiwo"), real=real_stack, gpu_cluster=False
    ) as pipeline:
        yield pipeline


async def test_a_cluster_queue_edited_by_hand_is_put_back_and_only_then_ready(
    stack: Pipeline,
) -> None:
    kube = stack.kube
    suffix = uuid.uuid4().hex[:6]
    first, second = f"first-{suffix}", f"second-{suffix}"
    await apply_queue_config(kube, queue_config_spec(first, second))

    def as_applied(queue: Mapping[str, Any]) -> bool:
        return (
            flavor_names(queue) == [first, second] and queue["spec"].get("namespaceSelector") == {}
        )

    async def ready_on(queue_is: Any, what: str) -> dict[str, Any]:
        async def check() -> dict[str, Any] | Pending:
            found = await kube.get(resources.KAIWO_QUEUE_CONFIG, actors.QUEUE_CONFIG)
            try:
                queue = await kube.get(resources.KUEUE_CLUSTER_QUEUE, QUEUE)
            except NotFound:
                return Pending(f"no ClusterQueue yet; {found.get('status')}")
            if is_ready(found) and queue_is(queue):
                return queue
            return Pending(f"{found.get('status')} / {queue['spec']}")

        return await eventually(check, what=what, within=STEP)

    before = await ready_on(as_applied, "READY on the queue as applied")

    [group] = before["spec"]["resourceGroups"]
    edit = {
        "spec": {
            "resourceGroups": [{**group, "flavors": group["flavors"][::-1]}],
            "namespaceSelector": {"matchLabels": {"team": "x"}},
        }
    }
    edited = await kube.merge_patch(resources.KUEUE_CLUSTER_QUEUE, QUEUE, edit, field_manager=HAND)
    assert flavor_names(edited) == [second, first]
    assert edited["spec"]["namespaceSelector"] == {"matchLabels": {"team": "x"}}

    def put_back(queue: Mapping[str, Any]) -> bool:
        later = int(queue["metadata"]["resourceVersion"]) > int(
            edited["metadata"]["resourceVersion"]
        )
        return later and as_applied(queue)

    restored = await ready_on(put_back, "the edit undone, and READY")
    assert restored["spec"]["resourceGroups"] == before["spec"]["resourceGroups"]
    assert restored["spec"]["namespaceSelector"] == {}
    # Undone by the operator's apply, which owns the fields again.
    owners = {
        entry["manager"]
        for entry in restored["metadata"]["managedFields"]
        if "f:resourceGroups" in str(entry.get("fieldsV1"))
    }
    assert owners == {"kaiwo"}


SET_ELSEWHERE: Final = (
    f"ClusterQueue {QUEUE} is in cohort by-hand, set outside the KaiwoQueueConfig, which leaves "
    "what it does not set: Kueue lends the queue's unused quota to its cohort and lets it "
    "borrow there. Name the cohort in the KaiwoQueueConfig to keep it, or remove it from the "
    "ClusterQueue"
)


async def test_a_cohort_added_by_hand_is_left_and_told(stack: Pipeline) -> None:
    """Decision 0274: a ``cohort`` the spec leaves unset, added by hand, stays (the operator's
    forced apply cannot remove another manager's field, decision 0226), and the queue now
    lends and borrows there: the KaiwoQueueConfig says so on its Ready condition, with one
    Warning Event, and no longer once the cohort is taken off. Before, it said nothing."""
    kube = stack.kube
    suffix = uuid.uuid4().hex[:6]
    await apply_queue_config(kube, queue_config_spec(f"first-{suffix}", f"second-{suffix}"))

    async def says(message: str, what: str) -> None:
        async def check() -> bool | Pending:
            found = await kube.get(resources.KAIWO_QUEUE_CONFIG, actors.QUEUE_CONFIG)
            status = found.get("status") or {}
            if status.get("status") == "READY" and ready(found).get("message") == message:
                return True
            return Pending(str(status))

        await eventually(check, what=what, within=STEP)

    await says(MATCH, "READY on the queue as applied")
    await kube.merge_patch(
        resources.KUEUE_CLUSTER_QUEUE, QUEUE, {"spec": {"cohort": "by-hand"}}, field_manager=HAND
    )
    await says(f"{MATCH}; {SET_ELSEWHERE}", "the cohort set by hand told")
    await has_events(
        stack, "default", actors.QUEUE_CONFIG, "KueueFieldsSetElsewhere", kind="KaiwoQueueConfig"
    )
    queue = await kube.get(resources.KUEUE_CLUSTER_QUEUE, QUEUE)
    assert queue["spec"]["cohort"] == "by-hand"  # left, as 0226 has it

    await kube.json_patch(
        resources.KUEUE_CLUSTER_QUEUE,
        QUEUE,
        [{"op": "remove", "path": "/spec/cohort"}],
        field_manager=HAND,
    )
    await says(MATCH, "nothing told once the cohort is taken off")
    told = await events_of(stack, "default", actors.QUEUE_CONFIG, kind="KaiwoQueueConfig")
    assert [m for r, m in told if r == "KueueFieldsSetElsewhere"] == [SET_ELSEWHERE]
