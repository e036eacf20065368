"""What the simulated Job controller, scheduler and kubelet decide, with no I/O.

A pod's life in the sandbox: created Pending on a node with room for its requests (or left
Pending, unschedulable), Running and Ready ``start_seconds`` after it was created, and after
its run time Succeeded, or Failed when asked to fail. The run time is, first that applies:

* the pod's annotation :data:`RUN_SECONDS` (copied from the workload's annotations);
* :attr:`Timing.download_seconds` for a download Job's pod;
* :attr:`Timing.run_seconds`, cut short by the workload's ``spec.duration`` when that is
  shorter;
* for ever, for a pod that restarts (``restartPolicy: Always``, a Deployment's): it serves.

The annotation :data:`FAIL` makes the container exit with code 1; its value is the message
(the reason a user sees). Every delay is multiplied by :attr:`Timing.scale`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any, Final, Literal

from kaiwo_sandbox.quantities import Requests, add, pod_requests, quantity

PREFIX: Final = "sandbox.kaiwo.silogen.ai/"
RUN_SECONDS: Final = PREFIX + "run-seconds"
FAIL: Final = PREFIX + "fail"
GPU_UTILIZATION: Final = PREFIX + "gpu-utilization"
GPU_IDS: Final = PREFIX + "gpu-ids"
NODE: Final = PREFIX + "node"
"""Where the sandbox's scheduler placed a pod it could not bind (a real API server's pods are
bound through the binding subresource, which the Kubernetes port does not offer)."""
WORKLOAD_TYPE_LABEL: Final = "kaiwo.silogen.ai/type"
JOB_NAME_LABEL: Final = "batch.kubernetes.io/job-name"
CONTROLLER_UID_LABEL: Final = "batch.kubernetes.io/controller-uid"
TIME_FORMAT: Final = "%Y-%m-%dT%H:%M:%SZ"


@dataclass(frozen=True, slots=True)
class Timing:
    """How long things take in the sandbox (seconds, before ``scale``)."""

    admit_seconds: float = 2.0
    """How long Kueue takes to look at a new Workload (so that PENDING is seen)."""
    start_seconds: float = 2.0
    run_seconds: float = 20.0
    download_seconds: float = 3.0
    scale: float = 1.0

    def delay(self, seconds: float) -> timedelta:
        return timedelta(seconds=seconds * self.scale)


@dataclass(frozen=True, slots=True)
class RunPlan:
    seconds: float
    failure: str | None = None


def run_plan(
    pod: Mapping[str, Any], *, timing: Timing, duration_seconds: float | None = None
) -> RunPlan:
    """How long the pod runs and whether it fails (see the module docstring)."""
    metadata = pod.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    failure = annotations.get(FAIL) or None
    given = annotations.get(RUN_SECONDS)
    if given is not None:
        try:
            return RunPlan(max(0.0, float(given)), failure)
        except ValueError:
            pass  # a bad value falls back to the defaults; the sandbox is not a validator
    if (metadata.get("labels") or {}).get(WORKLOAD_TYPE_LABEL) == "downloader":
        return RunPlan(timing.download_seconds, failure)
    if (pod.get("spec") or {}).get("restartPolicy", "Always") == "Always":
        return RunPlan(math.inf, failure)
    seconds = timing.run_seconds
    if duration_seconds is not None:
        seconds = min(seconds, duration_seconds)
    return RunPlan(seconds, failure)


def parse_time(text: object) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def format_time(moment: datetime) -> str:
    return moment.strftime(TIME_FORMAT)


PodStep = Literal["start", "succeed", "fail"]


def pod_step(
    pod: Mapping[str, Any], plan: RunPlan, *, timing: Timing, now: datetime
) -> PodStep | None:
    """What the kubelet does to a bound pod now, if anything."""
    status = pod.get("status") or {}
    phase = status.get("phase") or "Pending"
    if not node_of(pod) or phase in ("Succeeded", "Failed"):
        return None
    if phase == "Pending":
        created = parse_time((pod.get("metadata") or {}).get("creationTimestamp"))
        due = created is None or now >= created + timing.delay(timing.start_seconds)
        return "start" if due else None
    started = parse_time(status.get("startTime"))
    if math.isinf(plan.seconds) and not plan.failure:
        return None
    seconds = timing.start_seconds if math.isinf(plan.seconds) else plan.seconds
    if started is None or now < started + timing.delay(seconds):
        return None
    return "fail" if plan.failure else "succeed"


def pod_status(
    pod: Mapping[str, Any], step: PodStep, *, plan: RunPlan, now: datetime
) -> dict[str, Any]:
    """The status the kubelet reports for ``step``."""
    at = format_time(now)
    started = (pod.get("status") or {}).get("startTime") or at
    running = step == "start"
    if running:
        state: dict[str, Any] = {"running": {"startedAt": at}}
    else:
        failed = step == "fail"
        terminated: dict[str, Any] = {
            "exitCode": 1 if failed else 0,
            "reason": "Error" if failed else "Completed",
            "startedAt": started,
            "finishedAt": at,
        }
        if failed and plan.failure:
            terminated["message"] = plan.failure
        state = {"terminated": terminated}
    phase = {"start": "Running", "succeed": "Succeeded", "fail": "Failed"}[step]
    ready = "True" if running else "False"
    return {
        "phase": phase,
        "startTime": started,
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": started},
            {"type": "Initialized", "status": "True", "lastTransitionTime": started},
            {"type": "ContainersReady", "status": ready, "lastTransitionTime": at},
            {"type": "Ready", "status": ready, "lastTransitionTime": at},
        ],
        "containerStatuses": [
            {
                "name": container.get("name", ""),
                "image": container.get("image", ""),
                "imageID": "",
                "ready": running,
                "started": running,
                "restartCount": 0,
                "state": state,
            }
            for container in (pod.get("spec") or {}).get("containers") or ()
        ],
    }


# ------------------------------------------------------------------ scheduling


@dataclass(frozen=True, slots=True)
class NodeRoom:
    """A node's allocatable resources and its GPU resource name (None: no GPUs)."""

    name: str
    allocatable: Requests
    gpu_resource: str | None
    gpus: int


