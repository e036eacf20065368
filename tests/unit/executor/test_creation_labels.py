"""A label or annotation the owner no longer has leaves a child created suspended.

Such a child is created under ``kaiwo-create`` and updated under ``kaiwo``; server-side apply
keeps a field while any manager owns it, so without the release of
:mod:`kaiwo_executor.creation_metadata` a label removed from a KaiwoJob stayed on its Job for
good (seen on the real API server, decision 0128).
"""

from __future__ import annotations

from typing import Any

from kaiwo_executor.creation_metadata import creation_metadata_release

from tests.managed_fields import field_managers_of
from tests.unit.executor.test_late_plans import kueue_unsuspends

JOB_WRITES = ("batch", "jobs", "team-a", "train")


def suspended_job(harness: Any, **labels: str) -> dict[str, Any]:
    job = harness.job()
    job["metadata"]["labels"] = {**job["metadata"].get("labels", {}), **labels}
    job["metadata"]["annotations"] = {"note": "first"}
    job["spec"]["suspend"] = True
    return job


def updated(job: dict[str, Any], **labels: str) -> dict[str, Any]:
    """The manifest of a later plan: ``suspend`` left to Kueue, the labels as given."""
    later = {**job, "spec": {k: v for k, v in job["spec"].items() if k != "suspend"}}
    kept = {k: v for k, v in job["metadata"]["labels"].items() if k not in ("team", "project")}
    metadata = {k: v for k, v in job["metadata"].items() if k != "annotations"}
    later["metadata"] = {**metadata, "labels": {**kept, **labels}}
    return later


async def test_a_removed_label_and_annotation_leave_an_admitted_job(harness: Any) -> None:
    job = suspended_job(harness, team="a", project="p")
    await harness.run(harness.plan([job]), plan_id="plan-1")
    await kueue_unsuspends(harness)

    await harness.run(harness.plan([updated(job, project="q")]), plan_id="plan-2")

    found = harness.find("batch/v1", "Job", "train")
    assert found["metadata"]["labels"]["project"] == "q"
    assert "team" not in found["metadata"]["labels"]
    assert "note" not in (found["metadata"].get("annotations") or {})
    assert found["spec"]["suspend"] is False
    assert field_managers_of(found, "spec", "suspend") == {"kueue-admission"}
    assert found["metadata"]["ownerReferences"] == job["metadata"]["ownerReferences"]


async def test_a_job_still_waiting_for_admission_stays_suspended(harness: Any) -> None:
    job = suspended_job(harness, team="a", project="p")
    await harness.run(harness.plan([job]), plan_id="plan-1")

    await harness.run(harness.plan([updated(job, project="q")]), plan_id="plan-2")

    found = harness.find("batch/v1", "Job", "train")
    assert "team" not in found["metadata"]["labels"]
    assert found["spec"]["suspend"] is True
    assert "kaiwo-create" in field_managers_of(found, "spec", "suspend")


async def test_an_update_that_keeps_every_label_costs_no_second_request(harness: Any) -> None:
    job = suspended_job(harness, team="a", project="p")
    del job["metadata"]["annotations"]
    await harness.run(harness.plan([job]), plan_id="plan-1")
    before = harness.writes()[JOB_WRITES]

    later = updated(job, team="a", project="q")
    await harness.run(harness.plan([later]), plan_id="plan-2")

    assert harness.writes()[JOB_WRITES] - before == 1
    assert harness.find("batch/v1", "Job", "train")["metadata"]["labels"]["team"] == "a"


def test_the_release_holds_on_to_kaiwo_creates_spec_fields_as_they_are_and_no_metadata() -> None:
    applied = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "train",
            "namespace": "team-a",
            "labels": {"team": "a", "app": "x"},
            "managedFields": [
                {
                    "manager": "kaiwo-create",
                    "operation": "Apply",
                    "fieldsV1": {
                        "f:metadata": {"f:labels": {".": {}, "f:team": {}, "f:app": {}}},
                        "f:spec": {"f:suspend": {}, "f:template": {"f:spec": {}}},
                    },
                },
                {
                    "manager": "kaiwo",
                    "operation": "Apply",
                    "fieldsV1": {"f:metadata": {"f:labels": {"f:app": {}}}},
                },
            ],
        },
        "spec": {"suspend": True, "parallelism": 1, "template": {"spec": {}}},
    }
    manifest = {"metadata": {"labels": {"app": "x"}}}

    assert creation_metadata_release(applied, manifest) == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "team-a"},
        "spec": {"suspend": True, "template": {"spec": {}}},  # what kaiwo-create holds
    }
    # Every label kaiwo-create holds is still sent: nothing to give up.
    assert (
        creation_metadata_release(applied, {"metadata": {"labels": {"app": "x", "team": "a"}}})
        is None
    )
    # An object kaiwo-create never wrote (a Deployment): nothing to give up.
    other = {**applied, "metadata": {**applied["metadata"], "managedFields": []}}
    assert creation_metadata_release(other, manifest) is None
