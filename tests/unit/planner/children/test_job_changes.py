"""What of a changed KaiwoJob can reach its existing batch Job, and the message for the rest."""

from __future__ import annotations

import copy
from typing import Any

from kaiwo_contracts.child_spec_fields import removable_spec_fields
from kaiwo_planner.domain.children.job_changes import (
    IMMUTABLE_JOB_SPEC_FIELDS,
    KUEUE_OWNED_SPEC_FIELDS,
    job_update,
    job_update_in,
    kueue_label_update,
    replacing_message,
)
from kaiwo_planner.domain.children.workload_children import ChildCondition, plan_children
from kaiwo_planner.domain.scheduling.gpu_allocation import GpuAllocation
from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.state.planning_context import PlanningContext

DESIRED = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "j", "labels": {"new": "label"}},
    "spec": {
        "ttlSecondsAfterFinished": 60,
        "suspend": True,
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "workload",
                        "image": "img:2",
                        "env": [{"name": "A", "value": "1"}],
                        "resources": {"limits": {"cpu": "4"}},
                    }
                ],
                "tolerations": [{"key": "k", "operator": "Exists"}],
            }
        },
    },
}
OBSERVED_TEMPLATE = {
    "metadata": {"labels": {"batch.kubernetes.io/controller-uid": "x"}},
    "spec": {
        "containers": [
            {
                "name": "workload",
                "image": "img:1",
                "env": [{"name": "A", "value": "1"}],
                "resources": {"limits": {"cpu": 4}},
                "terminationMessagePath": "/dev/termination-log",
            }
        ],
        "tolerations": [
            {"key": "kueue-flavor", "operator": "Exists"},
            {"key": "k", "operator": "Exists"},
        ],
    },
}
OBSERVED = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "j"},
    "spec": {
        "ttlSecondsAfterFinished": 3600,
        "suspend": False,
        "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "x"}},
        "template": OBSERVED_TEMPLATE,
    },
}


def test_immutable_fields_keep_their_observed_values_and_are_reported():
    update = job_update(DESIRED, OBSERVED)

    assert update.not_applied == ("spec.template.spec.containers[0].image",)
    # suspend is Kueue's once the Job exists; the selector the server made is not ours, nor
    # the label the server put on the template (decision 0131).
    assert update.manifest == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "labels": {"new": "label"}},
        "spec": {
            "ttlSecondsAfterFinished": 60,
            "template": {"metadata": {"labels": {}}, "spec": OBSERVED_TEMPLATE["spec"]},
        },
    }
    assert update.message == (
        "Not applied to the existing Job, because a Job's pod template, selector and "
        "completion settings cannot change after it is created: "
        "spec.template.spec.containers[0].image. "
        "Delete and re-create the KaiwoJob to run with these changes."
    )


