"""A workload deleted and submitted again under the same name (decision 0165): the first
run's children still there name the deleted owner (same kind and name, another uid) as
their controller. They are left and waited for like anyone else's object (decision 0037),
but told as what they are: the previous run's, being removed by the garbage collector. No
``NameConflict`` Warning, no failed action, no "rename or remove it"."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kaiwo_contracts.plans import ObjectRef
from kaiwo_executor.child_ownership import name_conflict, with_name_conflicts
from kaiwo_kube import resources

from tests.unit.executor.conftest import NAMESPACE, Harness

PREVIOUS_UID = "0000-previous-run"
KAIWO_API = "kaiwo.silogen.ai/v1alpha1"
DATA = ObjectRef(
    api_version="v1", kind="PersistentVolumeClaim", name="train-data", namespace=NAMESPACE
)
RUNNING = {"status": "RUNNING", "conditions": [{"type": "Valid", "status": "True"}]}


def previous_runs_pvc(harness: Harness) -> dict[str, Any]:
    pvc = harness.pvc()
    pvc["metadata"] = harness.child_metadata("train-data", owner_uid=PREVIOUS_UID)
    return pvc


def conditions(harness: Harness) -> dict[str, dict[str, Any]]:
    owner = harness.find(KAIWO_API, "KaiwoJob", "train")
    assert owner is not None
    return {c["type"]: c for c in (owner.get("status") or {}).get("conditions") or []}


async def test_the_previous_runs_claim_is_waited_for_and_told_as_such(harness: Harness) -> None:
    old = await harness.kube.create(previous_runs_pvc(harness))
    plan = harness.plan([harness.job(), harness.pvc()], status=RUNNING)

    execution = await harness.run(plan, plan_id="plan-1")

    message = (
        f"PersistentVolumeClaim train-data of the previous KaiwoJob train (uid {PREVIOUS_UID}) "
        "is still being removed: this run goes on once it is gone"
    )
    assert harness.find("v1", "PersistentVolumeClaim", "train-data") == old
    assert harness.find("batch/v1", "Job", "train") is None  # it would mount the old claim
    assert [a for a in execution.actions if a.outcome == "failed"] == []
    assert {
        (a.target.display(), a.reason) for a in execution.actions if a.operation == "apply"
    } == {
        ("PersistentVolumeClaim/team-a/train-data", f"PreviousRunRemoving: {message}"),
        (
            "Job/team-a/train",
            "withheld while the previous run's PersistentVolumeClaim/team-a/train-data is "
            "being removed",
        ),
    }
    assert not execution.must_retry
    told = conditions(harness)
    assert "NameConflict" not in told
    removing = told["PreviousRunRemoving"]
    assert (removing["status"], removing["reason"], removing["message"]) == (
        "True",
        "StillBeingRemoved",
        message,
    )
    assert harness.events(reason="NameConflict") == []
    [event] = harness.events(reason="PreviousRunRemoving")
    assert (event["type"], event["message"]) == ("Normal", message)

    # A resync while the claim is still there: told once.
    await harness.run(plan, plan_id="plan-2", absent=(DATA,))
    assert len(harness.events(reason="PreviousRunRemoving")) == 1

    await harness.kube.delete(resources.PERSISTENT_VOLUME_CLAIM, "train-data", namespace=NAMESPACE)
    execution = await harness.run(plan, plan_id="plan-3", absent=(DATA,))

    assert [a for a in execution.actions if a.outcome == "failed"] == []
    made = harness.find("v1", "PersistentVolumeClaim", "train-data")
    assert made is not None
    assert [r["uid"] for r in made["metadata"]["ownerReferences"]] == [harness.owner.uid]
    assert harness.find("batch/v1", "Job", "train") is not None
    assert "PreviousRunRemoving" not in conditions(harness)


def controlled(kind: str, name: str, uid: str, api_version: str = KAIWO_API) -> dict[str, Any]:
    reference = {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
    }
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "o-entrypoint", "namespace": "ns", "ownerReferences": [reference]},
    }


def test_only_an_owner_of_the_same_kind_and_name_is_a_previous_run() -> None:
    manifest = controlled("KaiwoJob", "o", "2222")

    def previous(live: dict[str, Any]) -> bool:
        found = name_conflict(manifest, live)
        assert found is not None
        return found.previous_run

    assert previous(controlled("KaiwoJob", "o", "1111"))
    assert not previous(controlled("KaiwoService", "o", "1111"))  # another owner, alive
    assert not previous(controlled("KaiwoJob", "p", "1111"))
    assert not previous(controlled("KaiwoJob", "o", "1111", api_version="example.com/v1"))
    assert not previous({"metadata": {"name": "o-entrypoint", "namespace": "ns"}})  # nobody's


def test_previous_runs_and_others_objects_get_a_condition_each() -> None:
    since = datetime(2025, 3, 1, 12, 0, 5, tzinfo=UTC)
    manifest = controlled("KaiwoJob", "o", "2222")
    old = name_conflict(manifest, controlled("KaiwoJob", "o", "1111"))
    foreign = name_conflict(manifest, controlled("KaiwoJob", "p", "3333"))
    assert old is not None and foreign is not None

    marked = with_name_conflicts({"status": "PENDING"}, [old, foreign], since=since)

    assert [(c["type"], c["reason"], c["message"]) for c in marked["conditions"]] == [
        (
            "NameConflict",
            "NameTaken",
            "ConfigMap/ns/o-entrypoint exists and is not this owner's (controlled by KaiwoJob "
            "p (uid 3333)): left as it is; rename or remove it",
        ),
        (
            "PreviousRunRemoving",
            "StillBeingRemoved",
            "ConfigMap o-entrypoint of the previous KaiwoJob o (uid 1111) is still being "
            "removed: this run goes on once it is gone",
        ),
    ]
    assert with_name_conflicts(marked, [], since=since) == {"status": "PENDING", "conditions": []}
