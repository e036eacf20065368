"""What a workload tells of its children's run-time failures (decision 0134): the
``ChildHealthy`` condition, the Events and the public event, written out by hand."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kaiwo_contracts.events.observed import ObservedObjectV1
from kaiwo_contracts.plans import EventIntent
from kaiwo_planner.domain.scheduling.schedulable import SchedulableVerdict
from kaiwo_planner.domain.status.child_phase import ChildKind, ObservedChildren
from kaiwo_planner.domain.status.public_events import derive_public_events, public_state
from kaiwo_planner.domain.status.workload_status import StatusDecision, derive_status

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
T_NOW = "2026-01-01T12:00:00Z"
T_EARLIER = "2026-01-01T11:00:00Z"
OK = SchedulableVerdict(schedulable=True, reason="Schedulable", message="enough GPUs")
SCHEDULABLE = {
    "type": "Schedulable",
    "status": "True",
    "observedGeneration": 1,
    "lastTransitionTime": T_EARLIER,
    "reason": "Schedulable",
    "message": "enough GPUs",
}
ADMITTED = {
    "type": "Admitted",
    "status": "True",
    "observedGeneration": 1,
    "lastTransitionTime": T_EARLIER,
    "reason": "Admitted",
    "message": "Workload is admitted",
}
KUEUE_ADMITTED = {
    "apiVersion": "kueue.x-k8s.io/v1beta1",
    "kind": "Workload",
    "metadata": {"name": "wl", "namespace": "team"},
    "status": {"conditions": [{"type": "Admitted", "status": "True"}]},
}


def running(phase: str = "RUNNING", *conditions: dict[str, Any]) -> dict[str, Any]:
    return {
        "status": phase,
        "observedGeneration": 1,
        "conditions": [SCHEDULABLE, ADMITTED, *conditions],
        "startTime": T_EARLIER,
        "duration": 0,
    }


def health(status: str, reason: str, message: str, *, since: str = T_NOW) -> dict[str, Any]:
    return {
        "type": "ChildHealthy",
        "status": status,
        "observedGeneration": 1,
        "lastTransitionTime": since,
        "reason": reason,
        "message": message,
    }


def derive(
    previous: dict[str, Any],
    kind: ChildKind,
    child: dict[str, Any] | None,
    *,
    node_pools: frozenset[str] | None = None,
    **observed: Any,
) -> StatusDecision:
    return derive_status(
        workload_kind="KaiwoService" if kind in ("Deployment", "AppWrapper") else "KaiwoJob",
        generation=1,
        previous_status=previous,
        observed=ObservedChildren(
            child_kind=kind,
            child=child,
            kueue_workloads=observed.pop("kueue_workloads", (KUEUE_ADMITTED,)),
            **observed,
        ),
        schedulable=OK,
        cluster_queue="kaiwo",
        now=NOW,
        node_pools=node_pools,
    )


def warning(reason: str, message: str) -> EventIntent:
    return EventIntent(type="Warning", reason=reason, message=message)


def batch_job(*conditions: dict[str, Any], **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "train", "namespace": "team", "uid": "job-uid"},
        "spec": {"backoffLimit": 0},
        "status": {"conditions": list(conditions), **status},
    }


def job_condition(kind: str, reason: str, message: str) -> dict[str, Any]:
    return {"type": kind, "status": "True", "reason": reason, "message": message}


def pod(
    name: str,
    *,
    phase: str = "Running",
    containers: tuple[dict[str, Any], ...] = (),
    init_containers: tuple[dict[str, Any], ...] = (),
    owner_uid: str = "job-uid",
    **status: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {"phase": phase, "containerStatuses": list(containers), **status}
    if init_containers:
        body["initContainerStatuses"] = list(init_containers)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "team",
            "ownerReferences": [{"kind": "Job", "name": "x", "uid": owner_uid}],
        },
        "status": body,
    }


def exited(name: str, code: int, finished: str, message: str = "") -> dict[str, Any]:
    terminated: dict[str, Any] = {"exitCode": code, "reason": "Error", "finishedAt": finished}
    if message:
        terminated["message"] = message
    return {"name": name, "state": {"terminated": terminated}}


def waiting(
    name: str, reason: str, message: str = "", last_exit: int | None = None
) -> dict[str, Any]:
    found: dict[str, Any] = {"reason": reason}
    if message:
        found["message"] = message
    container: dict[str, Any] = {"name": name, "ready": False, "state": {"waiting": found}}
    if last_exit is not None:
        container["lastState"] = {"terminated": {"exitCode": last_exit, "reason": "Error"}}
    return container


# ------------------------------------------------------------------ a failed main child


def test_a_job_past_its_deadline_names_the_deadline_and_its_killed_pod() -> None:
    failed = derive(
        running(),
        "Job",
        batch_job(
            job_condition("Failed", "DeadlineExceeded", "Job was active longer than specified"),
            failed=1,
        ),
        pods=(pod("train-abcde", phase="Failed", containers=(exited("workload", 137, T_NOW),)),),
    )
    cause = (
        "Job train: Job was active longer than specified; pod train-abcde: container workload"
        " exited with code 137 (Error)"
    )
    assert failed.status["status"] == "FAILED"
    assert failed.status["conditions"] == [
        SCHEDULABLE,
        ADMITTED,
        health("False", "DeadlineExceeded", cause),
    ]
    assert failed.events == (
        warning("WorkloadFailed", f"Workload has failed: DeadlineExceeded: {cause}"),
    )


def test_the_last_of_the_jobs_failed_pods_is_named_and_other_pods_are_not() -> None:
    # Two attempts (backoffLimit 1) and the download Job's pod, which exited 3 last but is
    # not the Job's: the second attempt's exit is what ended the Job.
    failed = derive(
        running(),
        "Job",
        batch_job(
            job_condition("FailureTarget", "BackoffLimitExceeded", "Job has reached the limit"),
            failed=2,
        ),
        pods=(
            pod(
                "train-2",
                phase="Failed",
                containers=(exited("workload", 2, "2026-01-01T11:50:00Z", "disk full"),),
            ),
            pod(
                "train-1",
                phase="Failed",
                containers=(exited("workload", 1, "2026-01-01T11:40:00Z"),),
            ),
            pod(
                "train-download-1",
                phase="Failed",
                containers=(exited("downloader", 3, "2026-01-01T11:55:00Z"),),
                owner_uid="download-job-uid",
            ),
        ),
    )
    assert failed.status["conditions"][-1] == health(
        "False",
        "BackoffLimitExceeded",
        "Job train: Job has reached the limit; pod train-2: container workload exited with"
        " code 2 (Error): disk full",
    )


def test_a_pod_evicted_without_an_exit_code_is_named_by_its_own_reason() -> None:
    evicted = pod(
        "train-abcde",
        phase="Failed",
        reason="Evicted",
        message="The node was low on resource: memory.",
    )
    failed = derive(
        running(),
        "Job",
        batch_job(job_condition("Failed", "BackoffLimitExceeded", "Job has reached the limit")),
        pods=(evicted,),
    )
    assert failed.status["conditions"][-1]["message"] == (
        "Job train: Job has reached the limit; pod train-abcde: Evicted (The node was low on"
        " resource: memory.)"
    )


def test_a_job_whose_pods_are_gone_is_named_by_the_job_alone() -> None:
    # A pod deleted by someone: the Job counts it failed, and it is gone from the cluster.
    failed = derive(
        running(),
        "Job",
        batch_job(job_condition("Failed", "BackoffLimitExceeded", "Job has reached the limit")),
    )
    assert failed.status["conditions"][-1] == health(
        "False", "BackoffLimitExceeded", "Job train: Job has reached the limit"
    )


def test_a_failed_ray_job_names_kuberays_reason_and_message() -> None:
    ray_job = {
        "kind": "RayJob",
        "metadata": {"name": "train", "uid": "rj"},
        "status": {
            "jobStatus": "FAILED",
            "jobDeploymentStatus": "Failed",
            "reason": "AppFailed",
            "message": "Job entrypoint command failed with exit code 1",
        },
    }
    failed = derive(running(), "RayJob", ray_job)
    assert failed.status["conditions"][-1] == health(
        "False", "AppFailed", "Job entrypoint command failed with exit code 1"
    )


def ray_service(**applications: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "RayService",
        "status": {"activeServiceStatus": {"applicationStatuses": applications}},
    }


APP_WRAPPER = {"kind": "AppWrapper", "metadata": {"name": "chat", "uid": "aw"}}


def test_a_ray_service_whose_application_fails_is_in_error_until_it_serves_again() -> None:
    # Upstream made it FAILED, which is final: nothing applied any more, not even the
    # serveConfigV2 edit that fixes it, and FAILED after Ray Serve restarted the replicas.
    failing = ray_service(
        chat={"status": "DEPLOY_FAILED", "message": "ImportError: vllm"},
        health={"status": "RUNNING"},
    )
    error = derive(running("READY"), "AppWrapper", APP_WRAPPER, ray_service=failing)
    cause = "application chat is DEPLOY_FAILED: ImportError: vllm"
    assert error.status["status"] == "ERROR"
    assert error.status["conditions"][-1] == health("False", "ApplicationsFailed", cause)
    assert error.events == (warning("WorkloadError", cause),)

    serving = {
        **ray_service(chat={"status": "RUNNING"}, health={"status": "RUNNING"}),
        "status": {"conditions": [{"type": "Ready", "status": "True"}]},
    }
    ready = derive(error.status, "AppWrapper", APP_WRAPPER, ray_service=serving)
    assert ready.status["status"] == "READY"
    assert ready.status["conditions"][-1] == health(
        "True", "Healthy", "The workload's children and pods report no failure"
    )
    assert ready.events == (
        EventIntent(type="Normal", reason="WorkloadReady", message="Workload is ready"),
    )


def test_a_ray_services_first_deployment_failing_is_in_error_not_starting_for_good() -> None:
    # KubeRay keeps a first cluster's applications in pendingServiceStatus until they serve,
    # so one that fails to deploy stays there: read from activeServiceStatus alone, the
    # service said STARTING for good and told nothing (decision 0186).
    failing = {
        "kind": "RayService",
        "status": {
            "pendingServiceStatus": {
                "rayClusterName": "chat-x7k2p",
                "rayClusterStatus": {"state": "ready"},
                "applicationStatuses": {
                    "chat": {"status": "DEPLOY_FAILED", "message": "ImportError: vllm"}
                },
            }
        },
    }
    error = derive(running("STARTING"), "AppWrapper", APP_WRAPPER, ray_service=failing)
    cause = "application chat is DEPLOY_FAILED: ImportError: vllm"
    assert error.status["status"] == "ERROR"
    assert error.status["conditions"][-1] == health("False", "ApplicationsFailed", cause)
    assert error.events == (warning("WorkloadError", cause),)


def test_a_serving_ray_services_edit_that_fails_to_deploy_is_told_while_it_serves() -> None:
    # The old cluster keeps serving (READY); the new one, started for the edit, never takes
    # it over. Nothing told it before (decision 0186).
    upgrading = {
        "kind": "RayService",
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "activeServiceStatus": {
                "rayClusterName": "chat-abc12",
                "applicationStatuses": {"chat": {"status": "RUNNING"}},
            },
            "pendingServiceStatus": {
                "rayClusterName": "chat-def34",
                "applicationStatuses": {
                    "chat": {"status": "DEPLOY_FAILED", "message": "ImportError: vllm"},
                    "health": {"status": "RUNNING"},
                },
            },
        },
    }
    told = derive(running("READY"), "AppWrapper", APP_WRAPPER, ray_service=upgrading)
    cause = (
        "application chat is DEPLOY_FAILED on Ray cluster chat-def34, which KubeRay started "
        "to take the edit while chat-abc12 serves: ImportError: vllm"
    )
    assert told.status["status"] == "READY"
    assert told.status["conditions"][-1] == health("False", "ApplicationsFailed", cause)
    assert told.events == (warning("ChildUnhealthy", f"ApplicationsFailed: {cause}"),)

    promoted = {
        "kind": "RayService",
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "activeServiceStatus": {
                "rayClusterName": "chat-def34",
                "applicationStatuses": {"chat": {"status": "RUNNING"}},
            },
        },
    }
    healthy = derive(told.status, "AppWrapper", APP_WRAPPER, ray_service=promoted)
    assert healthy.status["status"] == "READY"
    assert healthy.status["conditions"][-1] == health(
        "True", "Healthy", "The workload's children and pods report no failure"
    )


# ------------------------------------------------------------------ a Deployment stuck


def deployment(**status: Any) -> dict[str, Any]:
    return {
        "kind": "Deployment",
        "metadata": {"name": "chat", "generation": 1, "uid": "dep"},
        "spec": {"replicas": 1, "progressDeadlineSeconds": 600},
        "status": {"observedGeneration": 1, **status},
    }


PAST_DEADLINE = {
    "type": "Progressing",
    "status": "False",
    "reason": "ProgressDeadlineExceeded",
    "message": 'ReplicaSet "chat-5d9c" has timed out progressing.',
}


def test_a_deployment_past_its_progress_deadline_names_it_and_what_its_pods_wait_on() -> None:
    stuck = pod(
        "chat-5d9c-x1",
        phase="Pending",
        containers=(waiting("workload", "ImagePullBackOff", 'Back-off pulling image "vllm:v9"'),),
    )
    error = derive(
        running("STARTING"), "Deployment", deployment(conditions=[PAST_DEADLINE]), pods=(stuck,)
    )
    cause = (
        'ReplicaSet "chat-5d9c" has timed out progressing. (progressDeadlineSeconds: 600); pod'
        " chat-5d9c-x1: container workload is waiting: ImagePullBackOff (Back-off pulling image"
        ' "vllm:v9")'
    )
    assert error.status["status"] == "ERROR"
    assert error.status["conditions"] == [
        SCHEDULABLE,
        ADMITTED,
        health("False", "ProgressDeadlineExceeded", cause),
    ]
    # It used to say "Workload is in error" (no False condition to name the cause).
    assert error.events == (warning("WorkloadError", cause),)


def test_a_deployment_in_error_is_told_by_its_own_cause_while_its_volume_is_being_deleted() -> None:
    """``PvcReady`` comes before ``ChildHealthy`` in the conditions; the Event named the first
    False one, the volume, and not why the workload is in error."""
    leaving = {
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "chat-data", "deletionTimestamp": T_NOW},
        "status": {"phase": "Bound"},
    }
    error = derive(
        running("STARTING"), "Deployment", deployment(conditions=[PAST_DEADLINE]), pvcs=(leaving,)
    )
    cause = 'ReplicaSet "chat-5d9c" has timed out progressing. (progressDeadlineSeconds: 600)'
    assert error.status["status"] == "ERROR"
    assert [c["type"] for c in error.status["conditions"]] == [
        "Schedulable",
        "Admitted",
        "PvcReady",
        "ChildHealthy",
    ]
    assert error.events == (warning("WorkloadError", cause),)


# ------------------------------------------------------------------ pods in trouble


def test_a_crash_looping_replica_is_told_once_and_its_recovery_too() -> None:
    crashing = pod(
        "chat-5d9c-x1",
        containers=(
            waiting(
                "workload",
                "CrashLoopBackOff",
                "back-off 40s restarting failed container=workload pod=chat-5d9c-x1",
                last_exit=2,
            ),
        ),
    )
    first = derive(running("READY"), "Deployment", deployment(), pods=(crashing,))
    cause = (
        "pod chat-5d9c-x1: container workload is waiting: CrashLoopBackOff; it last exited with"
        " code 2 (Error)"
    )
    assert first.status["status"] == "STARTING"
    assert first.status["conditions"][-1] == health("False", "CrashLoopBackOff", cause)
    assert first.events == (
        EventIntent(
            type="Normal", reason="WorkloadStarting", message="Workload was admitted, starting"
        ),
        warning("ChildUnhealthy", f"CrashLoopBackOff: {cause}"),
    )

    # The kubelet's next back-off: the same trouble, nothing new to write or tell.
    longer = pod(
        "chat-5d9c-x1",
        containers=(
            waiting("workload", "CrashLoopBackOff", "back-off 1m20s restarting", last_exit=2),
        ),
    )
    again = derive(first.status, "Deployment", deployment(), pods=(longer,))
    assert again.status == first.status
    assert again.events == ()

    recovered = derive(
        first.status, "Deployment", deployment(availableReplicas=1, readyReplicas=1), pods=()
    )
    assert recovered.status["status"] == "READY"
    assert recovered.status["conditions"][-1] == health(
        "True", "Healthy", "The workload's children and pods report no failure"
    )
    assert recovered.events == (
        EventIntent(type="Normal", reason="WorkloadReady", message="Workload is ready"),
    )


def test_a_job_pod_that_cannot_pull_its_image_is_told_and_not_again_as_the_kubelet_retries() -> (
    None
):
    pulling = pod(
        "train-abcde",
        phase="Pending",
        containers=(
            waiting("workload", "ErrImagePull", 'failed to pull "ghcr.io/x:nope": not found'),
        ),
    )
    first = derive(running("STARTING"), "Job", batch_job(active=1), pods=(pulling,))
    cause = (
        "pod train-abcde: container workload is waiting: ErrImagePull (failed to pull"
        ' "ghcr.io/x:nope": not found)'
    )
    assert first.status["status"] == "STARTING"
    assert first.status["conditions"][-1] == health("False", "ErrImagePull", cause)
    assert first.events == (warning("ChildUnhealthy", f"ErrImagePull: {cause}"),)

    backing_off = pod(
        "train-abcde",
        phase="Pending",
        containers=(waiting("workload", "ImagePullBackOff", 'Back-off pulling "ghcr.io/x:nope"'),),
    )
    second = derive(first.status, "Job", batch_job(active=1), pods=(backing_off,))
    assert second.status["conditions"][-1] == health(
        "False",
        "ImagePullBackOff",
        "pod train-abcde: container workload is waiting: ImagePullBackOff (Back-off pulling"
        ' "ghcr.io/x:nope")',
    )
    assert second.events == ()


def test_an_init_container_in_trouble_and_more_pods_than_are_named() -> None:
    pods = tuple(
        pod(
            f"chat-{i}",
            phase="Pending",
            init_containers=(
                waiting("fetch", "CreateContainerConfigError", 'secret "hf" not found'),
            ),
            containers=(waiting("workload", "PodInitializing"),),
        )
        for i in (3, 1, 2)
    )
    decision = derive(running("STARTING"), "Deployment", deployment(), pods=pods)
    told = 'container fetch is waiting: CreateContainerConfigError (secret "hf" not found)'
    assert decision.status["conditions"][-1] == health(
        "False",
        "CreateContainerConfigError",
        f"pod chat-1: {told}; pod chat-2: {told} and 1 more",
    )


def test_pods_starting_finished_or_going_are_no_trouble() -> None:
    creating = pod(
        "chat-1", phase="Pending", containers=(waiting("workload", "ContainerCreating"),)
    )
    going = pod("chat-2", containers=(waiting("workload", "CrashLoopBackOff"),))
    going["metadata"]["deletionTimestamp"] = T_NOW
    ended = pod("chat-3", phase="Failed", containers=(waiting("workload", "ImagePullBackOff"),))
    decision = derive(
        running("STARTING"), "Deployment", deployment(), pods=(creating, going, ended)
    )
    # Never in trouble: no ChildHealthy condition at all.
    assert decision.status["conditions"] == [SCHEDULABLE, ADMITTED]
    assert decision.events == ()


# ------------------------------------------------------------------ a pool its nodes left

OLD_POOL = "amd-mi300x-4gpu-172core-1843gi"
NEW_POOL = "amd-mi300x-8gpu-172core-1843gi"


def admitted_pod(
    name: str,
    *,
    pool: str = OLD_POOL,
    controller: str = "ReplicaSet",
    controller_uid: str = "rs",
    **spec: Any,
) -> dict[str, Any]:
    """A pending pod Kueue admitted into ``pool`` (its selector), the scheduler's verdict
    Unschedulable."""
    found = pod(
        name,
        phase="Pending",
        conditions=[
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/2 nodes are available: 2 node(s) didn't match Pod's node "
                "affinity/selector.",
            }
        ],
    )
    found["metadata"]["ownerReferences"] = [
        {"kind": controller, "name": "chat-5d9c", "uid": controller_uid, "controller": True}
    ]
    found["spec"] = {
        "nodeSelector": {"kaiwo/nodepool": pool, "kubernetes.io/hostname": "nc-1"},
        **spec,
    }
    return found


def test_a_pod_admitted_into_a_pool_no_node_is_in_is_told_with_what_to_do() -> None:
    stranded = admitted_pod("chat-5d9c-8lm65")
    serving = deployment(readyReplicas=1, availableReplicas=1)
    serving["spec"]["replicas"] = 2  # one serves, the other is the pod stranded
    first = derive(
        running("RUNNING"),
        "Deployment",
        serving,
        pods=(stranded,),
        node_pools=frozenset({NEW_POOL}),
    )
    cause = (
        "pod chat-5d9c-8lm65: Kueue admitted it into node pool amd-mi300x-4gpu-172core-1843gi,"
        " which no node is in any more (its nodes moved to another pool before the scheduler "
        "bound the pod), so no node can take it, and Kueue, which counts it admitted, does not "
        "admit it again; delete the pod: its ReplicaSet makes a new one, which Kueue admits "
        "anew"
    )
    assert first.status["status"] == "RUNNING"
    assert first.status["conditions"][-1] == health("False", "NodePoolGone", cause)
    assert first.events == (warning("ChildUnhealthy", f"NodePoolGone: {cause}"),)

    # Its nodes back in the pool (or the pod replaced): healthy again.
    back = derive(
        first.status,
        "Deployment",
        serving,
        pods=(stranded,),
        node_pools=frozenset({OLD_POOL, NEW_POOL}),
    )
    assert back.status["conditions"][-1] == health(
        "True", "Healthy", "The workload's children and pods report no failure"
    )


STRANDED_JOB_POD = (
    "pod train-x7: Kueue admitted it into node pool amd-mi300x-4gpu-172core-1843gi, which no "
    "node is in any more (its nodes moved to another pool before the scheduler bound the pod), "
    "so no node can take it, and Kueue, which counts it admitted, does not admit it again; "
)


def test_a_jobs_pod_in_a_pool_gone_after_a_pod_ran_is_told_how_to_keep_what_ran() -> None:
    # Deleting the pod would not help: the Job makes the same pod again, with Kueue's
    # selector in its template. A Job made anew would redo what its first pod finished.
    stranded = admitted_pod("train-x7", controller="Job", controller_uid="job-uid")
    decision = derive(
        running("RUNNING"),
        "Job",
        batch_job(active=1, succeeded=1),
        pods=(stranded,),
        node_pools=frozenset({NEW_POOL}),
    )
    assert decision.status["conditions"][-1] == health(
        "False",
        "NodePoolGone",
        STRANDED_JOB_POD + "set spec.active of its Kueue Workload wl to false, and once the "
        "Job is suspended back to true: Kueue admits it anew, and what its pods finished is "
        "kept",
    )


def test_a_jobs_pod_in_a_pool_gone_before_any_ran_is_told_the_job_is_made_anew() -> None:
    stranded = admitted_pod("train-x7", controller="Job", controller_uid="job-uid")
    decision = derive(
        running("STARTING"),
        "Job",
        batch_job(active=1),
        pods=(stranded,),
        node_pools=frozenset({NEW_POOL}),
    )
    assert decision.status["conditions"][-1] == health(
        "False",
        "NodePoolGone",
        STRANDED_JOB_POD + "the operator makes the Job anew, which Kueue admits again",
    )


def test_pods_the_scheduler_may_still_place_are_no_pool_trouble() -> None:
    in_a_pool_with_nodes = admitted_pod("chat-1", pool=NEW_POOL)  # waits for room only
    gated = admitted_pod("chat-2", schedulingGates=[{"name": "kueue.x-k8s.io/admission"}])
    bound = admitted_pod("chat-3", nodeName="nc-1")
    going = admitted_pod("chat-4")
    going["metadata"]["deletionTimestamp"] = T_NOW
    not_tried = admitted_pod("chat-5")
    not_tried["status"]["conditions"] = []
    pods = (in_a_pool_with_nodes, gated, bound, going, not_tried)
    decision = derive(
        running("STARTING"), "Deployment", deployment(), pods=pods, node_pools={NEW_POOL}
    )
    assert decision.status["conditions"] == [SCHEDULABLE, ADMITTED]
    # The nodes' pools unknown: no pod is judged by its pool.
    unknown = derive(running("STARTING"), "Deployment", deployment(), pods=(admitted_pod("c"),))
    assert unknown.status["conditions"] == [SCHEDULABLE, ADMITTED]


def test_a_pool_in_the_selector_of_a_pod_kueue_does_not_manage_is_the_users_own() -> None:
    # A namespace Kueue does not manage: no Workload, nobody admitted the pod anywhere. One
    # replica serves, so the service is believed admitted and its pods are looked at.
    serving = deployment(readyReplicas=1, availableReplicas=1)
    serving["spec"]["replicas"] = 2
    decision = derive(
        running("RUNNING"),
        "Deployment",
        serving,
        pods=(admitted_pod("chat-1"),),
        node_pools=frozenset({NEW_POOL}),
        kueue_workloads=(),
    )
    assert "ChildHealthy" not in [c["type"] for c in decision.status["conditions"]]


def test_a_download_pod_that_cannot_pull_its_image_is_told_while_downloading() -> None:
    downloader = pod(
        "train-download-abcde",
        phase="Pending",
        containers=(waiting("downloader", "ImagePullBackOff", "Back-off pulling image"),),
        owner_uid="download-uid",
    )
    decision = derive_status(
        workload_kind="KaiwoJob",
        generation=1,
        previous_status={"status": "DOWNLOADING", "conditions": []},
        observed=ObservedChildren(
            child_kind="Job",
            downloads_configured=True,
            download_job={
                "kind": "Job",
                "metadata": {"name": "train-download"},
                "status": {"active": 1},
            },
            pods=(downloader,),
        ),
        schedulable=OK,
        cluster_queue="kaiwo",
        now=NOW,
    )
    assert decision.status["status"] == "DOWNLOADING"
    assert decision.status["conditions"][-1] == health(
        "False",
        "ImagePullBackOff",
        "pod train-download-abcde: container downloader is waiting: ImagePullBackOff (Back-off"
        " pulling image)",
    )


# ------------------------------------------------------------------ the public event


def test_the_public_failed_event_names_the_childs_cause() -> None:
    before = {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoJob",
        "metadata": {"name": "train", "namespace": "team", "uid": "u1", "resourceVersion": "5"},
        "spec": {"user": "ada@example.com", "clusterQueue": "gpu"},
        "status": running(),
    }
    failed = derive(
        running(),
        "Job",
        batch_job(job_condition("Failed", "BackoffLimitExceeded", "Job has reached the limit")),
    )
    after = {**before, "metadata": {**before["metadata"], "resourceVersion": "6"}}
    after["status"] = failed.status
    events = derive_public_events(
        public_state(before),
        ObservedObjectV1(
            kind="KaiwoJob",
            api_version="kaiwo.silogen.ai/v1alpha1",
            namespace="team",
            name="train",
            uid="u1",
            resource_version="6",
            event_type="MODIFIED",
            object=after,
        ),
        observed_at=NOW,
        default_queue="kaiwo",
    )
    told = [
        (e.label, getattr(e.payload, "reason", None), getattr(e.payload, "message", None))
        for e in events
    ]
    assert told == [
        ("phase-changed", "BackoffLimitExceeded", "Job train: Job has reached the limit"),
        ("failed", "BackoffLimitExceeded", "Job train: Job has reached the limit"),
    ]