def test_a_list_that_changed_length_is_reported_as_a_whole():
    observed = {"spec": {"template": {"spec": {"containers": [{"name": "a"}, {"name": "b"}]}}}}
    desired = {"spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}}

    assert job_update(desired, observed).not_applied == ("spec.template.spec.containers",)


def test_a_variable_and_a_pull_secret_dropped_from_the_spec_keep_the_observed_template():
    # The namespace's AIMNamespaceConfig deleted: its HF_TOKEN and pull secret are no longer
    # desired. The observed template holds more than the desired one anyway, so only the
    # named items tell the removal; applied, it would change the template (refused on every
    # plan, decision 0131).
    observed_template = {
        "metadata": {
            "labels": {
                "controller-uid": "u",
                "job-name": "j",
                "batch.kubernetes.io/controller-uid": "u",
                "batch.kubernetes.io/job-name": "j",
                "team": "a",
            }
        },
        "spec": {
            "imagePullSecrets": [{"name": "reg-a"}],
            "containers": [
                {
                    "name": "workload",
                    "image": "img:1",
                    "env": [
                        {"name": "A", "value": "1"},
                        {
                            "name": "HF_TOKEN",
                            "valueFrom": {"secretKeyRef": {"name": "hf-a", "key": "token"}},
                        },
                    ],
                }
            ],
        },
    }
    desired = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {
            "template": {
                "metadata": {"labels": {"team": "a"}},
                "spec": {
                    "containers": [
                        {"name": "workload", "image": "img:1", "env": [{"name": "A", "value": "1"}]}
                    ]
                },
            }
        },
    }

    update = job_update(desired, {**OBSERVED, "spec": {"template": observed_template}})

    assert update.not_applied == (
        "spec.template.spec.containers[0].env[name=HF_TOKEN]",
        "spec.template.spec.imagePullSecrets[name=reg-a]",
    )
    # The template as observed, but for the labels the API server put there: never sent,
    # so they stay the server's, and an apply of the desired template later (the config
    # made again as it was) does not take them away.
    assert update.manifest["spec"] == {
        "template": {
            "metadata": {"labels": {"team": "a"}},
            "spec": observed_template["spec"],
        }
    }
    assert update.message == (
        "Not applied to the existing Job, because a Job's pod template, selector and "
        "completion settings cannot change after it is created: "
        "spec.template.spec.containers[0].env[name=HF_TOKEN], "
        "spec.template.spec.imagePullSecrets[name=reg-a]. "
        "Delete and re-create the KaiwoJob to run with these changes."
    )


def test_an_observed_job_whose_spec_is_no_mapping_is_taken_as_observing_nothing():
    # Found by fuzzing planning: a damaged observed Job (spec a list) raised AttributeError.
    desired = {"spec": {"template": {"spec": {"containers": [{"name": "c"}]}}, "suspend": True}}
    for damaged in ([{"template": {}}], "spec", 7):
        update = job_update(desired, {"spec": damaged})
        assert update.not_applied == ("spec.template",)
        assert update.manifest == {"spec": {}}


def test_an_unchanged_job_reports_nothing():
    update = job_update(
        {**DESIRED, "spec": {**DESIRED["spec"], "template": OBSERVED_TEMPLATE}}, OBSERVED
    )

    assert update.not_applied == ()
    assert update.message == ""


def test_an_unchanged_job_keeps_its_own_manifest_but_suspend():
    as_created = {
        **DESIRED,
        "spec": {
            **DESIRED["spec"],
            "template": {
                "spec": {
                    "containers": [
                        {"name": "workload", "image": "img:1", "env": [{"name": "A", "value": "1"}]}
                    ]
                }
            },
        },
    }
    update = job_update(as_created, OBSERVED)

    assert update.not_applied == ()
    # Not the server's copy with its defaults: the same bytes as created, so no new apply.
    assert update.manifest["spec"] == {
        "ttlSecondsAfterFinished": 60,
        "template": as_created["spec"]["template"],
    }


def test_plan_children_reports_the_changes_an_existing_job_cannot_take(make_job):
    allocation = GpuAllocation(gpus=0, gpus_per_replica=0, replicas=1, vendor="amd")
    job = make_job({"image": "img:2"})
    first = plan_children(workload=make_job({"image": "img:1"}), allocation=allocation, config=None)
    observed = copy.deepcopy(first.desired[0])
    observed["spec"]["suspend"] = False  # admitted: it runs

    decision = plan_children(
        workload=job, allocation=allocation, config=None, observed_main_child=observed
    )

    (manifest,) = decision.desired
    assert manifest["spec"]["template"] == observed["spec"]["template"]
    assert decision.conditions == (
        ChildCondition(
            "ChildSpecApplied",
            "False",
            "JobFieldsImmutable",
            "Not applied to the existing Job, because a Job's pod template, selector and "
            "completion settings cannot change after it is created: "
            "spec.template.spec.containers[0].image. "
            "Delete and re-create the KaiwoJob to run with these changes.",
        ),
    )


