"""The scientist's commands ``list``, ``status``, ``logs`` and ``delete`` (``submit``:
:mod:`kaiwo_cli.commands.submit`; what they share: :mod:`kaiwo_cli.commands.workload_access`).

Each finds the cluster as :mod:`kaiwo_cli.cluster_access` says (after ``kaiwo up``: no flag
needed) and prints what :mod:`kaiwo_cli.workload_views` renders. Heavy modules (the
Kubernetes client, pydantic models, rich) are imported inside the commands, so that
``kaiwo --help`` and ``kaiwo list -h`` start at once.

Exit status: 0 done; 1 the input is invalid, the workload failed or stopped in ERROR
(``--wait``), or there was nothing to show (no such workload, no pods of it yet); 2 the cluster
cannot be reached or refused the request (a workload that exists already, for ``submit``); 3
``--wait --timeout`` ran out before the workload settled.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import click

from kaiwo_cli.commands.options import (
    HELP,
    OBJECT_FORMATS,
    all_namespaces_option,
    check_output,
    cluster_options,
    listed_kind,
    listed_phase,
    namespace_option,
    output_option,
    output_option_saying,
)
from kaiwo_cli.commands.workload_access import (
    POLL_SECONDS,
    dump_objects,
    exit_with,
    read_in_scope,
    resolve_target,
    run_on_cluster,
    utc_now,
    workload_argument,
    workload_reference,
)
from kaiwo_cli.workload_follow import (
    resource_of,
)

if TYPE_CHECKING:
    from kaiwo_contracts.queue_estimates.kueue import Placed

    from kaiwo_cli.cluster_port import CommandCluster


@click.command()
@click.option(
    "--user", "-u", default=None, help="Whose workloads (default: you, from the CLI config)."
)
@click.option("--all-users", is_flag=True, default=False, help="Everyone's workloads.")
@click.option(
    "--kind", default=None, callback=listed_kind, help="KaiwoJob or KaiwoService (job, service)."
)
@click.option(
    "--status",
    "phase",
    default=None,
    callback=listed_phase,
    help="Only this phase (PENDING, RUNNING, ...).",
)
@namespace_option
@all_namespaces_option
@output_option
@click.option("--watch", "-w", is_flag=True, default=False, help=HELP["watch"])
@cluster_options
def list_workloads(
    *,
    user: str | None,
    all_users: bool,
    kind: str | None,
    phase: str | None,
    namespace: str | None,
    all_namespaces: bool,
    output: str | None,
    watch: bool,
    kubeconfig: Path | None,
    context: str | None,
    state: Path | None,
) -> None:
    """KaiwoJobs and KaiwoServices: yours (spec.user) in every namespace unless told otherwise.

    "You" is --user, else the user of the CLI config; with neither, everyone's are listed.
    """
    import os

    from kaiwo_cli.submission import SubmissionError, config_path, read_config

    check_output(output)
    if not all_users and user is None:
        try:
            user = read_config(config_path(os.environ)).user
        except SubmissionError as error:
            raise exit_with("list", str(error), code=1) from None
    wanted_user = None if all_users else user
    scope = None if all_namespaces or namespace is None else namespace
    target = resolve_target(kubeconfig, context, state)

    async def work(kube: CommandCluster) -> int:
        nonlocal scope
        from kaiwo_cli.cluster_access import list_workloads as read
        from kaiwo_cli.workload_views import list_table, matches, watch_line

        def selected(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return [w for w in found if matches(w, user=wanted_user, kind=kind, phase=phase)]

        async def read_scope(where: str | None) -> list[dict[str, Any]]:
            return await read(kube, namespace=where)

        found, scope = await read_in_scope(
            "list", target, scope, read_scope, every_asked=all_namespaces
        )
        workloads = selected(found)
        if output in ("yaml", "json") or (output == "name" and workloads):
            # An empty List for yaml/json, as kubectl; no names is no line (below).
            click.echo(dump_objects(workloads, output, single=False))
        elif workloads:
            click.echo(list_table(workloads, now=utc_now(), wide=output == "wide"))
        elif not watch:
            whose = f" of {wanted_user}" if wanted_user else ""
            click.echo(f"No workloads{whose} found.", err=True)
        if not watch:
            return 0
        seen = {_key(w): phase_of_(w) for w in workloads}
        while True:
            await asyncio.sleep(POLL_SECONDS)
            for workload in selected(await read(kube, namespace=scope)):
                if seen.get(_key(workload)) != phase_of_(workload):
                    seen[_key(workload)] = phase_of_(workload)
                    click.echo(watch_line(workload, now=utc_now()))

    def phase_of_(workload: dict[str, Any]) -> str:
        from kaiwo_cli.workload_views import phase_of

        return phase_of(workload)

    with contextlib.suppress(KeyboardInterrupt):  # ends -w
        run_on_cluster("list", target, work)


def _key(workload: dict[str, Any]) -> tuple[str, str, str]:
    meta = workload["metadata"]
    return (str(workload.get("kind")), str(meta.get("namespace")), str(meta.get("name")))


@click.command()
@workload_argument
@namespace_option
@output_option_saying(HELP["status_output"])
@click.option(
    "--watch",
    "-w",
    is_flag=True,
    default=False,
    help="Print it again whenever it changes, until a final phase (or Ctrl-C).",
)
@cluster_options
def status(
    workload: str,
    *,
    namespace: str | None,
    output: str | None,
    watch: bool,
    kubeconfig: Path | None,
    context: str | None,
    state: Path | None,
) -> None:
    """Phase, conditions, children and pods, recent Events, queue and place in it.

    Exit 1 when there is no such workload; 2 when the cluster cannot be reached or refuses.
    """
    check_output(output, allowed=OBJECT_FORMATS)
    target = resolve_target(kubeconfig, context, state)
    ns, name, kind = workload_reference("status", workload, namespace=namespace, target=target)

    async def work(kube: CommandCluster) -> None:
        from kaiwo_cli.workload_views import FINAL_PHASES, phase_of

        shown: str | None = None
        watched = kind
        while True:
            found, text, comparable = await _status_now(kube, ns, name, watched, output=output)
            watched = found["kind"]  # -w looks again at the one it showed (one GET)
            if comparable != shown:
                if shown is not None:
                    click.echo("---")
                click.echo(text)
                shown = comparable
            if not watch or phase_of(found) in FINAL_PHASES:
                return
            await asyncio.sleep(POLL_SECONDS)

    with contextlib.suppress(KeyboardInterrupt):  # ends -w
        run_on_cluster("status", target, work)


_STILL: Final = datetime(2000, 1, 1, tzinfo=UTC)
"""A fixed "now" for telling whether a report changed: ages move every second, the objects
do not."""


async def _status_now(
    kube: CommandCluster, ns: str, name: str, kind: str | None, *, output: str | None
) -> tuple[dict[str, Any], str, str]:
    """The workload, its report now, and the report as compared between two looks."""
    from kaiwo_cli import cluster_access as access
    from kaiwo_cli.workload_views import KUEUE_WORKLOAD_KIND, queue_position, status_report

    found = await access.find_workload(kube, ns, name, kind=kind)
    if output is not None:
        text = dump_objects([found], output, single=True)
        return found, text, text
    children = await access.children_of(kube, found)
    pods = await access.pods_of(kube, found, children.objects)
    events = await access.events_about(kube, ns, [found, *children.objects, *pods])
    # A scientist's `edit` role reads no Kueue Workloads: the place in the queue is then
    # unknown, and the report says so rather than failing.
    waiting = await access.readable_kueue_workloads(kube, namespace=ns)
    position = queue_position(found, waiting) if waiting is not None else None
    estimate, partial = await _estimate(kube, found) if position is not None else (None, False)
    unreadable = children.unreadable + (() if waiting is not None else (KUEUE_WORKLOAD_KIND,))

    def report(now: datetime, estimate: Placed | None) -> str:
        return status_report(
            found,
            children=children.objects,
            pods=pods,
            events=events,
            position=position,
            now=now,
            estimate=estimate,
            estimate_partial=partial,
            unreadable=unreadable,
        )

    # The estimate moves with the clock; a watch prints again when the objects change.
    return found, report(utc_now(), estimate), report(_STILL, None)


async def _estimate(kube: CommandCluster, workload: dict[str, Any]) -> tuple[Placed | None, bool]:
    """The pending workload's place in its ClusterQueue and estimated start (decision 0055),
    and whether it was estimated from its own namespace only."""
    from kaiwo_contracts.queue_estimates.kueue import (
        cluster_estimates,
        declared_durations,
        placed_for,
    )

    from kaiwo_cli import cluster_access as access

    namespace = str((workload.get("metadata") or {}).get("namespace") or "")
    world = await access.queue_world(kube, namespace=namespace)
    estimates = cluster_estimates(
        cluster_queues=world.cluster_queues,
        local_queues=world.local_queues,
        kueue_workloads=world.kueue_workloads,
        declared=declared_durations(world.workloads),
        now=utc_now(),
    )
    return placed_for(workload, world.kueue_workloads, estimates), not world.whole


@click.command()
@workload_argument
@click.option(
    "--follow",
    "-f",
    is_flag=True,
    default=False,
    help="Keep streaming: wait for containers to start, follow each (and pods that come "
    "later) until the workload ends; Ctrl-C stops.",
)
@click.option("--tail", type=int, default=None, help="Only the last N lines of each container.")
@click.option("--container", "-c", default=None, help="Only this container.")
@namespace_option
@cluster_options
def logs(
    workload: str,
    *,
    follow: bool,
    tail: int | None,
    container: str | None,
    namespace: str | None,
    kubeconfig: Path | None,
    context: str | None,
    state: Path | None,
) -> None:
    """The logs of the workload's pods. With several pods or containers (and always with
    -f, where pods come and go) each line starts with [POD/CONTAINER].

    Exit 1 when there is nothing to show: no such workload, no pods of it yet, no container
    of that name; 2 when the cluster cannot be reached or refuses.
    """
    target = resolve_target(kubeconfig, context, state)
    ns, name, kind = workload_reference("logs", workload, namespace=namespace, target=target)

    async def work(kube: CommandCluster) -> int:
        from kaiwo_cli.workload_logs import follow_logs, print_logs

        if follow:
            return await follow_logs(kube, ns, name, kind=kind, container=container, tail=tail)
        return await print_logs(kube, ns, name, kind=kind, container=container, tail=tail)

    with contextlib.suppress(KeyboardInterrupt):  # ends -f
        code = run_on_cluster("logs", target, work)
        if code:
            raise click.exceptions.Exit(code)


@click.command()
@workload_argument
@namespace_option
@cluster_options
def delete(
    workload: str,
    *,
    namespace: str | None,
    kubeconfig: Path | None,
    context: str | None,
    state: Path | None,
) -> None:
    """Delete a KaiwoJob or KaiwoService (its children go with it).

    Exit 1 when there is no such workload; 2 when the cluster cannot be reached or refuses.
    """
    target = resolve_target(kubeconfig, context, state)
    ns, name, kind = workload_reference("delete", workload, namespace=namespace, target=target)

    async def work(kube: CommandCluster) -> str:
        from kaiwo_kube import NotFound

        from kaiwo_cli import cluster_access as access
        from kaiwo_cli.workload_views import qualified_name

        found = await access.find_workload(kube, ns, name, kind=kind)
        try:
            await kube.delete(
                resource_of(found), name, namespace=ns, uid=found["metadata"].get("uid")
            )
        except NotFound:  # deleted by someone else since: nothing left to delete, as above
            raise access.NothingToShowError(
                f"no KaiwoJob or KaiwoService {ns}/{name} (deleted meanwhile)"
            ) from None
        return f"{qualified_name(found)} deleted from {ns}"

    click.echo(run_on_cluster("delete", target, work))
