"""What a sandbox container writes to its log, with no I/O.

Nothing runs in the sandbox, so a container's log is derived from its pod and its run plan
(:func:`~kaiwo_sandbox.lifecycle.run_plan`): a line when it starts (what, where, on which
GPUs), the command it would run, progress at each quarter of its run time, and how it ended:
``done`` with exit code 0, or the failure message as the container's last words and its exit
code. A container that restarts (a Deployment's) says it serves, then again every
:data:`SERVING_EVERY_SECONDS`. Every line carries the moment it was written; a running
container's log holds the lines due by ``now``, a finished one's everything up to its end.

The same pod and moment always give the same lines, so the kubelet's log endpoint keeps no
state: it reads the pod and asks again.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from kaiwo_sandbox.lifecycle import WORKLOAD_TYPE_LABEL, RunPlan, Timing, node_of, parse_time
from kaiwo_sandbox.scheduling import gpu_ids

PREFIX: Final = "[sandbox] "
PROGRESS_PARTS: Final = 4
SERVING_EVERY_SECONDS: Final = 30.0
COMMAND_WIDTH: Final = 160
WORKLOAD_NAME_LABEL: Final = "kaiwo.silogen.ai/name"


@dataclass(frozen=True, slots=True)
class LogLine:
    at: datetime
    text: str


@dataclass(frozen=True, slots=True)
class ContainerRun:
    """A started container: when it started and, once it has, how it ended."""

    started: datetime
    finished: datetime | None = None
    exit_code: int = 0
    message: str = ""


def container_run(pod: Mapping[str, Any], container: str) -> ContainerRun | None:
    """The container's run from the pod's status (None: it has not started)."""
    for status in (pod.get("status") or {}).get("containerStatuses") or ():
        if status.get("name") != container:
            continue
        state = status.get("state") or {}
        running, terminated = state.get("running"), state.get("terminated")
        if running:
            started = parse_time(running.get("startedAt"))
            return ContainerRun(started) if started is not None else None
        if terminated:
            finished = parse_time(terminated.get("finishedAt"))
            started = parse_time(terminated.get("startedAt")) or finished
            if started is None or finished is None:
                return None
            return ContainerRun(
                started,
                finished,
                exit_code=int(terminated.get("exitCode") or 0),
                message=str(terminated.get("message") or ""),
            )
    return None


def container_log(
    pod: Mapping[str, Any],
    container: str,
    *,
    run: ContainerRun,
    plan: RunPlan,
    timing: Timing,
    now: datetime,
) -> tuple[LogLine, ...]:
    """The lines ``container`` of ``pod`` has written by ``now`` (all of them once it ended)."""
    until = run.finished or now
    lines = [
        LogLine(run.started, PREFIX + _started(pod, container)),
        LogLine(run.started, PREFIX + _command(pod, container)),
        *_middle(run, plan, timing=timing, until=until),
    ]
    if run.finished is not None:
        lines += _ending(run)
    return tuple(line for line in lines if line.at <= until)


def _middle(run: ContainerRun, plan: RunPlan, *, timing: Timing, until: datetime) -> list[LogLine]:
    if math.isinf(plan.seconds):
        every = timing.delay(SERVING_EVERY_SECONDS)
        lines = [LogLine(run.started, PREFIX + "ready: serving until the pod is deleted")]
        at, count = run.started + every, 1
        while at <= until and every > timedelta(0):
            lines.append(LogLine(at, PREFIX + f"still serving after {_seconds(every * count)}"))
            at, count = at + every, count + 1
        return lines
    total = timing.delay(plan.seconds)
    return [
        LogLine(
            run.started + total * part / PROGRESS_PARTS,
            PREFIX + f"{100 * part // PROGRESS_PARTS}% of the planned {_seconds(total)}",
        )
        for part in range(1, PROGRESS_PARTS)
    ]


def _ending(run: ContainerRun) -> list[LogLine]:
    assert run.finished is not None
    took = _seconds(run.finished - run.started)
    if run.exit_code == 0:
        return [LogLine(run.finished, PREFIX + f"done after {took}: exit code 0")]
    last_words = [LogLine(run.finished, run.message)] if run.message else []
    return [
        *last_words,
        LogLine(run.finished, PREFIX + f"exited with code {run.exit_code} after {took}"),
    ]


def _started(pod: Mapping[str, Any], container: str) -> str:
    metadata = pod.get("metadata") or {}
    labels = metadata.get("labels") or {}
    what = f"pod {metadata.get('namespace')}/{metadata.get('name')}"
    workload = labels.get(WORKLOAD_NAME_LABEL)
    if workload:
        kind = "download" if labels.get(WORKLOAD_TYPE_LABEL) == "downloader" else "workload"
        what += f" ({kind} {metadata.get('namespace')}/{workload})"
    ids = gpu_ids(pod)
    gpus = f" with GPUs {','.join(str(i) for i in ids)}" if ids else ""
    return (
        f"container {container} of {what} started on node {node_of(pod)}{gpus}; "
        "a simulation: nothing really runs"
    )


def _command(pod: Mapping[str, Any], container: str) -> str:
    spec: Mapping[str, Any] = next(
        (c for c in (pod.get("spec") or {}).get("containers") or () if c.get("name") == container),
        {},
    )
    words = [str(w) for w in (spec.get("command") or []) + (spec.get("args") or [])]
    shown = " ".join(_script_summary(w) if "\n" in w else w for w in words)
    if len(shown) > COMMAND_WIDTH:
        shown = shown[: COMMAND_WIDTH - 1] + "…"
    return f"image {spec.get('image') or '-'}: {shown or '(its default command)'}"


def _script_summary(script: str) -> str:
    """A shell script as one line: its commands without the shebang, comments and ``set``."""
    kept = []
    for raw in script.splitlines():
        line = raw.strip().removesuffix("\\").strip()
        if line and not line.startswith(("#", "set ")):
            kept.append(line)
    return " ".join(kept)


def _seconds(span: timedelta) -> str:
    return f"{span.total_seconds():g} s"
