"""Plans that arrive after the cluster moved on: they must not undo newer changes.

The planner plans from what it has observed; by the time the executor carries a plan out,
others may have written since (the executor itself for a newer plan, Kueue unsuspending a
Job). Found by the pipeline integration test, where such late plans made the status and the
Job's ``suspend`` flip back and forth for ever.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kaiwo_contracts.events.plans import PlanDecidedV1
from kaiwo_contracts.plans import ObjectRef
from kaiwo_executor.step_outcomes import STALE_STATUS
from kaiwo_kube import resources

from tests.managed_fields import field_managers_of

JOB_REF = ObjectRef(api_version="batch/v1", kind="Job", name="train", namespace="team-a")


def outcomes(execution: Any) -> list[tuple[str, str, str, str | None]]:
    return [(a.operation, a.target.display(), a.outcome, a.reason) for a in execution.actions]


def owner_resource_version(harness: Any) -> str:
    owner = harness.find("kaiwo.silogen.ai/v1alpha1", "KaiwoJob", "train")
    return str(owner["metadata"]["resourceVersion"])


async def kueue_unsuspends(harness: Any) -> None:
    """Kueue admits the Job: it unsuspends it with its own field manager."""
    await harness.kube.merge_patch(
        resources.JOB,
        "train",
        {"spec": {"suspend": False}},
        namespace="team-a",
        field_manager="kueue-admission",
    )


async def test_a_status_planned_from_an_older_owner_version_is_not_written(harness: Any) -> None:
    planned_from = owner_resource_version(harness)
    pending = harness.plan([], status={"status": "PENDING"}).model_copy(
        update={"observed_resource_version": planned_from}
    )
    await harness.run(pending, plan_id="plan-1")
    assert harness.find("kaiwo.silogen.ai/v1alpha1", "KaiwoJob", "train")["status"] == {
        "status": "PENDING"
    }

    # Planned from the same (now old) version, but carried out after plan-1's write.
    late = harness.plan([], status={"status": "DOWNLOADING"}).model_copy(
        update={"observed_resource_version": planned_from}
    )
    execution = await harness.run(late, plan_id="plan-2")

    assert harness.find("kaiwo.silogen.ai/v1alpha1", "KaiwoJob", "train")["status"] == {
        "status": "PENDING"
    }
    assert outcomes(execution) == [("status", "KaiwoJob/team-a/train", "unchanged", STALE_STATUS)]

    # The plan of the current version is written.
    current = harness.plan([], status={"status": "STARTING"}).model_copy(
        update={"observed_resource_version": owner_resource_version(harness)}
    )
    execution = await harness.run(current, plan_id="plan-3")
    assert harness.find("kaiwo.silogen.ai/v1alpha1", "KaiwoJob", "train")["status"] == {
        "status": "STARTING"
    }
    assert outcomes(execution) == [("status", "KaiwoJob/team-a/train", "applied", None)]


async def test_a_child_named_absent_by_a_late_plan_is_not_applied_over_newer_changes(
    harness: Any,
) -> None:
    job = harness.job()
    job["spec"]["suspend"] = True
    await harness.run(harness.plan([job]), plan_id="plan-1")
    await kueue_unsuspends(harness)

    # A plan made before the Job was observed names it absent, with the manifest of plan-1.
    execution = await harness.run(harness.plan([job]), plan_id="plan-2", absent=(JOB_REF,))

    assert harness.find("batch/v1", "Job", "train")["spec"]["suspend"] is False
    assert outcomes(execution) == [("apply", "Job/team-a/train", "unchanged", None)]

    # Deleted by hand: the same kind of plan creates it again.
    harness.fake.store.delete(harness.served("batch/v1", "Job"), namespace="team-a", name="train")
    execution = await harness.run(harness.plan([job]), plan_id="plan-3", absent=(JOB_REF,))
    assert harness.find("batch/v1", "Job", "train")["spec"]["suspend"] is True
    assert outcomes(execution) == [("apply", "Job/team-a/train", "applied", None)]


async def test_a_child_whose_labels_someone_removed_gets_them_back_and_nothing_else(
    harness: Any,
) -> None:
    """Decision 0139: without ``app.kubernetes.io/managed-by`` the watcher no longer sees
    the child, so the planner names it absent; the executor found it there and left it so,
    for good. Only the missing label keys go back: Kueue's ``suspend`` and a label of the
    user's own stay as they are."""
    job = harness.job()
    job["metadata"]["labels"]["app.kubernetes.io/managed-by"] = "kaiwo"
    job["spec"]["suspend"] = True
    await harness.run(harness.plan([job]), plan_id="plan-1")
    await kueue_unsuspends(harness)
    await harness.kube.merge_patch(
        resources.JOB,
        "train",
        {"metadata": {"labels": {"app.kubernetes.io/managed-by": None, "mine": "x"}}},
        namespace="team-a",
        field_manager="kubectl-edit",
    )

    execution = await harness.run(harness.plan([job]), plan_id="plan-2", absent=(JOB_REF,))

    found = harness.find("batch/v1", "Job", "train")
    assert found["metadata"]["labels"] == {
        **job["metadata"]["labels"],
        "mine": "x",
    }
    assert found["spec"]["suspend"] is False
    assert outcomes(execution) == [("apply", "Job/team-a/train", "applied", None)]

    # With every label there, a late plan's absent child is left as it is (no write).
    version = found["metadata"]["resourceVersion"]
    execution = await harness.run(harness.plan([job]), plan_id="plan-3", absent=(JOB_REF,))
    assert harness.find("batch/v1", "Job", "train")["metadata"]["resourceVersion"] == version
    assert outcomes(execution) == [("apply", "Job/team-a/train", "unchanged", None)]


