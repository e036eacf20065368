"""Never adopt (issue 23): a child the plan wants whose name is taken by an object the owner
does not control is left exactly as it is, and so is everything of the plan that could use it
by name; the owner gets the condition ``NameConflict`` and a Warning Event naming the object,
both gone once the name is free again. Against the fake API server (the real one:
tests/integration/test_never_adopt.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kaiwo_contracts.plans import ObjectRef
from kaiwo_executor.child_ownership import (
    NameConflict,
    name_conflict,
    with_name_conflicts,
    withheld_by,
)
from kaiwo_kube import resources

from tests.unit.executor.conftest import NAMESPACE, Harness

KAIWO_API = "kaiwo.silogen.ai/v1alpha1"
ENTRYPOINT = ObjectRef(
    api_version="v1", kind="ConfigMap", name="train-entrypoint", namespace=NAMESPACE
)
"""The child the planner keeps seeing missing (the name is someone else's object)."""
RUNNING = {"status": "RUNNING", "conditions": [{"type": "Valid", "status": "True"}]}


def foreign_config_map(name: str = "train-entrypoint") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "data": {"salaries.csv": "alice,100"},
    }


def foreign_pvc() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "train-data", "namespace": NAMESPACE},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }


def foreign_job(*, controller_uid: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "train", "namespace": NAMESPACE}
    if controller_uid is not None:
        metadata["ownerReferences"] = [
            {
                "apiVersion": KAIWO_API,
                "kind": "KaiwoJob",
                "name": "someone-else",
                "uid": controller_uid,
                "controller": True,
            }
        ]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "payroll", "image": "payroll:7"}],
                }
            }
        },
    }


def conditions(harness: Harness) -> dict[str, dict[str, Any]]:
    owner = harness.find(KAIWO_API, "KaiwoJob", "train")
    assert owner is not None
    return {c["type"]: c for c in (owner.get("status") or {}).get("conditions") or []}


def failures(execution: Any) -> list[tuple[str, str | None]]:
    return [(a.target.display(), a.reason) for a in execution.actions if a.outcome == "failed"]


async def test_objects_of_someone_else_are_left_alone_and_the_owner_is_told(
    harness: Harness,
) -> None:
    """The issue's cases: a KaiwoJob whose ConfigMap, PVC and Job names are taken."""
    config_map = await harness.kube.create(foreign_config_map())
    pvc = await harness.kube.create(foreign_pvc())
    job = await harness.kube.create(foreign_job())
    before = harness.writes()

    execution = await harness.run(
        harness.plan([harness.job(), harness.pvc(), harness.config_map()], status=RUNNING),
        plan_id="plan-1",
    )

    for found in (config_map, pvc, job):
        live = harness.find(found["apiVersion"], found["kind"], found["metadata"]["name"])
        assert live == found, f"{found['kind']} changed"
        assert "ownerReferences" not in live["metadata"]
    assert failures(execution) == [
        (
            f"{kind}/team-a/{name}",
            f"NameConflict: {kind}/team-a/{name} exists and is not this owner's (controlled by "
            "nobody): left as it is; rename or remove it",
        )
        for kind, name in (
            ("Job", "train"),
            ("ConfigMap", "train-entrypoint"),
            ("PersistentVolumeClaim", "train-data"),
        )
    ]
    assert not execution.must_retry
    writes = {key for key in harness.writes() - before if key[1] != "events"}
    assert writes == {("kaiwo.silogen.ai", "kaiwojobs", "team-a", "train")}  # the status only
    condition = conditions(harness)["NameConflict"]
    assert condition["status"] == "True"
    assert condition["reason"] == "NameTaken"
    assert condition["lastTransitionTime"] == "2025-03-01T12:00:00Z"
    assert (
        "ConfigMap/team-a/train-entrypoint exists and is not this owner's" in condition["message"]
    )
    assert conditions(harness)["Valid"] == {"type": "Valid", "status": "True"}
    warned = sorted(e["message"].split(" exists")[0] for e in harness.events(reason="NameConflict"))
    assert warned == [
        "ConfigMap/team-a/train-entrypoint",
        "Job/team-a/train",
        "PersistentVolumeClaim/team-a/train-data",
    ]
    assert {e["type"] for e in harness.events(reason="NameConflict")} == {"Warning"}


async def test_one_taken_name_withholds_the_plans_objects_of_its_namespace(
    harness: Harness,
) -> None:
    """The Job would mount a ConfigMap of someone else's by name: nothing is written."""
    await harness.kube.create(foreign_config_map())

    execution = await harness.run(
        harness.plan([harness.job(), harness.pvc(), harness.config_map()]), plan_id="plan-1"
    )

    assert harness.find("batch/v1", "Job", "train") is None
    assert harness.find("v1", "PersistentVolumeClaim", "train-data") is None
    withheld = {
        (a.target.display(), a.reason) for a in execution.actions if a.outcome == "unchanged"
    }
    reason = "withheld while ConfigMap/team-a/train-entrypoint is not this owner's"
    assert withheld == {
        ("Job/team-a/train", reason),
        ("PersistentVolumeClaim/team-a/train-data", reason),
    }


