"""A data volume deleted and made anew is downloaded into again before the workload's pods
start (decision 0140): the download Job names the uid of each claim it fills."""

from __future__ import annotations

from typing import Any

from kaiwo_contracts.plans import EventIntent, PruneRule
from kaiwo_planner.domain.children.downloads import (
    DOWNLOADED_INTO,
    claims_made_anew,
    with_claims_it_fills,
)

from tests.planning_calls import planned
from tests.unit.planner.test_planning import NOW, SERVE_SPEC, kaiwo_service

SPEC = {
    **SERVE_SPEC,
    "storage": {
        "storageEnabled": True,
        "storageClassName": "standard",
        "data": {
            "storageSize": "10Gi",
            "download": {
                "s3": [
                    {
                        "endpointUrl": "https://s3.example.com",
                        "buckets": [
                            {
                                "name": "weights",
                                "folders": [{"path": "llama", "targetPath": "llama"}],
                            }
                        ],
                    }
                ]
            },
        },
    },
}
OWNED = [{"uid": "svc-uid", "controller": True}]
SUCCEEDED = {
    "type": "DownloadJobSucceeded",
    "status": "True",
    "reason": "JobCompleted",
    "message": "Download job succeeded",
    "lastTransitionTime": "2026-01-01T11:30:00Z",
}
READY = {"status": "READY", "observedGeneration": 1, "conditions": [SUCCEEDED]}
MADE_ANEW = (
    "PersistentVolumeClaim chat-data the download filled was deleted: the download runs again "
    "into the new, empty one before the workload's pods start"
)


def claim(uid: str, *, created: str = "2026-01-01T11:20:00Z") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": "chat-data",
            "namespace": "team-a",
            "uid": uid,
            "creationTimestamp": created,
            "ownerReferences": OWNED,
        },
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "standard",
            "resources": {"requests": {"storage": "10Gi"}},
        },
        "status": {"phase": "Bound"},
    }


def finished_download(*, filled: str | None) -> dict[str, Any]:
    annotations = {} if filled is None else {DOWNLOADED_INTO: f'{{"chat-data": "{filled}"}}'}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "chat-download",
            "namespace": "team-a",
            "uid": "download-uid",
            "annotations": annotations,
            "ownerReferences": OWNED,
        },
        "spec": {"backoffLimit": 0},
        "status": {
            "succeeded": 1,
            "conditions": [{"type": "Complete", "status": "True"}],
        },
    }


def deployment() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "chat",
            "namespace": "team-a",
            "uid": "deploy-uid",
            "ownerReferences": OWNED,
        },
        "spec": {"replicas": 1},
        "status": {"replicas": 1, "readyReplicas": 0},
    }


def kinds_and_names(desired: tuple[dict[str, Any], ...]) -> list[tuple[str, str]]:
    return [(d["kind"], d["metadata"]["name"]) for d in desired]


def download_condition(status: dict[str, Any]) -> dict[str, Any]:
    (found,) = [c for c in status["conditions"] if c["type"] == "DownloadJobSucceeded"]
    return {k: found[k] for k in ("status", "reason", "message")}


# ------------------------------------------------------------------ the pure rule


def test_a_claim_with_another_uid_than_the_download_filled_is_made_anew():
    job = finished_download(filled="old-pvc")

    assert claims_made_anew(job, [claim("new-pvc")]) == ("chat-data",)
    assert claims_made_anew(job, []) == ("chat-data",)  # deleted, the new one not made yet
    assert claims_made_anew(job, [claim("old-pvc")]) == ()
    # A download Job made before the annotation existed names no claim: trusted.
    assert claims_made_anew(finished_download(filled=None), [claim("new-pvc")]) == ()


def test_with_the_download_job_removed_a_claim_made_after_it_succeeded_is_made_anew():
    later = claim("new-pvc", created="2026-01-01T11:45:00Z")
    earlier = claim("old-pvc", created="2026-01-01T11:20:00Z")

    assert claims_made_anew(None, [later], succeeded_at="2026-01-01T11:30:00Z") == ("chat-data",)
    assert claims_made_anew(None, [earlier], succeeded_at="2026-01-01T11:30:00Z") == ()
    assert claims_made_anew(None, [later], succeeded_at=None) == ()


def test_the_download_job_names_the_observed_claims_it_mounts():
    job = {
        "kind": "Job",
        "metadata": {"name": "chat-download", "annotations": {"a": "b"}},
        "spec": {
            "template": {
                "spec": {
                    "volumes": [
                        {"name": "config", "configMap": {"name": "chat-download"}},
                        {"name": "data", "persistentVolumeClaim": {"claimName": "chat-data"}},
                    ]
                }
            }
        },
    }
    other = {**claim("other"), "metadata": {"name": "chat-hf", "uid": "hf-uid"}}

    annotated = with_claims_it_fills(job, [claim("pvc-1"), other])

    assert annotated["metadata"]["annotations"] == {
        "a": "b",
        DOWNLOADED_INTO: '{"chat-data": "pvc-1"}',
    }
    assert with_claims_it_fills(job, []) is job  # no claim observed yet: nothing to name


# ------------------------------------------------------------------ the planner


