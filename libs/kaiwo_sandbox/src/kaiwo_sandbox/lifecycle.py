"""What the simulated kubelet decides about a pod's life, with no I/O (the scheduler's
decisions are :mod:`kaiwo_sandbox.scheduling`, the controllers' status
:mod:`kaiwo_sandbox.controller_status`).

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
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final, Literal

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


def node_of(pod: Mapping[str, Any]) -> str:
    """The node a pod runs on: bound, or placed by the sandbox's scheduler ("" for neither)."""
    bound = (pod.get("spec") or {}).get("nodeName")
    placed = ((pod.get("metadata") or {}).get("annotations") or {}).get(NODE)
    return str(bound or placed or "")