@dataclass(frozen=True, slots=True)
class Placement:
    node: str
    gpu_ids: tuple[int, ...]


def node_of(pod: Mapping[str, Any]) -> str:
    """The node a pod runs on: bound, or placed by the sandbox's scheduler ("" for neither)."""
    bound = (pod.get("spec") or {}).get("nodeName")
    placed = ((pod.get("metadata") or {}).get("annotations") or {}).get(NODE)
    return str(bound or placed or "")


def is_active(pod: Mapping[str, Any]) -> bool:
    phase = (pod.get("status") or {}).get("phase") or "Pending"
    return phase not in ("Succeeded", "Failed") and not (pod.get("metadata") or {}).get(
        "deletionTimestamp"
    )


def place(
    requests: Requests, *, nodes: Sequence[NodeRoom], pods: Sequence[Mapping[str, Any]]
) -> Placement | None:
    """The first node (in the given order) where ``requests`` fit beside the active pods bound
    to it, with the lowest free GPU ids; None when no node has room."""
    for node in nodes:
        bound = [p for p in pods if node_of(p) == node.name]
        used: dict[str, Decimal] = {}
        taken: set[int] = set()
        for pod in filter(is_active, bound):
            used = add(used, pod_requests(pod.get("spec") or {}))
            taken |= set(gpu_ids(pod))
        fits = all(
            used.get(name, Decimal(0)) + amount <= node.allocatable.get(name, Decimal(0))
            for name, amount in requests.items()
            if amount > 0
        )
        if not fits:
            continue
        wanted = int(requests.get(node.gpu_resource, 0)) if node.gpu_resource else 0
        free = [i for i in range(node.gpus) if i not in taken]
        return Placement(node.name, tuple(free[:wanted]))
    return None


def gpu_ids(pod: Mapping[str, Any]) -> tuple[int, ...]:
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(GPU_IDS) or ""
    return tuple(int(part) for part in text.split(",") if part.strip().isdigit())


GPU_RESOURCES: Final = ("amd.com/gpu", "nvidia.com/gpu")


def held_gpus(pods: Sequence[Mapping[str, Any]]) -> dict[str, tuple[int, ...]]:
    """The GPU ids each active bound pod holds, by ``namespace/name``: those the sandbox's
    scheduler noted on it, else (a real scheduler notes none; the device plugin would choose)
    the lowest ids its node has left, pods taken in order of creation."""
    held: dict[str, tuple[int, ...]] = {}
    taken: dict[str, set[int]] = {}
    active = [p for p in pods if is_active(p) and node_of(p)]
    for pod in active:
        if noted := gpu_ids(pod):
            held[_key(pod)] = noted
            taken.setdefault(node_of(pod), set()).update(noted)
    for pod in sorted(active, key=_created):
        if _key(pod) in held:
            continue
        requests = pod_requests(pod.get("spec") or {})
        wanted = int(sum(requests.get(name, Decimal(0)) for name in GPU_RESOURCES))
        used = taken.setdefault(node_of(pod), set())
        ids: list[int] = []
        candidate = 0
        while len(ids) < wanted:
            if candidate not in used:
                ids.append(candidate)
            candidate += 1
        used.update(ids)
        held[_key(pod)] = tuple(ids)
    return held