def test_an_existing_jobs_update_is_kept_while_only_its_status_moves(make_job):
    """The main child as it exists is worked out once per spec version of the observed Job
    (its uid and generation), as long as its labels, annotations and spec are as they were:
    a Job whose status moved gets the very same manifest and condition. A label Kueue put
    on it, or a spec changed by hand without a new generation, is decided afresh."""
    allocation = GpuAllocation(gpus=0, gpus_per_replica=0, replicas=1, vendor="amd")
    job = make_job({"image": "img:2"})
    first = plan_children(workload=make_job({"image": "img:1"}), allocation=allocation, config=None)
    observed = copy.deepcopy(first.desired[0])
    observed["spec"]["suspend"] = False  # admitted: it runs
    observed["metadata"] |= {"uid": "job-uid", "generation": 1}
    context = PlanningContext.of(ClusterState())

    def planned(seen: dict[str, Any]) -> Any:
        return plan_children(
            workload=job,
            allocation=allocation,
            config=None,
            observed_main_child=seen,
            context=context,
        )

    before = planned(observed)
    moved = planned({**copy.deepcopy(observed), "status": {"active": 1}})
    assert moved.desired[0] is before.desired[0]
    assert moved.conditions[0] is before.conditions[0]
    labelled = copy.deepcopy(observed)
    labelled["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "low"
    assert (
        planned(labelled).desired[0]["metadata"]["labels"]
        != before.desired[0]["metadata"]["labels"]
    )
    by_hand = copy.deepcopy(observed)
    by_hand["spec"]["template"]["spec"]["containers"][0]["image"] = "img:2"
    assert planned(by_hand).conditions[0].status == "True"  # it matches the spec now


def test_a_job_waiting_in_its_queue_is_replaced_to_take_the_edit(make_job):
    # Decision 0129: nothing of a suspended Job runs, so it is pruned and made anew.
    allocation = GpuAllocation(gpus=0, gpus_per_replica=0, replicas=1, vendor="amd")
    first = plan_children(workload=make_job({"image": "img:1"}), allocation=allocation, config=None)
    (observed,) = first.desired
    assert observed["spec"]["suspend"] is True  # created waiting for Kueue

    edited = make_job({"image": "img:2"})
    decision = plan_children(
        workload=edited, allocation=allocation, config=None, observed_main_child=observed
    )

    assert decision.desired == ()
    assert decision.conditions == (
        ChildCondition(
            "ChildSpecApplied",
            "False",
            "Replacing",
            "The Job waiting in its queue is replaced by one made from the edited spec "
            "(spec.template.spec.containers[0].image), which waits in the queue anew",
        ),
    )
    # Once it is gone, the Job of the edited spec is made.
    (anew,) = plan_children(workload=edited, allocation=allocation, config=None).desired
    assert anew["spec"]["template"]["spec"]["containers"][0]["image"] == "img:2"


def test_replacing_names_the_first_few_paths():
    paths = [f"spec.template.spec.containers[{i}].image" for i in range(5)]

    assert replacing_message("Job", paths) == (
        "The Job waiting in its queue is replaced by one made from the edited spec "
        "(spec.template.spec.containers[0].image, spec.template.spec.containers[1].image, "
        "spec.template.spec.containers[2].image and 2 more), which waits in the queue anew"
    )


def _observed_job(generation: int, *, image: str = "img:1", phase: str = "") -> dict[str, Any]:
    job = copy.deepcopy(OBSERVED)
    job["metadata"] |= {"uid": "job-uid", "generation": generation}
    job["spec"]["template"]["spec"]["containers"][0]["image"] = image
    job["status"] = {"active": 1} if phase == "running" else {}
    return job


def test_a_job_update_is_kept_while_the_observed_job_keeps_its_spec_version():
    context = PlanningContext.of(ClusterState())
    first = job_update_in(context, DESIRED, _observed_job(1))

    # The Job's status moved: a new object, the same generation and spec.
    again = job_update_in(context, DESIRED, _observed_job(1, phase="running"))

    assert again is first
    assert again == job_update(DESIRED, _observed_job(1, phase="running"))


def test_a_job_update_is_worked_out_again_for_a_new_spec_or_a_new_desired_job():
    context = PlanningContext.of(ClusterState())
    first = job_update_in(context, DESIRED, _observed_job(1))

    # The spec changed and the API server bumped the generation: the image now matches.
    newer = job_update_in(context, DESIRED, _observed_job(2, image="img:2"))
    assert newer.not_applied == ()
    # A hand-made observation that changes the template without a new generation.
    forged = job_update_in(context, DESIRED, _observed_job(1, image="img:3"))
    assert forged.not_applied == ("spec.template.spec.containers[0].image",)
    assert forged.manifest["spec"]["template"]["spec"]["containers"][0]["image"] == "img:3"
    # Another desired Job (a new spec version of the KaiwoJob): not the kept one.
    desired = copy.deepcopy(DESIRED)
    other = job_update_in(context, desired, _observed_job(1))
    assert other is not first
    assert other == first


def test_an_observed_job_without_uid_or_generation_is_compared_each_time():
    context = PlanningContext.of(ClusterState())
    anonymous = copy.deepcopy(OBSERVED)

    assert job_update_in(context, DESIRED, anonymous) is not job_update_in(
        context, DESIRED, anonymous
    )


# ---------------------------------------------------------------- Kueue's labels

QUEUE = "kueue.x-k8s.io/queue-name"
PRIORITY = "kueue.x-k8s.io/priority-class"


def kueue_child(labels: dict[str, str], *, suspend: bool | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"entrypoint": "python train.py"}
    if suspend is not None:
        spec["suspend"] = suspend
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "r", "labels": {"app": "r", **labels}},
        "spec": spec,
    }