async def test_an_object_another_owner_controls_is_named_with_its_controller(
    harness: Harness,
) -> None:
    job = await harness.kube.create(foreign_job(controller_uid="0000-other"))

    execution = await harness.run(harness.plan([harness.job()]), plan_id="plan-1")

    assert harness.find("batch/v1", "Job", "train") == job
    [(_, reason)] = failures(execution)
    assert reason is not None and "controlled by KaiwoJob someone-else (uid 0000-other)" in reason


async def test_once_the_name_is_free_the_next_plan_creates_the_child_and_clears_the_condition(
    harness: Harness,
) -> None:
    await harness.kube.create(foreign_config_map())
    plan = harness.plan([harness.job(), harness.config_map()], status=RUNNING)
    await harness.run(plan, plan_id="plan-1")
    # The same decision again (a resync: the child is still missing): nothing new to say.
    again = await harness.run(plan, plan_id="plan-2", absent=(ENTRYPOINT,))
    assert [a.outcome for a in again.actions if a.operation == "status"] == ["unchanged"]
    # A plan changed for another reason (its status) while the name is still taken.
    changed = harness.plan([harness.job(), harness.config_map()], status={"status": "PENDING"})
    await harness.run(changed, plan_id="plan-2b", absent=(ENTRYPOINT,))
    assert len(harness.events(reason="NameConflict")) == 1  # once per object, not per plan

    await harness.kube.delete(resources.CONFIG_MAP, "train-entrypoint", namespace=NAMESPACE)
    execution = await harness.run(plan, plan_id="plan-3", absent=(ENTRYPOINT,))

    assert failures(execution) == []
    created = harness.find("v1", "ConfigMap", "train-entrypoint")
    assert created is not None
    assert [r["uid"] for r in created["metadata"]["ownerReferences"]] == [harness.owner.uid]
    assert harness.find("batch/v1", "Job", "train") is not None
    assert "NameConflict" not in conditions(harness)
    assert conditions(harness)["Valid"] == {"type": "Valid", "status": "True"}


async def test_the_owners_own_child_is_applied_when_the_memo_is_lost(harness: Harness) -> None:
    """Read before the first write of this executor: it is the owner's, so it is updated."""
    await harness.run(harness.plan([harness.config_map()]), plan_id="plan-1")
    fresh = harness.executor(kv=type(harness.kv)())

    execution = await harness.run(
        harness.plan([harness.config_map(entrypoint="python train.py --epochs 2")]),
        plan_id="plan-2",
        executor=fresh,
    )

    assert failures(execution) == []
    live = harness.find("v1", "ConfigMap", "train-entrypoint")
    assert live is not None
    assert live["data"] == {"entrypoint.sh": "python train.py --epochs 2"}


async def test_prune_leaves_an_object_that_carries_the_labels_but_not_the_owner(
    harness: Harness,
) -> None:
    await harness.run(harness.plan([harness.config_map()]), plan_id="plan-1")
    copy = foreign_config_map("copied-labels")
    copy["metadata"]["labels"] = {harness.inventory_label: harness.owner.uid}
    copied = await harness.kube.create(copy)

    await harness.run(harness.plan([harness.job()]), plan_id="plan-2")

    assert harness.find("v1", "ConfigMap", "train-entrypoint") is None  # the owner's: pruned
    assert harness.find("v1", "ConfigMap", "copied-labels") == copied


# ---------------------------------------------------------------------- the pure rules

OWNER_UID = "1111"
CHILD = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {
        "name": "a",
        "namespace": "ns",
        "ownerReferences": [
            {"kind": "KaiwoJob", "name": "o", "uid": OWNER_UID, "controller": True}
        ],
    },
}


def conflict(namespace: str | None) -> NameConflict:
    target = ObjectRef(api_version="v1", kind="X", name="x", namespace=namespace)
    return NameConflict(target=target, controller=None)


def test_an_object_is_the_owners_only_through_its_controller_reference() -> None:
    owned = {"metadata": {"ownerReferences": [{"uid": OWNER_UID, "controller": True}]}}
    not_controller = {"metadata": {"ownerReferences": [{"uid": OWNER_UID}]}}

    assert name_conflict(CHILD, None) is None
    assert name_conflict(CHILD, owned) is None
    assert name_conflict(CHILD, not_controller) is not None
    assert name_conflict({"metadata": {"name": "node-1"}}, {"metadata": {}}) is None  # no claim


def test_a_conflict_withholds_its_namespace_and_a_cluster_scoped_one_everything() -> None:
    other = {"metadata": {"namespace": "other"}}

    assert withheld_by(CHILD, [conflict("other")]) is None
    assert withheld_by(other, [conflict("other")]) == conflict("other")
    assert withheld_by(CHILD, [conflict(None)]) == conflict(None)


def test_the_condition_is_added_kept_and_dropped_by_the_executor_alone() -> None:
    since = datetime(2025, 3, 1, 12, 0, 5, 123, tzinfo=UTC)
    status = {"status": "PENDING", "conditions": [{"type": "Valid", "status": "True"}]}

    marked = with_name_conflicts(status, [conflict("ns")] * 7, since=since)

    [valid, name_taken] = marked["conditions"]
    assert valid == {"type": "Valid", "status": "True"}
    assert name_taken["lastTransitionTime"] == "2025-03-01T12:00:05Z"
    assert name_taken["message"].endswith("; and 2 more")
    assert with_name_conflicts(marked, [], since=since) == status
    assert with_name_conflicts({"status": "PENDING"}, [], since=since) == {"status": "PENDING"}
