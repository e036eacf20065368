"""plan_object end to end: owners and cluster states in, hand-written plans out."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from kaiwo_contracts.plans import EventIntent, ObjectRef, Plan, PruneRule, canonical_json
from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.state.workload_finding import WorkloadFinding

from tests.planning_calls import planned, planning
from tests.unit.planner.kueue_queues import cohort_queue

EXPECTED = Path(__file__).parent / "planning_expected"
NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
T_NOW = "2026-01-01T12:00:00Z"
T_EARLIER = "2026-01-01T11:00:00Z"
KAIWO = "kaiwo.silogen.ai/v1alpha1"

WORKLOAD_PRUNE = [
    PruneRule(api_version="batch/v1", kind="Job"),
    PruneRule(api_version="ray.io/v1", kind="RayJob"),
    PruneRule(api_version="apps/v1", kind="Deployment"),
    PruneRule(api_version="workload.codeflare.dev/v1beta2", kind="AppWrapper"),
    PruneRule(api_version="v1", kind="ConfigMap"),
    PruneRule(api_version="v1", kind="Service"),
    PruneRule(api_version="gateway.networking.k8s.io/v1", kind="HTTPRoute"),
]


def queue_config(*queues: dict[str, Any]) -> dict[str, Any]:
    """A KaiwoQueueConfig ``kaiwo``; each queue: {"name": ..., "namespaces": [...]}."""
    quota = {
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "amd.com/gpu"],
                "flavors": [
                    {
                        "name": "mi300x",
                        "resources": [
                            {"name": "cpu", "nominalQuota": 256},
                            {"name": "amd.com/gpu", "nominalQuota": 16},
                        ],
                    }
                ],
            }
        ]
    }
    return {
        "apiVersion": KAIWO,
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": "kaiwo", "uid": "kqc-uid", "generation": 1},
        "spec": {
            "resourceFlavors": [{"name": "mi300x", "nodeLabels": {"kaiwo/nodepool": "mi300x"}}],
            "clusterQueues": [{**queue, "spec": quota} for queue in queues],
        },
    }


def kaiwo_job(
    spec: dict[str, Any],
    *,
    name: str = "train",
    namespace: str = "team-a",
    uid: str = "job-uid",
    generation: int = 1,
    status: dict[str, Any] | None = None,
    created: str = "2026-01-01T11:58:00Z",
) -> dict[str, Any]:
    job: dict[str, Any] = {
        "apiVersion": KAIWO,
        "kind": "KaiwoJob",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid,
            "generation": generation,
            "resourceVersion": "7",
            "creationTimestamp": created,
        },
        "spec": spec,
    }
    if status is not None:
        job["status"] = status
    return job


def kaiwo_service(
    spec: dict[str, Any], *, generation: int = 1, status: dict[str, Any] | None = None
) -> dict[str, Any]:
    service = kaiwo_job(spec, name="chat", uid="svc-uid", generation=generation, status=status)
    service["kind"] = "KaiwoService"
    return service


def running_job(owner: dict[str, Any]) -> dict[str, Any]:
    """The observed, running batch Job of a KaiwoJob (only what status reads)."""
    meta = owner["metadata"]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": f"{meta['uid']}-job",
            "ownerReferences": [{"uid": meta["uid"], "controller": True}],
        },
        "spec": {"suspend": False},
        "status": {"active": 1, "ready": 1},
    }


def admitted(child_uid: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {
            "name": f"job-{child_uid}",
            "namespace": "team-a",
            "ownerReferences": [{"uid": child_uid}],
        },
        "status": {"conditions": [{"type": "Admitted", "status": "True"}]},
    }


@pytest.fixture
def gpu_nodes(make_node: Callable[..., dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        make_node("mi300x-0", gpu="mi300x"),
        make_node("mi300x-1", gpu="mi300x"),
        make_node("cpu-0"),
    ]


@pytest.fixture
def cluster_with(
    gpu_nodes: list[dict[str, Any]],
) -> Callable[..., ClusterState]:
    def build(
        *objects: dict[str, Any],
        workloads: tuple[dict[str, Any], ...] = (),
        queues: dict[str, Any] | None = None,
    ) -> ClusterState:
        return ClusterState.from_wire(
            nodes=gpu_nodes,
            objects=[queues or queue_config({"name": "kaiwo"}), *objects],
            kueue_workloads=workloads,
            namespaces=["team-a", "team-b", "vision"],
        )

    return build


def expected_plan(name: str) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((EXPECTED / f"{name}.yaml").read_text())
    return document


def dumped(plan: Plan | None) -> dict[str, Any]:
    """The plan's JSON without its sources (what it was computed from: hashes of the inputs,
    tested in tests/unit/planner/test_plan_sources.py)."""
    assert plan is not None
    document = plan.model_dump(mode="json")
    document.pop("sources", None)
    return document


def condition(plan: Plan, condition_type: str) -> dict[str, Any]:
    assert plan.status is not None
    return next(c for c in plan.status["conditions"] if c["type"] == condition_type)


def main_container(manifest: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = manifest["spec"]["template"]["spec"]["containers"][0]
    return container


TRAIN_SPEC = {"user": "ann@example.com", "gpus": 4, "image": "rocm/pytorch:latest"}
TRAIN_SPEC["entrypoint"] = "python train.py"


# ------------------------------------------------------------------ KaiwoJob end to end


def test_kaiwojob_first_plan_creates_the_job_and_reports_pending(cluster_with):
    owner = kaiwo_job(TRAIN_SPEC)

    result = planning(owner=owner, cluster=cluster_with(owner), now=NOW)

    assert dumped(result.plan) == expected_plan("kaiwojob_first_plan")
    # Planned again when its 5-minute wait (pendingThresholdForPreemption) is over.
    assert result.replan_at == datetime(2026, 1, 1, 12, 3, 1, tzinfo=UTC)
    assert result.also_replan == ()


def test_kaiwojob_runs_once_kueue_admits_its_job(cluster_with):
    pending_status = expected_plan("kaiwojob_first_plan")["status"]
    owner = kaiwo_job(TRAIN_SPEC, status=pending_status)
    job = copy.deepcopy(expected_plan("kaiwojob_first_plan")["desired"][0])
    job["metadata"]["uid"] = "child-uid"
    job["spec"]["suspend"] = False
    job["status"] = {"active": 1, "ready": 1}

    plan = planned(
        owner=owner, cluster=cluster_with(owner, job, workloads=(admitted("child-uid"),)), now=NOW
    )

    assert plan is not None
    assert plan.status == {
        "status": "RUNNING",
        "conditions": [
            {
                "type": "Schedulable",
                "status": "True",
                "observedGeneration": 1,
                "lastTransitionTime": T_NOW,
                "reason": "Schedulable",
                "message": "Cluster has sufficient GPU resources",
            },
            {
                "type": "Admitted",
                "status": "True",
                "observedGeneration": 1,
                "lastTransitionTime": T_NOW,
                "reason": "Admitted",
                "message": "Workload is admitted",
            },
            {
                "type": "ChildSpecApplied",
                "status": "True",
                "observedGeneration": 1,
                "lastTransitionTime": T_NOW,
                "reason": "Applied",
                "message": "The Job matches the workload's spec",
            },
        ],
        "observedGeneration": 1,
        "startTime": T_NOW,
        "duration": 0,
    }
    assert plan.events == (
        EventIntent(type="Normal", reason="WorkloadRunning", message="Workload has started"),
    )
    # Kueue unsuspended the Job; the plan leaves suspend to it, so it cannot suspend it again.
    assert ["suspend" in d["spec"] for d in plan.desired] == [False]


# ------------------------------------------------------------------ changes after creation


def test_a_kaiwoservice_change_rolls_out_to_its_deployment(cluster_with):
    first = {"user": "bo@example.com", "image": "vllm:1", "replicas": 2, "entrypoint": "serve"}
    running = {"status": "READY", "startTime": T_EARLIER, "observedGeneration": 1}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "chat",
            "namespace": "team-a",
            "uid": "deploy-uid",
            "generation": 1,
            "ownerReferences": [{"uid": "svc-uid", "controller": True}],
        },
        "spec": {"replicas": 2},
        "status": {"observedGeneration": 1, "availableReplicas": 2, "readyReplicas": 2},
    }
    before = kaiwo_service(first, status=running)
    after = kaiwo_service({**first, "image": "vllm:2", "replicas": 3}, generation=2, status=running)

    old_plan = planned(owner=before, cluster=cluster_with(before, deployment), now=NOW)
    new_plan = planned(owner=after, cluster=cluster_with(after, deployment), now=NOW)

    assert old_plan is not None and new_plan is not None
    (old_deployment,) = old_plan.desired
    (new_deployment,) = new_plan.desired
    assert (old_deployment["spec"]["replicas"], main_container(old_deployment)["image"]) == (
        2,
        "vllm:1",
    )
    assert (new_deployment["spec"]["replicas"], main_container(new_deployment)["image"]) == (
        3,
        "vllm:2",
    )
    assert new_plan.observed_generation == 2
    assert new_plan.status is not None and new_plan.status["observedGeneration"] == 2
    assert list(new_plan.prune) == WORKLOAD_PRUNE


def allocation_env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container["env"] if e["name"].startswith("NUM_")}


def test_a_kaiwoservice_with_zero_replicas_is_paused_and_ready(cluster_with):
    # replicas: 0 scales the Deployment to 0 (decision 0111); a replica keeps its GPUs in the
    # template for when it is scaled up again, and nothing is held meanwhile.
    spec = {"user": "bo@example.com", "image": "vllm:1", "entrypoint": "serve"}
    owner = kaiwo_service({**spec, "replicas": 0, "gpusPerReplica": 2})

    plan = planned(owner=owner, cluster=cluster_with(owner), now=NOW)

    assert plan is not None
    (deployment,) = plan.desired
    container = main_container(deployment)
    assert deployment["spec"]["replicas"] == 0
    assert container["resources"]["limits"]["amd.com/gpu"] == "2"
    assert allocation_env(container) == {
        "NUM_GPUS": "0",
        "NUM_REPLICAS": "0",
        "NUM_GPUS_PER_REPLICA": "2",
    }
    # Once the Deployment controller has seen it, every one of the 0 wanted replicas is
    # available: READY, as for any Deployment with all its replicas (never FAILED or ERROR).
    observed = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "chat",
            "namespace": "team-a",
            "uid": "deploy-uid",
            "generation": 1,
            "ownerReferences": [{"uid": "svc-uid", "controller": True}],
        },
        "spec": {"replicas": 0},
        "status": {"observedGeneration": 1},
    }
    paused = kaiwo_service({**spec, "replicas": 0, "gpusPerReplica": 2}, status=plan.status)

    ready = planned(owner=paused, cluster=cluster_with(paused, observed), now=NOW)

    assert ready is not None and ready.status is not None
    assert ready.status["status"] == "READY"
    assert condition(ready, "Schedulable")["message"] == "Workload does not require GPU resources"


def own_gpus_deployment(gpus: int) -> dict[str, Any]:
    """A given Deployment whose vLLM container asks for ``gpus`` AMD GPUs itself."""
    container = {"name": "vllm", "image": "vllm:1", "resources": {"limits": {"amd.com/gpu": gpus}}}
    return {"spec": {"template": {"spec": {"containers": [container]}}}}


def test_a_services_own_deployment_gpus_are_what_it_holds_and_is_told(cluster_with):
    # No gpus, no gpusPerReplica: the container's own 2 GPUs stay (decision 0161), and each
    # of the 2 replicas holds them, so the env, Schedulable and every count say 4 (0163).
    # Before: NUM_GPUS=0, NUM_GPUS_PER_REPLICA=0, "Workload does not require GPU resources".
    owner = kaiwo_service({"deployment": own_gpus_deployment(2), "replicas": 2})

    plan = planned(owner=owner, cluster=cluster_with(owner), now=NOW)

    assert plan is not None
    (deployment,) = plan.desired
    container = main_container(deployment)
    assert deployment["spec"]["replicas"] == 2
    # The container's GPUs as written (no request added: the Deployment is not rolled).
    assert container["resources"] == {
        "limits": {"amd.com/gpu": "2", "cpu": "2", "memory": "16Gi"},
        "requests": {"cpu": "2", "memory": "16Gi"},
    }
    assert allocation_env(container) == {
        "NUM_GPUS": "4",
        "NUM_REPLICAS": "2",
        "NUM_GPUS_PER_REPLICA": "2",
    }
    schedulable = condition(plan, "Schedulable")
    assert (schedulable["status"], schedulable["message"]) == (
        "True",
        "Cluster has sufficient GPU resources",
    )


def test_a_services_own_deployment_gpus_larger_than_any_node_are_refused(cluster_with):
    # 16 GPUs per pod on 8-GPU nodes waited in the scheduler for good, the service
    # "not requiring GPU resources"; now Schedulable names the container (decision 0163).
    owner = kaiwo_service({"deployment": own_gpus_deployment(16)})

    plan = planned(owner=owner, cluster=cluster_with(owner), now=NOW)

    assert plan is not None and plan.status is not None
    assert plan.status["status"] == "ERROR"
    schedulable = condition(plan, "Schedulable")
    assert (schedulable["status"], schedulable["reason"]) == ("False", "InsufficientGPUsPerNode")
    assert schedulable["message"] == (
        'spec.deployment.spec.template.spec.containers[0] asks for 16 GPUs ("amd.com/gpu") '
        "per pod, but the largest node has 8 GPUs (vendor: amd): lower it and raise "
        "spec.replicas"
    )
    assert plan.desired == ()


def own_gpus_job(gpus: int, parallelism: int) -> dict[str, Any]:
    """A given batch Job running ``parallelism`` pods whose container asks for ``gpus`` AMD
    GPUs itself."""
    return {"spec": {"parallelism": parallelism, **own_gpus_deployment(gpus)["spec"]}}


OWN_GPUS_JOB_SPEC = {k: v for k, v in TRAIN_SPEC.items() if k != "gpus"}


def test_a_jobs_own_template_gpus_are_what_it_holds_and_is_told(cluster_with):
    # No gpus, no gpusPerReplica: the container's own 4 GPUs stay (decision 0161), and each
    # of the 2 pods the Job runs at once holds them, so the env, Schedulable and every count
    # say 8 (0166). Before: NUM_GPUS=0, NUM_GPUS_PER_REPLICA=0, "Workload does not require
    # GPU resources".
    owner = kaiwo_job({**OWN_GPUS_JOB_SPEC, "job": own_gpus_job(4, 2)})

    plan = planned(owner=owner, cluster=cluster_with(owner), now=NOW)

    assert plan is not None
    (job,) = plan.desired
    container = main_container(job)
    assert job["spec"]["parallelism"] == 2
    # The container's GPUs as written (no request added, no CPU/memory default for them).
    assert container["resources"] == {
        "limits": {"amd.com/gpu": "4", "cpu": "2", "memory": "16Gi"},
        "requests": {"cpu": "2", "memory": "16Gi"},
    }
    assert allocation_env(container) == {
        "NUM_GPUS": "8",
        "NUM_REPLICAS": "2",
        "NUM_GPUS_PER_REPLICA": "4",
    }
    schedulable = condition(plan, "Schedulable")
    assert (schedulable["status"], schedulable["message"]) == (
        "True",
        "Cluster has sufficient GPU resources",
    )


def test_a_jobs_own_template_gpus_larger_than_any_node_are_refused(cluster_with):
    # 16 GPUs per pod on 8-GPU nodes would wait in the scheduler for good, the job "not
    # requiring GPU resources"; now Schedulable names the container (decision 0166).
    owner = kaiwo_job({**OWN_GPUS_JOB_SPEC, "job": own_gpus_job(16, 1)})

    plan = planned(owner=owner, cluster=cluster_with(owner), now=NOW)

    assert plan is not None and plan.status is not None
    assert plan.status["status"] == "ERROR"
    schedulable = condition(plan, "Schedulable")
    assert (schedulable["status"], schedulable["reason"]) == ("False", "InsufficientGPUsPerNode")
    assert schedulable["message"] == (
        'spec.job.spec.template.spec.containers[0] asks for 16 GPUs ("amd.com/gpu") in the '
        "single pod of a Job, but the largest node has 8 GPUs (vendor: amd): set ray: true to "
        "spread the GPUs across nodes, or lower it"
    )
    assert plan.desired == ()


def test_a_ray_kaiwojob_with_zero_replicas_runs_on_its_head_alone(cluster_with):
    owner = kaiwo_job({**TRAIN_SPEC, "gpus": 0, "ray": True, "replicas": 0, "gpusPerReplica": 2})

    plan = planned(owner=owner, cluster=cluster_with(owner), now=NOW)

    assert plan is not None
    (ray_job,) = plan.desired
    (workers,) = ray_job["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    assert (workers["replicas"], workers["minReplicas"], workers["maxReplicas"]) == (0, 0, 0)
    assert allocation_env(workers["template"]["spec"]["containers"][0]) == {
        "NUM_GPUS": "0",
        "NUM_REPLICAS": "0",
        "NUM_GPUS_PER_REPLICA": "2",
    }


def test_a_batch_kaiwojob_ignores_zero_replicas(cluster_with):
    # The API reference: replicas is ignored for a batch KaiwoJob; its one pod gets its GPUs.
    owner = kaiwo_job({**TRAIN_SPEC, "gpus": 0, "replicas": 0, "gpusPerReplica": 2})

    plan = planned(owner=owner, cluster=cluster_with(owner), now=NOW)

    assert plan is not None
    (job,) = plan.desired
    container = main_container(job)
    assert container["resources"]["limits"]["amd.com/gpu"] == "2"
    assert allocation_env(container) == {
        "NUM_GPUS": "2",
        "NUM_REPLICAS": "1",
        "NUM_GPUS_PER_REPLICA": "2",
    }


def test_a_job_change_kubernetes_cannot_apply_is_reported(cluster_with):
    observed = copy.deepcopy(expected_plan("kaiwojob_first_plan")["desired"][0])
    observed["metadata"]["uid"] = "child-uid"
    observed["spec"]["suspend"] = False
    observed["status"] = {"active": 1, "ready": 1}
    running = {"status": "RUNNING", "startTime": T_EARLIER, "observedGeneration": 1}
    owner = kaiwo_job({**TRAIN_SPEC, "image": "rocm/pytorch:v2"}, generation=2, status=running)

    plan = planned(
        owner=owner,
        cluster=cluster_with(owner, observed, workloads=(admitted("child-uid"),)),
        now=NOW,
    )

    assert plan is not None
    message = (
        "Not applied to the existing Job, because a Job's pod template, selector and "
        "completion settings cannot change after it is created: "
        "spec.template.spec.containers[0].image. "
        "Delete and re-create the KaiwoJob to run with these changes."
    )
    assert condition(plan, "ChildSpecApplied") == {
        "type": "ChildSpecApplied",
        "status": "False",
        "observedGeneration": 2,
        "lastTransitionTime": T_NOW,
        "reason": "JobFieldsImmutable",
        "message": message,
    }
    assert EventIntent(type="Warning", reason="ChildSpecNotApplied", message=message) in (
        plan.events
    )
    # The existing template is what gets applied (the API server would reject a new one).
    (job,) = plan.desired
    assert main_container(job)["image"] == "rocm/pytorch:latest"


def test_a_parallel_job_made_before_0147_keeps_its_pods_env_and_says_so(cluster_with):
    """Decision 0147's upgrade: a running Job of 2 pods x 4 made when its env said one pod
    (``NUM_GPUS=4``, ``NUM_REPLICAS=1``) cannot take the new env (its template is
    immutable); it runs on as it is, and ``ChildSpecApplied`` names the two values kept."""
    parallel = {"spec": {"parallelism": 2}}
    owner = kaiwo_job({**TRAIN_SPEC, "gpus": 4, "job": parallel})
    first = planned(owner=owner, cluster=cluster_with(owner), now=NOW)
    assert first is not None
    (observed,) = copy.deepcopy(first.desired)
    for variable in main_container(observed)["env"]:
        variable["value"] = {"NUM_GPUS": "4", "NUM_REPLICAS": "1"}.get(
            variable["name"], variable.get("value")
        )
    observed["metadata"]["uid"] = "child-uid"
    observed["spec"]["suspend"] = False
    observed["status"] = {"active": 2, "ready": 2}
    running = {"status": "RUNNING", "startTime": T_EARLIER, "observedGeneration": 1}
    owner = kaiwo_job({**TRAIN_SPEC, "gpus": 4, "job": parallel}, status=running)

    plan = planned(
        owner=owner,
        cluster=cluster_with(owner, observed, workloads=(admitted("child-uid"),)),
        now=NOW,
    )

    assert plan is not None
    applied = condition(plan, "ChildSpecApplied")
    assert (applied["status"], applied["reason"]) == ("False", "JobFieldsImmutable")
    assert applied["message"] == (
        "Not applied to the existing Job, because a Job's pod template, selector and "
        "completion settings cannot change after it is created: "
        "spec.template.spec.containers[0].env[0].value, "
        "spec.template.spec.containers[0].env[1].value. "
        "Delete and re-create the KaiwoJob to run with these changes."
    )
    (job,) = plan.desired
    assert gpu_env(main_container(job)) == {
        "NUM_GPUS": "4",
        "NUM_REPLICAS": "1",
        "NUM_GPUS_PER_REPLICA": "4",
    }


def test_a_waiting_ray_services_app_wrapper_is_replaced_to_take_an_edit(cluster_with):
    """Decision 0129: the webhook refuses any change of an AppWrapper's components, but one
    still waiting in its queue runs nothing yet, so it is pruned and made anew."""
    spec = {"image": "rayproject/ray:2.40.0", "ray": True, "gpus": 0, "clusterQueue": "kaiwo"}
    first = planned(owner=kaiwo_service(spec), cluster=cluster_with(kaiwo_service(spec)), now=NOW)
    assert first is not None
    (observed,) = copy.deepcopy([m for m in first.desired if m["kind"] == "AppWrapper"])
    observed["metadata"]["uid"] = "wrapper-uid"
    observed["spec"]["suspend"] = True  # Kueue's webhook: waiting for admission
    edited = kaiwo_service(
        {**spec, "image": "rayproject/ray:2.41.0"}, generation=2, status=first.status
    )

    plan = planned(owner=edited, cluster=cluster_with(edited, observed), now=NOW)

    assert plan is not None
    assert [m["kind"] for m in plan.desired if m["kind"] == "AppWrapper"] == []
    assert any(rule.kind == "AppWrapper" for rule in plan.prune)
    replacing = condition(plan, "ChildSpecApplied")
    assert (replacing["status"], replacing["reason"]) == ("False", "Replacing")
    assert [(e.type, e.reason) for e in plan.events if e.reason.startswith("Child")] == [
        ("Normal", "ChildReplacing")
    ]


def test_a_waiting_app_wrapper_whose_edit_is_undone_before_its_replacement_is_kept(
    cluster_with,
):
    """Decision 0291 carries a replacement over only within the generation that decided it:
    an edit undone at once (the executor refuses the plan that replaced the waiting
    AppWrapper, its spec no longer the owner's) leaves the AppWrapper as it is, in its
    place in the queue."""
    spec = {"image": "rayproject/ray:2.40.0", "ray": True, "gpus": 0, "clusterQueue": "kaiwo"}
    first = planned(owner=kaiwo_service(spec), cluster=cluster_with(kaiwo_service(spec)), now=NOW)
    assert first is not None
    (observed,) = copy.deepcopy([m for m in first.desired if m["kind"] == "AppWrapper"])
    observed["metadata"]["uid"] = "wrapper-uid"
    observed["spec"]["suspend"] = True
    edited = kaiwo_service(
        {**spec, "image": "rayproject/ray:2.41.0"}, generation=2, status=first.status
    )
    replacing = planned(owner=edited, cluster=cluster_with(edited, observed), now=NOW)
    assert replacing is not None
    assert condition(replacing, "ChildSpecApplied")["reason"] == "Replacing"
    undone = kaiwo_service(spec, generation=3, status=replacing.status)

    plan = planned(owner=undone, cluster=cluster_with(undone, observed), now=NOW)

    assert plan is not None
    assert [m["kind"] for m in plan.desired if m["kind"] == "AppWrapper"] == ["AppWrapper"]
    assert condition(plan, "ChildSpecApplied")["reason"] == "Applied"


def test_a_job_kueue_admitted_but_still_observed_suspended_is_not_replaced(cluster_with):
    """Kueue admits the Workload before it unsuspends the Job: a Job observed suspended beside
    an admitted Workload is starting, and keeps its template (decision 0129)."""
    observed = copy.deepcopy(expected_plan("kaiwojob_first_plan")["desired"][0])
    observed["metadata"]["uid"] = "child-uid"
    assert observed["spec"]["suspend"] is True
    owner = kaiwo_job({**TRAIN_SPEC, "image": "rocm/pytorch:v2"}, generation=2)

    starting = planned(
        owner=owner,
        cluster=cluster_with(owner, observed, workloads=(admitted("child-uid"),)),
        now=NOW,
    )
    waiting = planned(owner=owner, cluster=cluster_with(owner, observed), now=NOW)

    assert starting is not None and waiting is not None
    assert condition(starting, "ChildSpecApplied")["reason"] == "JobFieldsImmutable"
    (job,) = starting.desired
    assert main_container(job)["image"] == "rocm/pytorch:latest"
    assert condition(waiting, "ChildSpecApplied")["reason"] == "Replacing"
    assert waiting.desired == ()


GONE_POOL = "amd-mi300x-4gpu-172core-1843gi"


def unschedulable_pod(
    name: str, *, labels: dict[str, str], controller: dict[str, Any]
) -> dict[str, Any]:
    """A pod of ``controller`` whose selector names ``GONE_POOL``, which the scheduler found no
    node for."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "labels": dict(labels),
            "ownerReferences": [{**controller, "controller": True}],
        },
        "spec": {"nodeSelector": {"kaiwo/nodepool": GONE_POOL}},
        "status": {
            "phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        },
    }