def test_a_suspended_child_takes_a_new_queue_and_priority_class():
    desired = kueue_child({QUEUE: "b", PRIORITY: "high"})
    observed = kueue_child({QUEUE: "a", PRIORITY: "low"}, suspend=True)

    assert kueue_label_update(desired, observed) == (desired, ())


def test_a_running_child_keeps_its_queue_and_gains_no_priority_class():
    # Kueue's webhook refuses both on a child that is not suspended.
    desired = kueue_child({QUEUE: "b", PRIORITY: "high"})
    observed = kueue_child({QUEUE: "a"}, suspend=False)

    manifest, kept = kueue_label_update(desired, observed)

    assert manifest["metadata"]["labels"] == {"app": "r", QUEUE: "a"}
    assert kept == (f"metadata.labels[{QUEUE}]", f"metadata.labels[{PRIORITY}]")
    assert desired["metadata"]["labels"][QUEUE] == "b"  # the desired child is not modified


def test_a_running_child_may_change_its_priority_class():
    desired = kueue_child({QUEUE: "a", PRIORITY: "high"})
    observed = kueue_child({QUEUE: "a", PRIORITY: "low"})  # no suspend: running, to Kueue

    assert kueue_label_update(desired, observed) == (desired, ())


def test_no_child_loses_its_priority_class():
    desired = kueue_child({QUEUE: "a"})
    observed = kueue_child({QUEUE: "a", PRIORITY: "low"}, suspend=True)

    manifest, kept = kueue_label_update(desired, observed)

    assert manifest["metadata"]["labels"] == {"app": "r", QUEUE: "a", PRIORITY: "low"}
    assert kept == (f"metadata.labels[{PRIORITY}]",)


