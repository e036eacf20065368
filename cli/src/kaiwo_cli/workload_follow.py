"""``kaiwo submit --wait``: follow workloads until they settle, a spinner each and a line
per phase each enters, and say why one failed. Heavy modules are imported inside the
functions (see :mod:`kaiwo_cli.commands.workloads`)."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kaiwo_cli.cluster_port import ClusterWatcher


class NotSettledError(Exception):
    """``--wait --timeout`` ran out: a workload is neither done nor stuck (exit 3). The message
    has a line per workload not settled, with the phase it was last seen in (decision 0141)."""


async def follow_until_settled(
    kube: ClusterWatcher, workloads: list[dict[str, Any]], *, within: float | None
) -> list[dict[str, Any]]:
    """Watch every workload until it settles: a spinner each, a line per phase it enters."""
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    console = Console(stderr=True, highlight=False)
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}", markup=False),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as progress:
        # The latest state each watch has seen, by position: what a timeout names.
        latest = list(workloads)
        watches = [
            _follow_one(kube, latest, index, progress, progress.add_task(label(workload, "NEW")))
            for index, workload in enumerate(workloads)
        ]
        try:
            return list(await asyncio.wait_for(asyncio.gather(*watches), within))
        except TimeoutError:
            raise NotSettledError(not_settled_message(latest, within=within or 0)) from None


def not_settled_message(latest: list[dict[str, Any]], *, within: float) -> str:
    """A line for each workload ``--wait`` gave up on: which, and the phase it was last in
    (it said only "not settled within 600 s", of which of three jobs nobody knew)."""
    from kaiwo_cli.workload_views import is_settled, phase_of

    lines = [
        f"{label(workload, 'not settled')} within {within:g} s (last phase {phase_of(workload)})"
        for workload in latest
        if not is_settled(workload)
    ]
    # Settled in the instant the time ran out: still a timeout, with nothing to name.
    return "\n".join(lines) or f"not settled within {within:g} s"


async def _follow_one(
    kube: ClusterWatcher, latest: list[dict[str, Any]], index: int, progress: Any, task: Any
) -> dict[str, Any]:
    """List, then watch from the list's version (every phase is seen, however short), until
    the workload settles; a watch the server ends or expires is started again."""
    from kaiwo_kube import ResourceExpired

    from kaiwo_cli.cluster_access import ClusterError, readable_kueue_workloads
    from kaiwo_cli.workload_views import is_settled, phase_of, queue_position

    workload = latest[index]
    resource = resource_of(workload)
    meta = workload["metadata"]
    where = {"namespace": meta["namespace"], "field_selector": f"metadata.name={meta['name']}"}
    shown = ""
    queue_readable = True
    """False once the API server refused the Kueue Workloads (403): not asked again, and the
    spinner shows the phase without the place in the queue."""

    async def show(current: dict[str, Any]) -> None:
        nonlocal shown, queue_readable
        latest[index] = current
        phase = phase_of(current)
        queued = (
            await readable_kueue_workloads(kube, namespace=meta["namespace"])
            if queue_readable
            else None
        )
        queue_readable = queued is not None
        position = queue_position(current, queued) if queued is not None else None
        waiting = (
            f" ({position.position} of {position.pending} waiting in {position.queue})"
            if position is not None
            else ""
        )
        progress.update(task, description=label(current, phase) + waiting)
        if phase != shown:
            shown = phase
            moment = datetime.now(UTC).strftime("%H:%M:%S")
            # A line to keep (grep, CI logs): whole however long, and the failure reason as
            # the container wrote it, brackets and all (rich markup would eat or choke on them).
            progress.console.print(
                f"{moment}  {label(current, phase)}{failure_reason(current)}",
                markup=False,
                soft_wrap=True,
            )

    current = workload
    while True:
        listed = await kube.list(resource, **where)
        if not listed.items:
            raise ClusterError(f"{label(current, shown)}: deleted while waiting")
        current = {"apiVersion": resource.api_version, "kind": resource.kind, **listed.items[0]}
        await show(current)
        if is_settled(current):
            progress.update(task, total=1, completed=1)
            return current
        events = kube.watch(resource, resource_version=listed.resource_version, **where)
        try:
            async with contextlib.aclosing(events):
                async for event in events:
                    if event.type == "DELETED":
                        raise ClusterError(f"{label(current, shown)}: deleted while waiting")
                    if event.type in ("ADDED", "MODIFIED"):
                        current = {
                            "apiVersion": resource.api_version,
                            "kind": resource.kind,
                            **event.object,
                        }
                        await show(current)
                        if is_settled(current):
                            progress.update(task, total=1, completed=1)
                            return current
        except ResourceExpired:
            continue


def current_phase(workload: dict[str, Any]) -> str:
    from kaiwo_cli.workload_views import phase_of

    return phase_of(workload)


def label(workload: dict[str, Any], phase: str) -> str:
    meta = workload["metadata"]
    return f"{workload['kind']} {meta['namespace']}/{meta['name']}: {phase}"


def failure_reason(workload: dict[str, Any]) -> str:
    """The message of a failed workload's failing condition, to say why (see
    :func:`~kaiwo_cli.workload_views.failure_condition`); for TERMINATED
    ``WorkloadTerminatedEarly``. The first condition with a message was ``Schedulable``'s
    "Cluster has sufficient GPU resources" for a job whose container failed."""
    from kaiwo_cli.workload_views import failure_condition

    status = workload.get("status") or {}
    phase = status.get("status")
    if phase not in ("FAILED", "ERROR", "TERMINATED"):
        return ""
    conditions = [c for c in status.get("conditions") or [] if c.get("message")]
    found = (
        next((c for c in conditions if c.get("type") == "WorkloadTerminatedEarly"), None)
        if phase == "TERMINATED"
        else failure_condition(conditions)
    )
    return f" ({found.get('reason')}: {found['message']})" if found is not None else ""


def resource_of(workload: dict[str, Any]) -> Any:
    from kaiwo_kube import resources

    return (
        resources.KAIWO_SERVICE if workload.get("kind") == "KaiwoService" else resources.KAIWO_JOB
    )