def stranded_job_and_pod(first: Plan) -> tuple[dict[str, Any], dict[str, Any]]:
    """The first plan's Job as Kueue started it in ``GONE_POOL`` (its selector written into
    the template), and its pod, which the scheduler found no node for (decision 0183)."""
    (job,) = copy.deepcopy(first.desired)
    job["metadata"]["uid"] = "child-uid"
    job["spec"]["suspend"] = False
    job["spec"]["template"]["spec"]["nodeSelector"] = {"kaiwo/nodepool": GONE_POOL}
    job["status"] = {"active": 1, "startTime": T_EARLIER}
    pod = unschedulable_pod(
        "train-x7",
        labels=job["spec"]["template"]["metadata"]["labels"],
        controller={"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "child-uid"},
    )
    return job, pod


Stranded = Callable[[Plan], tuple[dict[str, Any], dict[str, Any]]]


def started_and_stranded(
    cluster_with: Any, spec: dict[str, Any], stranded: Stranded
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The main child the first plan of a KaiwoJob of ``spec`` makes, as ``stranded`` has
    Kueue start it in ``GONE_POOL``, its pod that waits there, and the KaiwoJob STARTING."""
    owner = kaiwo_job(spec)
    first = planned(owner=owner, cluster=cluster_with(owner), now=NOW)
    assert first is not None
    child, pod = stranded(first)
    return child, pod, kaiwo_job(spec, status={**first.status, "status": "STARTING"})


def stranded_job_replaced(
    cluster_with: Any,
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], Plan]:
    """:func:`started_and_stranded`'s Job, pod and STARTING KaiwoJob of ``TRAIN_SPEC``, with
    Kueue's admitted Workload, and the plan that makes the Job anew."""
    job, pod, starting = started_and_stranded(cluster_with, TRAIN_SPEC, stranded_job_and_pod)
    plan = planned(
        owner=starting,
        cluster=cluster_with(starting, job, pod, workloads=(admitted("child-uid"),)),
        now=NOW,
    )
    assert plan is not None
    return job, pod, starting, plan


def test_a_job_admitted_into_a_pool_its_nodes_left_is_made_anew(cluster_with):
    """Decision 0183: Kueue started the Job in a pool no node is in any more (its nodes moved
    to another pool before the scheduler bound the pod), and none of its pods ran: the Job
    is pruned, to be made again, and Kueue admits the new one into a pool that has nodes.
    The plan after it makes the Job again without a ChildDeleted warning: the operator
    deleted it, not someone else."""
    job, pod, _, plan = stranded_job_replaced(cluster_with)

    assert plan.desired == ()
    assert any(rule.kind == "Job" for rule in plan.prune)
    told = (
        "Job train: Kueue admitted it into node pool amd-mi300x-4gpu-172core-1843gi, which no "
        "node is in any more, before any of its pods ran: the Job is made anew, and Kueue "
        "admits it again"
    )
    replacing = condition(plan, "ChildSpecApplied")
    assert (replacing["status"], replacing["reason"], replacing["message"]) == (
        "False",
        "Replacing",
        told,
    )
    assert condition(plan, "ChildHealthy")["reason"] == "NodePoolGone"
    assert [(e.type, e.reason, e.message) for e in plan.events if e.reason == "ChildReplacing"] == [
        ("Normal", "ChildReplacing", told)
    ]

    # While the Job is going (a finalizer may hold it: a RayJob's does), it stays replaced,
    # told once.
    going = {**job, "metadata": {**job["metadata"], "deletionTimestamp": T_EARLIER}}
    replacing_owner = kaiwo_job(TRAIN_SPEC, status=plan.status)
    still = planned(
        owner=replacing_owner,
        cluster=cluster_with(replacing_owner, going, pod, workloads=(admitted("child-uid"),)),
        now=NOW,
    )
    assert still is not None
    assert still.desired == ()
    assert condition(still, "ChildSpecApplied") == replacing
    assert [e.reason for e in still.events if e.reason == "ChildReplacing"] == []

    # The Job and its Workload gone: made again, and nobody is warned of a deletion.
    replaced = kaiwo_job(TRAIN_SPEC, status=still.status)
    again = planned(owner=replaced, cluster=cluster_with(replaced), now=NOW)
    assert again is not None
    assert [m["kind"] for m in again.desired] == ["Job"]
    assert condition(again, "ChildSpecApplied")["status"] == "True"
    assert [e.reason for e in again.events if e.reason == "ChildDeleted"] == []


@pytest.mark.parametrize(
    "seen_first",
    [
        pytest.param("pod", id="its pod going"),
        pytest.param("workload", id="its Kueue Workload gone"),
    ],
)
def test_a_job_made_anew_stays_replaced_until_it_is_gone_whatever_is_seen_first(
    cluster_with, seen_first
):
    """Decision 0291: the prune of the Job made anew deletes its pod and Kueue's Workload
    too, and their watch events may come before the Job's own. Seen so, the Job no longer
    waits in the gone pool; it is still the Job being replaced, and its going is the
    operator's deletion, not someone's (no ``ChildDeleted``)."""
    job, pod, starting, plan = stranded_job_replaced(cluster_with)
    replacing = condition(plan, "ChildSpecApplied")
    going_pod = {**pod, "metadata": {**pod["metadata"], "deletionTimestamp": T_EARLIER}}
    seen = (
        cluster_with(starting, job, going_pod, workloads=(admitted("child-uid"),))
        if seen_first == "pod"
        else cluster_with(starting, job, pod)
    )
    replacing_owner = kaiwo_job(TRAIN_SPEC, status=plan.status)

    still = planned(owner=replacing_owner, cluster=seen, now=NOW)

    assert still is not None
    assert still.desired == ()
    assert any(rule.kind == "Job" for rule in still.prune)
    assert condition(still, "ChildSpecApplied") == replacing
    replaced = kaiwo_job(TRAIN_SPEC, status=still.status)
    again = planned(owner=replaced, cluster=cluster_with(replaced), now=NOW)
    assert again is not None
    assert [m["kind"] for m in again.desired] == ["Job"]
    assert [e.reason for e in again.events if e.reason == "ChildDeleted"] == []


def test_a_job_created_since_a_replacing_status_is_not_taken_for_the_one_replaced(cluster_with):
    """A ``Replacing`` status left behind (its successor's write was stale) does not make the
    operator delete the new Job: the one replaced was created before the status said so
    (decision 0291)."""
    job, _, _, plan = stranded_job_replaced(cluster_with)
    assert condition(plan, "ChildSpecApplied")["reason"] == "Replacing"
    new_job = copy.deepcopy(job)
    new_job["metadata"].update(uid="new-child-uid", creationTimestamp="2026-01-01T12:00:05Z")
    new_job["spec"]["template"]["spec"].pop("nodeSelector")
    left_behind = kaiwo_job(TRAIN_SPEC, status=plan.status)

    later = planned(
        owner=left_behind,
        cluster=cluster_with(left_behind, new_job, workloads=(admitted("new-child-uid"),)),
        now=NOW + timedelta(seconds=10),
    )

    assert later is not None
    assert [m["kind"] for m in later.desired] == ["Job"]
    assert condition(later, "ChildSpecApplied")["reason"] != "Replacing"


@pytest.mark.parametrize(
    "ran",
    [
        pytest.param({"status": {"active": 1, "succeeded": 1}}, id="a pod succeeded"),
        pytest.param({"status": {"active": 1, "failed": 1}}, id="a pod failed"),
        pytest.param({"status": {"active": 1, "ready": 1}}, id="a pod is ready"),
        pytest.param({"pod": {"nodeName": "mi300x-0"}}, id="its pod is bound"),
        pytest.param({"nodes": True}, id="its pool has nodes"),
        pytest.param({"workloads": ()}, id="Kueue does not manage it"),
    ],
)
def test_a_job_is_not_made_anew_once_anything_of_it_ran_or_may_run(cluster_with, gpu_nodes, ran):
    """What a Job made anew would lose, or a pod that may still run, keeps the Job: it is
    applied as before (decision 0183)."""
    job, pod, starting = started_and_stranded(cluster_with, TRAIN_SPEC, stranded_job_and_pod)
    job["status"] = {**job["status"], **ran.get("status", {})}
    pod["spec"].update(ran.get("pod", {}))
    if ran.get("nodes"):  # the nodes of cluster_with
        gpu_nodes[0]["metadata"]["labels"]["kaiwo/nodepool"] = GONE_POOL
    workloads = ran.get("workloads", (admitted("child-uid"),))
    cluster = cluster_with(starting, job, pod, workloads=workloads)

    plan = planned(owner=starting, cluster=cluster, now=NOW)

    assert plan is not None
    assert [m["kind"] for m in plan.desired] == ["Job"]
    assert condition(plan, "ChildSpecApplied")["reason"] != "Replacing"


RAY_SPEC = {**TRAIN_SPEC, "ray": True}


def stranded_ray_job_and_pod(first: Plan) -> tuple[dict[str, Any], dict[str, Any]]:
    """The first plan's RayJob as Kueue started it in ``GONE_POOL``, KubeRay starting its
    cluster, and the cluster's head pod, which the scheduler found no node for."""
    (ray_job,) = copy.deepcopy([m for m in first.desired if m["kind"] == "RayJob"])
    ray_job["metadata"]["uid"] = "child-uid"
    ray_job["spec"]["suspend"] = False
    ray_job["status"] = {"jobDeploymentStatus": "Initializing", "rayClusterName": "train-abc"}
    pod = unschedulable_pod(
        "train-abc-head-x7",
        labels={"kaiwo.silogen.ai/run-id": "job-uid", "ray.io/node-type": "head"},
        controller={
            "apiVersion": "ray.io/v1",
            "kind": "RayCluster",
            "name": "train-abc",
            "uid": "cluster-uid",
        },
    )
    return ray_job, pod


@pytest.mark.parametrize(
    ("deployment_status", "cluster", "made_anew"),
    [
        pytest.param("Initializing", "train-abc", True, id="its cluster starting"),
        pytest.param("Running", "train-abc", False, id="its Ray job running"),
        # The cluster of the RayJob made anew before, still going: not this RayJob's.
        pytest.param("Initializing", "train-def", False, id="the pod of another cluster"),
    ],
)
def test_a_ray_job_admitted_into_a_pool_its_nodes_left_is_made_anew_while_its_cluster_starts(
    cluster_with, deployment_status, cluster, made_anew
):
    """Decision 0183, for a RayJob: Kueue wrote the gone pool into its cluster's templates.
    While KubeRay still starts the cluster (none of its pods ran) it is made anew; once the
    Ray job runs, it is kept, and only its own cluster's pods count."""
    ray_job, pod, starting = started_and_stranded(cluster_with, RAY_SPEC, stranded_ray_job_and_pod)
    ray_job["status"].update(jobDeploymentStatus=deployment_status, rayClusterName=cluster)

    plan = planned(
        owner=starting,
        cluster=cluster_with(starting, ray_job, pod, workloads=(admitted("child-uid"),)),
        now=NOW,
    )

    assert plan is not None
    applied = condition(plan, "ChildSpecApplied")
    if not made_anew:
        assert "RayJob" in [m["kind"] for m in plan.desired]
        assert applied["reason"] != "Replacing"
        return
    assert "RayJob" not in [m["kind"] for m in plan.desired]
    assert (applied["reason"], applied["message"]) == (
        "Replacing",
        "RayJob train: Kueue admitted it into node pool amd-mi300x-4gpu-172core-1843gi, which "
        "no node is in any more, before any of its pods ran: the RayJob is made anew, and "
        "Kueue admits it again",
    )
    assert condition(plan, "ChildHealthy")["message"].endswith(
        "; the operator makes the RayJob anew, which Kueue admits again"
    )


RAY_SERVICE_SPEC = {"image": "rayproject/ray:2.40.0", "ray": True, "gpus": 4}


def ray_service_started(
    cluster_with: Any, app_wrapper_status: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A Ray KaiwoService STARTING, and its first plan's AppWrapper as Kueue admitted it,
    with ``app_wrapper_status``."""
    first = planned(
        owner=kaiwo_service(RAY_SERVICE_SPEC),
        cluster=cluster_with(kaiwo_service(RAY_SERVICE_SPEC)),
        now=NOW,
    )
    assert first is not None
    (wrapper,) = copy.deepcopy([m for m in first.desired if m["kind"] == "AppWrapper"])
    wrapper["metadata"]["uid"] = "wrapper-uid"
    wrapper["spec"]["suspend"] = False
    wrapper["status"] = app_wrapper_status
    return kaiwo_service(RAY_SERVICE_SPEC, status={**first.status, "status": "STARTING"}), wrapper


def stranded_ray_service(
    cluster_with: Any, *, cluster: str, pod_bound: bool = False
) -> tuple[dict[str, Any], ClusterState]:
    """:func:`ray_service_started`, whose AppWrapper Kueue admitted into ``GONE_POOL``; the
    AppWrapper controller made its RayService, whose first Ray cluster (``chat-abc``) KubeRay
    starts; and the head pod of ``cluster``, which the scheduler found no node for
    (``pod_bound``: bound to a node before the pool went)."""
    owner, wrapper = ray_service_started(cluster_with, {"phase": "Running"})
    ray_service = {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": {
            "name": "chat",
            "namespace": "team-a",
            "uid": "ray-service-uid",
            "ownerReferences": [{"kind": "AppWrapper", "uid": "wrapper-uid", "controller": True}],
        },
        "status": {"pendingServiceStatus": {"rayClusterName": "chat-abc"}},
    }
    pod = unschedulable_pod(
        f"{cluster}-head-x7",
        labels={"kaiwo.silogen.ai/run-id": "svc-uid", "ray.io/node-type": "head"},
        controller={"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": cluster, "uid": "c"},
    )
    if pod_bound:
        pod["spec"]["nodeName"] = "mi300x-0"
    workloads = (admitted("wrapper-uid"),)
    return owner, cluster_with(owner, wrapper, ray_service, pod, workloads=workloads)


def test_a_ray_services_app_wrapper_admitted_into_a_pool_its_nodes_left_is_made_anew(
    cluster_with,
):
    """Decision 0185: Kueue admitted the AppWrapper into a pool no node is in any more, and
    every live pod of its RayService's cluster waits for it. A service keeps no work, so the
    AppWrapper is pruned, to be made again, and Kueue admits the new one into a pool that
    has nodes."""
    owner, cluster = stranded_ray_service(cluster_with, cluster="chat-abc")

    plan = planned(owner=owner, cluster=cluster, now=NOW)

    assert plan is not None
    assert "AppWrapper" not in [m["kind"] for m in plan.desired]
    assert any(rule.kind == "AppWrapper" for rule in plan.prune)
    told = (
        "AppWrapper chat: Kueue admitted it into node pool amd-mi300x-4gpu-172core-1843gi, "
        "which no node is in any more, and none of its pods can run: the AppWrapper is made "
        "anew, and Kueue admits it again"
    )
    applied = condition(plan, "ChildSpecApplied")
    assert (applied["reason"], applied["message"]) == ("Replacing", told)
    assert condition(plan, "ChildHealthy")["message"].endswith(
        "; the operator makes the AppWrapper anew, which Kueue admits again"
    )
    assert [(e.type, e.message) for e in plan.events if e.reason == "ChildReplacing"] == [
        ("Normal", told)
    ]


@pytest.mark.parametrize(
    ("cluster", "pod_bound"),
    [
        # The cluster of the AppWrapper made anew before, still going: not this one's.
        pytest.param("chat-def", False, id="the pod of another cluster"),
        pytest.param("chat-abc", True, id="the pod bound before the pool went"),
    ],
)
def test_a_ray_services_app_wrapper_is_kept_while_a_pod_of_it_may_run(
    cluster_with, cluster, pod_bound
):
    """Only the pods of the clusters its RayService names count, and only while each waits
    for the gone pool (decision 0185)."""
    owner, state = stranded_ray_service(cluster_with, cluster=cluster, pod_bound=pod_bound)

    plan = planned(owner=owner, cluster=state, now=NOW)

    assert plan is not None
    assert "AppWrapper" in [m["kind"] for m in plan.desired]
    assert condition(plan, "ChildSpecApplied")["reason"] != "Replacing"


def failed_app_wrapper(cluster_with: Any, phase: str, reason: str, message: str) -> Plan:
    """The plan of :func:`ray_service_started` once its AppWrapper is in ``phase``, its
    ``Unhealthy`` condition saying ``reason`` and ``message``, and its RayService gone."""
    unhealthy = {"type": "Unhealthy", "status": "True", "reason": reason, "message": message}
    owner, wrapper = ray_service_started(cluster_with, {"phase": phase, "conditions": [unhealthy]})
    plan = planned(
        owner=owner,
        cluster=cluster_with(owner, wrapper, workloads=(admitted("wrapper-uid"),)),
        now=NOW,
    )
    assert plan is not None
    return plan


def test_a_ray_services_app_wrapper_failed_for_its_deleted_ray_service_is_made_anew(
    cluster_with,
):
    """Decision 0185: the AppWrapper controller fails an AppWrapper whose RayService someone
    deleted, at once and for good; the service would never run again, so it is made anew."""
    plan = failed_app_wrapper(
        cluster_with,
        "Failed",
        "MissingComponent",
        "Only found 0 deployed components, but was expecting 1",
    )

    assert "AppWrapper" not in [m["kind"] for m in plan.desired]
    assert plan.status["status"] == "STARTING"
    told = (
        "AppWrapper chat: its RayService was deleted, and the AppWrapper controller failed it "
        "for good (Only found 0 deployed components, but was expecting 1): the AppWrapper is "
        "made anew, and Kueue admits it again"
    )
    applied = condition(plan, "ChildSpecApplied")
    assert (applied["reason"], applied["message"]) == ("Replacing", told)
    assert [(e.type, e.message) for e in plan.events if e.reason == "ChildReplacing"] == [
        ("Normal", told)
    ]


def test_a_ray_services_app_wrapper_failed_for_good_fails_the_service(cluster_with):
    """Decision 0185: once its retries are spent, the AppWrapper controller fails the
    AppWrapper for good and deletes its RayService. The service is FAILED, told why in the
    controller's words, and the AppWrapper is not made anew (before, it said STARTING for
    good: its phase came from a RayService no longer there)."""
    plan = failed_app_wrapper(cluster_with, "Failed", "FoundFailedPods", "Found 1 failed pods")

    assert plan.status["status"] == "FAILED"
    health = condition(plan, "ChildHealthy")
    assert (health["reason"], health["message"]) == (
        "FoundFailedPods",
        "AppWrapper chat failed: Found 1 failed pods",
    )
    assert condition(plan, "ChildSpecApplied")["reason"] != "Replacing"


def test_a_ray_services_app_wrapper_resetting_is_left_to_its_controller(cluster_with):
    """Within its retries the AppWrapper controller resets the AppWrapper itself (it makes
    its RayService again): the service is starting, and its AppWrapper kept."""
    plan = failed_app_wrapper(cluster_with, "Resetting", "FoundFailedPods", "Found 1 failed pods")

    assert plan.status["status"] == "STARTING"
    assert "AppWrapper" in [m["kind"] for m in plan.desired]
    assert condition(plan, "ChildSpecApplied")["reason"] != "Replacing"


def test_storage_left_disabled_is_told_once_per_generation(cluster_with):
    """The reference ignores ``data``/``huggingFace`` unless ``storageEnabled``: the workload
    runs without them, and a Warning says so (decision 0119)."""
    spec = {**TRAIN_SPEC, "storage": {"data": {"storageSize": "10Gi"}}}
    owner = kaiwo_job(spec)

    plan = planned(owner=owner, cluster=cluster_with(owner), now=NOW)

    assert plan is not None
    assert [m["kind"] for m in plan.desired] == ["Job"]
    told = tuple(e for e in plan.events if e.reason == "SettingsIgnored")
    assert told == (
        EventIntent(
            type="Warning",
            reason="SettingsIgnored",
            message=(
                "spec.storage.data is ignored because spec.storage.storageEnabled is not true: "
                "no PersistentVolumeClaim is created, nothing is downloaded and nothing is "
                "mounted; set spec.storage.storageEnabled: true to use it"
            ),
        ),
    )
    again_owner = kaiwo_job(spec, status=plan.status)
    again = planned(owner=again_owner, cluster=cluster_with(again_owner), now=NOW)
    assert again is not None
    assert all(e.reason != "SettingsIgnored" for e in again.events)


def test_a_kaiwoconfig_change_replans_image_scheduler_and_queue(cluster_with):
    owner = kaiwo_job({"user": "ann@example.com", "entrypoint": "python x.py"})
    config = {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfig",
        "metadata": {"name": "kaiwo"},
        "spec": {
            "defaultClusterQueueName": "research",
            "ray": {"defaultRayImage": "example.com/ray:7"},
            "scheduling": {"kubeSchedulerName": "custom-scheduler"},
        },
    }
    queues = queue_config({"name": "kaiwo"}, {"name": "research"})

    before = planned(owner=owner, cluster=cluster_with(owner), now=NOW)
    after = planned(owner=owner, cluster=cluster_with(owner, config, queues=queues), now=NOW)

    assert before is not None and after is not None
    (job_before,) = before.desired
    (job_after,) = after.desired
    pod_before = job_before["spec"]["template"]["spec"]
    pod_after = job_after["spec"]["template"]["spec"]
    assert (pod_before["schedulerName"], pod_before["containers"][0]["image"]) == (
        "kaiwo-scheduler",
        "ghcr.io/silogen/rocm-ray:6.4",
    )
    assert (pod_after["schedulerName"], pod_after["containers"][0]["image"]) == (
        "custom-scheduler",
        "example.com/ray:7",
    )
    assert job_before["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "kaiwo"
    assert job_after["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "research"
    assert condition(after, "Admitted")["message"] == (
        "Workload is pending admission into 'research'"
    )


def test_the_namespace_config_adds_its_pull_secrets(cluster_with):
    owner = kaiwo_job(TRAIN_SPEC)
    namespace_config = {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "AIMNamespaceConfig",
        "metadata": {"name": "aim", "namespace": "team-a"},
        "spec": {"images": {"imagePullSecrets": ["team-registry"]}},
    }
    elsewhere = copy.deepcopy(namespace_config)
    elsewhere["metadata"]["namespace"] = "team-b"
    elsewhere["spec"]["images"]["imagePullSecrets"] = ["not-ours"]

    plan = planned(owner=owner, cluster=cluster_with(owner, namespace_config, elsewhere), now=NOW)

    assert plan is not None
    (job,) = plan.desired
    assert job["spec"]["template"]["spec"]["imagePullSecrets"] == [{"name": "team-registry"}]


CONFIG_API = "config.kaiwo.silogen.ai/v1alpha1"


def kaiwo_config(spec: dict[str, Any], *, generation: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": CONFIG_API,
        "kind": "KaiwoConfig",
        "metadata": {
            "name": "kaiwo",
            "uid": "kc-uid",
            "generation": generation,
            "resourceVersion": "41",
        },
        "spec": spec,
    }


def aim_namespace_config(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": CONFIG_API,
        "kind": "AIMNamespaceConfig",
        "metadata": {
            "name": "tenant",
            "namespace": "team-a",
            "uid": "aim-uid",
            "generation": 3,
            "resourceVersion": "42",
        },
        "spec": spec,
    }


def test_an_invalid_kaiwoconfig_gets_only_a_warning_event_naming_each_field(cluster_with):
    # Decision 0206: the KaiwoConfig has no status; an Event on it is what a user sees.
    config = kaiwo_config(
        {
            "ray": {"headPodMemory": "lots"},
            "scheduling": {"pendingThresholdForPreemption": "soon"},
        }
    )

    plan = planned(owner=config, cluster=cluster_with(config), now=NOW)

    assert plan is not None
    assert plan.owner == ObjectRef(
        api_version=CONFIG_API, kind="KaiwoConfig", name="kaiwo", uid="kc-uid"
    )
    assert (plan.observed_generation, plan.observed_resource_version) == (2, "41")
    assert plan.events == (
        EventIntent(
            type="Warning",
            reason="InvalidConfig",
            message=(
                "The KaiwoConfig 'kaiwo' is invalid, so until it is fixed workloads are "
                "planned with the defaults and the monitor judges no GPU use (no findings, no "
                "preemption): spec.ray.headPodMemory: must be a non-negative "
                "Kubernetes quantity such as 500m, 16Gi, 100G or 8 (digits with an optional "
                "decimal point, then one of the suffixes n u m k M G T P E Ki Mi Gi Ti Pi Ei "
                "or an exponent e3), got 'lots'; spec.scheduling.pendingThresholdForPreemption: "
                "must be a duration such as 30s, 5m or 1h30m, at most 2562047h"
            ),
        ),
    )
    # Nothing else: no status (the CRD has none), no children, nothing pruned.
    assert (plan.status, plan.desired, plan.prune, plan.prune_selector) == (None, (), (), {})
    assert [source.ref.kind for source in plan.sources] == ["KaiwoConfig"]


def test_the_same_invalid_kaiwoconfig_plans_the_same_event_and_an_edit_a_new_one(cluster_with):
    # The executor emits a plan's Events once per fingerprint: the same version settles.
    config = kaiwo_config({"ray": {"headPodMemory": "lots"}})
    first = planned(owner=config, cluster=cluster_with(config), now=NOW)
    later = planned(owner=config, cluster=cluster_with(config), now=NOW + timedelta(hours=1))
    edited = kaiwo_config({"ray": {"headPodMemory": "more"}}, generation=3)
    after_edit = planned(owner=edited, cluster=cluster_with(edited), now=NOW)

    assert first is not None and later is not None and after_edit is not None
    assert later.fingerprint() == first.fingerprint()
    assert after_edit.fingerprint() != first.fingerprint()
    assert after_edit.events[0].message.endswith("got 'more'")


def test_a_valid_kaiwoconfig_plans_nothing(cluster_with):
    valid = kaiwo_config({"ray": {"headPodMemory": "32Gi"}})

    assert planned(owner=valid, cluster=cluster_with(valid), now=NOW) is None


@pytest.mark.parametrize("memory", ["32Gi", "lots"])
def test_a_kaiwoconfig_of_another_name_is_told_it_is_never_read(cluster_with, memory):
    # Decision 0209: only 'kaiwo' is read; one of another name, valid or not, changes nothing,
    # and an Event on it says so and where its settings belong.
    valid = kaiwo_config({"ray": {"headPodMemory": "32Gi"}})
    other = kaiwo_config({"ray": {"headPodMemory": memory}})
    other["metadata"] |= {"name": "my-settings", "uid": "kc-other"}

    plan = planned(owner=other, cluster=cluster_with(valid, other), now=NOW)

    assert plan is not None
    assert plan.owner == ObjectRef(
        api_version=CONFIG_API, kind="KaiwoConfig", name="my-settings", uid="kc-other"
    )
    assert plan.events == (
        EventIntent(
            type="Warning",
            reason="NotInForce",
            message=(
                "Only the KaiwoConfig named 'kaiwo' is read, so this one ('my-settings') "
                "changes nothing: put its settings in the KaiwoConfig 'kaiwo' (kubectl edit "
                "kaiwoconfig kaiwo) and delete this one"
            ),
        ),
    )
    assert (plan.status, plan.desired, plan.prune, plan.prune_selector) == (None, (), (), {})
    assert [(s.ref.kind, s.ref.name) for s in plan.sources] == [("KaiwoConfig", "my-settings")]
    # The one read is untouched by it.
    assert planned(owner=valid, cluster=cluster_with(valid, other), now=NOW) is None


def test_an_invalid_kaiwoconfig_leaves_the_workloads_on_the_defaults(cluster_with):
    config = kaiwo_config({"ray": {"headPodMemory": "lots", "defaultRayImage": "example/x:1"}})
    owner = kaiwo_job({"user": "ann@example.com", "entrypoint": "python x.py"})

    plan = planned(owner=owner, cluster=cluster_with(owner, config), now=NOW)

    assert plan is not None
    (job,) = plan.desired
    assert main_container(job)["image"] == "ghcr.io/silogen/rocm-ray:6.4"
    # Told on the KaiwoConfig, not on every workload.
    assert [e.reason for e in plan.events] == ["WorkloadPending"]


def test_names_an_aimnamespaceconfig_gives_children_that_cannot_use_them_are_told(cluster_with):
    config = aim_namespace_config(
        {
            "gateway": {"name": "kgw", "namespace": "Gateway-System"},
            "images": {"imagePullSecrets": ["team-registry", "Team_Registry"]},
            "credentials": {
                "huggingFaceToken": {"secretName": "hf-creds", "secretKey": "hf/token"}
            },
        }
    )

    plan = planned(owner=config, cluster=cluster_with(config), now=NOW)

    assert plan is not None
    assert plan.owner == ObjectRef(
        api_version=CONFIG_API,
        kind="AIMNamespaceConfig",
        name="tenant",
        namespace="team-a",
        uid="aim-uid",
    )
    assert plan.events == (
        EventIntent(
            type="Warning",
            reason="InvalidConfig",
            message=(
                "The AIMNamespaceConfig gives names the children of the workloads and Models "
                "of namespace 'team-a' cannot use (the API server refuses such a child, or no "
                "Secret or Gateway can be so named); they are passed on as written until "
                'fixed: spec.gateway.namespace: "Gateway-System" must be a namespace\'s name: '
                "a lowercase RFC 1123 label of at most 63 characters, such as gateway-system; "
                'spec.credentials.huggingFaceToken.secretKey: "hf/token" must be a Secret\'s '
                "key: at most 253 letters, digits, '-', '_' or '.', not '.' or '..' and not "
                "starting with '..', such as token; spec.images.imagePullSecrets[1]: "
                '"Team_Registry" must be a Secret\'s name: a lowercase RFC 1123 subdomain of '
                "at most 253 characters, such as hf-creds"
            ),
        ),
    )
    assert (plan.status, plan.desired, plan.prune) == (None, (), ())


def test_a_namespace_configs_names_reach_the_children_as_written(cluster_with):
    # Decision 0206: a typo in the config must not roll or prune what runs, so the children
    # get the names as before, and the Event on the config says what is wrong.
    config = aim_namespace_config({"images": {"imagePullSecrets": ["team-registry", "Bad_Name"]}})
    owner = kaiwo_job(TRAIN_SPEC)

    plan = planned(owner=owner, cluster=cluster_with(owner, config), now=NOW)

    assert plan is not None
    (job,) = plan.desired
    assert job["spec"]["template"]["spec"]["imagePullSecrets"] == [
        {"name": "team-registry"},
        {"name": "Bad_Name"},
    ]


def test_an_aimnamespaceconfig_the_models_refuse_is_told_it_is_ignored(cluster_with):
    config = aim_namespace_config({"images": {"imagePullSecrets": "team-registry"}})

    plan = planned(owner=config, cluster=cluster_with(config), now=NOW)

    assert plan is not None
    assert [(e.reason, e.message) for e in plan.events] == [
        (
            "InvalidConfig",
            "The AIMNamespaceConfig is invalid, so it is ignored (none of its settings reach "
            "the workloads and Models of namespace 'team-a') until it is fixed: "
            "spec.images.imagePullSecrets: must be a list",
        )
    ]


def test_a_valid_aimnamespaceconfig_plans_nothing(cluster_with):
    config = aim_namespace_config(
        {
            "gateway": {"name": "kgw", "namespace": "gateway-system"},
            "images": {"imagePullSecrets": ["team-registry"]},
            "credentials": {"huggingFaceToken": {"secretName": "hf-creds", "secretKey": "token"}},
        }
    )

    assert planned(owner=config, cluster=cluster_with(config), now=NOW) is None


def named_namespace_config(
    name: str, spec: dict[str, Any], *, namespace: str = "team-a", resource_version: str = "42"
) -> dict[str, Any]:
    config = aim_namespace_config(spec)
    config["metadata"].update(
        name=name, namespace=namespace, uid=f"uid-{name}", resourceVersion=resource_version
    )
    return config


NOT_IN_FORCE_MESSAGE = (
    "Another AIMNamespaceConfig of namespace 'team-a', 'a-team', is in force (the first "
    "valid one by name), so none of this one's settings reach the workloads and Models of "
    "the namespace while it exists: keep one AIMNamespaceConfig per namespace, or delete "
    "'a-team' to put this one in force"
)


def test_a_second_valid_aimnamespaceconfig_is_told_the_first_by_name_is_in_force(cluster_with):
    # Decision 0209: only the first valid one by name is read; the other is told so, once,
    # on itself, and the one in force plans nothing.
    first = named_namespace_config("a-team", {"images": {"imagePullSecrets": ["reg-a"]}})
    second = named_namespace_config("b-team", {"images": {"imagePullSecrets": ["reg-b"]}})
    cluster = cluster_with(second, first)

    plan = planned(owner=second, cluster=cluster, now=NOW)

    assert plan is not None
    assert plan.owner == ObjectRef(
        api_version=CONFIG_API,
        kind="AIMNamespaceConfig",
        name="b-team",
        namespace="team-a",
        uid="uid-b-team",
    )
    assert plan.events == (
        EventIntent(type="Warning", reason="NotInForce", message=NOT_IN_FORCE_MESSAGE),
    )
    assert (plan.status, plan.desired, plan.prune, plan.prune_selector) == (None, (), (), {})
    # It was computed from both: an edit of either checks and re-tells it (decision 0038).
    assert [(s.ref.name, s.ref.uid) for s in plan.sources] == [
        ("b-team", "uid-b-team"),
        ("a-team", "uid-a-team"),
    ]
    assert all(source.digest for source in plan.sources)
    assert planned(owner=first, cluster=cluster, now=NOW) is None


def test_the_same_two_aimnamespaceconfigs_plan_the_same_not_in_force_event(cluster_with):
    first = named_namespace_config("a-team", {})
    second = named_namespace_config("b-team", {})
    once = planned(owner=second, cluster=cluster_with(first, second), now=NOW)
    again = planned(owner=second, cluster=cluster_with(first, second), now=NOW + timedelta(hours=1))
    edited_first = named_namespace_config(
        "a-team", {"images": {"imagePullSecrets": ["reg"]}}, resource_version="50"
    )
    after_edit = planned(owner=second, cluster=cluster_with(edited_first, second), now=NOW)

    assert once is not None and again is not None and after_edit is not None
    assert again.model_dump(mode="json") == once.model_dump(mode="json")
    assert again.fingerprint() == once.fingerprint()
    # The one in force is a source: its edit makes a new plan (the executor checks it too).
    assert after_edit.fingerprint() != once.fingerprint()
    assert after_edit.events == once.events


def test_an_invalid_first_aimnamespaceconfig_leaves_the_next_in_force(cluster_with):
    broken = named_namespace_config("a-team", {"images": {"imagePullSecrets": "reg"}})
    second = named_namespace_config("b-team", {"images": {"imagePullSecrets": ["reg-b"]}})
    cluster = cluster_with(broken, second)

    assert planned(owner=second, cluster=cluster, now=NOW) is None
    told = planned(owner=broken, cluster=cluster, now=NOW)
    assert told is not None
    # The invalid one is told it is invalid, from itself alone: not that another is in force.
    assert [e.reason for e in told.events] == ["InvalidConfig"]
    assert [s.ref.name for s in told.sources] == ["a-team"]


def test_an_invalid_second_aimnamespaceconfig_is_told_it_is_invalid_not_that_it_is_not_in_force(
    cluster_with,
):
    first = named_namespace_config("a-team", {})
    broken = named_namespace_config("b-team", {"images": {"imagePullSecrets": "reg"}})

    plan = planned(owner=broken, cluster=cluster_with(first, broken), now=NOW)

    assert plan is not None
    assert [(e.reason, e.message) for e in plan.events] == [
        (
            "InvalidConfig",
            "The AIMNamespaceConfig is invalid, so it is ignored (none of its settings reach "
            "the workloads and Models of namespace 'team-a') until it is fixed: "
            "spec.images.imagePullSecrets: must be a list",
        )
    ]
    assert [s.ref.name for s in plan.sources] == ["b-team"]


def test_the_names_of_an_aimnamespaceconfig_not_in_force_are_told_once_it_is(cluster_with):
    first = named_namespace_config("a-team", {})
    second = named_namespace_config("b-team", {"images": {"imagePullSecrets": ["Bad_Name"]}})

    while_not = planned(owner=second, cluster=cluster_with(first, second), now=NOW)
    alone = planned(owner=second, cluster=cluster_with(second), now=NOW)

    assert while_not is not None and alone is not None
    assert [e.reason for e in while_not.events] == ["NotInForce"]
    assert [e.reason for e in alone.events] == ["InvalidConfig"]
    assert "spec.images.imagePullSecrets[0]" in alone.events[0].message
    assert [s.ref.name for s in alone.sources] == ["b-team"]


def test_aimnamespaceconfigs_of_other_namespaces_do_not_count(cluster_with):
    elsewhere = named_namespace_config("a-team", {}, namespace="team-b")
    mine = named_namespace_config("b-team", {})

    assert planned(owner=mine, cluster=cluster_with(elsewhere, mine), now=NOW) is None
    assert planned(owner=elsewhere, cluster=cluster_with(elsewhere, mine), now=NOW) is None


def test_the_download_pod_gets_the_workloads_pod_labels_and_pull_secrets(cluster_with):
    # The reference: podTemplateSpecLabels go on "the generated Pods", imagePullSecrets on
    # "the PodSpec for all generated pods"; the download pod is one (decision 0192). The
    # system labels win over the user's.
    spec = {
        **TRAIN_SPEC,
        "podTemplateSpecLabels": {"sidecar.istio.io/inject": "false", "kaiwo.silogen.ai/name": "x"},
        "imagePullSecrets": [{"name": "own-registry"}],
        "storage": {
            "storageEnabled": True,
            "data": {
                "storageSize": "1Gi",
                "download": {"git": [{"repository": "https://e.com/r.git", "targetPath": "r"}]},
            },
        },
    }
    owner = kaiwo_job(spec)
    namespace_config = {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "AIMNamespaceConfig",
        "metadata": {"name": "aim", "namespace": "team-a"},
        "spec": {"images": {"imagePullSecrets": ["team-registry"]}},
    }

    plan = planned(owner=owner, cluster=cluster_with(owner, namespace_config), now=NOW)

    assert plan is not None
    (download,) = [
        m for m in plan.desired if m["metadata"]["name"] == "train-download" and m["kind"] == "Job"
    ]
    template = download["spec"]["template"]
    assert template["metadata"]["labels"]["sidecar.istio.io/inject"] == "false"
    assert template["metadata"]["labels"]["kaiwo.silogen.ai/name"] == "train"
    assert "sidecar.istio.io/inject" not in download["metadata"]["labels"]
    assert template["spec"]["imagePullSecrets"] == [
        {"name": "own-registry"},
        {"name": "team-registry"},
    ]


# ------------------------------------------------------------------ invalid input


def test_an_invalid_spec_is_reported_and_nothing_is_applied_or_pruned(cluster_with):
    owner = kaiwo_job({"gpus": -1, "gpuz": 3})

    plan = planned(owner=owner, cluster=cluster_with(owner), now=NOW)

    message = (
        "The spec is invalid, nothing was changed: spec.gpus: must be at least 0; "
        "spec.gpuz: unknown field"
    )
    assert dumped(plan) == {
        "owner": {
            "apiVersion": KAIWO,
            "kind": "KaiwoJob",
            "name": "train",
            "namespace": "team-a",
            "uid": "job-uid",
        },
        "observedGeneration": 1,
        "observedResourceVersion": "7",
        "desired": [],
        "status": {
            "status": "ERROR",
            "conditions": [
                {
                    "type": "Valid",
                    "status": "False",
                    "observedGeneration": 1,
                    "lastTransitionTime": T_NOW,
                    "reason": "InvalidSpec",
                    "message": message,
                }
            ],
            "observedGeneration": 1,
        },
        "events": [{"type": "Warning", "reason": "InvalidSpec", "message": message}],
        "prune": [],
        "pruneSelector": {},
        "deleteOwner": False,
    }


def test_a_download_without_a_size_stored_before_the_rule_never_starts(cluster_with):
    # Stored before the CRD refused it (decision 0111): without its size nothing would be
    # downloaded, so the workload must not start; the status and an Event name the field.
    storage = {
        "storageEnabled": True,
        "data": {"download": {"git": [{"repository": "https://example.com/r", "targetPath": "r"}]}},
    }
    owner = kaiwo_job({**TRAIN_SPEC, "storage": storage})

    plan = planned(owner=owner, cluster=cluster_with(owner), now=NOW)

    message = (
        "The spec is invalid, nothing was changed: spec.storage.data.storageSize: storageSize is "
        "required when data.download is given: the download Job fills a volume of that size "
        "before the workload starts (e.g. storageSize: 100Gi)"
    )
    assert plan is not None and plan.status is not None
    assert (plan.desired, plan.prune) == ((), ())
    assert plan.status["status"] == "ERROR"
    assert condition(plan, "Valid")["reason"] == "InvalidSpec"
    assert condition(plan, "Valid")["message"] == message
    assert plan.events == (EventIntent(type="Warning", reason="InvalidSpec", message=message),)


def test_a_running_workload_made_invalid_keeps_its_phase_and_children(cluster_with):
    running = {"status": "RUNNING", "startTime": T_EARLIER, "observedGeneration": 1}
    owner = kaiwo_job({**TRAIN_SPEC, "duration": "soon"}, generation=2, status=running)

    plan = planned(owner=owner, cluster=cluster_with(owner), now=NOW)

    assert plan is not None and plan.status is not None
    assert plan.status["status"] == "RUNNING"
    assert plan.status["startTime"] == T_EARLIER
    assert condition(plan, "Valid")["message"] == (
        "The spec is invalid, nothing was changed: spec.duration: must be a duration such as "
        "30m, 1h or 1h30m, got 'soon'"
    )
    assert (plan.desired, plan.prune) == ((), ())


def test_a_fixed_spec_turns_valid_again(cluster_with):
    invalid = {
        "status": "ERROR",
        "observedGeneration": 1,
        "conditions": [
            {
                "type": "Valid",
                "status": "False",
                "observedGeneration": 1,
                "lastTransitionTime": T_EARLIER,
                "reason": "InvalidSpec",
                "message": "The spec is invalid, nothing was changed: spec.gpus: must be >= 0",
            }
        ],
    }
    owner = kaiwo_job(TRAIN_SPEC, generation=2, status=invalid)

    plan = planned(owner=owner, cluster=cluster_with(owner), now=NOW)

    assert plan is not None and plan.status is not None
    assert condition(plan, "Valid") == {
        "type": "Valid",
        "status": "True",
        "observedGeneration": 2,
        "lastTransitionTime": T_NOW,
        "reason": "ValidSpec",
        "message": "The spec is valid",
    }
    assert plan.status["status"] == "PENDING"
    assert len(plan.desired) == 1


# ------------------------------------------------------------------ phases without children


def test_terminating_workload_is_terminated_and_its_children_pruned(cluster_with):
    terminating = {
        "status": "TERMINATING",
        "startTime": T_EARLIER,
        "observedGeneration": 1,
        "conditions": [
            {
                "type": "WorkloadTerminatedEarly",
                "status": "False",
                "observedGeneration": 1,
                "lastTransitionTime": T_EARLIER,
                "reason": "DurationExceededWithActiveGpuDemand",
                "message": "Terminated since duration was exceeded",
            }
        ],
    }
    owner = kaiwo_job(TRAIN_SPEC, status=terminating)

    plan = planned(owner=owner, cluster=cluster_with(owner), now=NOW)

    assert plan is not None
    assert plan.desired == ()
    assert list(plan.prune) == [
        *WORKLOAD_PRUNE,
        PruneRule(api_version="v1", kind="PersistentVolumeClaim"),
    ]
    assert plan.prune_selector == {
        "app.kubernetes.io/managed-by": "kaiwo",
        "kaiwo.silogen.ai/owner-uid": "job-uid",
    }
    assert plan.status == {
        "status": "TERMINATED",
        "startTime": T_EARLIER,
        "observedGeneration": 1,
        "conditions": [
            {
                "type": "WorkloadTerminatedEarly",
                "status": "True",
                "observedGeneration": 1,
                "lastTransitionTime": T_NOW,
                "reason": "DurationExceededWithActiveGpuDemand",
                "message": "Terminated since duration was exceeded",
            }
        ],
        "completionTime": T_NOW,
        "duration": 3600,
    }
    assert plan.events == (
        EventIntent(
            type="Normal", reason="WorkloadTerminated", message="Workload has been terminated"
        ),
        EventIntent(
            type="Warning",
            reason="DurationExceededWithActiveGpuDemand",
            message="Terminated since duration was exceeded",
        ),
    )


def test_a_completed_job_is_left_as_it_is(cluster_with):
    complete = {"status": "COMPLETE", "startTime": T_EARLIER, "observedGeneration": 1}
    owner = kaiwo_job(TRAIN_SPEC, generation=2, status=complete)

    plan = planned(owner=owner, cluster=cluster_with(owner), now=NOW)

    assert plan is not None
    assert (plan.desired, plan.prune) == ((), ())
    assert plan.status == {**complete, "observedGeneration": 2}


def deleting(owner: dict[str, Any]) -> dict[str, Any]:
    """``owner`` deleted with foreground propagation: kept until its children are gone."""
    meta = {**owner["metadata"], "deletionTimestamp": T_NOW, "finalizers": ["foregroundDeletion"]}
    return {**owner, "metadata": meta}


RUNNING = {"status": "RUNNING", "startTime": T_EARLIER, "observedGeneration": 1}


@pytest.mark.parametrize("make", [kaiwo_job, kaiwo_service], ids=["KaiwoJob", "KaiwoService"])
def test_a_workload_being_deleted_gets_a_plan_that_does_nothing(cluster_with, make):
    """The garbage collector deleted its children and keeps the workload until they are gone:
    planned as a live one, each child was created again and the phase went back to PENDING,
    with its Event."""
    owner = deleting(make(TRAIN_SPEC, status=RUNNING))

    result = planning(owner=owner, cluster=cluster_with(owner), now=NOW)

    plan = result.plan
    assert plan is not None
    assert (plan.desired, plan.prune, plan.status, plan.events) == ((), (), None, ())
    assert (plan.observed_generation, plan.observed_resource_version) == (1, "7")
    assert (result.replan_at, result.also_replan) == (None, ())


def test_a_workload_with_a_download_being_deleted_gets_no_download_job_or_claim(cluster_with):
    spec = {
        **TRAIN_SPEC,
        "storage": {
            "storageEnabled": True,
            "storageClassName": "standard",
            "data": {
                "storageSize": "10Gi",
                "download": {
                    "git": [{"repository": "https://example.com/d.git", "targetPath": "d"}]
                },
            },
        },
    }
    owner = deleting(kaiwo_job(spec, status={"status": "DOWNLOADING", "observedGeneration": 1}))

    plan = planned(owner=owner, cluster=cluster_with(owner), now=NOW)

    assert plan is not None
    assert (plan.desired, plan.status, plan.events) == ((), None, ())


def test_a_workload_in_a_namespace_being_deleted_is_not_told_failed(cluster_with):
    """The namespace controller deletes what the namespace holds in no set order: the Job
    whose pod it killed first made the running KaiwoJob FAILED (a Warning Event and the
    public ``failed``) seconds before the KaiwoJob went too."""
    owner = kaiwo_job(TRAIN_SPEC, status=RUNNING)
    job = running_job(owner)
    job["status"] = {"failed": 1, "conditions": [{"type": "Failed", "status": "True"}]}
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "team-a", "uid": "ns-uid", "deletionTimestamp": T_NOW},
        "status": {"phase": "Terminating"},
    }

    plan = planned(owner=owner, cluster=cluster_with(owner, job, namespace), now=NOW)

    assert plan is not None
    assert (plan.desired, plan.prune, plan.status, plan.events) == ((), (), None, ())


def test_a_workload_in_a_live_namespace_is_told_its_job_failed(cluster_with):
    owner = kaiwo_job(TRAIN_SPEC, status=RUNNING)
    job = running_job(owner)
    job["status"] = {"failed": 1, "conditions": [{"type": "Failed", "status": "True"}]}
    namespace = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "team-a", "uid": "ns-uid"},
        "status": {"phase": "Active"},
    }

    plan = planned(owner=owner, cluster=cluster_with(owner, job, namespace), now=NOW)

    assert plan is not None and plan.status is not None
    assert plan.status["status"] == "FAILED"


def test_an_unschedulable_workload_gets_no_children_and_deletes_none(cluster_with):
    owner = kaiwo_job({**TRAIN_SPEC, "gpus": 64})

    plan = planned(owner=owner, cluster=cluster_with(owner), now=NOW)

    assert plan is not None and plan.status is not None
    assert (plan.desired, plan.prune) == ((), ())
    assert plan.status["status"] == "ERROR"
    assert plan.events == (
        EventIntent(
            type="Warning",
            reason="WorkloadError",
            message="Cluster has 16 GPUs, but requested for 64 GPUs (vendor: amd)",
        ),
    )


def gpu_env(container: dict[str, Any]) -> dict[str, str]:
    return {
        e["name"]: e["value"]
        for e in container.get("env", [])
        if e["name"] in {"NUM_GPUS", "NUM_REPLICAS", "NUM_GPUS_PER_REPLICA"}
    }


def test_a_batch_job_gets_every_gpu_in_its_one_pod(make_node):
    """Decision 0113: not one share of a split by the smallest node (4 GPUs of the 8)."""
    owner = kaiwo_job({**TRAIN_SPEC, "gpus": 8})
    nodes = [make_node("mi300x-small", gpu="mi300x", gpus=4), make_node("mi300x-0", gpu="mi300x")]
    cluster = ClusterState.from_wire(
        nodes=nodes, objects=[queue_config({"name": "kaiwo"}), owner], namespaces=["team-a"]
    )

    plan = planned(owner=owner, cluster=cluster, now=NOW)

    assert plan is not None
    (job,) = plan.desired
    container = main_container(job)
    assert container["resources"]["limits"]["amd.com/gpu"] == "8"
    assert gpu_env(container) == {"NUM_GPUS": "8", "NUM_REPLICAS": "1", "NUM_GPUS_PER_REPLICA": "8"}
    assert condition(plan, "Schedulable")["status"] == "True"


def test_a_batch_job_larger_than_every_node_is_refused_and_told_about_ray(cluster_with):
    owner = kaiwo_job({**TRAIN_SPEC, "gpus": 16})

    plan = planned(owner=owner, cluster=cluster_with(owner), now=NOW)

    message = (
        "spec.gpus (16) asks for 16 GPUs in the single pod of a Job, but the largest node has "
        "8 GPUs (vendor: amd): set ray: true to spread the GPUs across nodes, or lower spec.gpus"
    )
    assert plan is not None and plan.status is not None
    assert (plan.desired, plan.prune) == ((), ())
    assert plan.status["status"] == "ERROR"
    schedulable = condition(plan, "Schedulable")
    assert (schedulable["status"], schedulable["reason"], schedulable["message"]) == (
        "False",
        "InsufficientGPUsPerNode",
        message,
    )
    assert plan.events == (EventIntent(type="Warning", reason="WorkloadError", message=message),)


def test_a_batch_jobs_parallel_pods_are_described_and_counted_together(cluster_with):
    """Decision 0147: a ``spec.job`` running 2 pods at once (an indexed job of 4 completions)
    holds 2 x 4 GPUs; the env of each pod says so, and so does the Schedulable note. Before,
    the env said ``NUM_REPLICAS=1``, ``NUM_GPUS=4`` and nothing was told."""
    parallel = {"spec": {"parallelism": 2, "completions": 4, "completionMode": "Indexed"}}
    owner = kaiwo_job({**TRAIN_SPEC, "gpus": 4, "job": parallel})

    plan = planned(owner=owner, cluster=cluster_with(owner), now=NOW)

    assert plan is not None
    (job,) = plan.desired
    assert (job["spec"]["parallelism"], job["spec"]["completions"]) == (2, 4)
    container = main_container(job)
    assert container["resources"]["limits"]["amd.com/gpu"] == "4"
    assert gpu_env(container) == {"NUM_GPUS": "8", "NUM_REPLICAS": "2", "NUM_GPUS_PER_REPLICA": "4"}
    schedulable = condition(plan, "Schedulable")
    assert (schedulable["status"], schedulable["reason"], schedulable["message"]) == (
        "True",
        "GpusRecalculated",
        "Cluster has sufficient GPU resources; spec.gpus (4) is the GPUs of each pod of a Job "
        "(spec.gpusPerReplica not given), and the Job runs 2 pods at once "
        "(spec.job.spec.parallelism, no more than its completions), each with 4 GPUs: the "
        "workload holds 8 GPUs; set spec.gpusPerReplica to 2 to share 4 GPUs over the pods, or "
        "lower spec.job.spec.parallelism",
    )


def test_a_batch_job_whose_parallel_pods_exceed_the_cluster_is_refused(cluster_with):
    """Two 8-GPU nodes: 3 pods of 8 at once can never all run (Kueue would hold it for good)."""
    owner = kaiwo_job({**TRAIN_SPEC, "gpus": 8, "job": {"spec": {"parallelism": 3}}})

    plan = planned(owner=owner, cluster=cluster_with(owner), now=NOW)

    assert plan is not None and plan.status is not None
    assert (plan.desired, plan.status["status"]) == ((), "ERROR")
    schedulable = condition(plan, "Schedulable")
    assert (schedulable["reason"], schedulable["message"]) == (
        "InsufficientGPUs",
        "Cluster has 16 GPUs, but requested for 24 GPUs (vendor: amd)",
    )


def _sweep(minimum: str | None) -> dict[str, Any]:
    """4 pods of 8 GPUs at once (32), Kueue's minimum in ``spec.job``'s annotations."""
    job: dict[str, Any] = {"spec": {"parallelism": 4, "completions": 4}}
    if minimum is not None:
        job["metadata"] = {"annotations": {"kueue.x-k8s.io/job-min-parallelism": minimum}}
    return kaiwo_job({**TRAIN_SPEC, "gpus": 32, "replicas": 4, "gpusPerReplica": 8, "job": job})


def test_a_sweep_whose_minimum_fits_the_cluster_is_schedulable_and_its_job_made(cluster_with):
    """Decision 0155: 4 pods x 8 GPUs with minimum 2 on two 8-GPU nodes (16). Kueue can start
    2 of its pods; before, it went ERROR (``InsufficientGPUs``) and its Job was never made."""
    owner = _sweep("2")

    plan = planned(owner=owner, cluster=cluster_with(owner), now=NOW)

    assert plan is not None and plan.status is not None
    assert plan.status["status"] != "ERROR"
    (job,) = plan.desired
    assert job["metadata"]["annotations"]["kueue.x-k8s.io/job-min-parallelism"] == "2"
    assert (job["spec"]["parallelism"], job["spec"]["completions"]) == (4, 4)
    container = main_container(job)
    assert container["resources"]["limits"]["amd.com/gpu"] == "8"
    assert gpu_env(container) == {
        "NUM_GPUS": "32",
        "NUM_REPLICAS": "4",
        "NUM_GPUS_PER_REPLICA": "8",
    }
    schedulable = condition(plan, "Schedulable")
    assert (schedulable["status"], schedulable["reason"], schedulable["message"]) == (
        "True",
        "Schedulable",
        "Cluster has sufficient GPU resources: the Job runs 4 pods of 8 GPUs (32) and Kueue "
        "may start it with 2 (kueue.x-k8s.io/job-min-parallelism), which fit the cluster's 16",
    )


def test_a_sweep_whose_minimum_exceeds_the_cluster_is_refused_naming_it(cluster_with):
    owner = _sweep("3")

    plan = planned(owner=owner, cluster=cluster_with(owner), now=NOW)

    assert plan is not None and plan.status is not None
    assert (plan.desired, plan.status["status"]) == ((), "ERROR")
    schedulable = condition(plan, "Schedulable")
    assert (schedulable["status"], schedulable["reason"], schedulable["message"]) == (
        "False",
        "InsufficientGPUs",
        "Cluster has 16 GPUs, but requested for 32 GPUs (vendor: amd); Kueue may start the "
        "Job with 3 of its 4 pods (kueue.x-k8s.io/job-min-parallelism), 24 GPUs, which do not "
        "fit either: lower the annotation, or spec.gpus",
    )


def test_a_sweep_kueue_may_not_admit_partially_is_refused_as_before(cluster_with):
    """No annotation: the Job runs all its pods or none, so all of them count."""
    owner = _sweep(None)

    plan = planned(owner=owner, cluster=cluster_with(owner), now=NOW)

    assert plan is not None and plan.status is not None
    assert (plan.desired, plan.status["status"]) == ((), "ERROR")
    schedulable = condition(plan, "Schedulable")
    assert (schedulable["status"], schedulable["reason"], schedulable["message"]) == (
        "False",
        "InsufficientGPUs",
        "Cluster has 16 GPUs, but requested for 32 GPUs (vendor: amd)",
    )


@pytest.mark.parametrize(
    ("minimum", "why"),
    [
        ("4", "(4) must be at least 1 and below the 4 pods the Job runs at once"),
        ("0", "(0) must be at least 1 and below the 4 pods the Job runs at once"),
        ("two", 'must be a whole number of pods, not "two"'),
        (" 2", 'must be a whole number of pods, not " 2"'),
        ("2_0", 'must be a whole number of pods, not "2_0"'),
    ],
)
def test_a_sweep_with_a_minimum_kueue_refuses_is_invalid_naming_the_annotation(
    cluster_with, minimum, why
):
    """A minimum Kueue's Job webhook refuses (not a whole number in 1..pods-1): the Job would
    never be made (the KaiwoJob PENDING for good, told in Kueue's words). The spec is invalid
    instead, naming the annotation, told in a Warning, and nothing is made (decision 0160;
    before, the sweep was checked as one without a minimum)."""
    owner = _sweep(minimum)

    plan = planned(owner=owner, cluster=cluster_with(owner), now=NOW)

    assert plan is not None
    valid = condition(plan, "Valid")
    assert (valid["status"], valid["reason"]) == ("False", "InvalidSpec")
    assert valid["message"].startswith(
        "The spec is invalid, nothing was changed: spec.job: "
        f'metadata.annotations["kueue.x-k8s.io/job-min-parallelism"] {why}'
    ), valid["message"]
    assert [(e.type, e.reason) for e in plan.events] == [("Warning", "InvalidSpec")]
    assert plan.desired == ()


def test_a_nonindexed_sweep_kueue_would_keep_complete_as_admitted_is_invalid(cluster_with):
    """``kueue.x-k8s.io/job-completions-equal-parallelism: "true"`` on a Job left NonIndexed:
    Kueue's webhook refuses the Job, which is never made, and the KaiwoJob waited PENDING for
    good with Kueue's words in ApplyRefused (measured). Now the spec is invalid, naming
    ``spec.job.spec.completionMode``, told in a Warning, and nothing is made (decision 0160)."""
    job = {
        "metadata": {
            "annotations": {
                "kueue.x-k8s.io/job-min-parallelism": "2",
                "kueue.x-k8s.io/job-completions-equal-parallelism": "true",
            }
        },
        "spec": {"parallelism": 4, "completions": 4},
    }
    owner = kaiwo_job({**TRAIN_SPEC, "gpus": 8, "job": job})

    plan = planned(owner=owner, cluster=cluster_with(owner), now=NOW)

    assert plan is not None
    valid = condition(plan, "Valid")
    assert (valid["status"], valid["reason"]) == ("False", "InvalidSpec")
    assert valid["message"] == (
        "The spec is invalid, nothing was changed: spec.job: spec.completionMode must be "
        'Indexed with metadata.annotations["kueue.x-k8s.io/job-completions-equal-parallelism"] '
        '"true": Kueue then sets the completions of the Job to the pods it admits, which '
        "Kubernetes lets change only for an Indexed Job whose completions equal its "
        "parallelism (left out, the mode is NonIndexed); set spec.completionMode: Indexed or "
        "leave the annotation out"
    )
    assert [(e.type, e.reason) for e in plan.events] == [("Warning", "InvalidSpec")]
    assert "spec.job: spec.completionMode must be Indexed" in plan.events[0].message
    assert plan.desired == ()


def test_a_sweep_whose_pods_exceed_every_node_is_refused_per_node_with_a_minimum(cluster_with):
    """The minimum changes the cluster-size check only: a pod larger than every node never
    runs, however few of them Kueue starts."""
    job = {
        "metadata": {"annotations": {"kueue.x-k8s.io/job-min-parallelism": "1"}},
        "spec": {"parallelism": 2},
    }
    owner = kaiwo_job({**TRAIN_SPEC, "gpus": 32, "replicas": 2, "gpusPerReplica": 16, "job": job})

    plan = planned(owner=owner, cluster=cluster_with(owner), now=NOW)

    assert plan is not None
    schedulable = condition(plan, "Schedulable")
    assert (schedulable["status"], schedulable["reason"]) == ("False", "InsufficientGPUsPerNode")


def test_a_ray_job_larger_than_every_node_is_still_split(cluster_with):
    owner = kaiwo_job({**TRAIN_SPEC, "gpus": 16, "ray": True})

    plan = planned(owner=owner, cluster=cluster_with(owner), now=NOW)

    assert plan is not None
    assert condition(plan, "Schedulable")["status"] == "True"
    (ray_job,) = plan.desired
    (workers,) = ray_job["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    assert workers["replicas"] == 2
    worker = workers["template"]["spec"]["containers"][0]
    assert worker["resources"]["limits"]["amd.com/gpu"] == "8"


SERVE_SPEC = {"user": "bo@example.com", "image": "vllm:1", "entrypoint": "serve"}


def test_a_deployment_keeps_its_replicas_and_shares_gpus_over_them(cluster_with):
    """Decision 0113: upstream made ``replicas: 4, gpus: 8`` one pod of 8 GPUs."""
    owner = kaiwo_service({**SERVE_SPEC, "replicas": 4, "gpus": 8})

    plan = planned(owner=owner, cluster=cluster_with(owner), now=NOW)

    assert plan is not None
    (deployment,) = plan.desired
    container = main_container(deployment)
    assert deployment["spec"]["replicas"] == 4
    assert container["resources"]["limits"]["amd.com/gpu"] == "2"
    assert gpu_env(container) == {"NUM_GPUS": "8", "NUM_REPLICAS": "4", "NUM_GPUS_PER_REPLICA": "2"}


def test_a_deployment_of_one_replica_is_split_by_node_size(cluster_with):
    owner = kaiwo_service({**SERVE_SPEC, "replicas": 1, "gpus": 16})

    plan = planned(owner=owner, cluster=cluster_with(owner), now=NOW)

    assert plan is not None
    (deployment,) = plan.desired
    assert deployment["spec"]["replicas"] == 2
    assert main_container(deployment)["resources"]["limits"]["amd.com/gpu"] == "8"


def test_a_deployment_whose_gpus_do_not_divide_over_its_replicas_is_refused(cluster_with):
    owner = kaiwo_service({**SERVE_SPEC, "replicas": 3, "gpus": 8})

    plan = planned(owner=owner, cluster=cluster_with(owner), now=NOW)

    message = (
        "spec.gpus (8) does not divide evenly over spec.replicas (3) of a Deployment: set "
        "spec.gpus to a multiple of spec.replicas, or set spec.gpusPerReplica"
    )
    assert plan is not None and plan.status is not None
    assert (plan.desired, plan.status["status"]) == ((), "ERROR")
    assert condition(plan, "Schedulable")["reason"] == "GpusNotDivisibleByReplicas"
    assert plan.events == (EventIntent(type="Warning", reason="WorkloadError", message=message),)


# ------------------------------------------------------------------ totals told (0118)


def four_eight_gpu_nodes(make_node: Any, *objects: dict[str, Any]) -> ClusterState:
    return ClusterState.from_wire(
        nodes=[make_node(f"mi300x-{i}", gpu="mi300x", gpus=8) for i in range(4)],
        objects=[queue_config({"name": "kaiwo"}), *objects],
        namespaces=["team-a"],
    )


def notes(plan: Plan) -> tuple[EventIntent, ...]:
    return tuple(e for e in plan.events if e.reason in {"GpusRoundedDown", "GpusRecalculated"})


def test_a_split_that_rounds_down_says_so_and_its_env_says_what_runs(make_node):
    """``gpus: 30`` on 8-GPU nodes runs 4 x 7: the user is told 30 became 28, once."""
    owner = kaiwo_job({**TRAIN_SPEC, "gpus": 30, "ray": True})
    cluster = four_eight_gpu_nodes(make_node, owner)

    plan = planned(owner=owner, cluster=cluster, now=NOW)

    message = (
        "Cluster has sufficient GPU resources; spec.gpus (30) is rounded down to 28: the "
        "nodes' size splits it into 4 replicas of 7 GPUs, and 30 does not divide evenly over "
        "4; set spec.gpus to a multiple of 4, or set spec.replicas and spec.gpusPerReplica to "
        "choose the split"
    )
    assert plan is not None and plan.status is not None
    schedulable = condition(plan, "Schedulable")
    assert (schedulable["status"], schedulable["reason"], schedulable["message"]) == (
        "True",
        "GpusRoundedDown",
        message,
    )
    assert notes(plan) == (EventIntent(type="Normal", reason="GpusRoundedDown", message=message),)
    (ray_job,) = plan.desired
    (workers,) = ray_job["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    assert workers["replicas"] == 4
    worker = workers["template"]["spec"]["containers"][0]
    assert gpu_env(worker) == {"NUM_GPUS": "28", "NUM_REPLICAS": "4", "NUM_GPUS_PER_REPLICA": "7"}

    told = kaiwo_job({**TRAIN_SPEC, "gpus": 30, "ray": True}, status=plan.status)
    again = planned(owner=told, cluster=four_eight_gpu_nodes(make_node, told), now=NOW)
    assert again is not None
    assert notes(again) == ()


def test_gpus_per_replica_with_the_default_replicas_says_gpus_was_recalculated(make_node):
    """The CRD defaults replicas to 1, so gpus 16 with gpusPerReplica 8 runs 1 x 8 (the API
    reference: gpus is recalculated); the user is told which fields to change."""
    owner = kaiwo_job({**TRAIN_SPEC, "gpus": 16, "gpusPerReplica": 8, "replicas": 1, "ray": True})

    plan = planned(owner=owner, cluster=four_eight_gpu_nodes(make_node, owner), now=NOW)

    message = (
        "Cluster has sufficient GPU resources; spec.gpus (16) is recalculated from "
        "spec.replicas (1) x spec.gpusPerReplica (8): the workload holds 8 GPUs; set "
        "spec.replicas to 2 for 16 GPUs, or leave out spec.gpus"
    )
    assert plan is not None
    assert condition(plan, "Schedulable")["reason"] == "GpusRecalculated"
    assert condition(plan, "Schedulable")["message"] == message
    assert notes(plan) == (EventIntent(type="Normal", reason="GpusRecalculated", message=message),)
    (ray_job,) = plan.desired
    (workers,) = ray_job["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    assert workers["replicas"] == 1
    worker = workers["template"]["spec"]["containers"][0]
    assert gpu_env(worker) == {"NUM_GPUS": "8", "NUM_REPLICAS": "1", "NUM_GPUS_PER_REPLICA": "8"}


def test_a_batch_job_with_gpus_per_replica_describes_its_one_pod(make_node):
    """A Job runs one pod whatever replicas says: the env says 1 replica of 2 GPUs, not 3 x 2
    (a torchrun --nnodes 3 would wait for nodes that never come)."""
    owner = kaiwo_job({**TRAIN_SPEC, "gpus": 6, "replicas": 3, "gpusPerReplica": 2})

    plan = planned(owner=owner, cluster=four_eight_gpu_nodes(make_node, owner), now=NOW)

    assert plan is not None
    (job,) = plan.desired
    container = main_container(job)
    assert container["resources"]["limits"]["amd.com/gpu"] == "2"
    assert gpu_env(container) == {"NUM_GPUS": "2", "NUM_REPLICAS": "1", "NUM_GPUS_PER_REPLICA": "2"}
    assert condition(plan, "Schedulable")["message"] == (
        "Cluster has sufficient GPU resources; spec.gpus (6) is recalculated as "
        "spec.gpusPerReplica (2), the GPUs of the single pod of a Job (spec.replicas is "
        "ignored for a Job): the workload holds 2 GPUs; leave out spec.gpusPerReplica to give "
        "the pod all 6, or set ray: true to run spec.replicas pods"
    )


def test_preemption_counts_the_gpus_the_pods_will_hold(make_node):
    """The waiting Ray job asks for 30 on 8-GPU nodes; its 4 pods will hold 28."""
    running = {"status": "RUNNING", "startTime": "2026-01-01T09:00:00Z", "observedGeneration": 1}
    expired = kaiwo_job({**TRAIN_SPEC, "gpus": 8, "duration": "1h"}, status=running)
    waiting = kaiwo_job(
        {**TRAIN_SPEC, "gpus": 30, "ray": True},
        name="next",
        uid="next-uid",
        status={"status": "PENDING", "observedGeneration": 1},
        created="2026-01-01T11:50:00Z",
    )
    cluster = ClusterState.from_wire(
        nodes=[make_node(f"mi300x-{i}", gpu="mi300x", gpus=8) for i in range(4)],
        objects=[queue_config({"name": "kaiwo"}), expired, running_job(expired), waiting],
        kueue_workloads=(admitted("job-uid-job"),),
        namespaces=["team-a"],
    )

    victim = planned(owner=expired, cluster=cluster, now=NOW)

    assert victim is not None
    assert condition(victim, "WorkloadTerminatedEarly")["message"] == (
        "Terminated since duration was exceeded and there is active GPU demand: "
        "KaiwoJob/team-a/next has waited for 28 amd GPUs longer than 5m0s"
    )


# ------------------------------------------------------------------ preemption by duration


def waiting_since(at: str) -> dict[str, Any]:
    """A PENDING status whose ``Admitted`` condition turned False at ``at`` (after an eviction,
    or the end of the downloads)."""
    condition = {
        "type": "Admitted",
        "status": "False",
        "reason": "Pending",
        "message": "Workload is pending admission into 'kaiwo'",
        "lastTransitionTime": at,
    }
    return {"status": "PENDING", "observedGeneration": 1, "conditions": [condition]}


def expired_and_waiting(
    cluster_with: Any, waiting_status: dict[str, Any], *, created: str
) -> tuple[dict[str, Any], dict[str, Any], ClusterState]:
    """A workload of 8 GPUs past its 1h duration, one waiting for 8 GPUs, and their cluster."""
    running = {"status": "RUNNING", "startTime": "2026-01-01T09:00:00Z", "observedGeneration": 1}
    expired = kaiwo_job({**TRAIN_SPEC, "gpus": 8, "duration": "1h"}, status=running)
    waiting = kaiwo_job(
        {**TRAIN_SPEC, "gpus": 8},
        name="next",
        uid="next-uid",
        status=waiting_status,
        created=created,
    )
    cluster = cluster_with(
        expired, running_job(expired), waiting, workloads=(admitted("job-uid-job"),)
    )
    return expired, waiting, cluster


def test_an_expired_workload_is_terminated_for_one_waiting_too_long(cluster_with):
    expired, waiting, cluster = expired_and_waiting(
        cluster_with, {"status": "PENDING", "observedGeneration": 1}, created="2026-01-01T11:50:00Z"
    )

    victim = planned(owner=expired, cluster=cluster, now=NOW)
    beneficiary = planning(owner=waiting, cluster=cluster, now=NOW)

    assert victim is not None and victim.status is not None
    assert victim.status["status"] == "TERMINATING"
    assert condition(victim, "WorkloadTerminatedEarly") == {
        "type": "WorkloadTerminatedEarly",
        "status": "False",
        "observedGeneration": 1,
        "lastTransitionTime": T_NOW,
        "reason": "DurationExceededWithActiveGpuDemand",
        "message": (
            "Terminated since duration was exceeded and there is active GPU demand: "
            "KaiwoJob/team-a/next has waited for 8 amd GPUs longer than 5m0s"
        ),
    }
    assert beneficiary.also_replan == (
        ObjectRef(
            api_version=KAIWO, kind="KaiwoJob", name="train", namespace="team-a", uid="job-uid"
        ),
    )


def test_a_workload_kueue_evicted_waits_since_its_eviction_not_its_creation(cluster_with):
    # Created two hours ago, evicted two minutes ago: pending for 2 minutes, under the 5m
    # threshold (the seed's "pending for longer than this threshold"; upstream counted from
    # the creation, and stopped the expired workload at once).
    expired, waiting, cluster = expired_and_waiting(
        cluster_with, waiting_since("2026-01-01T11:58:00Z"), created="2026-01-01T10:00:00Z"
    )

    victim = planned(owner=expired, cluster=cluster, now=NOW)
    beneficiary = planning(owner=waiting, cluster=cluster, now=NOW)

    assert victim is not None and victim.status is not None
    assert victim.status["status"] == "RUNNING"
    assert beneficiary.also_replan == ()
    assert beneficiary.replan_at == datetime(2026, 1, 1, 12, 3, 1, tzinfo=UTC)


def test_a_running_workload_is_replanned_at_its_deadline(cluster_with):
    running = {"status": "RUNNING", "startTime": T_EARLIER, "observedGeneration": 1}
    owner = kaiwo_job({**TRAIN_SPEC, "duration": "2h"}, status=running)
    cluster = cluster_with(owner, running_job(owner), workloads=(admitted("job-uid-job"),))

    result = planning(owner=owner, cluster=cluster, now=NOW)

    assert result.replan_at == datetime(2026, 1, 1, 13, 0, 0, tzinfo=UTC)
    assert result.plan is not None
    assert condition(result.plan, "Preemptable")["reason"] == "DurationNotExceeded"


# ------------------------------------------------------------------ the KaiwoQueueConfig


def test_localqueues_exist_where_workloads_use_an_open_queue(gpu_nodes):
    queues = queue_config({"name": "kaiwo"}, {"name": "vision-queue", "namespaces": ["vision"]})
    workloads = [
        kaiwo_job({}, namespace="team-a"),
        kaiwo_job({"clusterQueue": "kaiwo"}, name="b", namespace="team-b", uid="b"),
        kaiwo_job({"clusterQueue": "vision-queue"}, name="c", namespace="team-c", uid="c"),
    ]
    cluster = ClusterState.from_wire(
        nodes=gpu_nodes, objects=[queues, *workloads], namespaces=["team-a", "team-b", "vision"]
    )

    plan = planned(owner=queues, cluster=cluster, now=NOW)

    assert plan is not None
    local_queues = [d for d in plan.desired if d["kind"] == "LocalQueue"]
    assert [(q["metadata"]["namespace"], q["metadata"]["name"]) for q in local_queues] == [
        ("team-a", "kaiwo"),
        ("team-b", "kaiwo"),
        ("vision", "vision-queue"),
    ]
    assert local_queues[0] == {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "LocalQueue",
        "metadata": {
            "name": "kaiwo",
            "namespace": "team-a",
            "labels": {
                "app.kubernetes.io/managed-by": "kaiwo",
                "kaiwo.silogen.ai/queue-config": "kaiwo",
            },
            "ownerReferences": [
                {
                    "apiVersion": KAIWO,
                    "kind": "KaiwoQueueConfig",
                    "name": "kaiwo",
                    "uid": "kqc-uid",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {"clusterQueue": "kaiwo"},
    }
    # None of the Kueue objects is observed yet: not READY until they are (decision 0048).
    assert plan.status is not None and plan.status["status"] == "PENDING"


def test_a_workload_waiting_on_an_invalid_queue_config_is_told_so(cluster_with):
    # Decision 0205: two flavors of one name pass the CRD, not the model. Every workload said
    # "Cluster queue 'kaiwo' is not defined in KaiwoQueueConfig 'kaiwo'", which it is.
    broken = queue_config({"name": "kaiwo"})
    broken["spec"]["resourceFlavors"] *= 2

    plan = planned(owner=kaiwo_job({}), cluster=cluster_with(queues=broken), now=NOW)

    assert plan is not None
    schedulable = condition(plan, "Schedulable")
    assert (schedulable["status"], schedulable["reason"], schedulable["message"]) == (
        "False",
        "QueueConfigInvalid",
        "KaiwoQueueConfig 'kaiwo' is invalid, so none of its queues is in force (its Valid "
        "condition says why): cluster queue 'kaiwo' waits for it to be fixed",
    )
    # A queue config that does not define the queue still says that.
    other = planned(owner=kaiwo_job({"clusterQueue": "nosuch"}), cluster=cluster_with(), now=NOW)
    assert other is not None
    assert condition(other, "Schedulable")["reason"] == "ClusterQueueNotFound"


def test_an_invalid_queue_config_is_reported_without_observed_generation(cluster_with):
    broken = queue_config({"name": "kaiwo"})
    broken["spec"]["clusterQueues"][0]["spec"]["resourceGroups"] = "many"

    plan = planned(owner=broken, cluster=cluster_with(), now=NOW)

    assert plan is not None and plan.status is not None
    assert plan.status["status"] == "FAILED"
    assert "observedGeneration" not in plan.status
    assert condition(plan, "Valid")["reason"] == "InvalidSpec"
    assert "spec.clusterQueues[0].spec.resourceGroups" in condition(plan, "Valid")["message"]
    assert (plan.desired, plan.prune) == ((), ())


# ------------------------------------------------------------------ kinds without a plan


@pytest.mark.parametrize(
    "owner",
    [
        {"apiVersion": "config.kaiwo.silogen.ai/v1alpha1", "kind": "KaiwoConfig", "metadata": {}},
        {
            "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
            "kind": "AIMNamespaceConfig",
            "metadata": {"name": "aim", "namespace": "team-a"},
        },
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}},
    ],
    ids=["KaiwoConfig", "AIMNamespaceConfig", "Job"],
)
def test_objects_that_own_nothing_have_no_plan(owner, cluster_with):
    assert planned(owner=owner, cluster=cluster_with(), now=NOW) is None


def test_the_same_inputs_give_the_same_bytes(cluster_with):
    owner = kaiwo_job({**TRAIN_SPEC, "env": [{"name": "B", "value": "2"}, {"name": "A"}]})

    first = planned(owner=owner, cluster=cluster_with(owner), now=NOW)
    second = planned(owner=copy.deepcopy(owner), cluster=cluster_with(owner), now=NOW)

    assert canonical_json(dumped(first)) == canonical_json(dumped(second))


# ------------------------------------------------------------------ monitor findings


def finding(
    *,
    at: datetime = NOW,
    measured: bool = True,
    underutilized_since: datetime | None = None,
    idle_since: datetime | None = None,
    reading: float | None = None,
    threshold: float = 0.01,
    idle_threshold: float = 0.05,
) -> WorkloadFinding:
    """A finding as the monitor publishes it with the default KaiwoConfig (1 %; idle: 5 %,
    aggregation Max); ``reading`` defaults to 0 during a stretch and 50 % otherwise."""
    if reading is None:
        reading = 0.0 if underutilized_since or idle_since else 0.5
    return WorkloadFinding(
        uid="job-uid",
        at=at,
        measured=measured,
        vendor="amd",
        gpu_count=4,
        threshold_ratio=threshold,
        underutilized_since=underutilized_since,
        idle_threshold_ratio=idle_threshold,
        idle_since=idle_since,
        utilization_ratio=reading if measured else None,
        idle_utilization_ratio=reading if measured else None,
        idle_aggregation="Max",
    )


OPTED_IN = {"kaiwo.silogen.ai/gpu-preemption.policy": "OnPressure"}
"""The workload's annotation that opts it in to GPU idle preemption (policy OnPressure)."""


def opted_in(workload: dict[str, Any], annotations: dict[str, str] = OPTED_IN) -> dict[str, Any]:
    return {**workload, "metadata": {**workload["metadata"], "annotations": dict(annotations)}}


def with_findings(cluster: ClusterState, *found: WorkloadFinding) -> ClusterState:
    return dataclasses.replace(cluster, findings={f.uid: f for f in found})


RUNNING_STATUS = {"status": "RUNNING", "startTime": "2026-01-01T09:00:00Z", "observedGeneration": 1}
TERMINATE_AFTER_1H = {
    "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
    "kind": "KaiwoConfig",
    "metadata": {"name": "kaiwo", "uid": "config-uid"},
    "spec": {
        "resourceMonitoring": {"terminateUnderutilized": True, "terminateUnderutilizedAfter": "1h"}
    },
}


def test_an_underutilized_finding_sets_the_condition_and_a_normal_one_clears_it(cluster_with):
    owner = kaiwo_job(TRAIN_SPEC, status=RUNNING_STATUS)
    cluster = cluster_with(owner, running_job(owner), workloads=(admitted("job-uid-job"),))
    low = planned(
        owner=owner,
        cluster=with_findings(cluster, finding(underutilized_since=NOW - timedelta(minutes=5))),
        now=NOW,
    )
    assert condition(low, "ResourceUnderutilization") == {
        "type": "ResourceUnderutilization",
        "status": "True",
        "observedGeneration": 1,
        "lastTransitionTime": T_NOW,
        "reason": "GpuUtilizationLow",
        "message": "GPU utilization has been below 1% of the requested GPUs since "
        "2026-01-01T11:55:00Z",
    }
    assert low.status is not None and low.status["status"] == "RUNNING"
    # Told once as an Event (upstream's GpuUtilizationLow), not again while it lasts.
    assert tuple(e for e in low.events if e.reason == "GpuUtilizationLow") == (
        EventIntent(
            type="Warning",
            reason="GpuUtilizationLow",
            message="GPU utilization has been below 1% of the requested GPUs since "
            "2026-01-01T11:55:00Z",
        ),
    )

    flagged = kaiwo_job(TRAIN_SPEC, status=low.status)
    later = NOW + timedelta(minutes=1)
    still_low = planned(
        owner=flagged,
        cluster=with_findings(
            cluster, finding(at=later, underutilized_since=NOW - timedelta(minutes=5))
        ),
        now=later,
    )
    assert condition(still_low, "ResourceUnderutilization") == condition(
        low, "ResourceUnderutilization"
    )
    assert [e for e in still_low.events if e.reason == "GpuUtilizationLow"] == []
    normal = planned(owner=flagged, cluster=with_findings(cluster, finding(at=later)), now=later)
    cleared = condition(normal, "ResourceUnderutilization")
    assert (cleared["status"], cleared["reason"], cleared["lastTransitionTime"]) == (
        "False",
        "GpuUtilizationNormal",
        "2026-01-01T12:01:00Z",
    )
    # No data: the condition stays as it was.
    unknown = planned(
        owner=flagged, cluster=with_findings(cluster, finding(measured=False)), now=later
    )
    assert condition(unknown, "ResourceUnderutilization") == condition(
        low, "ResourceUnderutilization"
    )


def test_underutilized_for_the_window_is_terminated_only_on_fresh_evidence(cluster_with):
    owner = kaiwo_job(TRAIN_SPEC, status=RUNNING_STATUS)
    cluster = cluster_with(
        owner, running_job(owner), TERMINATE_AFTER_1H, workloads=(admitted("job-uid-job"),)
    )
    since = NOW - timedelta(hours=1)
    short = planned(
        owner=owner,
        cluster=with_findings(cluster, finding(underutilized_since=since + timedelta(seconds=1))),
        now=NOW,
    )
    assert short.status is not None and short.status["status"] == "RUNNING"

    due = planned(
        owner=owner, cluster=with_findings(cluster, finding(underutilized_since=since)), now=NOW
    )
    assert due.status is not None and due.status["status"] == "TERMINATING"
    early = condition(due, "WorkloadTerminatedEarly")
    assert (early["status"], early["reason"]) == ("False", "GpuUtilizationLow")

    # The same evidence, but the monitor went quiet ten minutes ago: nothing happens.
    stale = planned(
        owner=owner,
        cluster=with_findings(
            cluster,
            finding(
                at=NOW - timedelta(minutes=10), underutilized_since=since - timedelta(minutes=10)
            ),
        ),
        now=NOW,
    )
    assert stale.status is not None and stale.status["status"] == "RUNNING"
    # Missing data never terminates.
    missing = planned(
        owner=owner,
        cluster=with_findings(cluster, finding(measured=False, underutilized_since=since)),
        now=NOW,
    )
    assert missing.status is not None and missing.status["status"] == "RUNNING"


def test_an_idle_workload_is_preempted_for_a_pending_one_that_waited(cluster_with):
    owner = opted_in(kaiwo_job(TRAIN_SPEC, status=RUNNING_STATUS))
    waiting = kaiwo_job(
        {**TRAIN_SPEC, "gpus": 4},
        name="next",
        uid="next-uid",
        status={"status": "PENDING", "observedGeneration": 1},
        created="2026-01-01T11:50:00Z",
    )
    cluster = cluster_with(owner, running_job(owner), waiting, workloads=(admitted("job-uid-job"),))
    idle = finding(idle_since=NOW - timedelta(minutes=11))
    victim = planned(owner=owner, cluster=with_findings(cluster, idle), now=NOW)
    assert victim.status is not None and victim.status["status"] == "TERMINATING"
    early = condition(victim, "WorkloadTerminatedEarly")
    assert early["reason"] == "GpuIdlePreemption"
    assert "for pending workload KaiwoJob/team-a/next" in early["message"]
    assert victim.status["preemptedFor"] == {
        "kind": "KaiwoJob",
        "namespace": "team-a",
        "name": "next",
        "uid": "next-uid",
    }

    # Without pressure (nobody pending), OnPressure keeps it running.
    alone = cluster_with(owner, running_job(owner), workloads=(admitted("job-uid-job"),))
    kept = planned(owner=owner, cluster=with_findings(alone, idle), now=NOW)
    assert kept.status is not None and kept.status["status"] == "RUNNING"

    # A waiter Kueue evicted a minute ago has waited a minute, not since its creation
    # (decision 0191): no pressure yet.
    evicted = {**waiting, "status": waiting_since("2026-01-01T11:59:00Z")}
    recent = cluster_with(owner, running_job(owner), evicted, workloads=(admitted("job-uid-job"),))
    spared = planned(owner=owner, cluster=with_findings(recent, idle), now=NOW)
    assert spared.status is not None and spared.status["status"] == "RUNNING"


def pending_next(queue: str) -> dict[str, Any]:
    """``next``, a KaiwoJob of ``queue`` PENDING for 4 GPUs since 11:50."""
    return kaiwo_job(
        {**TRAIN_SPEC, "gpus": 4, "clusterQueue": queue},
        name="next",
        uid="next-uid",
        status={"status": "PENDING", "observedGeneration": 1},
        created="2026-01-01T11:50:00Z",
    )


def test_an_idle_workload_is_kept_for_a_pending_one_of_another_cluster_queue(cluster_with):
    # Kueue gives what the idle job frees back to its own queue (decision 0236).
    owner = opted_in(kaiwo_job(TRAIN_SPEC, status=RUNNING_STATUS))
    waiting = pending_next("elsewhere")
    cluster = cluster_with(owner, running_job(owner), waiting, workloads=(admitted("job-uid-job"),))
    idle = finding(idle_since=NOW - timedelta(minutes=11))
    kept = planned(owner=owner, cluster=with_findings(cluster, idle), now=NOW)
    assert kept.status is not None and kept.status["status"] == "RUNNING"


def test_an_idle_workload_is_kept_for_one_of_its_cohort_where_its_flavor_lends_nothing(
    cluster_with,
):
    """Kueue lends each flavor on its own (decision 0279). The idle job's queue ``kaiwo``
    lends its MI250 quota to the cohort ``lab`` and none of its MI300X: admitted into MI300X,
    it frees nothing ``next`` (waiting in ``other``, of ``lab``) can borrow, and is kept;
    admitted into MI250, it is preempted for ``next``. Before, any flavor's lending counted."""
    owner = opted_in(kaiwo_job(TRAIN_SPEC, status=RUNNING_STATUS))
    waiting = pending_next("other")
    queues = (
        cohort_queue("kaiwo", "lab", mi300x={"lendingLimit": 0}, mi250={}),
        cohort_queue("other", "lab", mi300x={}, mi250={}),
    )
    idle = finding(idle_since=NOW - timedelta(minutes=11))

    def phase_held_in(flavor: str) -> str:
        held = admitted("job-uid-job")
        held["status"]["admission"] = {
            "clusterQueue": "kaiwo",
            "podSetAssignments": [{"name": "main", "flavors": {"amd.com/gpu": flavor}}],
        }
        cluster = cluster_with(owner, running_job(owner), waiting, *queues, workloads=(held,))
        plan = planned(owner=owner, cluster=with_findings(cluster, idle), now=NOW)
        assert plan is not None and plan.status is not None
        return str(plan.status["status"])

    assert phase_held_in("mi300x") == "RUNNING"
    assert phase_held_in("mi250") == "TERMINATING"


def waiting_kaiwo_job() -> list[dict[str, Any]]:
    return [pending_next("other")]


def waiting_replica() -> list[dict[str, Any]]:
    """``chat``, a READY KaiwoService of queue ``other`` (2 replicas of 4 GPUs): Kueue
    admitted one replica's pod and has gated the other's since 11:30 (decision 0236)."""
    spec = {"image": "vllm", "replicas": 2, "gpusPerReplica": 4, "clusterQueue": "other"}
    serve = kaiwo_service(spec, status={"status": "READY", "startTime": "2026-01-01T11:00:00Z"})
    objects: list[dict[str, Any]] = [serve]
    for name, conditions in (("chat-a", [{"type": "Admitted", "status": "True"}]), ("chat-b", [])):
        labels = {"kaiwo.silogen.ai/run-id": "svc-uid"}
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": "team-a",
                "uid": f"uid-{name}",
                "labels": labels,
            },
        }
        workload = {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "Workload",
            "metadata": {
                "name": f"pod-{name}",
                "namespace": "team-a",
                "uid": f"uid-{name}-workload",
                "creationTimestamp": "2026-01-01T11:30:00Z",
                "ownerReferences": [{"kind": "Pod", "name": name, "uid": f"uid-{name}"}],
            },
            "status": {"conditions": conditions},
        }
        objects += [pod, workload]
    return objects


@pytest.mark.parametrize("waiting", [waiting_kaiwo_job, waiting_replica])
def test_an_idle_workload_is_kept_for_one_whose_queue_has_no_room_left_to_borrow(
    cluster_with, waiting
):
    """Decision 0281: a workload waits for 4 GPUs in ``other``, which may borrow 8 beyond its
    8 of each flavor. Holding 14 of each (6 borrowed), it may take 2 more: Kueue admits the
    waiting workload on nothing the idle job of ``kaiwo`` frees, and the idle job is kept.
    Holding 12 (4 borrowed), it is preempted. Before, any limit above 0 was open."""
    owner = opted_in(kaiwo_job(TRAIN_SPEC, status=RUNNING_STATUS))
    idle = finding(idle_since=NOW - timedelta(minutes=11))
    others = waiting()
    workloads = tuple(o for o in others if o["kind"] == "Workload")
    others = [o for o in others if o["kind"] != "Workload"]

    def phase_beside(borrowed: int) -> str:
        limited = cohort_queue("other", "lab", mi300x={"borrowingLimit": 8})
        usage = {"name": "amd.com/gpu", "total": str(8 + borrowed), "borrowed": str(borrowed)}
        limited["status"] = {"flavorsReservation": [{"name": "mi300x", "resources": [usage]}]}
        queues = (cohort_queue("kaiwo", "lab", mi300x={}), limited)
        cluster = cluster_with(owner, running_job(owner), *others, *queues, workloads=workloads)
        plan = planned(owner=owner, cluster=with_findings(cluster, idle), now=NOW)
        assert plan is not None and plan.status is not None
        return str(plan.status["status"])

    assert phase_beside(6) == "RUNNING"
    assert phase_beside(4) == "TERMINATING"


def test_an_idle_workload_within_the_quota_its_queue_keeps_from_lending_is_kept(cluster_with):
    """Decision 0282: ``kaiwo`` keeps 8 of its 16 MI300X GPUs from lending (its lending
    limit is 8). Kueue counts in the cohort only what it uses beyond those 8, so stopping the
    idle job, while ``kaiwo`` uses 8, frees nothing ``next`` (waiting in ``other``) can borrow:
    it is kept. While ``kaiwo`` uses 12, it is preempted for ``next``; while it uses 10, it
    would give the cohort 2 of the 4 ``next`` waits for, and is kept (decision 0284)."""
    owner = opted_in(kaiwo_job(TRAIN_SPEC, status=RUNNING_STATUS))
    waiting = pending_next("other")
    idle = finding(idle_since=NOW - timedelta(minutes=11))

    def phase_while_using(gpus: int) -> str:
        lender = cohort_queue("kaiwo", "lab", mi300x={"nominalQuota": 16, "lendingLimit": 8})
        usage = {"name": "amd.com/gpu", "total": str(gpus)}
        lender["status"] = {"flavorsUsage": [{"name": "mi300x", "resources": [usage]}]}
        queues = (lender, cohort_queue("other", "lab", mi300x={}))
        cluster = cluster_with(owner, running_job(owner), waiting, *queues)
        plan = planned(owner=owner, cluster=with_findings(cluster, idle), now=NOW)
        assert plan is not None and plan.status is not None
        return str(plan.status["status"])

    assert phase_while_using(8) == "RUNNING"
    assert phase_while_using(12) == "TERMINATING"
    assert phase_while_using(10) == "RUNNING"


# ------------------------- each preemption counts the other's observed victims (decision 0150)


def preempted_for_next(reason: str, phase: str, at: str, *, name: str, uid: str) -> dict[str, Any]:
    """A KaiwoJob of 4 GPUs the planner terminated for ``reason`` for ``next`` (as it writes
    the status: TERMINATING, the condition False; TERMINATED, True since ``at``)."""
    status = {
        "status": phase,
        "startTime": "2026-01-01T09:00:00Z",
        "observedGeneration": 1,
        "preemptedFor": {
            "kind": "KaiwoJob",
            "namespace": "team-a",
            "name": "next",
            "uid": "next-uid",
        },
        "conditions": [
            {
                "type": "WorkloadTerminatedEarly",
                "status": "True" if phase == "TERMINATED" else "False",
                "observedGeneration": 1,
                "lastTransitionTime": at,
                "reason": reason,
                "message": "Terminated early for KaiwoJob/team-a/next",
            }
        ],
    }
    return kaiwo_job({**TRAIN_SPEC, "duration": "1h"}, name=name, uid=uid, status=status)


def pod_of_run(uid: str) -> dict[str, Any]:
    """A pod of the workload ``uid`` still observed (the label the planner puts on them)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{uid}-pod",
            "namespace": "team-a",
            "uid": f"{uid}-pod",
            "labels": {"kaiwo.silogen.ai/run-id": uid},
        },
    }


NEXT_WAITS_FOR_4 = kaiwo_job(
    {**TRAIN_SPEC, "gpus": 4},
    name="next",
    uid="next-uid",
    status={"status": "PENDING", "observedGeneration": 1},
    created="2026-01-01T11:50:00Z",
)


def test_an_idle_workload_is_spared_while_an_expired_ones_gpus_go_to_the_waiter(cluster_with):
    """``expired`` was terminated for ``next`` by duration preemption. Observed TERMINATING,
    it left ``preempting``, and the idle decision, counting its own victims only, saw ``next``
    unserved and preempted the idle workload too, for GPUs already on their way."""
    owner = opted_in(kaiwo_job(TRAIN_SPEC, status=RUNNING_STATUS))
    idle = finding(idle_since=NOW - timedelta(minutes=11))

    def idle_plan(*others: dict[str, Any]) -> str:
        cluster = cluster_with(
            owner,
            running_job(owner),
            NEXT_WAITS_FOR_4,
            *others,
            workloads=(admitted("job-uid-job"),),
        )
        plan = planned(owner=owner, cluster=with_findings(cluster, idle), now=NOW)
        assert plan is not None and plan.status is not None
        return str(plan.status["status"])

    def expired(phase: str, at: str) -> dict[str, Any]:
        reason = "DurationExceededWithActiveGpuDemand"
        return preempted_for_next(reason, phase, at, name="expired", uid="expired-uid")

    # TERMINATING; then TERMINATED a minute ago (less than two): the GPUs are on their way.
    assert idle_plan(expired("TERMINATING", "2026-01-01T11:59:30Z")) == "RUNNING"
    assert idle_plan(expired("TERMINATED", "2026-01-01T11:59:00Z")) == "RUNNING"
    # TERMINATED two minutes ago and its pods gone: ``next`` still waits and presses again.
    assert idle_plan(expired("TERMINATED", "2026-01-01T11:58:00Z")) == "TERMINATING"
    # Long ago, but a pod of it is still there: its GPUs are not free yet.
    long_ago = expired("TERMINATED", "2026-01-01T11:00:00Z")
    assert idle_plan(long_ago, pod_of_run("expired-uid")) == "RUNNING"
    # Terminated for a workload that no longer waits: nothing on its way to ``next``.
    for_another = copy.deepcopy(expired("TERMINATING", "2026-01-01T11:59:30Z"))
    for_another["status"]["preemptedFor"] |= {"name": "gone", "uid": "gone-uid"}
    assert idle_plan(for_another) == "TERMINATING"


def test_an_expired_workload_runs_on_while_an_idle_victims_gpus_go_to_the_waiter(cluster_with):
    """The reverse: an idle workload preempted for ``next`` (policy OnPressure, its status
    names ``next``) observed stopping; duration preemption counted only its own victims and
    terminated the expired workload for ``next`` as well."""
    running = {"status": "RUNNING", "startTime": "2026-01-01T09:00:00Z", "observedGeneration": 1}
    owner = kaiwo_job({**TRAIN_SPEC, "duration": "1h"}, status=running)

    def expired_plan(*others: dict[str, Any]) -> str:
        cluster = cluster_with(
            owner,
            running_job(owner),
            NEXT_WAITS_FOR_4,
            *others,
            workloads=(admitted("job-uid-job"),),
        )
        plan = planned(owner=owner, cluster=cluster, now=NOW)
        assert plan is not None and plan.status is not None
        return str(plan.status["status"])

    def idle_victim(phase: str, at: str) -> dict[str, Any]:
        return preempted_for_next("GpuIdlePreemption", phase, at, name="idle", uid="idle-uid")

    assert expired_plan(idle_victim("TERMINATING", "2026-01-01T11:59:30Z")) == "RUNNING"
    assert expired_plan(idle_victim("TERMINATED", "2026-01-01T11:59:00Z")) == "RUNNING"
    assert expired_plan(idle_victim("TERMINATED", "2026-01-01T11:58:00Z")) == "TERMINATING"
    long_ago = idle_victim("TERMINATED", "2026-01-01T11:00:00Z")
    assert expired_plan(long_ago, pod_of_run("idle-uid")) == "RUNNING"


def test_the_other_preemptions_victim_counts_its_own_gpus_once(cluster_with):
    """``next`` waits for 8; the one victim stopping for it frees 4, so the other workload of
    4 is still stopped for it, whichever preemption took which."""
    waits_for_8 = copy.deepcopy(NEXT_WAITS_FOR_4)
    waits_for_8["spec"]["gpus"] = 8
    idle = finding(idle_since=NOW - timedelta(minutes=11))
    at = "2026-01-01T11:59:30Z"

    idle_owner = opted_in(kaiwo_job(TRAIN_SPEC, status=RUNNING_STATUS))
    expired_victim = preempted_for_next(
        "DurationExceededWithActiveGpuDemand", "TERMINATING", at, name="e", uid="e-uid"
    )
    cluster = cluster_with(
        idle_owner,
        running_job(idle_owner),
        waits_for_8,
        expired_victim,
        workloads=(admitted("job-uid-job"),),
    )
    plan = planned(owner=idle_owner, cluster=with_findings(cluster, idle), now=NOW)
    assert plan is not None and plan.status is not None
    assert plan.status["status"] == "TERMINATING"

    running = {"status": "RUNNING", "startTime": "2026-01-01T09:00:00Z", "observedGeneration": 1}
    expired_owner = kaiwo_job({**TRAIN_SPEC, "duration": "1h"}, status=running)
    idle_victim = preempted_for_next("GpuIdlePreemption", "TERMINATING", at, name="i", uid="i-uid")
    cluster = cluster_with(
        expired_owner,
        running_job(expired_owner),
        waits_for_8,
        idle_victim,
        workloads=(admitted("job-uid-job"),),
    )
    plan = planned(owner=expired_owner, cluster=cluster, now=NOW)
    assert plan is not None and plan.status is not None
    assert plan.status["status"] == "TERMINATING"


def test_an_idle_parallel_job_is_preempted_for_the_gpus_all_its_pods_hold(cluster_with):
    """Decision 0147: an idle Job of 2 pods x 4 holds 8, enough for a job waiting for 8.
    Counted as one pod of 4 before, it could not cover the demand, and nobody was preempted
    (stopping it "would free GPUs the waiter still could not use")."""
    spec = {**TRAIN_SPEC, "gpus": 4, "job": {"spec": {"parallelism": 2}}}
    owner = opted_in(kaiwo_job(spec, status=RUNNING_STATUS))
    waiting = kaiwo_job(
        {**TRAIN_SPEC, "gpus": 8},
        name="next",
        uid="next-uid",
        status={"status": "PENDING", "observedGeneration": 1},
        created="2026-01-01T11:50:00Z",
    )
    cluster = cluster_with(owner, running_job(owner), waiting, workloads=(admitted("job-uid-job"),))
    idle = finding(idle_since=NOW - timedelta(minutes=11))

    victim = planned(owner=owner, cluster=with_findings(cluster, idle), now=NOW)

    assert victim.status is not None and victim.status["status"] == "TERMINATING"
    early = condition(victim, "WorkloadTerminatedEarly")
    assert early["reason"] == "GpuIdlePreemption"
    assert victim.status["preemptedFor"]["name"] == "next"


def test_an_idle_jobs_pods_whose_quota_kueue_released_are_not_counted_as_freed(cluster_with):
    """Decision 0152: an idle sweep of 2 pods x 4 (3 completions) ran its first 2; Kueue's
    Workload says 1 pod reclaimable, its quota released, so it holds 4. For a job waiting for
    8, the one idle workload that covers it alone is another idle job of 8, idle for less
    long: it is preempted and the sweep runs on. Before, the sweep was counted as 8 and,
    idle longest, preempted alone: 4 freed, and the waiter still waited."""
    sweep_spec = {**TRAIN_SPEC, "gpus": 4, "job": {"spec": {"parallelism": 2, "completions": 3}}}
    sweep = opted_in(kaiwo_job(sweep_spec, status=RUNNING_STATUS))
    wide = opted_in(
        kaiwo_job({**TRAIN_SPEC, "gpus": 8}, name="wide", uid="wide-uid", status=RUNNING_STATUS)
    )
    waiting = kaiwo_job(
        {**TRAIN_SPEC, "gpus": 8},
        name="next",
        uid="next-uid",
        status={"status": "PENDING", "observedGeneration": 1},
        created="2026-01-01T11:50:00Z",
    )
    released = admitted("job-uid-job")
    released["status"] |= {
        "admission": {"clusterQueue": "kaiwo", "podSetAssignments": [{"name": "main", "count": 2}]},
        "reclaimablePods": [{"name": "main", "count": 1}],
    }
    cluster = cluster_with(
        sweep,
        running_job(sweep),
        wide,
        running_job(wide),
        waiting,
        workloads=(released, admitted("wide-uid-job")),
    )
    idle = with_findings(
        cluster,
        finding(idle_since=NOW - timedelta(minutes=30)),
        dataclasses.replace(finding(idle_since=NOW - timedelta(minutes=11)), uid="wide-uid"),
    )

    kept = planned(owner=sweep, cluster=idle, now=NOW)
    victim = planned(owner=wide, cluster=idle, now=NOW)

    assert kept.status is not None and kept.status["status"] == "RUNNING"
    assert victim.status is not None and victim.status["status"] == "TERMINATING"
    assert victim.status["preemptedFor"]["name"] == "next"


def test_a_pending_workload_being_deleted_preempts_no_idle_one(cluster_with):
    """Deleted in the foreground (or with its Namespace) it stays PENDING for a while, but it
    waits for nothing: the idle workload runs on (decision 0130)."""
    owner = opted_in(kaiwo_job(TRAIN_SPEC, status=RUNNING_STATUS))
    waiting = kaiwo_job(
        {**TRAIN_SPEC, "gpus": 4},
        name="next",
        namespace="team-b",
        uid="next-uid",
        status={"status": "PENDING", "observedGeneration": 1},
        created="2026-01-01T11:50:00Z",
    )
    deleted = {**waiting, "metadata": {**waiting["metadata"], "deletionTimestamp": T_NOW}}
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-b"}}
    namespace_deleted = {**namespace, "metadata": {"name": "team-b", "deletionTimestamp": T_NOW}}
    idle = finding(idle_since=NOW - timedelta(minutes=11))
    for going in ((waiting, namespace), (deleted, namespace), (waiting, namespace_deleted)):
        cluster = cluster_with(
            owner, running_job(owner), *going, workloads=(admitted("job-uid-job"),)
        )
        plan = planned(owner=owner, cluster=with_findings(cluster, idle), now=NOW)
        assert plan.status is not None
        phase = "TERMINATING" if going == (waiting, namespace) else "RUNNING"
        assert plan.status["status"] == phase, going


ALWAYS_NOW = {
    "kaiwo.silogen.ai/gpu-preemption.policy": "Always",
    "kaiwo.silogen.ai/gpu-preemption.grace-period": "0s",
}


def idle_finding_claiming(**extra: Any) -> WorkloadFinding:
    """What the monitor's key could publish: an idle stretch of an hour, measured now."""
    found = finding(idle_since=NOW - timedelta(hours=1))
    return dataclasses.replace(found, **extra)


def test_only_an_idle_workloads_plan_works_out_the_idle_preemption_decision(
    cluster_with, monkeypatch
):
    """The decision reads every workload of the cluster, and every running workload's finding
    brings a plan: worked out in each, a busy cluster of 1,000 running workloads paid 17.7 ms
    a plan, growing with the cluster (decision 0158). Only an idle workload can be its victim,
    so the plan of a busy one, or of one not opted in, does not work it out."""
    from kaiwo_planner.domain import workload_preemption

    worked_out: list[datetime] = []
    decide = workload_preemption.idle_preemption_decision

    def counted(context: Any, *, now: datetime) -> Any:
        worked_out.append(now)
        return decide(context, now=now)

    monkeypatch.setattr(workload_preemption, "idle_preemption_decision", counted)
    idle = finding(idle_since=NOW - timedelta(hours=1))
    for owner, found in (
        (kaiwo_job(TRAIN_SPEC, status=RUNNING_STATUS), idle),  # not opted in
        (opted_in(kaiwo_job(TRAIN_SPEC, status=RUNNING_STATUS)), finding()),  # busy
    ):
        cluster = cluster_with(owner, running_job(owner), workloads=(admitted("job-uid-job"),))
        kept = planned(owner=owner, cluster=with_findings(cluster, found), now=NOW)
        assert kept.status is not None and kept.status["status"] == "RUNNING"
    assert worked_out == []

    owner = opted_in(kaiwo_job(TRAIN_SPEC, status=RUNNING_STATUS), ALWAYS_NOW)
    cluster = cluster_with(owner, running_job(owner), workloads=(admitted("job-uid-job"),))
    stopped = planned(owner=owner, cluster=with_findings(cluster, idle), now=NOW)
    assert stopped.status is not None and stopped.status["status"] == "TERMINATING"
    assert worked_out == [NOW]


def gpus_worked_out(monkeypatch: Any) -> list[str]:
    """The names of the workloads whose GPUs the idle decision works out, as it does so."""
    from kaiwo_planner.domain.scheduling import idle_preemption_inputs

    counted: list[str] = []
    allocated = idle_preemption_inputs.allocated_gpus

    def counting(obj: Any, *args: Any, **kwargs: Any) -> int:
        counted.append(obj["metadata"]["name"])
        return allocated(obj, *args, **kwargs)

    monkeypatch.setattr(idle_preemption_inputs, "allocated_gpus", counting)
    return counted


def test_the_idle_decision_counts_the_gpus_only_of_the_workloads_that_take_part(
    cluster_with, monkeypatch
):
    """An idle workload's plan reads every workload of the cluster; the GPUs each holds are
    worked out only for those that take part (idle ones, waiting ones, those freeing GPUs),
    not for every busy or finished one (decision 0158: 16.0 -> 9.6 ms for such a plan among
    1,000 opted-in workloads, a tenth of them idle)."""
    counted = gpus_worked_out(monkeypatch)
    owner = opted_in(kaiwo_job(TRAIN_SPEC, status=RUNNING_STATUS), ALWAYS_NOW)
    busy = opted_in(kaiwo_job(TRAIN_SPEC, name="busy", uid="busy-uid", status=RUNNING_STATUS))
    done = kaiwo_job(TRAIN_SPEC, name="done", uid="done-uid", status={"status": "COMPLETE"})
    waits = kaiwo_job(TRAIN_SPEC, name="waits", uid="waits-uid", status={"status": "PENDING"})
    cluster = cluster_with(
        owner, running_job(owner), busy, done, waits, workloads=(admitted("job-uid-job"),)
    )
    found = with_findings(
        cluster,
        finding(idle_since=NOW - timedelta(hours=1)),
        dataclasses.replace(finding(), uid="busy-uid"),
    )

    stopped = planned(owner=owner, cluster=found, now=NOW)

    assert stopped.status is not None and stopped.status["status"] == "TERMINATING"
    assert sorted(counted) == ["train", "waits"]


def test_the_idle_decision_weighs_only_an_idle_workload_that_may_be_chosen(
    cluster_with, monkeypatch
):
    """What an idle workload holds is worked out only for one that may be chosen: past its
    grace period, and Always or with a workload waiting for GPUs. Among 1,000 opted-in
    workloads, a tenth of them idle and none waiting, an idle workload's plan after each
    change took 5.5 ms at p50, now 3.1 (``bench/planner.py``'s ``Idle`` shape)."""
    counted = gpus_worked_out(monkeypatch)
    owner = opted_in(kaiwo_job(TRAIN_SPEC, status=RUNNING_STATUS))  # OnPressure, grace 10m
    always = {**ALWAYS_NOW, "kaiwo.silogen.ai/gpu-preemption.grace-period": "10m"}
    fresh = opted_in(
        kaiwo_job(TRAIN_SPEC, name="fresh", uid="fresh-uid", status=RUNNING_STATUS), always
    )
    idle = (
        finding(idle_since=NOW - timedelta(minutes=11)),
        dataclasses.replace(finding(idle_since=NOW - timedelta(minutes=5)), uid="fresh-uid"),
    )
    alone = cluster_with(owner, running_job(owner), fresh, workloads=(admitted("job-uid-job"),))

    kept = planned(owner=owner, cluster=with_findings(alone, *idle), now=NOW)

    assert kept.status is not None and kept.status["status"] == "RUNNING"
    assert counted == []

    waiting = pending_next("kaiwo")
    pressed = cluster_with(
        owner, running_job(owner), fresh, waiting, workloads=(admitted("job-uid-job"),)
    )
    stopped = planned(owner=owner, cluster=with_findings(pressed, *idle), now=NOW)

    assert stopped.status is not None and stopped.status["status"] == "TERMINATING"
    assert sorted(counted) == ["next", "train"]  # fresh, within its grace period, is not


def test_an_idle_workload_is_preempted_for_a_plain_job_kueue_does_not_admit_for_gpus(
    cluster_with,
):
    """Decision 0056: a plain Job that waits for GPUs is pressure for an idle KaiwoJob too,
    and it is found after the KaiwoJobs (the GPU workloads no Kaiwo kind owns): the idle
    KaiwoJob is weighed once all the waiting are known."""
    plain = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "plain",
            "namespace": "team-a",
            "uid": "plain-uid",
            "creationTimestamp": "2026-01-01T11:00:00Z",
            "annotations": OPTED_IN,
        },
        "spec": {
            "template": {
                "spec": {
                    "containers": [{"name": "main", "resources": {"limits": {"amd.com/gpu": "2"}}}]
                }
            }
        },
    }
    record = {
        "apiVersion": KAIWO,
        "kind": "GpuWorkload",
        "metadata": {"name": "job-plain-plain-ui", "namespace": "team-a", "uid": "record-uid"},
        "spec": {
            "workloadRef": {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "name": "plain",
                "uid": "plain-uid",
            }
        },
        "status": {},
    }
    refused = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {
            "name": "job-plain-abcde",
            "namespace": "team-a",
            "uid": "wl-plain",
            "creationTimestamp": "2026-01-01T11:00:00Z",
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "name": "plain", "uid": "plain-uid"}
            ],
        },
        "status": {
            "conditions": [
                {
                    "type": "QuotaReserved",
                    "status": "False",
                    "reason": "Pending",
                    "message": "couldn't assign flavors to pod set main: insufficient unused "
                    "quota for amd.com/gpu in flavor mi300x, 2 more needed",
                }
            ]
        },
    }
    owner = opted_in(kaiwo_job(TRAIN_SPEC, status=RUNNING_STATUS))
    cluster = cluster_with(
        owner, running_job(owner), plain, record, workloads=(admitted("job-uid-job"), refused)
    )
    idle = finding(idle_since=NOW - timedelta(minutes=11))

    victim = planned(owner=owner, cluster=with_findings(cluster, idle), now=NOW)

    assert victim.status is not None and victim.status["status"] == "TERMINATING"
    assert victim.status["preemptedFor"] == {
        "kind": "Job",
        "namespace": "team-a",
        "name": "plain",
        "uid": "plain-uid",
    }