def test_the_job_message_names_both_the_template_and_the_labels():
    desired = copy.deepcopy(DESIRED)
    desired["metadata"]["labels"] = {"new": "label", QUEUE: "b"}
    observed = copy.deepcopy(OBSERVED)
    observed["metadata"]["labels"] = {QUEUE: "a"}

    update = job_update(desired, observed)

    assert update.manifest["metadata"]["labels"] == {"new": "label", QUEUE: "a"}
    assert update.labels_not_applied == (f"metadata.labels[{QUEUE}]",)
    assert update.message == (
        "Not applied to the existing Job, because a Job's pod template, selector and "
        "completion settings cannot change after it is created: "
        "spec.template.spec.containers[0].image; and Kueue keeps a running workload in its "
        "queue and without a priority class it started without, and never takes a priority "
        "class away: metadata.labels[kueue.x-k8s.io/queue-name]. Delete and re-create the "
        "KaiwoJob to run with these changes."
    )


def test_a_held_update_is_decided_again_when_kueues_labels_move():
    # Labels change without a new generation: the kept update must not outlive them.
    context = PlanningContext.of(ClusterState())
    desired = copy.deepcopy(DESIRED)
    desired["metadata"]["labels"] = {QUEUE: "a"}
    observed = copy.deepcopy(OBSERVED)
    observed["metadata"] = {"name": "j", "uid": "u", "generation": 2, "labels": {}}
    first = job_update_in(context, desired, observed)
    observed["metadata"]["labels"] = {QUEUE: "a", PRIORITY: "low"}

    second = job_update_in(context, desired, observed)

    assert first.labels_not_applied == ()
    assert second.labels_not_applied == (f"metadata.labels[{PRIORITY}]",)
    assert second.manifest["metadata"]["labels"] == {QUEUE: "a", PRIORITY: "low"}


def test_a_starting_job_keeps_its_queue_held_or_not():
    """Kueue admits the Workload, then unsuspends the Job: a Job observed suspended beside an
    admitted Workload is starting, and its queue label stays, as on a running Job (0129)."""
    context = PlanningContext.of(ClusterState())
    desired = copy.deepcopy(DESIRED)
    desired["metadata"]["labels"] = {QUEUE: "b"}
    observed = copy.deepcopy(OBSERVED)
    observed["metadata"] = {"name": "j", "uid": "u", "generation": 2, "labels": {QUEUE: "a"}}
    observed["spec"]["suspend"] = True

    waiting = job_update_in(context, desired, observed)
    starting = job_update_in(context, desired, observed, admitted=True)

    assert waiting.labels_not_applied == ()
    assert waiting.manifest["metadata"]["labels"] == {QUEUE: "b"}
    assert starting.labels_not_applied == (f"metadata.labels[{QUEUE}]",)
    assert starting.manifest["metadata"]["labels"] == {QUEUE: "a"}
    assert job_update(desired, observed, admitted=True) == starting


def test_the_templates_are_compared_once_for_a_job_waiting_and_then_starting():
    """Kueue's admission flips ``admitted`` once in a Job's life; the comparison of the
    templates, the largest cost of planning a Job, does not depend on it and is not done
    again (its spec is the very same object), while Kueue's labels are decided anew."""
    context = PlanningContext.of(ClusterState())
    desired = copy.deepcopy(DESIRED)
    desired["metadata"]["labels"] = {QUEUE: "b"}
    observed = _observed_job(1)
    observed["metadata"]["labels"] = {QUEUE: "a"}
    observed["spec"]["suspend"] = True

    waiting = job_update_in(context, desired, observed)
    starting = job_update_in(context, desired, observed, admitted=True)

    assert starting.manifest["spec"] is waiting.manifest["spec"]
    assert (
        starting.not_applied == waiting.not_applied == ("spec.template.spec.containers[0].image",)
    )
    assert waiting.manifest["metadata"]["labels"] == {QUEUE: "b"}
    assert starting.manifest["metadata"]["labels"] == {QUEUE: "a"}
    assert starting == job_update(desired, observed, admitted=True)
    assert waiting == job_update(desired, observed)


