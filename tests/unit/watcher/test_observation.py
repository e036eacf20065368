"""From objects to observed events: ids, subjects, correlation (pure)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from kaiwo_kube import resources
from kaiwo_planner.domain.state.index_entry import written_last_by_operator
from kaiwo_watcher.observation import (
    KnownObject,
    child_owner,
    correlation_id,
    infer_deletion,
    known_from,
    log_identity,
    observe,
)
from kaiwo_watcher.watch_list import WatchTarget

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
WORKLOAD_UID = "6f1c2d3e-0000-4000-8000-000000000001"
JOB_UID = "6f1c2d3e-0000-4000-8000-000000000002"
CHILD = WatchTarget(resource=resources.JOB, label_selector="app.kubernetes.io/managed-by=kaiwo")
KAIWO_JOBS = WatchTarget(resource=resources.KAIWO_JOB, workload=True)
NODES = WatchTarget(resource=resources.NODE)


def controller(uid: str) -> list[dict[str, object]]:
    return [
        {"apiVersion": "v1", "kind": "X", "name": "x", "uid": "not-controller"},
        {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": uid, "controller": True},
    ]


def test_a_workload_correlates_with_itself_whatever_its_labels():
    obj = {
        "metadata": {
            "uid": WORKLOAD_UID,
            "labels": {"kaiwo.silogen.ai/owner-uid": "someone-else"},
            "ownerReferences": controller("other"),
        }
    }
    assert correlation_id(obj, workload=True) == WORKLOAD_UID


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ({"uid": "c", "labels": {"kaiwo.silogen.ai/owner-uid": "w"}}, "w"),
        ({"uid": "p", "labels": {"kaiwo.silogen.ai/run-id": "w"}}, "w"),
        (
            {
                "uid": "c",
                "labels": {"kaiwo.silogen.ai/owner-uid": "w", "kaiwo.silogen.ai/run-id": "r"},
            },
            "w",
        ),
        ({"uid": "wl", "ownerReferences": controller("job-1")}, "job-1"),
        ({"uid": "wl", "ownerReferences": controller("known-job")}, "the-workload"),
        ({"uid": "n"}, "n"),
        ({"uid": "n", "ownerReferences": [{"uid": "x", "controller": False}]}, "n"),
    ],
)
def test_correlation_of_other_objects(metadata, expected):
    owners = {"known-job": "the-workload"}
    assert correlation_id({"metadata": metadata}, workload=False, owners=owners) == expected


def test_observe_builds_the_envelope_and_subject():
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "train",
            "namespace": "team-a",
            "uid": JOB_UID,
            "resourceVersion": "417",
            "labels": {"kaiwo.silogen.ai/owner-uid": WORKLOAD_UID},
        },
        "spec": {"parallelism": 2},
    }
    observation = observe(job, target=CHILD, event_type="MODIFIED", time=NOW)
    envelope = observation.envelope
    assert observation.subject == f"kaiwo.obs.job.team-a.{JOB_UID}"
    assert envelope.id == f"{JOB_UID}:417"
    assert envelope.source == "/kaiwo/watcher"
    assert envelope.subject == "team-a/train"
    assert envelope.correlationid == WORKLOAD_UID
    assert envelope.time == NOW
    assert envelope.causationid is None
    assert envelope.data.event_type == "MODIFIED"
    assert envelope.data.resource_version == "417"
    assert envelope.data.object == job
    headers, _ = envelope.to_nats()
    assert headers["Nats-Msg-Id"] == f"{JOB_UID}:417"


def _managed(manager: str, time: str, **extra: object) -> dict[str, object]:
    return {
        "manager": manager,
        "operation": "Apply",
        "apiVersion": "batch/v1",
        "time": time,
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:spec": {"f:parallelism": {}}, "f:metadata": {"f:labels": {}}},
        **extra,
    }


def test_managed_fields_are_published_without_their_field_sets():
    entries = [
        _managed("kaiwo", "2026-03-01T12:00:00Z"),
        _managed("kube-controller-manager", "2026-03-01T12:00:05Z", subresource="status"),
        "not-an-entry",
    ]
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "train",
            "uid": JOB_UID,
            "resourceVersion": "5",
            "managedFields": entries,
        },
    }
    published = observe(job, target=CHILD, event_type="MODIFIED", time=NOW).envelope.data.object

    assert published["metadata"]["managedFields"] == [
        {
            "manager": "kaiwo",
            "operation": "Apply",
            "apiVersion": "batch/v1",
            "time": "2026-03-01T12:00:00Z",
        },
        {
            "manager": "kube-controller-manager",
            "operation": "Apply",
            "apiVersion": "batch/v1",
            "time": "2026-03-01T12:00:05Z",
            "subresource": "status",
        },
        "not-an-entry",
    ]
    assert {
        key: value for key, value in published["metadata"].items() if key != "managedFields"
    } == {
        "name": "train",
        "uid": JOB_UID,
        "resourceVersion": "5",
    }
    assert job["metadata"]["managedFields"] is entries  # the object read is left as it was
    assert "fieldsV1" in entries[0]


@pytest.mark.parametrize(
    ("newest", "by_operator"),
    [
        ([_managed("kaiwo", "2026-03-01T12:00:09Z")], True),
        ([_managed("kubectl", "2026-03-01T12:00:09Z")], False),
        ([_managed("kubectl", "2026-03-01T12:00:09Z", subresource="status")], False),
        ([_managed("kaiwo", "2026-03-01T12:00:09Z"), _managed("x", "2026-03-01T12:00:09Z")], False),
    ],
)
def test_the_planner_reads_the_same_last_writer_from_what_is_published(newest, by_operator):
    entries = [_managed("kubectl", "2026-03-01T12:00:01Z"), *newest]
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "uid": JOB_UID, "resourceVersion": "5", "managedFields": entries},
    }
    published = observe(job, target=CHILD, event_type="MODIFIED", time=NOW).envelope.data.object
    assert written_last_by_operator(job) is by_operator
    assert written_last_by_operator(published) is by_operator


def test_an_object_without_managed_fields_is_published_as_read():
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n", "uid": "n-1", "resourceVersion": "9"},
    }
    assert observe(node, target=NODES, event_type="SYNC", time=NOW).envelope.data.object == node


def test_list_items_without_type_meta_get_it_from_the_target():
    node = {"metadata": {"name": "gpu-1.example.com", "uid": "n-1", "resourceVersion": "9"}}
    observation = observe(node, target=NODES, event_type="SYNC", time=NOW)
    assert observation.envelope.data.object["apiVersion"] == "v1"
    assert observation.envelope.data.object["kind"] == "Node"
    assert observation.envelope.data.namespace is None
    assert observation.envelope.subject == "gpu-1.example.com"
    assert observation.subject == "kaiwo.obs.node._cluster.n-1"


def test_an_object_without_uid_or_version_is_refused():
    with pytest.raises(ValueError, match="uid"):
        observe(
            {"metadata": {"name": "x", "resourceVersion": "1"}},
            target=NODES,
            event_type="ADDED",
            time=NOW,
        )
    with pytest.raises(ValueError, match="resource_version"):
        observe({"metadata": {"name": "x", "uid": "u"}}, target=NODES, event_type="ADDED", time=NOW)


def test_an_inferred_deletion_has_a_replica_independent_id_and_the_list_version():
    known = KnownObject(namespace="team-a", name="train", correlation=WORKLOAD_UID)
    observation = infer_deletion(
        known, uid=WORKLOAD_UID, target=KAIWO_JOBS, list_resource_version="900", time=NOW
    )
    envelope = observation.envelope
    assert envelope.id == f"{WORKLOAD_UID}:deleted"
    assert envelope.data.event_type == "DELETED"
    assert envelope.data.resource_version == "900"
    assert envelope.data.object == {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoJob",
        "metadata": {"name": "train", "namespace": "team-a", "uid": WORKLOAD_UID},
    }
    assert envelope.correlationid == WORKLOAD_UID
    assert observation.subject == f"kaiwo.obs.kaiwojob.team-a.{WORKLOAD_UID}"


def test_known_from_keeps_what_an_inferred_deletion_needs():
    pod = {
        "metadata": {
            "name": "train-0",
            "namespace": "team-a",
            "uid": "p-1",
            "resourceVersion": "5",
            "labels": {"kaiwo.silogen.ai/run-id": WORKLOAD_UID},
        }
    }
    target = WatchTarget(resource=resources.POD)
    observation = observe(pod, target=target, event_type="ADDED", time=NOW)
    assert known_from(observation) == KnownObject(
        namespace="team-a", name="train-0", correlation=WORKLOAD_UID
    )


def test_log_identity_and_child_owner_take_any_metadata():
    # Seen while writing the fuzz target: the service's error path read metadata.get on a
    # list and raised inside its own except clause; the owner lookup did the same on labels.
    assert log_identity({"metadata": ["x"]}) == {"name": None, "namespace": None}
    assert log_identity({"metadata": {"name": "a", "namespace": "n"}}) == {
        "name": "a",
        "namespace": "n",
    }
    assert child_owner({"metadata": {"uid": "c", "labels": ["x"]}}) is None
    assert child_owner({"metadata": True}) is None
    labelled = {"metadata": {"uid": "c", "labels": {"kaiwo.silogen.ai/owner-uid": "w"}}}
    assert child_owner(labelled) == ("c", "w")


@pytest.mark.parametrize("references", [5, "x", [{"controller": True, "uid": ["u"]}]])
def test_owner_references_of_any_shape_give_no_controller(references):
    # Found while probing the watcher's decoding: an int raised TypeError, which the service
    # does not count as a rejected object; a list uid became the correlation "['u']".
    obj = {"metadata": {"uid": "own", "ownerReferences": references}}
    assert correlation_id(obj, workload=False) == "own"