def test_the_idle_decision_resolves_the_settings_only_of_workloads_with_an_idle_stretch(
    cluster_with, monkeypatch
):
    """A running workload's opt-in settings (its annotations and its Namespace's) are
    resolved only when its finding shows a fresh idle stretch: resolving them for every busy
    one was most of an idle workload's plan: 9.1-9.9 -> 2.6-2.7 ms (min) among 1,000 opted-in
    workloads, a tenth of them idle (``bench/planner.py``'s ``Idle`` shape)."""
    from kaiwo_planner.domain.scheduling import idle_preemption_inputs

    resolved: list[str] = []
    settings_of = idle_preemption_inputs.settings_of

    def counting(obj: Any, *args: Any) -> Any:
        resolved.append(obj["metadata"]["name"])
        return settings_of(obj, *args)

    monkeypatch.setattr(idle_preemption_inputs, "settings_of", counting)
    owner = opted_in(kaiwo_job(TRAIN_SPEC, status=RUNNING_STATUS), ALWAYS_NOW)
    busy = opted_in(kaiwo_job(TRAIN_SPEC, name="busy", uid="busy-uid", status=RUNNING_STATUS))
    unread = opted_in(kaiwo_job(TRAIN_SPEC, name="unread", uid="unread-uid", status=RUNNING_STATUS))
    stale = opted_in(kaiwo_job(TRAIN_SPEC, name="stale", uid="stale-uid", status=RUNNING_STATUS))
    cluster = cluster_with(
        owner, running_job(owner), busy, unread, stale, workloads=(admitted("job-uid-job"),)
    )
    idle_an_hour = finding(idle_since=NOW - timedelta(hours=1))
    found = with_findings(
        cluster,
        idle_an_hour,
        dataclasses.replace(finding(), uid="busy-uid"),
        dataclasses.replace(idle_an_hour, uid="stale-uid", at=NOW - timedelta(hours=1)),
    )

    stopped = planned(owner=owner, cluster=found, now=NOW)

    assert stopped.status is not None and stopped.status["status"] == "TERMINATING"
    assert set(resolved) == {"train"}


