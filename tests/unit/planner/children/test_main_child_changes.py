"""What of an edited workload reaches its existing RayJob, AppWrapper or Deployment (0123)."""

from __future__ import annotations

import copy
from typing import Any

from kaiwo_planner.domain.children.main_child_changes import (
    app_wrapper_update,
    deployment_update,
    ray_job_update,
)
from kaiwo_planner.domain.children.workload_children import ChildCondition, plan_children
from kaiwo_planner.domain.scheduling.gpu_allocation import GpuAllocation
from kaiwo_planner.domain.state.priority_classes import PriorityChoice

QUEUE = "kueue.x-k8s.io/queue-name"
PRIORITY = "kueue.x-k8s.io/priority-class"


def ray_job(*, image: str, suspend: bool | None, labels: dict[str, str]) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "entrypoint": "python train.py",
        "shutdownAfterJobFinishes": True,
        "rayClusterSpec": {
            "workerGroupSpecs": [
                {"groupName": "w", "template": {"spec": {"containers": [{"image": image}]}}}
            ]
        },
    }
    if suspend is not None:
        spec["suspend"] = suspend
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "r", "labels": labels},
        "spec": spec,
    }


def test_a_running_ray_job_keeps_its_spec_and_says_which_paths():
    desired = ray_job(image="ray:2", suspend=True, labels={QUEUE: "q", PRIORITY: "low"})
    observed = ray_job(image="ray:1", suspend=False, labels={QUEUE: "q"})

    update = ray_job_update(desired, observed)

    assert update.manifest["spec"] == {
        "entrypoint": "python train.py",
        "shutdownAfterJobFinishes": True,
        "rayClusterSpec": observed["spec"]["rayClusterSpec"],
    }
    assert update.manifest["metadata"]["labels"] == {QUEUE: "q"}
    assert update.message == (
        "Not applied to the existing RayJob, because a running RayJob keeps the spec it "
        "started with (changed, Kueue would stop it and queue it again, and Ray would start "
        "the job over): spec.rayClusterSpec.workerGroupSpecs[0].template.spec.containers[0]"
        ".image; and Kueue keeps a running workload in its queue and without a priority class "
        "it started without, and never takes a priority class away: "
        "metadata.labels[kueue.x-k8s.io/priority-class]. Delete and re-create the workload "
        "to run with these changes."
    )
    assert (
        desired["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][
            0
        ]["image"]
        == "ray:2"
    )  # the desired child is not modified


def test_a_running_ray_jobs_deadline_and_cluster_ttl_follow_the_spec():
    # KubeRay reads both on each reconcile, and Kueue's pod sets hold neither: a deadline
    # kept from an older spec still ended the job the user meant to run on (decision 0133).
    desired = ray_job(image="ray:1", suspend=True, labels={QUEUE: "q"})
    desired["spec"]["activeDeadlineSeconds"] = 7200
    observed = ray_job(image="ray:1", suspend=False, labels={QUEUE: "q"})
    observed["spec"]["activeDeadlineSeconds"] = 600
    observed["spec"]["ttlSecondsAfterFinished"] = 60

    update = ray_job_update(desired, observed)

    assert update.applied_whole
    assert update.manifest["spec"] == {
        "entrypoint": "python train.py",
        "shutdownAfterJobFinishes": True,
        "rayClusterSpec": observed["spec"]["rayClusterSpec"],
        "activeDeadlineSeconds": 7200,
    }  # no ttlSecondsAfterFinished: the executor takes it away (executor tests)


