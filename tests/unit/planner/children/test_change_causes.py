"""A kept change of a running child names the configuration it comes from (decision 0144).

Each test plans a workload once to make its child, takes that child as running, and plans
again with the configuration (or the workload) changed: the ``ChildSpecApplied`` message is
written out by hand.
"""

from __future__ import annotations

import copy
from typing import Any

from kaiwo_planner.domain.children.workload_children import ChildrenDecision, plan_children
from kaiwo_planner.domain.scheduling.gpu_allocation import GpuAllocation

ONE_GPU = GpuAllocation(gpus=1, gpus_per_replica=1, replicas=1, vendor="amd")
JOB_KEPT = (
    "Not applied to the existing Job, because a Job's pod template, selector and completion "
    "settings cannot change after it is created: "
)
JOB_END = ". Delete and re-create the KaiwoJob to run with these changes."
RAY_JOB_KEPT = (
    "Not applied to the existing RayJob, because a running RayJob keeps the spec it started "
    "with (changed, Kueue would stop it and queue it again, and Ray would start the job "
    "over): "
)
RAY_END = ". Delete and re-create the workload to run with these changes."
TENANT = {
    "images": {"imagePullSecrets": ["reg-a"]},
    "credentials": {"huggingFaceToken": {"secretName": "hf-a", "secretKey": "t"}},
}
TENANT_EDITED = {
    "images": {"imagePullSecrets": ["reg-a", "reg-b"]},
    "credentials": {"huggingFaceToken": {"secretName": "hf-b", "secretKey": "t"}},
}


def running(decision: ChildrenDecision, kind: str) -> dict[str, Any]:
    """The ``kind`` child of ``decision`` as the API server holds it once Kueue let it run."""
    (child,) = [copy.deepcopy(c) for c in decision.desired if c["kind"] == kind]
    child["metadata"]["uid"] = "child-uid"
    child["spec"]["suspend"] = False
    return child


def applied_message(decision: ChildrenDecision) -> str:
    (applied,) = [c for c in decision.conditions if c.type == "ChildSpecApplied"]
    return applied.message


def test_a_namespace_configs_edit_kept_by_a_running_job_names_the_config(
    make_job, make_namespace_config
):
    job = make_job({"image": "busybox:1", "gpus": 1})
    made = plan_children(
        workload=job,
        allocation=ONE_GPU,
        config=None,
        namespace_config=make_namespace_config(TENANT),
    )

    edited = plan_children(
        workload=job,
        allocation=ONE_GPU,
        config=None,
        namespace_config=make_namespace_config(TENANT_EDITED),
        observed_main_child=running(made, "Job"),
    )

    assert applied_message(edited) == (
        JOB_KEPT + "spec.template.spec.containers[0].env[0].valueFrom.secretKeyRef.name, "
        "spec.template.spec.imagePullSecrets (each from AIMNamespaceConfig team-a/aim, "
        "changed since the Job was made)" + JOB_END
    )


def test_a_namespace_config_deleted_under_a_running_job_is_named_as_gone(
    make_job, make_namespace_config
):
    """What the Job holds and nothing gives now came from the namespace's config or from the
    workload's spec, which no longer says (there is no history): both are named."""
    job = make_job({"image": "busybox:1", "gpus": 1})
    made = plan_children(
        workload=job,
        allocation=ONE_GPU,
        config=None,
        namespace_config=make_namespace_config(TENANT),
    )

    deleted = plan_children(
        workload=job,
        allocation=ONE_GPU,
        config=None,
        namespace_config=None,
        observed_main_child=running(made, "Job"),
    )

    assert applied_message(deleted) == (
        JOB_KEPT + "spec.template.spec.containers[0].env[name=HF_TOKEN], "
        "spec.template.spec.imagePullSecrets[name=reg-a] (each given by neither the "
        "workload's spec nor an AIMNamespaceConfig any more: namespace team-a has none now)"
        + JOB_END
    )


def test_the_workloads_own_edit_is_named_first_and_bare(make_job, make_namespace_config):
    made = plan_children(
        workload=make_job({"image": "busybox:1", "gpus": 1}),
        allocation=ONE_GPU,
        config=None,
        namespace_config=make_namespace_config(TENANT),
    )

    both = plan_children(
        workload=make_job({"image": "busybox:2", "gpus": 1}),
        allocation=ONE_GPU,
        config=None,
        namespace_config=None,
        observed_main_child=running(made, "Job"),
    )

    assert applied_message(both) == (
        JOB_KEPT + "spec.template.spec.containers[0].image; "
        "spec.template.spec.containers[0].env[name=HF_TOKEN], "
        "spec.template.spec.imagePullSecrets[name=reg-a] (each given by neither the "
        "workload's spec nor an AIMNamespaceConfig any more: namespace team-a has none now)"
        + JOB_END
    )


