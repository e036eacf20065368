"""A mutable spec field the owner no longer sets leaves a running child created suspended.

Such a child is created under ``kaiwo-create`` and updated under ``kaiwo``; server-side apply
keeps a field while any manager owns it, so a ``spec.job.spec.activeDeadlineSeconds`` removed
from a KaiwoJob stayed on its Job, held by the creation's manager, and still ended the job
(seen on the real API server, decision 0133). Immutable fields and ``suspend`` stay held.
"""

from __future__ import annotations

from typing import Any

from kaiwo_executor.creation_metadata import creation_metadata_release

from tests.managed_fields import field_managers_of
from tests.unit.executor.test_late_plans import kueue_unsuspends

JOB_WRITES = ("batch", "jobs", "team-a", "train")
FAIL_ON_42 = {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42]}}]}


def suspended_job(harness: Any) -> dict[str, Any]:
    job = harness.job()
    job["spec"].update(
        suspend=True, activeDeadlineSeconds=3600, backoffLimit=0, podFailurePolicy=FAIL_ON_42
    )
    return job


def without(job: dict[str, Any], *names: str) -> dict[str, Any]:
    """The manifest of a later plan: ``suspend`` left to Kueue, ``names`` no longer set."""
    dropped = {"suspend", *names}
    return {**job, "spec": {k: v for k, v in job["spec"].items() if k not in dropped}}


async def test_a_removed_deadline_leaves_a_running_job_and_its_immutable_fields_stay(
    harness: Any,
) -> None:
    job = suspended_job(harness)
    await harness.run(harness.plan([job]), plan_id="plan-1")
    await kueue_unsuspends(harness)
    before = harness.writes()[JOB_WRITES]

    later = without(job, "activeDeadlineSeconds", "podFailurePolicy")
    await harness.run(harness.plan([later]), plan_id="plan-2")

    found = harness.find("batch/v1", "Job", "train")
    assert "activeDeadlineSeconds" not in found["spec"]
    # Immutable: taking it away would be refused by the API server, so kaiwo-create holds on.
    assert found["spec"]["podFailurePolicy"] == FAIL_ON_42
    assert field_managers_of(found, "spec", "podFailurePolicy") == {"kaiwo-create"}
    assert found["spec"]["suspend"] is False
    assert field_managers_of(found, "spec", "suspend") == {"kueue-admission"}
    assert found["spec"]["template"] == job["spec"]["template"]
    assert harness.writes()[JOB_WRITES] - before == 2  # the update, and the release


async def test_a_job_still_waiting_loses_its_deadline_and_stays_suspended(harness: Any) -> None:
    job = suspended_job(harness)
    await harness.run(harness.plan([job]), plan_id="plan-1")

    await harness.run(harness.plan([without(job, "activeDeadlineSeconds")]), plan_id="plan-2")

    found = harness.find("batch/v1", "Job", "train")
    assert "activeDeadlineSeconds" not in found["spec"]
    assert found["spec"]["suspend"] is True
    assert field_managers_of(found, "spec", "suspend") == {"kaiwo-create"}


async def test_the_field_is_released_once_and_later_updates_cost_one_request(
    harness: Any,
) -> None:
    job = suspended_job(harness)
    await harness.run(harness.plan([job]), plan_id="plan-1")
    await kueue_unsuspends(harness)
    await harness.run(harness.plan([without(job, "activeDeadlineSeconds")]), plan_id="plan-2")
    before = harness.writes()[JOB_WRITES]

    again = without(job, "activeDeadlineSeconds")
    again["spec"]["backoffLimit"] = 2
    await harness.run(harness.plan([again]), plan_id="plan-3")

    assert harness.writes()[JOB_WRITES] - before == 1
    found = harness.find("batch/v1", "Job", "train")
    assert (found["spec"]["backoffLimit"], "activeDeadlineSeconds" in found["spec"]) == (2, False)


async def test_a_deadline_still_set_costs_no_second_request(harness: Any) -> None:
    job = suspended_job(harness)
    await harness.run(harness.plan([job]), plan_id="plan-1")
    await kueue_unsuspends(harness)
    before = harness.writes()[JOB_WRITES]

    later = without(job)
    later["spec"]["activeDeadlineSeconds"] = 7200
    await harness.run(harness.plan([later]), plan_id="plan-2")

    assert harness.writes()[JOB_WRITES] - before == 1
    assert harness.find("batch/v1", "Job", "train")["spec"]["activeDeadlineSeconds"] == 7200


def created(kind: str, api_version: str, spec: dict[str, Any], held: list[str]) -> dict[str, Any]:
    """``kind`` as an update returned it, ``kaiwo-create`` holding the spec fields ``held``."""
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {
            "name": "train",
            "namespace": "team-a",
            "labels": {"app": "x"},
            "managedFields": [
                {
                    "manager": "kaiwo-create",
                    "operation": "Apply",
                    "fieldsV1": {
                        "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                        "f:spec": {".": {}, **{f"f:{name}": {} for name in held}},
                    },
                }
            ],
        },
        "spec": spec,
    }


def test_the_release_of_a_running_ray_job_sends_what_kaiwo_create_keeps_without_the_removed():
    # Running: Kueue took suspend over. (A waiting one gives up all but suspend, decision 0225.)
    cluster = {"headGroupSpec": {"rayStartParams": {}}}
    applied = created(
        "RayJob",
        "ray.io/v1",
        {
            "suspend": False,
            "entrypoint": "python a.py",
            "rayClusterSpec": cluster,
            "activeDeadlineSeconds": 600,
            "ttlSecondsAfterFinished": 60,
            "submissionMode": "K8sJobMode",  # the CRD's default: nobody's
        },
        [
            "entrypoint",
            "rayClusterSpec",
            "activeDeadlineSeconds",
            "ttlSecondsAfterFinished",
        ],
    )
    manifest = {
        "metadata": {"labels": {"app": "x"}},
        "spec": {
            "entrypoint": "python a.py",
            "rayClusterSpec": cluster,
            "ttlSecondsAfterFinished": 60,
        },
    }

    assert creation_metadata_release(applied, manifest) == {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "train", "namespace": "team-a"},
        "spec": {
            "entrypoint": "python a.py",
            "rayClusterSpec": cluster,
            "ttlSecondsAfterFinished": 60,
        },
    }


def test_no_release_for_a_held_field_the_kind_does_not_let_go():
    job = created(
        "Job",
        "batch/v1",
        {"template": {}, "podFailurePolicy": FAIL_ON_42},
        ["template", "podFailurePolicy"],
    )
    wrapper = created(
        "AppWrapper",
        "workload.codeflare.dev/v1beta2",
        {"components": [], "suspend": False},
        ["components", "suspend"],
    )
    sent = {"metadata": {"labels": {"app": "x"}}, "spec": {"template": {}}}

    assert creation_metadata_release(job, sent) is None
    assert creation_metadata_release(wrapper, {**sent, "spec": {}}) is None
