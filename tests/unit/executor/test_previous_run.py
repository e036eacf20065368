"""A workload deleted and submitted again under the same name (decision 0165): the first
run's children still there name the deleted owner (same kind and name, another uid) as
their controller. They are left and waited for like anyone else's object (decision 0037),
but told as what they are: the previous run's, being removed by the garbage collector. No
``NameConflict`` Warning, no failed action, no "rename or remove it"."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest_asyncio
from kaiwo_contracts.plans import ObjectRef
from kaiwo_executor.child_ownership import (
    LOOKED_AGAIN_ANNOTATION,
    kept_by_kueue,
    name_conflict,
    with_name_conflicts,
)
from kaiwo_kube import resources
from kaiwo_kubefake import ResourceKind

from tests.unit.executor.conftest import (
    KAIWO_JOB,
    NAMESPACE,
    NOW,
    Harness,
    owner_harness,
)

PREVIOUS_UID = "0000-previous-run"
KAIWO_API = "kaiwo.silogen.ai/v1alpha1"
DATA = ObjectRef(
    api_version="v1", kind="PersistentVolumeClaim", name="train-data", namespace=NAMESPACE
)
IN_USE = "kueue.x-k8s.io/resource-in-use"
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


def previous_runs_topology(harness: Harness, *, uid: str) -> dict[str, Any]:
    metadata = harness.child_metadata("hosts", owner_uid=uid)
    del metadata["namespace"]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Topology",
        "metadata": metadata,
        "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]},
    }


TOPOLOGY = ResourceKind(
    group="kueue.x-k8s.io",
    version="v1beta1",
    plural="topologies",
    kind="Topology",
    namespaced=False,
)


@pytest_asyncio.fixture
async def kueue_harness(tmp_path: Path) -> AsyncIterator[Harness]:
    job = {
        "apiVersion": KAIWO_API,
        "kind": "KaiwoJob",
        "metadata": {"name": "train", "namespace": NAMESPACE},
        "spec": {"image": "busybox:1.36"},
    }
    async for found in owner_harness(tmp_path, kinds=(KAIWO_JOB, TOPOLOGY), owner=job):
        yield found


async def test_a_previous_runs_kueue_object_kept_in_deletion_is_touched(
    kueue_harness: Harness,
) -> None:
    harness = kueue_harness
    # Decision 0200: Kueue drops its finalizer once nothing uses the object and can miss the
    # moment; a touch makes it look again. The object stays as it is otherwise.
    old = previous_runs_topology(harness, uid=PREVIOUS_UID)
    old["metadata"]["finalizers"] = [IN_USE]
    created = await harness.kube.create(old)
    await harness.kube.delete(resources.KUEUE_TOPOLOGY, "hosts")
    plan = harness.plan(
        [previous_runs_topology(harness, uid=str(harness.owner.uid))], status=RUNNING
    )

    execution = await harness.run(plan, plan_id="plan-1")

    touched = harness.find("kueue.x-k8s.io/v1beta1", "Topology", "hosts", namespace=None)
    assert touched is not None
    metadata = touched["metadata"]
    assert metadata["annotations"] == {LOOKED_AGAIN_ANNOTATION: NOW.isoformat()}
    assert (metadata["uid"], metadata["finalizers"]) == (created["metadata"]["uid"], [IN_USE])
    assert [r["uid"] for r in metadata["ownerReferences"]] == [PREVIOUS_UID]
    assert [(a.operation, a.outcome) for a in execution.actions] == [
        ("apply", "unchanged"),
        ("event", "applied"),  # PreviousRunRemoving, Normal
        ("status", "applied"),
    ]
    assert "PreviousRunRemoving" in conditions(harness)


def test_only_a_previous_runs_kueue_object_held_in_deletion_is_touched() -> None:
    wanted = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Topology",
        "metadata": {
            "name": "hosts",
            "ownerReferences": [
                {
                    "apiVersion": KAIWO_API,
                    "kind": "KaiwoQueueConfig",
                    "name": "kaiwo",
                    "uid": "2222",
                    "controller": True,
                }
            ],
        },
    }

    def touched(live: dict[str, Any]) -> bool:
        conflict = name_conflict(wanted, live)
        return conflict is not None and kept_by_kueue(conflict, live)

    kept = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Topology",
        "metadata": {
            "name": "hosts",
            "deletionTimestamp": "2025-03-01T12:00:00Z",
            "finalizers": [IN_USE],
            "ownerReferences": [
                {
                    "apiVersion": KAIWO_API,
                    "kind": "KaiwoQueueConfig",
                    "name": "kaiwo",
                    "uid": "1111",
                    "controller": True,
                }
            ],
        },
    }
    assert touched(kept)
    assert not touched({**kept, "metadata": {**kept["metadata"], "finalizers": []}})
    alive = {k: v for k, v in kept["metadata"].items() if k != "deletionTimestamp"}
    assert not touched({**kept, "metadata": alive})
    assert not touched({**kept, "apiVersion": "v1", "kind": "ConfigMap"})
    other = {**kept["metadata"]["ownerReferences"][0], "name": "someone-else"}
    assert not touched({**kept, "metadata": {**kept["metadata"], "ownerReferences": [other]}})