def test_a_ray_job_kueue_admitted_but_still_observed_suspended_keeps_its_spec():
    # Kueue admits the Workload, then unsuspends the RayJob: an edit planned in between (the
    # newer RayJob not observed yet) reached the starting job, and Kueue started it over.
    desired = ray_job(image="ray:2", suspend=True, labels={QUEUE: "q"})
    observed = ray_job(image="ray:1", suspend=True, labels={QUEUE: "q"})

    waiting = ray_job_update(desired, observed)
    admitted = ray_job_update(desired, observed, admitted=True)

    assert waiting.applied_whole  # still waiting: the whole edit (Kueue updates its Workload)
    assert admitted.manifest["spec"]["rayClusterSpec"] == observed["spec"]["rayClusterSpec"]
    assert admitted.spec_not_applied == (
        "spec.rayClusterSpec.workerGroupSpecs[0].template.spec.containers[0].image",
    )


def test_a_running_ray_job_keeps_a_pull_secret_its_namespace_no_longer_gives():
    # Its AIMNamespaceConfig deleted: the desired pods lose the pull secret, which the
    # observed RayJob holds among fields it has anyway. Applied, Kueue would stop the job and
    # Ray start it over; kept, and named (decision 0131).
    desired = ray_job(image="ray:1", suspend=True, labels={QUEUE: "q"})
    observed = ray_job(image="ray:1", suspend=False, labels={QUEUE: "q"})
    worker = observed["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]["template"]["spec"]
    worker["imagePullSecrets"] = [{"name": "reg-a"}]

    update = ray_job_update(desired, observed)

    assert update.manifest["spec"]["rayClusterSpec"] == observed["spec"]["rayClusterSpec"]
    assert update.spec_not_applied == (
        "spec.rayClusterSpec.workerGroupSpecs[0].template.spec.imagePullSecrets[name=reg-a]",
    )


def test_a_waiting_ray_job_takes_the_edit_and_leaves_suspend_to_kueue():
    desired = ray_job(image="ray:2", suspend=True, labels={QUEUE: "q2"})
    observed = ray_job(image="ray:1", suspend=True, labels={QUEUE: "q"})

    update = ray_job_update(desired, observed)

    expected = copy.deepcopy(desired)
    del expected["spec"]["suspend"]
    assert update.manifest == expected
    assert update.applied_whole
    assert update.message == ""


def app_wrapper(image: str, *, suspend: bool) -> dict[str, Any]:
    return {
        "apiVersion": "workload.codeflare.dev/v1beta2",
        "kind": "AppWrapper",
        "metadata": {"name": "s", "labels": {QUEUE: "q"}},
        "spec": {
            "suspend": suspend,
            "components": [
                {
                    "podSets": [{"replicas": 1, "path": "template.spec"}],
                    "template": {"kind": "RayService", "spec": {"image": image}},
                }
            ],
        },
    }


def test_an_admitted_app_wrapper_keeps_its_components():
    # The AppWrapper operator's webhook refuses any change of them.
    desired = app_wrapper("ray:2", suspend=True)
    del desired["spec"]["suspend"]
    observed = app_wrapper("ray:1", suspend=False)

    update = app_wrapper_update(desired, observed)

    assert not update.replace
    assert update.manifest["spec"] == {"components": observed["spec"]["components"]}
    assert update.message == (
        "Not applied to the existing AppWrapper, because an AppWrapper's components cannot "
        "change after it is created: spec.components[0].template.spec.image. Delete and "
        "re-create the workload to run with these changes."
    )


def test_an_app_wrapper_waiting_in_its_queue_is_replaced_by_the_edited_one():
    # The webhook refuses the change while it waits too, but nothing of it runs yet: it is
    # made anew from the edited spec (decision 0129).
    desired = app_wrapper("ray:2", suspend=True)
    observed = app_wrapper("ray:1", suspend=True)

    update = app_wrapper_update(desired, observed)

    assert update.replace
    assert update.manifest == desired
    assert not update.applied_whole
    assert update.message == (
        "The AppWrapper waiting in its queue is replaced by one made from the edited spec "
        "(spec.components[0].template.spec.image), which waits in the queue anew"
    )


def test_an_app_wrapper_kueue_admitted_is_not_replaced_though_observed_suspended():
    desired = app_wrapper("ray:2", suspend=True)
    observed = app_wrapper("ray:1", suspend=True)

    update = app_wrapper_update(desired, observed, admitted=True)

    assert not update.replace
    assert update.manifest["spec"]["components"] == observed["spec"]["components"]


def test_a_waiting_app_wrapper_with_the_same_components_is_kept():
    desired = app_wrapper("ray:1", suspend=True)
    observed = app_wrapper("ray:1", suspend=True)

    update = app_wrapper_update(desired, observed)

    assert not update.replace
    assert update.applied_whole


def test_an_app_wrapper_as_created_is_applied_as_desired():
    desired = app_wrapper("ray:1", suspend=False)
    observed = app_wrapper("ray:1", suspend=False)

    update = app_wrapper_update(desired, observed)

    assert update.manifest == desired
    assert update.applied_whole


def deployment(labels: dict[str, str], *, ready: int | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "labels": {"app": "d", **labels}},
        "spec": {
            "replicas": 1,
            "template": {
                "metadata": {"labels": {"app": "d", **labels}},
                "spec": {"containers": [{"image": "vllm:1"}]},
            },
        },
    }
    if ready is not None:
        found["status"] = {"readyReplicas": ready}
    return found