def test_no_field_the_executor_may_take_from_a_job_is_one_the_planner_keeps():
    # The executor takes these from a running Job once the KaiwoJob no longer sets them
    # (decision 0133): one the API server refuses to change would be refused on every update.
    removable = removable_spec_fields("batch/v1", "Job")
    assert removable == {"activeDeadlineSeconds", "ttlSecondsAfterFinished", "backoffLimit"}
    assert not removable & {*IMMUTABLE_JOB_SPEC_FIELDS, *KUEUE_OWNED_SPEC_FIELDS}
    assert removable_spec_fields("apps/v1", "Deployment") == frozenset()


PARTIAL = "kueue.x-k8s.io/job-min-parallelism"


def partial_job(*, parallelism: int, suspend: bool) -> dict[str, Any]:
    """A Job of ``parallelism: 4`` wanted, allowed to run with 2 (Kueue's partial admission)."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "annotations": {PARTIAL: "2"}},
        "spec": {"parallelism": parallelism, "suspend": suspend, "completions": 4},
    }


def test_a_running_partially_admitted_jobs_parallelism_is_kueues() -> None:
    """Kueue admitted 2 of the 4 pods and set ``parallelism: 2`` as it unsuspended the Job;
    its webhook refuses any change of it while the Job runs. The operator keeps Kueue's value
    (decision 0153); before, it put 4 back, and the API server refused the write
    ("cannot change when partial admission is enabled and the job is not suspended")."""
    desired = partial_job(parallelism=4, suspend=True)
    update = job_update(desired, partial_job(parallelism=2, suspend=False), admitted=True)
    assert update.manifest["spec"]["parallelism"] == 2
    assert update.not_applied == ()


EQUAL = "kueue.x-k8s.io/job-completions-equal-parallelism"


def indexed_partial_job(*, count: int, suspend: bool, equal: str = "true") -> dict[str, Any]:
    """An Indexed Job of 4 pods and 4 completions wanted, allowed to run with 2, whose
    completions Kueue keeps equal to its parallelism; ``count``: both, as observed."""
    job = partial_job(parallelism=count, suspend=suspend)
    job["metadata"]["annotations"][EQUAL] = equal
    job["spec"] |= {"completions": count, "completionMode": "Indexed"}
    return job


def test_a_running_partially_admitted_jobs_completions_kept_equal_are_kueues() -> None:
    """Kueue admitted 2 of 4 pods and set ``parallelism`` and ``completions`` to 2 (decision
    0157): both are kept, and the completions are not told as a change the Job could not take.
    Before, ``ChildSpecApplied`` said "cannot change after it is created: spec.completions"
    of a Job running as its user asked."""
    desired = indexed_partial_job(count=4, suspend=True)
    update = job_update(desired, indexed_partial_job(count=2, suspend=False), admitted=True)
    assert (update.manifest["spec"]["parallelism"], update.manifest["spec"]["completions"]) == (
        2,
        2,
    )
    assert update.not_applied == ()
    assert update.message == ""


def test_completions_not_kept_equal_by_kueue_stay_the_operators() -> None:
    """Without the annotation set true (Go's ``ParseBool``: ``"false"``, ``"yes"`` are not),
    or while the Job waits suspended, completions observed otherwise than desired are an edit
    the Job could not take, told as before."""
    desired = indexed_partial_job(count=4, suspend=True)
    for equal in ("false", "yes"):
        update = job_update(desired, indexed_partial_job(count=2, suspend=False, equal=equal))
        assert update.manifest["spec"]["parallelism"] == 2
        assert update.manifest["spec"]["completions"] == 2
        assert update.not_applied == ("spec.completions",)
    for equal in ("1", "t", "TRUE", "True"):
        update = job_update(desired, indexed_partial_job(count=2, suspend=False, equal=equal))
        assert update.not_applied == (), equal
    waiting = job_update(desired, indexed_partial_job(count=3, suspend=True))
    assert waiting.not_applied == ("spec.completions",)
    assert waiting.manifest["spec"]["parallelism"] == 4


def test_a_suspended_or_unannotated_jobs_parallelism_stays_the_operators() -> None:
    """Suspended (waiting, or evicted: Kueue put its own count back), the Job takes the
    desired parallelism; without the annotation a changed parallelism is drift, put back."""
    desired = partial_job(parallelism=4, suspend=True)
    waiting = job_update(desired, partial_job(parallelism=3, suspend=True))
    assert waiting.manifest["spec"]["parallelism"] == 4
    unannotated = partial_job(parallelism=2, suspend=False)
    unannotated["metadata"] = {"name": "j"}
    assert job_update(desired, unannotated).manifest["spec"]["parallelism"] == 4


# ------------------------------------------------- Kueue's Job annotations of a running Job


def annotated_job(annotations: dict[str, str], *, suspend: bool) -> dict[str, Any]:
    """An Indexed Job of 4 pods and 4 completions, Kueue's Job annotations as given."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "uid": "u", "generation": 2, "annotations": annotations},
        "spec": {
            "parallelism": 4,
            "completions": 4,
            "completionMode": "Indexed",
            "suspend": suspend,
        },
    }


