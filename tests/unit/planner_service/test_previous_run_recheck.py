"""A KaiwoQueueConfig made again while a previous run's Kueue object is terminating (decision
0200): its plan goes to the executor again every 30 s while it waits, so that the executor
touches the object and Kueue looks at it again; once the object is gone, the wait ends."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from kaiwo_planner.domain.planning import plan_object
from kaiwo_planner.owner_round import CHILD_GONE_GRACE

KAIWO = "kaiwo.silogen.ai/v1alpha1"
RECHECK = timedelta(seconds=30)


def queue_config() -> dict[str, Any]:
    return {
        "apiVersion": KAIWO,
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": "kaiwo", "uid": "uid-kqc-new", "generation": 1},
        "spec": {
            "topologies": [
                {
                    "metadata": {"name": "hosts"},
                    "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]},
                }
            ]
        },
    }


def previous_runs_topology(deleted: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Topology",
        "metadata": {
            "name": "hosts",
            "uid": "uid-topology-old",
            "labels": {
                "app.kubernetes.io/managed-by": "kaiwo",
                "kaiwo.silogen.ai/queue-config": "kaiwo",
            },
            "ownerReferences": [
                {
                    "apiVersion": KAIWO,
                    "kind": "KaiwoQueueConfig",
                    "name": "kaiwo",
                    "uid": "uid-kqc-old",
                    "controller": True,
                }
            ],
            "deletionTimestamp": deleted,
            "finalizers": ["kueue.x-k8s.io/resource-in-use"],
        },
        "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]},
    }


def topologies(envelope: Any, field: str) -> list[str]:
    return [ref.name for ref in getattr(envelope.data, field) if ref.kind == "Topology"]


async def test_the_plan_goes_out_again_while_a_previous_runs_topology_is_terminating(
    harness: Any, build: Any, clock: Any
) -> None:
    service = harness.service(plan_fn=plan_object)
    await service.start()
    deleted = build.start - timedelta(seconds=5)
    old = previous_runs_topology(deleted.isoformat().replace("+00:00", "Z"))
    await harness.observe(old, "1", "MODIFIED")
    await harness.observe(queue_config(), "2", "ADDED")
    await harness.drain(service)
    assert len(harness.plans()) == 1
    # Counted in whole periods from the deletion, not from each planning.
    assert service.next_timer == deleted + RECHECK

    clock.advance(20)
    await service.step(wait_seconds=0)
    assert len(harness.plans()) == 1
    # The executor's touch comes back: planned again, not news, the time kept.
    touched = {**old, "metadata": {**old["metadata"], "annotations": {"touched": "1"}}}
    await harness.observe(touched, "3", "MODIFIED")
    await harness.drain(service)
    assert len(harness.plans()) == 1
    assert service.next_timer == deleted + RECHECK

    clock.advance(10)
    await service.step(wait_seconds=0)
    _, timed = harness.plans()
    assert timed.data.trigger == "timer"
    assert topologies(timed, "drifted") == ["hosts"]  # held by the previous run's
    assert service.next_timer == deleted + 2 * RECHECK

    await harness.observe(touched, "4", "DELETED")
    await harness.drain(service)
    clock.advance(CHILD_GONE_GRACE.total_seconds())  # a child's deletion is made up for after it
    await service.step(wait_seconds=0)
    *_, made = harness.plans()
    assert made.data.trigger == "timer"
    assert "hosts" in topologies(made, "absent")
    assert service.next_timer is None


async def test_a_queue_config_waiting_for_nothing_has_no_timer(
    harness: Any, build: Any, clock: Any
) -> None:
    service = harness.service(plan_fn=plan_object)
    await service.start()
    ours = previous_runs_topology(build.start.isoformat())
    ours["metadata"]["ownerReferences"][0]["uid"] = "uid-kqc-new"  # this one's, being deleted
    await harness.observe(ours, "1", "MODIFIED")
    await harness.observe(queue_config(), "2", "ADDED")
    await harness.drain(service)
    assert service.next_timer is None
    alive = previous_runs_topology("")
    del alive["metadata"]["deletionTimestamp"]  # the previous run's, not being deleted
    await harness.observe(alive, "3", "MODIFIED")
    await harness.drain(service)
    assert service.next_timer is None