def test_a_deployment_with_a_ready_pod_keeps_kueues_labels_on_it_and_its_template():
    # Kueue's Deployment webhook: no new queue, no priority class added once a pod is Ready.
    desired = deployment({QUEUE: "b", PRIORITY: "low"})
    observed = deployment({QUEUE: "a"}, ready=1)

    update = deployment_update(desired, observed)

    assert update.manifest["metadata"]["labels"] == {"app": "d", QUEUE: "a"}
    assert update.manifest["spec"]["template"]["metadata"]["labels"] == {"app": "d", QUEUE: "a"}
    assert update.manifest["spec"]["template"]["spec"] == desired["spec"]["template"]["spec"]
    assert update.message == (
        "Not applied to the existing Deployment, because Kueue keeps a running workload in "
        "its queue and without a priority class it started without, and never takes a "
        "priority class away: metadata.labels[kueue.x-k8s.io/queue-name], "
        "metadata.labels[kueue.x-k8s.io/priority-class]. Delete and re-create the workload "
        "to run with these changes."
    )
    assert desired["metadata"]["labels"][QUEUE] == "b"  # the desired child is not modified


def test_a_deployment_without_a_ready_pod_takes_a_new_queue_and_priority_class():
    desired = deployment({QUEUE: "b", PRIORITY: "low"})

    for observed in (deployment({QUEUE: "a"}, ready=0), deployment({QUEUE: "a"})):
        update = deployment_update(desired, observed)
        assert update.manifest == desired
        assert update.applied_whole


def test_no_deployment_loses_its_priority_class():
    desired = deployment({QUEUE: "a"})
    observed = deployment({QUEUE: "a", PRIORITY: "low"}, ready=0)

    update = deployment_update(desired, observed)

    assert update.manifest["metadata"]["labels"] == {"app": "d", QUEUE: "a", PRIORITY: "low"}
    assert update.manifest["spec"]["template"]["metadata"]["labels"] == {
        "app": "d",
        QUEUE: "a",
        PRIORITY: "low",
    }
    assert update.labels_not_applied == (f"metadata.labels[{PRIORITY}]",)


NO_GPUS = GpuAllocation(gpus=0, gpus_per_replica=0, replicas=1, vendor="amd")


def test_a_service_back_from_ray_says_its_deployment_matches(make_service):
    # The condition must not keep speaking of the AppWrapper the service no longer has.
    ray = plan_children(workload=make_service({"ray": True}), allocation=NO_GPUS, config=None)
    (observed,) = [c for c in ray.desired if c["kind"] == "AppWrapper"]

    decision = plan_children(
        workload=make_service({"ray": False}),
        allocation=NO_GPUS,
        config=None,
        observed_main_child=observed,
    )

    assert decision.conditions == (
        ChildCondition(
            "ChildSpecApplied", "True", "Applied", "The Deployment matches the workload's spec"
        ),
    )


