"""The Pod plan: upstream's worked cases, and whole rollouts and recoveries played out as a
sequence of plans, each from the Pods the one before left (a kubelet making them Ready)."""

from __future__ import annotations

from typing import Any

import pytest
from kaiwo_contracts.plans import ObjectRef, Plan
from kaiwo_planner.domain.models.rollout import ObservedPod, decide_pods, deletion_order

from tests.unit.planner.models.building import desired, model, observed_pod, plan_for

NEW = "newhash"
OLD = "oldhash"


def pod(
    name: str,
    *,
    pod_hash: str = NEW,
    ready: bool = True,
    scheduled: bool = True,
    created: str = "2026-01-01T10:00:00Z",
) -> ObservedPod:
    return ObservedPod(
        name=name,
        uid=f"uid-{name}",
        pod_hash=pod_hash,
        ready=ready,
        scheduled=scheduled,
        created=created,
        terminating=False,
    )


def decide(pods: list[ObservedPod], *, replicas: int = 3, surge: int = 1) -> tuple[int, list[str]]:
    decision = decide_pods(
        pods, current_hash=NEW, replicas=replicas, surge=surge, name_for=lambda s: f"new-{s}"
    )
    return len(decision.create), sorted(p.name for p in decision.delete)


# Upstream's Test_calculatePodPlan (replicas 3, surge 1), as the reference tabulates it.
@pytest.mark.parametrize(
    ("pods", "creates", "deletes"),
    [
        ([pod("a"), pod("b"), pod("c", ready=False)], 0, []),
        ([pod("a")], 2, []),
        ([pod("a"), pod("b"), pod("c"), pod("d", ready=False)], 0, ["d"]),
        (
            [
                pod("x", pod_hash=OLD, ready=False),
                pod("y", pod_hash=OLD, ready=False),
                pod("z", pod_hash=OLD),
            ],
            3,
            ["x", "y"],
        ),
        (
            [pod("surge"), pod("n1", ready=False), pod("n2", ready=False), pod("o", pod_hash=OLD)],
            0,
            [],
        ),
        ([pod("a"), pod("b"), pod("c"), pod("o", pod_hash=OLD)], 0, ["o"]),
    ],
    ids=[
        "one-unready-among-three",
        "two-missing",
        "one-too-many",
        "old-unready-replaced-at-once",
        "waiting-for-new-pods",
        "rollout-done",
    ],
)
def test_upstreams_worked_cases(pods: list[ObservedPod], creates: int, deletes: list[str]) -> None:
    assert decide(pods) == (creates, deletes)


def test_the_deletion_order_is_upstreams() -> None:
    pods = [
        pod("young-ready-scheduled-newhash", created="2026-01-01T11:00:00Z"),
        pod("old-unready-scheduled-newhash", ready=False),
        pod("young-ready-scheduled-oldhash", pod_hash=OLD, created="2026-01-01T11:00:00Z"),
        pod("young-unready-scheduled-newhash", ready=False, created="2026-01-01T11:00:00Z"),
        pod("old-unready-unscheduled-oldhash", pod_hash=OLD, ready=False, scheduled=False),
        pod(
            "young-unready-scheduled-oldhash",
            pod_hash=OLD,
            ready=False,
            created="2026-01-01T11:00:00Z",
        ),
        pod(
            "young-unready-unscheduled-oldhash",
            pod_hash=OLD,
            ready=False,
            scheduled=False,
            created="2026-01-01T11:00:00Z",
        ),
    ]
    assert [p.name for p in deletion_order(pods, NEW)] == [
        "young-unready-unscheduled-oldhash",
        "old-unready-unscheduled-oldhash",
        "young-unready-scheduled-oldhash",
        "young-unready-scheduled-newhash",
        "old-unready-scheduled-newhash",
        "young-ready-scheduled-oldhash",
        "young-ready-scheduled-newhash",
    ]


def test_new_pods_take_the_lowest_slots_no_observed_pod_uses() -> None:
    decision = decide_pods(
        [pod("new-0"), pod("new-2", ready=False)],
        current_hash=NEW,
        replicas=4,
        surge=1,
        name_for=lambda s: f"new-{s}",
    )
    assert decision.create == ("new-1", "new-3")
    assert decision.keep == ("new-2", "new-0")


# ------------------------------------------------------------------ played out


SPEC: dict[str, Any] = {
    "url": "hf://org/model",
    "engine": "VLLM",
    "resourceProfile": "cpu:1",
    "replicas": 3,
}


class Cluster:
    """The Model's Pods as a kubelet would keep them: created Pods start unready, and turn
    Ready one step later; deleted Pods go at once."""

    def __init__(self, *others: dict[str, Any]) -> None:
        self.others = others
        self.pods: dict[str, dict[str, Any]] = {}
        self.counter = 0
        self.most_live = 0

    def plan(self, spec: dict[str, Any]) -> Plan:
        return plan_for(model(spec, generation=2), *self.others, *self.pods.values())

    def step(self, spec: dict[str, Any]) -> Plan:
        """Plan, then carry the plan out and let the kubelet move one step."""
        plan = self.plan(spec)
        for ref in plan.delete:
            assert self.pods[ref.name]["metadata"]["uid"] == ref.uid
            del self.pods[ref.name]
        for existing in self.pods.values():  # the ones started earlier are Ready now
            existing["status"]["conditions"][0]["status"] = "True"
        for manifest in desired(plan, "Pod"):
            name = manifest["metadata"]["name"]
            if name not in self.pods:
                self.counter += 1
                self.pods[name] = observed_pod(
                    manifest,
                    uid=f"uid-{name}",
                    ready=False,
                    created=f"2026-01-01T11:{self.counter:02d}:00Z",
                )
        self.most_live = max(self.most_live, len(self.pods))
        return plan

    def hashes(self) -> set[str]:
        return {p["metadata"]["labels"]["pod-hash"] for p in self.pods.values()}

    def settle(self, spec: dict[str, Any], *, steps: int = 20) -> int:
        """Steps until a plan asks for nothing; returns how many."""
        for taken in range(1, steps + 1):
            seen_ready = all(_ready(p) for p in self.pods.values())
            before = set(self.pods)
            plan = self.step(spec)
            created = set(self.pods) - before
            if seen_ready and not plan.delete and not created:
                return taken
        raise AssertionError(f"not settled within {steps} steps")