def test_a_services_volume_made_anew_is_downloaded_into_before_its_pods_start(
    one_node_cluster_with,
):
    owner = kaiwo_service(SPEC, status=READY)
    cluster = one_node_cluster_with(
        owner, claim("new-pvc"), finished_download(filled="old-pvc"), deployment()
    )

    plan = planned(owner=owner, cluster=cluster, now=NOW)

    assert plan is not None and plan.status is not None
    # The finished download Job and the Deployment are not desired: pruned.
    assert kinds_and_names(plan.desired) == [
        ("ConfigMap", "chat-download"),
        ("PersistentVolumeClaim", "chat-data"),
    ]
    assert PruneRule(api_version="batch/v1", kind="Job") in plan.prune
    assert PruneRule(api_version="apps/v1", kind="Deployment") in plan.prune
    assert plan.status["status"] == "DOWNLOADING"
    assert download_condition(plan.status) == {
        "status": "False",
        "reason": "VolumeMadeAnew",
        "message": MADE_ANEW,
    }
    assert EventIntent(type="Warning", reason="VolumeMadeAnew", message=MADE_ANEW) in (plan.events)

    # The old Job still observed (being deleted): the same plan, told no more.
    again = planned(owner=kaiwo_service(SPEC, status=plan.status), cluster=cluster, now=NOW)
    assert again is not None and again.status is not None
    assert "VolumeMadeAnew" not in [e.reason for e in again.events]
    assert kinds_and_names(again.desired) == kinds_and_names(plan.desired)

    # The old Job gone: a new one, naming the new claim; the Deployment waits for it.
    gone = one_node_cluster_with(owner, claim("new-pvc"), deployment())
    after = planned(owner=kaiwo_service(SPEC, status=again.status), cluster=gone, now=NOW)
    assert after is not None
    assert kinds_and_names(after.desired) == [
        ("Job", "chat-download"),
        ("ConfigMap", "chat-download"),
        ("PersistentVolumeClaim", "chat-data"),
    ]
    (job,) = [d for d in after.desired if d["kind"] == "Job"]
    assert job["metadata"]["annotations"][DOWNLOADED_INTO] == '{"chat-data": "new-pvc"}'


def test_the_volume_the_download_filled_keeps_the_service_running(one_node_cluster_with):
    owner = kaiwo_service(SPEC, status=READY)
    cluster = one_node_cluster_with(
        owner, claim("old-pvc"), finished_download(filled="old-pvc"), deployment()
    )

    plan = planned(owner=owner, cluster=cluster, now=NOW)

    assert plan is not None and plan.status is not None
    assert ("Deployment", "chat") in kinds_and_names(plan.desired)
    assert ("Job", "chat-download") in kinds_and_names(plan.desired)
    assert download_condition(plan.status) == {
        "status": "True",
        "reason": "JobCompleted",
        "message": "Download job succeeded",
    }
    assert "VolumeMadeAnew" not in [e.reason for e in plan.events]


def test_a_volume_made_after_a_removed_download_succeeded_is_downloaded_into(one_node_cluster_with):
    """The download Job removed by someone after it succeeded at 11:30; the claim now there
    was made at 11:45: it cannot hold that download."""
    owner = kaiwo_service(SPEC, status=READY)
    cluster = one_node_cluster_with(
        owner, claim("new-pvc", created="2026-01-01T11:45:00Z"), deployment()
    )

    plan = planned(owner=owner, cluster=cluster, now=NOW)

    assert plan is not None and plan.status is not None
    assert kinds_and_names(plan.desired) == [
        ("Job", "chat-download"),
        ("ConfigMap", "chat-download"),
        ("PersistentVolumeClaim", "chat-data"),
    ]
    (job,) = [d for d in plan.desired if d["kind"] == "Job"]
    assert job["metadata"]["annotations"][DOWNLOADED_INTO] == '{"chat-data": "new-pvc"}'
    assert download_condition(plan.status)["reason"] == "VolumeMadeAnew"
    assert plan.status["status"] == "DOWNLOADING"


def test_a_removed_download_and_the_claim_it_filled_still_count(one_node_cluster_with):
    owner = kaiwo_service(SPEC, status=READY)
    cluster = one_node_cluster_with(
        owner, claim("old-pvc", created="2026-01-01T11:20:00Z"), deployment()
    )

    plan = planned(owner=owner, cluster=cluster, now=NOW)

    assert plan is not None and plan.status is not None
    # The data is there: the removed download Job is not made again, which downloaded anew
    # and deleted the Deployment meanwhile (decision 0248).
    assert kinds_and_names(plan.desired) == [
        ("Deployment", "chat"),
        ("ConfigMap", "chat-download"),
        ("PersistentVolumeClaim", "chat-data"),
    ]
    assert download_condition(plan.status) == {
        "status": "True",
        "reason": "JobCompleted",
        "message": "Download job succeeded",
    }
    assert "VolumeMadeAnew" not in [e.reason for e in plan.events]


def test_the_first_download_job_names_its_claim_once_the_claim_is_observed(one_node_cluster_with):
    owner = kaiwo_service(SPEC)

    first = planned(owner=owner, cluster=one_node_cluster_with(owner), now=NOW)

    assert first is not None and first.status is not None
    (job,) = [d for d in first.desired if d["kind"] == "Job"]
    assert DOWNLOADED_INTO not in job["metadata"].get("annotations", {})

    running = {**finished_download(filled=None), "status": {"active": 1}}
    second = planned(
        owner=kaiwo_service(SPEC, status=first.status),
        cluster=one_node_cluster_with(owner, claim("pvc-1"), running),
        now=NOW,
    )

    assert second is not None
    (job,) = [d for d in second.desired if d["kind"] == "Job"]
    assert job["metadata"]["annotations"][DOWNLOADED_INTO] == '{"chat-data": "pvc-1"}'
    assert ("Deployment", "chat") not in kinds_and_names(second.desired)