def test_a_ready_services_priority_edit_is_kept_out_and_told(make_service):
    first = plan_children(workload=make_service({}), allocation=NO_GPUS, config=None)
    (observed,) = copy.deepcopy([c for c in first.desired if c["kind"] == "Deployment"])
    observed["status"] = {"readyReplicas": 1}

    decision = plan_children(
        workload=make_service({"priorityClass": "low"}),
        allocation=NO_GPUS,
        config=None,
        priority=PriorityChoice(kueue_priority_class="low"),
        observed_main_child=observed,
    )

    (manifest,) = [c for c in decision.desired if c["kind"] == "Deployment"]
    assert PRIORITY not in manifest["metadata"]["labels"]
    assert PRIORITY not in manifest["spec"]["template"]["metadata"]["labels"]
    [applied] = decision.conditions
    assert (applied.type, applied.status, applied.reason) == (
        "ChildSpecApplied",
        "False",
        "JobFieldsImmutable",
    )
    assert "metadata.labels[kueue.x-k8s.io/priority-class]" in applied.message


def test_a_waiting_ray_service_leaves_its_app_wrapper_out_until_it_is_replaced(make_service):
    first = plan_children(workload=make_service({"ray": True}), allocation=NO_GPUS, config=None)
    (observed,) = copy.deepcopy([c for c in first.desired if c["kind"] == "AppWrapper"])
    observed["spec"]["suspend"] = True  # as Kueue's webhook creates it: waiting for admission

    edited = make_service({"ray": True, "image": "rayproject/ray:2.41.0"})
    decision = plan_children(
        workload=edited, allocation=NO_GPUS, config=None, observed_main_child=observed
    )

    assert [c["kind"] for c in decision.desired if c["kind"] == "AppWrapper"] == []
    [replacing] = decision.conditions
    assert (replacing.type, replacing.status, replacing.reason) == (
        "ChildSpecApplied",
        "False",
        "Replacing",
    )
    assert replacing.message.startswith("The AppWrapper waiting in its queue is replaced")

    # Once it is gone, the AppWrapper of the edited spec is created.
    anew = plan_children(workload=edited, allocation=NO_GPUS, config=None)
    (created,) = [c for c in anew.desired if c["kind"] == "AppWrapper"]
    assert "rayproject/ray:2.41.0" in str(created["spec"]["components"])


SPLIT_MARK = "kaiwo.silogen.ai/gpus-split-by-node-size"


def marked(child: dict[str, Any], made_from: str | None) -> dict[str, Any]:
    marked = copy.deepcopy(child)
    if made_from is not None:
        marked["metadata"]["annotations"] = {SPLIT_MARK: made_from, "other": "x"}
    return marked


def test_a_running_ray_job_keeps_the_spec_gpus_its_kept_workers_were_split_from():
    # spec.gpus edited 16 -> 17 while it runs: its worker groups stay 2 x 8, a split of 17
    # too; marked 17, a later plan would take 2 x 8 for the edit and call it applied (0137).
    desired = marked(ray_job(image="ray:2", suspend=True, labels={QUEUE: "q"}), "17")
    observed = marked(ray_job(image="ray:1", suspend=False, labels={QUEUE: "q"}), "16")
    update = ray_job_update(desired, observed)
    assert update.manifest["metadata"]["annotations"] == {SPLIT_MARK: "16", "other": "x"}

    unmarked = ray_job(image="ray:1", suspend=False, labels={QUEUE: "q"})
    update = ray_job_update(desired, unmarked)
    assert update.manifest["metadata"]["annotations"] == {"other": "x"}

    # Waiting, it takes the whole edit, the mark with it.
    waiting = marked(ray_job(image="ray:1", suspend=True, labels={QUEUE: "q"}), "16")
    update = ray_job_update(desired, waiting)
    assert update.manifest["metadata"]["annotations"] == {SPLIT_MARK: "17", "other": "x"}