async def test_a_plan_carried_out_again_after_kueue_admitted_its_job_leaves_suspend_alone(
    harness: Any,
) -> None:
    """The executor created the Job and died before remembering it; the plan comes back (to
    it or another replica) after Kueue admitted the Job. Found by the active-active test on
    the real API server: the Job was suspended again, its Pod deleted, and it never ran."""
    job = harness.job()
    job["spec"]["suspend"] = True
    plan = harness.plan([job])
    decision = PlanDecidedV1.of(plan, absent=(JOB_REF,))
    await harness.executor().execute(decision, plan_id="plan-1")  # never remembered
    await kueue_unsuspends(harness)

    execution = await harness.run(plan, plan_id="plan-1", absent=(JOB_REF,))

    found = harness.find("batch/v1", "Job", "train")
    assert found["spec"]["suspend"] is False
    assert field_managers_of(found, "spec", "suspend") == {"kueue-admission"}
    assert outcomes(execution) == [("apply", "Job/team-a/train", "applied", None)]

    # Not yet admitted, the same plan carried out again keeps the Job suspended.
    harness.fake.store.delete(harness.served("batch/v1", "Job"), namespace="team-a", name="train")
    await harness.executor().execute(decision, plan_id="plan-2")
    await harness.run(plan, plan_id="plan-2", absent=(JOB_REF,))
    assert harness.find("batch/v1", "Job", "train")["spec"]["suspend"] is True


async def test_a_plan_retried_after_a_later_plan_of_its_owner_is_superseded(
    harness: Any,
) -> None:
    earlier, later = (
        datetime(2025, 3, 1, 12, 0, tzinfo=UTC),
        datetime(2025, 3, 1, 12, 1, tzinfo=UTC),
    )
    await harness.run(
        harness.plan([harness.job(image="busybox:1.37")]),
        plan_id="plan-8",
        sequence=8,
        planned_at=later,
    )
    writes_before = sum(harness.writes().values())

    # Plan 7 was nak'ed for a retry and comes back after plan 8 was carried out.
    late = await harness.run(
        harness.plan([harness.job(image="busybox:1.36")]),
        plan_id="plan-7",
        sequence=7,
        planned_at=earlier,
    )

    assert late.skipped and late.superseded
    assert late.actions == ()
    assert sum(harness.writes().values()) == writes_before
    job = harness.find("batch/v1", "Job", "train")
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox:1.37"


async def test_a_re_created_plan_stream_does_not_make_new_plans_look_superseded(
    harness: Any,
) -> None:
    await harness.run(
        harness.plan([harness.job(image="busybox:1.37")]),
        plan_id="plan-900",
        sequence=900,
        planned_at=datetime(2025, 3, 1, 12, 0, tzinfo=UTC),
    )

    # The stream was deleted and created again: sequences start at 1, time goes on.
    after_reset = await harness.run(
        harness.plan([harness.job(image="busybox:1.38")]),
        plan_id="plan-1",
        sequence=1,
        planned_at=datetime(2025, 3, 1, 13, 0, tzinfo=UTC),
    )

    assert not after_reset.skipped
    job = harness.find("batch/v1", "Job", "train")
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox:1.38"