def test_the_workloads_own_token_is_its_own(make_job, make_namespace_config):
    """``HF_TOKEN`` in ``spec.env`` is the workload's, even while its namespace's config
    gives one."""
    own = {"name": "HF_TOKEN", "value": "mine"}
    made = plan_children(
        workload=make_job(
            {"image": "busybox:1", "env": [own], "imagePullSecrets": [{"name": "mine"}]}
        ),
        allocation=ONE_GPU,
        config=None,
        namespace_config=make_namespace_config(TENANT),
    )

    edited = plan_children(
        workload=make_job({"image": "busybox:1", "env": [{**own, "value": "new"}]}),
        allocation=ONE_GPU,
        config=None,
        namespace_config=make_namespace_config(TENANT),
        observed_main_child=running(made, "Job"),
    )

    # Its own variable, changed: the workload's alone. Its own pull secret, dropped: the
    # namespace's config might have given it as well, so both are named.
    assert applied_message(edited) == (
        JOB_KEPT + "spec.template.spec.containers[0].env[0].value; "
        "spec.template.spec.imagePullSecrets[name=mine] (given by neither the workload's spec "
        "nor AIMNamespaceConfig team-a/aim any more)" + JOB_END
    )


def test_kaiwo_config_edits_kept_by_a_running_job_name_the_kaiwo_config(make_job, make_config):
    """The scheduler name and the GPU taint's toleration are the KaiwoConfig's."""
    job = make_job({"image": "busybox:1", "gpus": 1})
    made = plan_children(workload=job, allocation=ONE_GPU, config=make_config())

    edited = plan_children(
        workload=job,
        allocation=ONE_GPU,
        config=make_config(
            {"scheduling": {"kubeSchedulerName": "other"}, "nodes": {"addTaintsToGpuNodes": True}}
        ),
        observed_main_child=running(made, "Job"),
    )

    assert applied_message(edited) == (
        JOB_KEPT + "spec.template.spec.schedulerName, spec.template.spec.tolerations "
        "(each from KaiwoConfig kaiwo, changed since the Job was made)" + JOB_END
    )


def test_a_waiting_job_replaced_for_a_namespace_configs_edit_names_the_config(
    make_job, make_namespace_config
):
    job = make_job({"image": "busybox:1", "gpus": 1})
    made = plan_children(
        workload=job,
        allocation=ONE_GPU,
        config=None,
        namespace_config=make_namespace_config(TENANT),
    )
    waiting = running(made, "Job")
    waiting["spec"]["suspend"] = True

    edited = plan_children(
        workload=job,
        allocation=ONE_GPU,
        config=None,
        namespace_config=make_namespace_config(TENANT_EDITED),
        observed_main_child=waiting,
    )

    assert applied_message(edited) == (
        "The Job waiting in its queue is replaced by one made from the edited spec "
        "(spec.template.spec.containers[0].env[0].valueFrom.secretKeyRef.name, "
        "spec.template.spec.imagePullSecrets (each from AIMNamespaceConfig team-a/aim, "
        "changed since the Job was made)), which waits in the queue anew"
    )


def test_a_running_ray_job_names_the_configs_it_keeps_fields_of(
    make_job, make_namespace_config, make_config
):
    """The same rule for a running RayJob: its pods' pull secrets and ``HF_TOKEN`` are the
    namespace's, the default Ray image of a workload that names none the KaiwoConfig's."""
    job = make_job({"ray": True, "gpus": 1})
    made = plan_children(
        workload=job,
        allocation=ONE_GPU,
        config=make_config(),
        namespace_config=make_namespace_config({"images": {"imagePullSecrets": ["reg-a"]}}),
    )

    edited = plan_children(
        workload=job,
        allocation=ONE_GPU,
        config=make_config({"ray": {"defaultRayImage": "rayproject/ray:9"}}),
        namespace_config=None,
        observed_main_child=running(made, "RayJob"),
    )

    head = "spec.rayClusterSpec.headGroupSpec.template.spec"
    worker = "spec.rayClusterSpec.workerGroupSpecs[0].template.spec"
    assert applied_message(edited) == (
        RAY_JOB_KEPT + f"{head}.containers[0].image, {worker}.containers[0].image "
        "(each from KaiwoConfig kaiwo, changed since the RayJob was made); "
        f"{head}.imagePullSecrets[name=reg-a], {worker}.imagePullSecrets[name=reg-a] "
        "(each given by neither the workload's spec nor an AIMNamespaceConfig any more: "
        "namespace team-a has none now)" + RAY_END
    )


def test_a_workloads_own_image_is_its_own_whatever_the_kaiwo_config_says(make_job, make_config):
    made = plan_children(
        workload=make_job({"ray": True, "image": "ray:1"}), allocation=ONE_GPU, config=None
    )

    edited = plan_children(
        workload=make_job({"ray": True, "image": "ray:2"}),
        allocation=ONE_GPU,
        config=make_config({"ray": {"defaultRayImage": "ray:2"}}),
        observed_main_child=running(made, "RayJob"),
    )

    head = "spec.rayClusterSpec.headGroupSpec.template.spec"
    worker = "spec.rayClusterSpec.workerGroupSpecs[0].template.spec"
    assert applied_message(edited) == (
        RAY_JOB_KEPT + f"{head}.containers[0].image, {worker}.containers[0].image" + RAY_END
    )