def test_a_finding_cannot_opt_a_workload_in_to_idle_preemption(cluster_with):
    # The attack: a finding saying policy Always, grace 0, for a workload that never opted
    # in. Only readings are taken from it; without an annotation nothing is preempted.
    owner = kaiwo_job(TRAIN_SPEC, status=RUNNING_STATUS)
    cluster = cluster_with(owner, running_job(owner), workloads=(admitted("job-uid-job"),))

    kept = planned(owner=owner, cluster=with_findings(cluster, idle_finding_claiming()), now=NOW)

    assert kept.status is not None and kept.status["status"] == "RUNNING"
    assert kept.desired  # its Job stays


def test_policy_and_grace_period_are_the_workloads_own_not_the_findings(cluster_with):
    def plan_with(annotations: dict[str, str]) -> Plan | None:
        owner = opted_in(kaiwo_job(TRAIN_SPEC, status=RUNNING_STATUS), annotations)
        nobody_waits = cluster_with(owner, running_job(owner), workloads=(admitted("job-uid-job"),))
        found = with_findings(nobody_waits, idle_finding_claiming())
        return planned(owner=owner, cluster=found, now=NOW)

    # Opted in with OnPressure (grace 10m): idle for an hour but nobody waits: it runs on.
    on_pressure = plan_with(OPTED_IN)
    assert on_pressure is not None and on_pressure.status is not None
    assert on_pressure.status["status"] == "RUNNING"
    # The user's own Always with grace 0: preempted.
    always = plan_with(ALWAYS_NOW)
    assert always is not None and always.status is not None
    assert always.status["status"] == "TERMINATING"
    assert condition(always, "WorkloadTerminatedEarly")["reason"] == "GpuIdlePreemption"