def test_an_admitted_app_wrapper_keeps_the_spec_gpus_its_components_were_split_from():
    def wrapper(image: str, made_from: str) -> dict[str, Any]:
        return marked(
            {
                "apiVersion": "workload.codeflare.dev/v1beta2",
                "kind": "AppWrapper",
                "metadata": {"name": "s", "labels": {QUEUE: "q"}},
                "spec": {"suspend": False, "components": [{"template": {"image": image}}]},
            },
            made_from,
        )

    update = app_wrapper_update(wrapper("ray:2", "17"), wrapper("ray:1", "16"))
    assert update.manifest["metadata"]["annotations"] == {SPLIT_MARK: "16", "other": "x"}


def served(replicas: int, *, image: str = "vllm:1", per_pod: int = 1) -> dict[str, Any]:
    """A service's Deployment of ``replicas`` pods of ``per_pod`` GPUs, with Kaiwo's env."""
    env = [
        {"name": "HF_HOME", "value": "/hf"},
        {"name": "NUM_GPUS", "value": str(replicas * per_pod)},
        {"name": "NUM_REPLICAS", "value": str(replicas)},
        {"name": "NUM_GPUS_PER_REPLICA", "value": str(per_pod)},
    ]
    container = {
        "name": "workload",
        "image": image,
        "env": env,
        "resources": {"limits": {"amd.com/gpu": str(per_pod)}},
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "chat", "labels": {"kueue.x-k8s.io/queue-name": "kaiwo"}},
        "spec": {
            "replicas": replicas,
            "template": {
                "metadata": {"labels": {"kueue.x-k8s.io/queue-name": "kaiwo"}},
                "spec": {"containers": [container]},
            },
        },
    }