def _key(pod: Mapping[str, Any]) -> str:
    metadata = pod.get("metadata") or {}
    return f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"


def _created(pod: Mapping[str, Any]) -> tuple[str, str]:
    return (str((pod.get("metadata") or {}).get("creationTimestamp") or ""), _key(pod))


def node_room(node: Mapping[str, Any]) -> NodeRoom:
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    gpu_resource = next((r for r in ("amd.com/gpu", "nvidia.com/gpu") if r in allocatable), None)
    return NodeRoom(
        name=(node.get("metadata") or {}).get("name", ""),
        allocatable={name: quantity(value) for name, value in allocatable.items()},
        gpu_resource=gpu_resource,
        gpus=int(quantity(allocatable[gpu_resource])) if gpu_resource else 0,
    )


def unschedulable_message(requests: Requests, node_count: int) -> str:
    biggest = max(
        (name for name in requests if requests[name] > 0 and "gpu" in name),
        default="cpu",
    )
    return f"0/{node_count} nodes are available: {node_count} Insufficient {biggest}."


# ------------------------------------------------------------------ controllers' status


def job_status(
    job: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], *, now: datetime
) -> dict[str, Any]:
    """The status a Job controller writes for ``job`` given its pods (one pod per
    ``parallelism``; ``backoffLimit`` failures allowed)."""
    spec = job.get("spec") or {}
    previous = job.get("status") or {}
    phases = [((p.get("status") or {}).get("phase") or "Pending") for p in pods]
    ready = sum(1 for p in pods if _pod_ready(p))
    succeeded = phases.count("Succeeded")
    failed = phases.count("Failed")
    active = len(phases) - succeeded - failed
    status: dict[str, Any] = {
        "active": active,
        "ready": ready,
        "succeeded": succeeded,
        "failed": failed,
        "startTime": previous.get("startTime") or format_time(now),
    }
    conditions = [
        c
        for c in previous.get("conditions") or ()
        if c.get("type") not in ("Complete", "Failed", "SuccessCriteriaMet", "FailureTarget")
    ]
    wanted = int(spec.get("completions") or spec.get("parallelism") or 1)
    at = format_time(now)
    if failed > int(spec.get("backoffLimit", 6)):
        # The real Job controller's words: what the container said stays on the pod.
        conditions.append(
            {
                "type": "Failed",
                "status": "True",
                "reason": "BackoffLimitExceeded",
                "message": "Job has reached the specified backoff limit",
                "lastTransitionTime": at,
            }
        )
    elif succeeded >= wanted:
        conditions.append(
            {
                "type": "SuccessCriteriaMet",
                "status": "True",
                "reason": "CompletionsReached",
                "lastTransitionTime": at,
            }
        )
        conditions.append(
            {
                "type": "Complete",
                "status": "True",
                "reason": "CompletionsReached",
                "lastTransitionTime": at,
            }
        )
        status["completionTime"] = previous.get("completionTime") or at
    if conditions:
        status["conditions"] = conditions
    return status


def job_is_finished(job: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or ()
    )


def _pod_ready(pod: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or ()
    )


def deployment_status(
    deployment: Mapping[str, Any], ready_pods: int, *, now: datetime
) -> dict[str, Any]:
    """The Deployment controller's status when ``ready_pods`` of its pods are Ready."""
    metadata = deployment.get("metadata") or {}
    wanted = int((deployment.get("spec") or {}).get("replicas", 1))
    ready = min(ready_pods, wanted)
    at = format_time(now)
    available = "True" if ready >= wanted else "False"
    return {
        "observedGeneration": int(metadata.get("generation") or 1),
        "replicas": wanted,
        "updatedReplicas": wanted,
        "readyReplicas": ready,
        "availableReplicas": ready,
        "unavailableReplicas": wanted - ready,
        "conditions": [
            {
                "type": "Available",
                "status": available,
                "reason": "MinimumReplicasAvailable"
                if available == "True"
                else "MinimumReplicasUnavailable",
                "lastUpdateTime": at,
                "lastTransitionTime": at,
            },
            {
                "type": "Progressing",
                "status": "True",
                "reason": "NewReplicaSetAvailable" if available == "True" else "ReplicaSetUpdated",
                "lastUpdateTime": at,
                "lastTransitionTime": at,
            },
        ],
    }


def same_status(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether writing ``new`` would change anything but timestamps (level-triggered: a
    settled sandbox writes nothing)."""
    written = {key: old.get(key) for key in new}
    return bool(_without_times(written) == _without_times(new))


def _without_times(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _without_times(v) for k, v in value.items() if not k.endswith(("Time", "At"))}
    if isinstance(value, list):
        return [_without_times(v) for v in value]
    return value