def test_an_idle_stretch_counts_only_below_the_workloads_own_threshold(cluster_with):
    owner = opted_in(kaiwo_job(TRAIN_SPEC, status=RUNNING_STATUS), ALWAYS_NOW)
    cluster = cluster_with(owner, running_job(owner), workloads=(admitted("job-uid-job"),))
    claims = {
        # busy at 40 %, the threshold is 5 %
        "a reading above the threshold": idle_finding_claiming(idle_utilization_ratio=0.4),
        # judged against 90 %: below that says nothing about 5 %
        "a looser threshold": idle_finding_claiming(idle_threshold_ratio=0.9),
        # the workload's aggregation is Max (the default): a Min reading is another measure
        "another aggregation": idle_finding_claiming(idle_aggregation="Min"),
        "no reading": idle_finding_claiming(idle_utilization_ratio=None),
    }
    for what, claim in claims.items():
        kept = planned(owner=owner, cluster=with_findings(cluster, claim), now=NOW)
        assert kept.status is not None, what
        assert kept.status["status"] == "RUNNING", what


def test_underutilization_counts_only_below_the_configs_threshold_where_it_monitors(
    cluster_with,
):
    owner = kaiwo_job(TRAIN_SPEC, status=RUNNING_STATUS)
    cluster = cluster_with(
        owner, running_job(owner), TERMINATE_AFTER_1H, workloads=(admitted("job-uid-job"),)
    )
    day = NOW - timedelta(hours=24)
    claims = {
        "a reading above 1 %": finding(underutilized_since=day, reading=0.3),
        "judged against 50 %": finding(underutilized_since=day, threshold=0.5, reading=0.005),
    }
    for what, claim in claims.items():
        kept = planned(owner=owner, cluster=with_findings(cluster, claim), now=NOW)
        assert kept.status is not None, what
        assert kept.status["status"] == "RUNNING", what
        assert not [
            c
            for c in kept.status["conditions"]
            if c["type"] == "ResourceUnderutilization" and c["status"] == "True"
        ], what
    # Only team-b is monitored: a finding about team-a decides nothing.
    elsewhere = {
        **TERMINATE_AFTER_1H,
        "spec": {
            "resourceMonitoring": {
                **TERMINATE_AFTER_1H["spec"]["resourceMonitoring"],
                "targetNamespaces": ["team-b"],
            }
        },
    }
    unmonitored = cluster_with(
        owner, running_job(owner), elsewhere, workloads=(admitted("job-uid-job"),)
    )
    kept = planned(
        owner=owner,
        cluster=with_findings(unmonitored, finding(underutilized_since=day)),
        now=NOW,
    )
    assert kept.status is not None and kept.status["status"] == "RUNNING"
    assert all(c["type"] != "ResourceUnderutilization" for c in kept.status["conditions"])