def _ready(pod_: dict[str, Any]) -> bool:
    return bool(pod_["status"]["conditions"][0]["status"] == "True")


def test_changing_args_replaces_every_pod_with_at_most_the_surge_extra() -> None:
    cluster = Cluster()
    cluster.settle(SPEC)
    assert len(cluster.pods) == 3
    (first_hash,) = cluster.hashes()
    cluster.most_live = 0

    changed = {**SPEC, "args": ["--max-model-len=4096"]}
    steps = cluster.settle(changed)

    (second_hash,) = cluster.hashes()
    assert second_hash != first_hash
    assert len(cluster.pods) == 3
    assert cluster.most_live <= 3 + 1
    assert steps == 8  # a surge Pod, then one Ready Pod of the old spec at a time


def test_a_rollout_with_surge_zero_never_exceeds_the_replicas() -> None:
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "kaiwo-models",
            "namespace": "kaiwo-system",
            "uid": "cm",
            "labels": {"kaiwo.silogen.ai/system-config": "models"},
        },
        "data": {"models.yaml": "modelRollouts: {surge: 0}\n"},
    }
    cluster = Cluster(config)
    cluster.settle(SPEC)
    cluster.most_live = 0
    cluster.settle({**SPEC, "image": "registry.local/vllm:2"})
    assert len(cluster.pods) == 3
    assert cluster.most_live == 3


def test_a_deleted_pod_is_replaced_by_the_next_plan() -> None:
    cluster = Cluster()
    cluster.settle(SPEC)
    gone = sorted(cluster.pods)[1]
    del cluster.pods[gone]

    plan = cluster.plan(SPEC)

    names = [d["metadata"]["name"] for d in desired(plan, "Pod")]
    assert len(names) == 3
    assert gone in names  # its slot is free again
    assert plan.delete == ()


def test_a_pod_being_deleted_is_replaced_without_waiting_for_it() -> None:
    cluster = Cluster()
    cluster.settle(SPEC)
    going = sorted(cluster.pods)[0]
    cluster.pods[going]["metadata"]["deletionTimestamp"] = "2026-01-01T11:59:00Z"

    plan = cluster.plan(SPEC)

    names = sorted(d["metadata"]["name"] for d in desired(plan, "Pod"))
    assert len(names) == 3 and going not in names
    assert names[-1].endswith("-3")  # the next free slot
    assert plan.delete == ()
    assert plan.status is not None and plan.status["replicas"] == {"all": 3, "ready": 3}


def test_the_same_plan_made_again_before_its_pods_are_observed_asks_for_the_same_pods() -> None:
    first = plan_for(model(SPEC))
    again = plan_for(model(SPEC))
    assert [d["metadata"]["name"] for d in desired(first, "Pod")] == [
        d["metadata"]["name"] for d in desired(again, "Pod")
    ]


@pytest.mark.parametrize(
    ("phase", "reason"),
    [("Failed", "Evicted"), ("Failed", "Terminated"), ("Succeeded", "")],
    ids=["evicted-by-its-kubelet", "stopped-by-a-node-shutdown", "succeeded"],
)
def test_a_finished_pod_is_deleted_and_replaced(phase: str, reason: str) -> None:
    # A bare Pod whose phase is Failed or Succeeded never runs again and nothing else
    # removes it; counted as live, it held the Model below its replicas for good.
    cluster = Cluster()
    cluster.settle(SPEC)
    finished = sorted(cluster.pods)[0]
    cluster.pods[finished]["status"] = {
        "phase": phase,
        "reason": reason,
        "conditions": [{"type": "Ready", "status": "False"}],
    }

    plan = cluster.plan(SPEC)

    assert plan.delete == (
        ObjectRef(
            api_version="v1", kind="Pod", name=finished, namespace="ai", uid=f"uid-{finished}"
        ),
    )
    names = sorted(d["metadata"]["name"] for d in desired(plan, "Pod"))
    assert len(names) == 3 and finished not in names
    assert names[-1].endswith("-3")  # the next free slot: the finished Pod still holds its own
    assert plan.status is not None and plan.status["replicas"] == {"all": 3, "ready": 2}

    cluster.settle(SPEC)
    assert len(cluster.pods) == 3 and finished not in cluster.pods


def test_a_finished_pod_is_no_live_replica_in_the_pod_plan() -> None:
    evicted = ObservedPod(
        name="a",
        uid="uid-a",
        pod_hash=NEW,
        ready=False,
        scheduled=True,
        created="2026-01-01T10:00:00Z",
        terminating=False,
        finished=True,
    )
    assert decide([evicted, pod("b"), pod("c")]) == (1, ["a"])