def with_server_defaults(deployment: dict[str, Any], *, ready: int) -> dict[str, Any]:
    """``deployment`` as the API server serves it: defaults added, a status."""
    observed = copy.deepcopy(deployment)
    container = observed["spec"]["template"]["spec"]["containers"][0]
    container["terminationMessagePath"] = "/dev/termination-log"
    container["imagePullPolicy"] = "IfNotPresent"
    observed["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    observed["status"] = {"readyReplicas": ready, "availableReplicas": ready}
    return observed


def test_a_serving_deployment_scaled_keeps_its_pods_replica_counts():
    # replicas 2 -> 3: only the counts in the env differ; applied, they changed the template
    # and every serving pod was replaced to scale (decision 0163). Kept, the Deployment scales.
    observed = with_server_defaults(served(2), ready=2)

    update = deployment_update(served(3), observed)

    assert update.manifest["spec"]["replicas"] == 3
    assert update.manifest["spec"]["template"] == served(2)["spec"]["template"]
    assert update.applied_whole


def test_a_scaled_deployment_with_another_change_rolls_with_the_new_counts():
    # A new image rolls the pods anyway: they get the counts of 3 replicas.
    observed = with_server_defaults(served(2), ready=2)
    desired = served(3, image="vllm:2")

    update = deployment_update(desired, observed)

    assert update.manifest == desired


def test_a_scaled_deployment_whose_pods_get_other_gpus_rolls():
    # gpus 4 over replicas 2 -> 4: each pod gets 1 GPU instead of 2; the pods must change.
    observed = with_server_defaults(served(2, per_pod=2), ready=2)
    desired = served(4, per_pod=1)

    assert deployment_update(desired, observed).manifest == desired


def test_a_scaled_deployment_losing_a_variable_rolls():
    # spec.env dropped HF_HOME as replicas changed: the removal needs new pods.
    observed = with_server_defaults(served(2), ready=2)
    desired = served(3)
    container = desired["spec"]["template"]["spec"]["containers"][0]
    container["env"] = [var for var in container["env"] if var["name"] != "HF_HOME"]

    assert deployment_update(desired, observed).manifest == desired


def selected(
    selector: dict[str, Any],
    template_labels: dict[str, str],
    *,
    image: str = "vllm:1",
    ready: int | None = None,
) -> dict[str, Any]:
    """A Deployment with ``selector`` and pods labelled ``template_labels``."""
    found = deployment({}, ready=ready)
    found["spec"]["selector"] = selector
    found["spec"]["template"]["metadata"]["labels"] = template_labels
    found["spec"]["template"]["spec"]["containers"][0]["image"] = image
    return found


SELECTOR_KEPT = (
    "Not applied to the existing Deployment, because a Deployment's selector cannot change "
    "after it is created, and its pods' labels must match it (deleted, the Deployment is made "
    "again from the spec as it is now): "
)


def test_a_deployments_edited_selector_is_kept_and_the_rest_of_the_edit_applies():
    # apps/v1: spec.selector is immutable. Applied, every plan was refused ("field is
    # immutable"), the image edit made with it lost too (decision 0216).
    observed = selected(
        {"matchLabels": {"app": "d", "tier": "web"}}, {"app": "d", "tier": "web"}, ready=1
    )
    desired = selected(
        {"matchLabels": {"app": "d", "tier": "api"}}, {"app": "d", "tier": "api"}, image="vllm:2"
    )

    update = deployment_update(desired, observed)

    assert update.manifest["spec"]["selector"] == {"matchLabels": {"app": "d", "tier": "web"}}
    assert update.manifest["spec"]["template"]["metadata"]["labels"] == {
        "app": "d",
        "tier": "web",
    }
    assert update.manifest["spec"]["template"]["spec"]["containers"] == [{"image": "vllm:2"}]
    assert update.spec_not_applied == (
        "spec.selector.matchLabels[tier]",
        "spec.template.metadata.labels[tier]",
    )
    assert update.message == SELECTOR_KEPT + (
        "spec.selector.matchLabels[tier], spec.template.metadata.labels[tier]. "
        "Delete and re-create the workload to run with these changes."
    )
    assert desired["spec"]["selector"] == {"matchLabels": {"app": "d", "tier": "api"}}


def test_a_deployment_back_to_the_default_template_keeps_the_users_selector_and_its_label():
    # The user's own spec.deployment (selector tier=web) removed: the default selects by app
    # only, and its pods have no tier label, which the kept selector needs.
    observed = selected(
        {"matchLabels": {"app": "d", "tier": "web"}}, {"app": "d", "tier": "web", "x": "1"}
    )
    desired = selected({"matchLabels": {"app": "d"}}, {"app": "d"}, image="vllm:2")

    update = deployment_update(desired, observed)

    assert update.manifest["spec"]["selector"] == {"matchLabels": {"app": "d", "tier": "web"}}
    assert update.manifest["spec"]["template"]["metadata"]["labels"] == {
        "app": "d",
        "tier": "web",
    }
    assert update.manifest["spec"]["template"]["spec"]["containers"] == [{"image": "vllm:2"}]
    assert update.message == SELECTOR_KEPT + (
        "spec.selector.matchLabels[tier], spec.template.metadata.labels[tier]. "
        "Delete and re-create the workload to run with these changes."
    )


def test_a_kept_selector_the_new_pods_still_match_leaves_their_labels_as_edited():
    observed = selected(
        {
            "matchLabels": {"app": "d"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["web", "api"]}],
        },
        {"app": "d", "tier": "web"},
    )
    desired = selected({"matchLabels": {"app": "d"}}, {"app": "d", "tier": "api"})

    update = deployment_update(desired, observed)

    assert update.manifest["spec"]["selector"] == observed["spec"]["selector"]
    assert update.manifest["spec"]["template"] == desired["spec"]["template"]
    assert update.message == SELECTOR_KEPT + (
        "spec.selector.matchExpressions. Delete and re-create the workload to run with these "
        "changes."
    )