def plan_of(owner: dict[str, Any], cluster: ClusterState, now: datetime) -> Plan:
    plan = planned(owner=owner, cluster=cluster, now=now)
    assert plan is not None and plan.status is not None
    return plan


def with_monitoring(**settings: Any) -> dict[str, Any]:
    """The KaiwoConfig of ``TERMINATE_AFTER_1H`` with other ``resourceMonitoring`` settings."""
    spec = TERMINATE_AFTER_1H["spec"]
    assert isinstance(spec, dict)
    monitoring = {**spec["resourceMonitoring"], **settings}
    return {**TERMINATE_AFTER_1H, "spec": {"resourceMonitoring": monitoring}}


def test_a_namespace_no_longer_monitored_has_its_condition_withdrawn_and_kept_withdrawn(
    cluster_with: Callable[..., ClusterState],
) -> None:
    """Decision 0213: ``targetNamespaces`` narrowed at runtime. The True condition becomes
    False, reason ``NamespaceNotMonitored``, whatever the findings say (it stayed True for
    good); the workload is not terminated; the next plans write nothing new; a workload that
    never had the condition gets none."""

    def running(owner: dict[str, Any], config: dict[str, Any]) -> ClusterState:
        return cluster_with(owner, running_job(owner), config, workloads=(admitted("job-uid-job"),))

    owner = kaiwo_job(TRAIN_SPEC, status=RUNNING_STATUS)
    day = NOW - timedelta(hours=24)
    earlier = NOW - timedelta(minutes=10)
    low = plan_of(
        owner,
        with_findings(
            running(owner, TERMINATE_AFTER_1H),
            finding(at=earlier, underutilized_since=earlier - timedelta(minutes=5)),
        ),
        earlier,
    )
    flagged_since = condition(low, "ResourceUnderutilization")
    assert (flagged_since["status"], flagged_since["lastTransitionTime"]) == (
        "True",
        "2026-01-01T11:50:00Z",
    )
    assert low.status is not None
    flagged = kaiwo_job(TRAIN_SPEC, status=low.status)

    narrowed = with_monitoring(targetNamespaces=["team-b"])
    cluster = running(flagged, narrowed)
    withdrawn = {
        "type": "ResourceUnderutilization",
        "status": "False",
        "observedGeneration": 1,
        "lastTransitionTime": T_NOW,
        "reason": "NamespaceNotMonitored",
        "message": "Namespace team-a is not monitored (KaiwoConfig "
        "spec.resourceMonitoring.targetNamespaces): GPU utilization is not judged",
    }
    findings = {
        "a 24 h stretch, due for termination": finding(underutilized_since=day),
        "busy again": finding(),
        "no reading": finding(measured=False),
    }
    for what, found in findings.items():
        plan = plan_of(flagged, with_findings(cluster, found), NOW)
        assert plan.status is not None and plan.status["status"] == "RUNNING", what
        assert condition(plan, "ResourceUnderutilization") == withdrawn, what
        assert [e for e in plan.events if e.reason == "GpuUtilizationLow"] == [], what
    # The monitor publishes nothing for it any more: withdrawn all the same.
    unread = plan_of(flagged, cluster, NOW)
    assert condition(unread, "ResourceUnderutilization") == withdrawn

    # Withdrawn once: the next plan, an hour later, writes the same status (no write).
    assert unread.status is not None
    settled = kaiwo_job(TRAIN_SPEC, status=unread.status)
    later = NOW + timedelta(hours=1)
    again = plan_of(settled, with_findings(running(settled, narrowed), finding(at=later)), later)
    assert again.status == unread.status

    # A workload of that namespace that never had the condition gets none.
    plain = kaiwo_job(TRAIN_SPEC, status=RUNNING_STATUS)
    quiet = plan_of(
        plain, with_findings(running(plain, narrowed), finding(underutilized_since=day)), NOW
    )
    assert quiet.status is not None
    assert "ResourceUnderutilization" not in {c["type"] for c in quiet.status["conditions"]}

    # Monitored again: the readings decide once more.
    back = plan_of(
        settled, with_findings(running(settled, TERMINATE_AFTER_1H), finding(at=later)), later
    )
    normal = condition(back, "ResourceUnderutilization")
    assert (normal["status"], normal["reason"]) == ("False", "GpuUtilizationNormal")