def test_a_running_job_keeps_kueues_annotations_it_runs_with_and_says_so() -> None:
    """Kueue 0.17 stops a running Job and queues it anew when its minimum changes (measured:
    every pod started again), and its webhook refuses the completions annotation added to a
    running Job (measured: ``ApplyRefused`` on every plan). Both are kept as the Job has them,
    and told with the value kept and the one asked (decision 0162)."""
    desired = annotated_job({PARTIAL: "3", EQUAL: "true"}, suspend=True)
    observed = annotated_job({PARTIAL: "2"}, suspend=False)

    update = job_update(desired, observed)

    assert update.manifest["metadata"]["annotations"] == {PARTIAL: "2"}
    assert update.annotations_not_applied == (
        'metadata.annotations[kueue.x-k8s.io/job-min-parallelism] ("2" kept, "3" asked)',
        "metadata.annotations[kueue.x-k8s.io/job-completions-equal-parallelism] "
        '(none kept, "true" asked)',
    )
    assert update.not_applied == ()
    assert update.message == (
        "Not applied to the existing Job, because Kueue stops a running Job and queues it anew "
        "when its minimum of pods changes, and refuses a change of whether its completions "
        "follow its parallelism while it runs: "
        'metadata.annotations[kueue.x-k8s.io/job-min-parallelism] ("2" kept, "3" asked), '
        "metadata.annotations[kueue.x-k8s.io/job-completions-equal-parallelism] "
        '(none kept, "true" asked). Delete and re-create the KaiwoJob to run with these '
        "changes."
    )
    assert desired["metadata"]["annotations"] == {PARTIAL: "3", EQUAL: "true"}


def test_annotations_removed_from_the_spec_stay_on_a_running_job() -> None:
    """Taken away, the minimum would restart the Job as a changed one does, and the
    completions annotation would be refused: both are sent as the Job has them."""
    desired = annotated_job({}, suspend=True)
    del desired["metadata"]["annotations"]
    observed = annotated_job({PARTIAL: "2", EQUAL: "true"}, suspend=False)

    update = job_update(desired, observed)

    assert update.manifest["metadata"]["annotations"] == {PARTIAL: "2", EQUAL: "true"}
    assert update.annotations_not_applied == (
        'metadata.annotations[kueue.x-k8s.io/job-min-parallelism] ("2" kept, none asked)',
        "metadata.annotations[kueue.x-k8s.io/job-completions-equal-parallelism] "
        '("true" kept, none asked)',
    )


def test_a_new_spelling_of_the_same_minimum_is_kept_too() -> None:
    """Kueue's webhook judges a changed minimum again against the pods it admitted: ``"02"``
    on a Job running 2 of its pods would be refused ("should be between 0 and 1")."""
    update = job_update(
        annotated_job({PARTIAL: "02"}, suspend=True), annotated_job({PARTIAL: "2"}, suspend=False)
    )
    assert update.manifest["metadata"]["annotations"] == {PARTIAL: "2"}
    assert len(update.annotations_not_applied) == 1