def test_pods_relabelled_out_of_an_unchanged_selector_keep_the_label_it_reads():
    observed = selected(
        {
            "matchLabels": {"app": "d"},
            "matchExpressions": [{"key": "canary", "operator": "DoesNotExist"}],
        },
        {"app": "d"},
    )
    desired = selected(
        {
            "matchLabels": {"app": "d"},
            "matchExpressions": [{"key": "canary", "operator": "DoesNotExist", "values": []}],
        },
        {"app": "d", "canary": "yes", "team": "a"},
    )

    update = deployment_update(desired, observed)

    assert update.manifest["spec"]["template"]["metadata"]["labels"] == {"app": "d", "team": "a"}
    assert update.spec_not_applied == ("spec.template.metadata.labels[canary]",)


def test_a_deployment_whose_selector_is_as_observed_is_applied_as_desired_itself():
    # The server leaves empty fields out: still the same selector, and no new bytes.
    observed = selected({"matchLabels": {"app": "d", "tier": "web"}}, {"app": "d", "tier": "web"})
    desired = selected(
        {"matchLabels": {"app": "d", "tier": "web"}, "matchExpressions": []},
        {"app": "d", "tier": "web", "version": "2"},
        image="vllm:2",
    )

    update = deployment_update(desired, observed)

    assert update.manifest is desired
    assert update.applied_whole


def test_a_deployment_observed_without_a_selector_takes_the_desired_one():
    desired = selected({"matchLabels": {"app": "d", "tier": "api"}}, {"app": "d", "tier": "api"})

    assert deployment_update(desired, deployment({})).manifest is desired


def own_deployment(tier: str, *, image: str) -> dict[str, Any]:
    """A KaiwoService spec with the user's own Deployment spec, its pods selected by tier."""
    return {
        "image": image,
        "deployment": {
            "spec": {
                "selector": {"matchLabels": {"tier": tier}},
                "template": {
                    "metadata": {"labels": {"tier": tier}},
                    "spec": {"containers": [{"name": "web", "image": image}]},
                },
            }
        },
    }


def test_a_services_selector_edit_is_kept_and_told_and_its_new_image_rolls(make_service):
    first = plan_children(
        workload=make_service(own_deployment("web", image="nginx:1")),
        allocation=NO_GPUS,
        config=None,
    )
    (observed,) = copy.deepcopy([c for c in first.desired if c["kind"] == "Deployment"])
    observed["status"] = {"readyReplicas": 1}

    decision = plan_children(
        workload=make_service(own_deployment("api", image="nginx:2")),
        allocation=NO_GPUS,
        config=None,
        observed_main_child=observed,
    )

    (manifest,) = [c for c in decision.desired if c["kind"] == "Deployment"]
    assert manifest["spec"]["selector"] == {"matchLabels": {"tier": "web", "app": "chat"}}
    assert manifest["spec"]["template"]["metadata"]["labels"]["tier"] == "web"
    assert manifest["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:2"
    assert decision.conditions == (
        ChildCondition(
            "ChildSpecApplied",
            "False",
            "JobFieldsImmutable",
            SELECTOR_KEPT
            + "spec.selector.matchLabels[tier], spec.template.metadata.labels[tier]. Delete "
            "and re-create the workload to run with these changes.",
        ),
    )

    # As it was made: the same manifest, and it matches.
    settled = plan_children(
        workload=make_service(own_deployment("web", image="nginx:1")),
        allocation=NO_GPUS,
        config=None,
        observed_main_child=observed,
    )
    (manifest,) = [c for c in settled.desired if c["kind"] == "Deployment"]
    assert manifest == first.desired[0]
    assert settled.conditions == (
        ChildCondition(
            "ChildSpecApplied", "True", "Applied", "The Deployment matches the workload's spec"
        ),
    )