def test_a_stretch_the_monitor_started_anew_under_a_lowered_threshold_is_not_due(
    cluster_with: Callable[..., ClusterState],
) -> None:
    """Decision 0213, the planner's side: after 23 h at 40 % under a threshold of 50 %, the
    threshold set to 20 % and an hour at 5 %, the monitor says "below 20 % since" the first
    reading below it. The planner names that start and terminates nothing; the same
    stretch after 24 h below 20 % is due. A finding still judged against 50 % decides
    nothing."""
    owner = kaiwo_job(TRAIN_SPEC, status=RUNNING_STATUS)
    twenty = with_monitoring(lowUtilizationThreshold=20, terminateUnderutilizedAfter="24h")
    cluster = cluster_with(owner, running_job(owner), twenty, workloads=(admitted("job-uid-job"),))
    lowered_at = NOW - timedelta(hours=1)
    restarted = finding(underutilized_since=lowered_at, threshold=0.2, reading=0.05)
    plan = plan_of(owner, with_findings(cluster, restarted), NOW)
    assert plan.status is not None and plan.status["status"] == "RUNNING"
    assert condition(plan, "ResourceUnderutilization")["message"] == (
        "GPU utilization has been below 20% of the requested GPUs since 2026-01-01T11:00:00Z"
    )
    # The monitor has not read the new threshold yet: below 50 % says nothing of 20 %.
    older_measure = finding(
        underutilized_since=NOW - timedelta(hours=24), threshold=0.5, reading=0.05
    )
    waiting = plan_of(owner, with_findings(cluster, older_measure), NOW)
    assert waiting.status is not None and waiting.status["status"] == "RUNNING"
    day_later = lowered_at + timedelta(hours=24)
    evidence = finding(at=day_later, underutilized_since=lowered_at, threshold=0.2, reading=0.05)
    due = plan_of(owner, with_findings(cluster, evidence), day_later)
    assert due.status is not None and due.status["status"] == "TERMINATING"