def test_a_waiting_job_takes_kueues_annotations_and_a_starting_one_keeps_them() -> None:
    """Suspended and not admitted, the Job takes the edit (measured: Kueue updated the
    Workload's ``minCount`` in place and admitted the Job with the new minimum). Suspended
    beside an admitted Workload, it is starting: kept as a running one."""
    desired = annotated_job({PARTIAL: "2", EQUAL: "true"}, suspend=True)
    observed = annotated_job({PARTIAL: "3"}, suspend=True)

    waiting = job_update(desired, observed)
    starting = job_update(desired, observed, admitted=True)

    assert waiting.manifest["metadata"]["annotations"] == {PARTIAL: "2", EQUAL: "true"}
    assert waiting.annotations_not_applied == ()
    assert waiting.message == ""
    assert starting.manifest["metadata"]["annotations"] == {PARTIAL: "3"}
    assert len(starting.annotations_not_applied) == 2


def test_a_running_job_whose_annotations_match_takes_the_desired_metadata_as_it_is() -> None:
    desired = annotated_job({PARTIAL: "2", EQUAL: "true"}, suspend=True)
    update = job_update(desired, annotated_job({PARTIAL: "2", EQUAL: "true"}, suspend=False))
    assert update.manifest["metadata"] is desired["metadata"]
    assert update.annotations_not_applied == ()


def test_a_held_update_is_decided_again_when_kueues_annotations_move() -> None:
    """Annotations change without a new generation: a waiting Job's update kept before its
    annotations changed must not be reused for them."""
    context = PlanningContext.of(ClusterState())
    desired = annotated_job({PARTIAL: "3"}, suspend=True)
    observed = annotated_job({PARTIAL: "3"}, suspend=False)
    first = job_update_in(context, desired, observed)
    observed["metadata"]["annotations"] = {PARTIAL: "2"}

    second = job_update_in(context, desired, observed)

    assert first.annotations_not_applied == ()
    assert second.manifest["metadata"]["annotations"] == {PARTIAL: "2"}
    assert second.annotations_not_applied == (
        'metadata.annotations[kueue.x-k8s.io/job-min-parallelism] ("2" kept, "3" asked)',
    )


def test_plan_children_tells_kueues_annotations_a_running_job_keeps(make_job):
    """The condition says what was kept: before, it said "The Job matches the workload's spec"
    while Kueue restarted the Job or refused the update."""
    allocation = GpuAllocation(gpus=4, gpus_per_replica=1, replicas=4, vendor="amd")

    def sweep(minimum: str) -> Any:
        return make_job(
            {
                "image": "img:1",
                "job": {
                    "metadata": {"annotations": {PARTIAL: minimum}},
                    "spec": {"parallelism": 4, "completions": 4, "completionMode": "Indexed"},
                },
            }
        )

    first = plan_children(workload=sweep("2"), allocation=allocation, config=None)
    observed = copy.deepcopy(first.desired[0])
    observed["spec"]["suspend"] = False  # admitted: it runs

    decision = plan_children(
        workload=sweep("3"), allocation=allocation, config=None, observed_main_child=observed
    )

    (manifest,) = decision.desired
    assert manifest["metadata"]["annotations"] == {PARTIAL: "2"}
    assert decision.conditions == (
        ChildCondition(
            "ChildSpecApplied",
            "False",
            "JobFieldsImmutable",
            "Not applied to the existing Job, because Kueue stops a running Job and queues it "
            "anew when its minimum of pods changes, and refuses a change of whether its "
            "completions follow its parallelism while it runs: "
            'metadata.annotations[kueue.x-k8s.io/job-min-parallelism] ("2" kept, "3" asked). '
            "Delete and re-create the KaiwoJob to run with these changes.",
        ),
    )