def test_a_stretch_that_ends_is_news_and_a_settled_busy_workload_is_not() -> None:
    low = finding(underutilized_since=NOW - timedelta(minutes=5))
    busy = finding(at=NOW + timedelta(minutes=1))
    busy_again = finding(at=NOW + timedelta(minutes=2))
    assert busy.decides_differently_from(low)
    assert not busy_again.decides_differently_from(busy)
    assert low.decides_differently_from(busy)
    assert busy.decides_differently_from(None)


def test_an_opted_in_workload_shows_its_idle_stretch_in_the_gpu_idle_condition(cluster_with):
    """Decision 0056: ``kaiwo gpus`` reads it; no reading leaves it as it is."""
    owner = opted_in(kaiwo_job(TRAIN_SPEC, status=RUNNING_STATUS))
    cluster = cluster_with(owner, running_job(owner), workloads=(admitted("job-uid-job"),))

    idle = planned(
        owner=owner,
        cluster=with_findings(cluster, finding(idle_since=NOW - timedelta(minutes=3))),
        now=NOW,
    )
    assert idle is not None and idle.status is not None
    assert idle.status["status"] == "RUNNING"  # OnPressure, nobody waits
    found = condition(idle, "GpuIdle")
    assert (found["status"], found["reason"]) == ("True", "GpuIdle")
    assert found["message"] == (
        "Idle since 2026-01-01T11:57:00Z: GPU utilization below 5%; from "
        "2026-01-01T12:07:00Z preempted when a pending workload needs amd GPUs "
        "(policy OnPressure)"
    )

    busy = planned(owner=owner, cluster=with_findings(cluster, finding()), now=NOW)
    assert busy is not None
    found = condition(busy, "GpuIdle")
    assert (found["status"], found["reason"]) == ("False", "GpuActive")
    assert found["message"] == (
        "Busy: at or above the idle threshold of 5% (policy OnPressure, grace period 10m0s)"
    )

    # Not opted in: no condition at all.
    plain = kaiwo_job(TRAIN_SPEC, status=RUNNING_STATUS)
    cluster = cluster_with(plain, running_job(plain), workloads=(admitted("job-uid-job"),))
    quiet = planned(owner=plain, cluster=with_findings(cluster, finding()), now=NOW)
    assert quiet is not None and quiet.status is not None
    assert "GpuIdle" not in {c["type"] for c in quiet.status.get("conditions") or ()}


def test_the_gpu_idle_condition_is_withdrawn_once_the_workload_opts_out_or_stops_running(
    cluster_with: Callable[..., ClusterState],
) -> None:
    """Decision 0228: ``GpuIdle`` True stayed for good once the workload opted out or stopped
    running, promising a preemption that would never come (``kaiwo gpus`` and the console
    flagged it idle). Now it becomes False, reason ``NotOptedIn`` or ``NotRunning``, whatever
    the findings say, and stays so without a new write."""
    owner = opted_in(kaiwo_job(TRAIN_SPEC, status=RUNNING_STATUS))
    cluster = cluster_with(owner, running_job(owner), workloads=(admitted("job-uid-job"),))
    idle_finding = finding(idle_since=NOW - timedelta(minutes=3))
    idle = plan_of(owner, with_findings(cluster, idle_finding), NOW)
    assert condition(idle, "GpuIdle")["status"] == "True"
    assert idle.status is not None
    later = NOW + timedelta(hours=2)
    still_idle = finding(at=later, idle_since=NOW - timedelta(minutes=3))

    # The annotation removed while it runs.
    plain = kaiwo_job(TRAIN_SPEC, status=idle.status)
    cluster = cluster_with(plain, running_job(plain), workloads=(admitted("job-uid-job"),))
    opted_out = plan_of(plain, with_findings(cluster, still_idle), later)
    assert opted_out.status is not None and opted_out.status["status"] == "RUNNING"
    assert condition(opted_out, "GpuIdle") == {
        "type": "GpuIdle",
        "status": "False",
        "observedGeneration": 1,
        "lastTransitionTime": "2026-01-01T14:00:00Z",
        "reason": "NotOptedIn",
        "message": "Not opted in to GPU idle preemption (annotations "
        "kaiwo.silogen.ai/gpu-preemption.*): GPU idleness is not judged",
    }
    settled = kaiwo_job(TRAIN_SPEC, status=opted_out.status)
    cluster = cluster_with(settled, running_job(settled), workloads=(admitted("job-uid-job"),))
    even_later = later + timedelta(minutes=5)
    again = plan_of(settled, with_findings(cluster, finding(at=even_later)), even_later)
    assert condition(again, "GpuIdle") == condition(opted_out, "GpuIdle")

    # Still opted in, but evicted by Kueue (its last status PENDING): not running any more.
    evicted = opted_in(kaiwo_job(TRAIN_SPEC, status={**idle.status, "status": "PENDING"}))
    job = running_job(evicted)
    job["spec"]["suspend"] = True
    job["status"] = {}
    waiting = plan_of(evicted, with_findings(cluster_with(evicted, job), still_idle), later)
    assert waiting.status is not None and waiting.status["status"] == "PENDING"
    withdrawn = condition(waiting, "GpuIdle")
    assert (withdrawn["status"], withdrawn["reason"], withdrawn["message"]) == (
        "False",
        "NotRunning",
        "Not running: GPU idleness is judged only while the workload runs",
    )


def test_gpu_idleness_is_read_from_the_ratio_the_monitor_judged(
    cluster_with: Callable[..., ClusterState],
) -> None:
    """Decision 0228: the planner compares the published ratio with the threshold as a ratio
    capped at 1, as the monitor judged it and as preemption compares it. 0.29 is not below
    29 % (0.29 x 100 = 28.999999999999996 was), 1.0 not below 150 % (100 < 150 was): the
    condition said idle where preemption saw a busy workload."""
    for threshold, ratio in [("29", 0.29), ("150", 1.0)]:
        annotations = {**OPTED_IN, "kaiwo.silogen.ai/gpu-preemption.threshold": threshold}
        owner = opted_in(kaiwo_job(TRAIN_SPEC, status=RUNNING_STATUS), annotations)
        cluster = cluster_with(owner, running_job(owner), workloads=(admitted("job-uid-job"),))
        claimed = finding(
            idle_since=NOW - timedelta(minutes=3), reading=ratio, idle_threshold=ratio
        )
        plan = plan_of(owner, with_findings(cluster, claimed), NOW)
        found = condition(plan, "GpuIdle")
        assert (found["status"], found["reason"]) == ("False", "GpuActive"), threshold


def test_a_pod_restarting_in_a_stretch_changes_neither_the_condition_nor_warns_again(
    cluster_with: Callable[..., ClusterState],
) -> None:
    """Decision 0197: one Warning per stretch. The monitor counts the GPUs of the running
    pods; while one of two 4-GPU replicas restarts it reads 4 of 8. The message named that
    count, so each restart rewrote the condition and warned again (decision 0228)."""
    owner = kaiwo_job(TRAIN_SPEC, status=RUNNING_STATUS)
    cluster = cluster_with(owner, running_job(owner), workloads=(admitted("job-uid-job"),))
    since = NOW - timedelta(minutes=30)
    low = plan_of(
        owner,
        with_findings(
            cluster, dataclasses.replace(finding(underutilized_since=since), gpu_count=8)
        ),
        NOW,
    )
    assert [e.reason for e in low.events if e.reason == "GpuUtilizationLow"] == [
        "GpuUtilizationLow"
    ]
    assert low.status is not None
    flagged = kaiwo_job(TRAIN_SPEC, status=low.status)
    cluster = cluster_with(flagged, running_job(flagged), workloads=(admitted("job-uid-job"),))
    for minutes, gpus in [(1, 4), (2, 8)]:
        at = NOW + timedelta(minutes=minutes)
        found = dataclasses.replace(finding(at=at, underutilized_since=since), gpu_count=gpus)
        plan = plan_of(flagged, with_findings(cluster, found), at)
        assert plan.status == low.status, gpus
        assert [e for e in plan.events if e.reason == "GpuUtilizationLow"] == [], gpus


# ------------------------------------------------ another vendor's GPU key (decision 0161)


def _nvidia_template(name: str = "main") -> dict[str, Any]:
    return {
        "spec": {
            "containers": [
                {"name": name, "image": "img", "resources": {"limits": {"nvidia.com/gpu": 1}}}
            ]
        }
    }


def _ray_cluster_with_nvidia_workers() -> dict[str, Any]:
    return {
        "headGroupSpec": {"template": {"spec": {"containers": [{"name": "ray-head"}]}}},
        "workerGroupSpecs": [{"groupName": "gpu", "template": _nvidia_template("ray-worker")}],
    }


NVIDIA_LIMIT = '.spec.containers[0].resources.limits["nvidia.com/gpu"] (1) must not be given: '


@pytest.mark.parametrize(
    ("make", "spec", "named"),
    [
        (
            kaiwo_job,
            {"job": {"spec": {"template": _nvidia_template()}}},
            "spec.job: spec.template",
        ),
        (
            kaiwo_job,
            {"rayJob": {"spec": {"rayClusterSpec": _ray_cluster_with_nvidia_workers()}}},
            "spec.rayJob: spec.rayClusterSpec.workerGroupSpecs[0].template",
        ),
        (
            kaiwo_service,
            {"deployment": {"spec": {"template": _nvidia_template()}}},
            "spec.deployment: spec.template",
        ),
        (
            kaiwo_service,
            {"rayService": {"spec": {"rayClusterConfig": _ray_cluster_with_nvidia_workers()}}},
            "spec.rayService: spec.rayClusterConfig.workerGroupSpecs[0].template",
        ),
    ],
)
def test_a_template_asking_for_another_vendors_gpus_is_invalid_on_every_path(
    cluster_with, make, spec, named
):
    """An AMD workload (the default vendor, ``gpus: 1``) whose given template limits
    ``nvidia.com/gpu``: the child's pods asked for both kinds, and Kueue kept it pending for
    good ("insufficient quota for nvidia.com/gpu in flavor mi300x", measured). Now the spec is
    invalid, naming the field, told in a Warning, and nothing is made (decision 0161)."""
    owner = make({**TRAIN_SPEC, "gpus": 1, **spec})

    plan = planned(owner=owner, cluster=cluster_with(owner), now=NOW)

    assert plan is not None
    valid = condition(plan, "Valid")
    assert (valid["status"], valid["reason"]) == ("False", "InvalidSpec")
    assert valid["message"].startswith(
        f"The spec is invalid, nothing was changed: {named}{NVIDIA_LIMIT}the "
        f"{owner['kind']} asks Kaiwo for AMD GPUs (gpus 1, gpuVendor amd, the default when "
        "left out), which Kaiwo gives its pods under amd.com/gpu"
    ), valid["message"]
    assert [(e.type, e.reason) for e in plan.events] == [("Warning", "InvalidSpec")]
    assert plan.desired == ()
    assert list(plan.prune) == []


def test_a_job_asking_kaiwo_for_no_gpus_keeps_its_own_gpu_key(cluster_with):
    """``gpus`` left at 0: the template's ``nvidia.com/gpu`` is the user's, kept as written,
    and Kaiwo adds no key of its own (not judged by decision 0161's rule)."""
    owner = kaiwo_job({**TRAIN_SPEC, "gpus": 0, "job": {"spec": {"template": _nvidia_template()}}})

    plan = planned(owner=owner, cluster=cluster_with(owner), now=NOW)

    assert plan is not None
    assert all(c["type"] != "Valid" for c in plan.status["conditions"])
    (job,) = plan.desired
    resources = main_container(job)["resources"]
    assert resources["limits"] == {"nvidia.com/gpu": "1", "cpu": "2", "memory": "16Gi"}
    assert "amd.com/gpu" not in resources["requests"]


def test_a_running_job_whose_spec_now_asks_for_two_vendors_is_left_as_it_is(cluster_with):
    """A KaiwoJob edited so that its template names the other vendor's key while its Job runs:
    the spec is invalid and nothing of what exists is changed or pruned (no fight with the
    running child, whose template is not compared)."""
    pending_status = expected_plan("kaiwojob_first_plan")["status"]
    job = copy.deepcopy(expected_plan("kaiwojob_first_plan")["desired"][0])
    job["metadata"]["uid"] = "child-uid"
    job["spec"]["suspend"] = False
    job["status"] = {"active": 1, "ready": 1}
    owner = kaiwo_job(
        {**TRAIN_SPEC, "job": {"spec": {"template": _nvidia_template()}}},
        generation=2,
        status=pending_status,
    )

    plan = planned(
        owner=owner, cluster=cluster_with(owner, job, workloads=(admitted("child-uid"),)), now=NOW
    )

    assert plan is not None
    assert condition(plan, "Valid")["status"] == "False"
    assert plan.desired == ()
    assert list(plan.prune) == []
