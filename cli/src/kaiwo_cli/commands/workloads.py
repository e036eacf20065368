"""The scientist's commands: ``submit``, ``list``, ``status``, ``logs``, ``delete``.

Each finds the cluster as :mod:`kaiwo_cli.cluster_access` says (after ``kaiwo up``: no flag
needed) and prints what :mod:`kaiwo_cli.workload_views` renders. Heavy modules (the
Kubernetes client, pydantic models, rich) are imported inside the commands, so that
``kaiwo --help`` and ``kaiwo list -h`` start at once.

Exit status: 0 done; 1 the input is invalid, the workload failed or stopped in ERROR
(``--wait``), or there was nothing to show; 2 the cluster cannot be reached or refused the
request; 3 ``--wait --timeout`` ran out before the workload settled.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

import click

from kaiwo_cli.commands.options import (
    HELP,
    all_namespaces_option,
    check_output,
    cluster_options,
    namespace_option,
    output_option,
)
from kaiwo_cli.workload_follow import (
    NotSettledError,
    current_phase,
    failure_reason,
    follow_until_settled,
    label,
    resource_of,
)

if TYPE_CHECKING:
    from kaiwo_contracts.queue_estimates.kueue import Placed

    from kaiwo_cli.cluster_access import ClusterTarget
    from kaiwo_cli.cluster_port import CommandCluster

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., object])
POLL_SECONDS = 1.0
USER_AGENT = "kaiwo-cli"
EXIT_FAILED: Final = 1
EXIT_UNREACHABLE: Final = 2
EXIT_TIMED_OUT: Final = 3


def _now() -> datetime:
    return datetime.now(UTC)


def _fail(command: str, message: str, *, code: int = 2) -> click.exceptions.Exit:
    click.echo(f"kaiwo {command}: {message}", err=True)
    return click.exceptions.Exit(code)


def _target(kubeconfig: Path | None, context: str | None, state: Path | None) -> ClusterTarget:
    from kaiwo_cli.cluster_access import cluster_target
    from kaiwo_cli.stack.state import state_dir_here

    return cluster_target(kubeconfig=kubeconfig, context=context, state_dir=state_dir_here(state))


def _reference(
    command: str, workload: str, *, namespace: str | None, target: ClusterTarget
) -> tuple[str, str]:
    """``NS/NAME`` (or ``NAME`` in ``-n`` or the context's namespace), or exit 1 naming why."""
    from kaiwo_cli.cluster_access import ClusterError, context_namespace, parse_reference

    try:
        return parse_reference(workload, default_namespace=namespace or context_namespace(target))
    except ClusterError as error:
        raise _fail(command, str(error), code=1) from None


def _run(command: str, target: ClusterTarget, work: Callable[[CommandCluster], Awaitable[T]]) -> T:
    """Connect, run ``work`` and turn every cluster failure into one line and exit 2."""
    import aiohttp
    from kaiwo_kube import KubeError

    from kaiwo_cli.cluster_access import ClusterError, connect, one_line

    async def session() -> T:
        kube = await connect(target, user_agent=f"{USER_AGENT}/{command}")
        async with kube:
            return await work(kube)

    try:
        return asyncio.run(session())
    except ClusterError as error:
        raise _fail(command, str(error)) from None
    except (KubeError, OSError, aiohttp.ClientError) as error:
        raise _fail(command, one_line(error)) from None


def _dump(objects: Sequence[dict[str, Any]], output: str, *, single: bool) -> str:
    import json

    import yaml

    from kaiwo_cli.workload_views import qualified_name

    if output == "name":
        return "\n".join(qualified_name(obj) for obj in objects)
    document: Any = (
        objects[0] if single else {"apiVersion": "v1", "kind": "List", "items": list(objects)}
    )
    if output == "json":
        return json.dumps(document, indent=2, sort_keys=True)
    return yaml.safe_dump(document, sort_keys=False).rstrip("\n")


# --------------------------------------------------------------------------- submit


@click.command()
@click.option(
    "--filename",
    "-f",
    type=click.Path(path_type=Path),
    required=True,
    help="The manifest (a KaiwoJob or KaiwoService); - for stdin.",
)
@click.option(
    "--user", default=None, help="spec.user when the manifest has none (over the config)."
)
@click.option(
    "--queue",
    default=None,
    help="spec.clusterQueue when the manifest has none (over the config).",
)
@click.option(
    "--wait", is_flag=True, default=False, help="Follow it to a final phase (a service: READY)."
)
@click.option(
    "--timeout", type=float, default=None, help="With --wait: give up after this many seconds."
)
@namespace_option
@cluster_options
def submit(
    *,
    filename: Path,
    user: str | None,
    queue: str | None,
    wait: bool,
    timeout: float | None,
    namespace: str | None,
    kubeconfig: Path | None,
    context: str | None,
    state: Path | None,
) -> None:
    """Validate a KaiwoJob or KaiwoService, fill in spec.user and spec.clusterQueue, create it.

    The user and queue come from --user/--queue, else the CLI config ($KAIWOCONFIG, else
    ~/.config/kaiwo/config.yaml, keys user and clusterQueue), and fill only what the
    manifest leaves out. Nothing is sent when any document is invalid.
    """
    import os

    from kaiwo_contracts.validation import validate_manifest

    from kaiwo_cli.manifest_files import ManifestReadError, read_documents
    from kaiwo_cli.submission import (
        SubmissionError,
        config_path,
        effective_config,
        prepare_manifest,
        read_config,
    )

    try:
        documents = list(read_documents(filename))
        config = effective_config(read_config(config_path(os.environ)), user=user, queue=queue)
        manifests = [
            prepare_manifest(document.content, config=config, namespace=namespace)
            for document in documents
        ]
    except ManifestReadError as error:
        raise _fail("submit", str(error), code=1) from None
    except SubmissionError as error:
        raise _fail("submit", f"{filename}: {error}", code=1) from None
    if not manifests:
        raise _fail("submit", f"{filename}: no manifest in it", code=1)
    invalid = False
    for document, manifest in zip(documents, manifests, strict=True):
        for problem in validate_manifest(manifest):
            invalid = True
            click.echo(
                f"kaiwo submit: {filename}:doc#{document.number} {document.label}: {problem}",
                err=True,
            )
    if invalid:
        raise _fail("submit", "nothing submitted: the manifest is invalid", code=1)
    target = _target(kubeconfig, context, state)
    try:
        settled = _run(
            "submit", target, lambda kube: _submit_all(kube, manifests, wait=wait, within=timeout)
        )
    except NotSettledError as error:
        raise _fail("submit", str(error), code=EXIT_TIMED_OUT) from None
    unsuccessful = [
        obj
        for obj in settled
        if wait and (obj.get("status") or {}).get("status") not in ("COMPLETE", "READY")
    ]
    for obj in unsuccessful:
        why = failure_reason(obj) or " (no reason given)"
        click.echo(f"kaiwo submit: {label(obj, current_phase(obj))}{why}", err=True)
    if unsuccessful:
        raise click.exceptions.Exit(EXIT_FAILED)


async def _submit_all(
    kube: CommandCluster, manifests: list[dict[str, Any]], *, wait: bool, within: float | None
) -> list[dict[str, Any]]:
    from kaiwo_kube import AlreadyExists

    from kaiwo_cli.cluster_access import ClusterError
    from kaiwo_cli.workload_views import qualified_name

    created = []
    for manifest in manifests:
        meta = manifest["metadata"]
        try:
            obj = await kube.create(manifest, field_manager="kaiwo-submit")
        except AlreadyExists:
            raise ClusterError(
                f"{manifest['kind']} {meta['namespace']}/{meta['name']} exists already "
                "(kaiwo delete it first, or change metadata.name)"
            ) from None
        spec = manifest.get("spec") or {}
        click.echo(
            f"{qualified_name(obj)} submitted in {meta['namespace']} "
            f"(user {spec.get('user') or '-'}, queue {spec.get('clusterQueue') or '-'})"
        )
        created.append(obj)
    if not wait:
        return created
    return await follow_until_settled(kube, created, within=within)


# --------------------------------------------------------------------------- list


@click.command()
@click.option(
    "--user", "-u", default=None, help="Whose workloads (default: you, from the CLI config)."
)
@click.option("--all-users", is_flag=True, default=False, help="Everyone's workloads.")
@click.option("--kind", default=None, help="KaiwoJob or KaiwoService.")
@click.option("--status", "phase", default=None, help="Only this phase (PENDING, RUNNING, ...).")
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
            raise _fail("list", str(error), code=1) from None
    wanted_user = None if all_users else user
    scope = None if all_namespaces or namespace is None else namespace
    target = _target(kubeconfig, context, state)

    async def work(kube: CommandCluster) -> int:
        from kaiwo_cli.cluster_access import list_workloads as read
        from kaiwo_cli.workload_views import list_table, matches, watch_line

        def selected(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return [w for w in found if matches(w, user=wanted_user, kind=kind, phase=phase)]

        workloads = selected(await read(kube, namespace=scope))
        if output in ("yaml", "json", "name"):
            click.echo(_dump(workloads, output, single=False))
        elif workloads:
            click.echo(list_table(workloads, now=_now(), wide=output == "wide"))
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
                    click.echo(watch_line(workload, now=_now()))

    def phase_of_(workload: dict[str, Any]) -> str:
        from kaiwo_cli.workload_views import phase_of

        return phase_of(workload)

    with contextlib.suppress(KeyboardInterrupt):  # ends -w
        _run("list", target, work)


def _key(workload: dict[str, Any]) -> tuple[str, str, str]:
    meta = workload["metadata"]
    return (str(workload.get("kind")), str(meta.get("namespace")), str(meta.get("name")))


# --------------------------------------------------------------------------- status


def workload_argument(command: F) -> F:
    """NAMESPACE/NAME, or NAME with -n (click arguments take no help text)."""
    return click.argument("workload", metavar="NAMESPACE/NAME")(command)


@click.command()
@workload_argument
@namespace_option
@output_option
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
    """Phase, conditions, children and pods, recent Events, queue and place in it."""
    check_output(output, allowed=("yaml", "json", "name"))
    target = _target(kubeconfig, context, state)
    ns, name = _reference("status", workload, namespace=namespace, target=target)

    async def work(kube: CommandCluster) -> None:
        from kaiwo_cli.workload_views import FINAL_PHASES, phase_of

        shown: str | None = None
        while True:
            found, text, comparable = await _status_now(kube, ns, name, output=output)
            if comparable != shown:
                if shown is not None:
                    click.echo("---")
                click.echo(text)
                shown = comparable
            if not watch or phase_of(found) in FINAL_PHASES:
                return
            await asyncio.sleep(POLL_SECONDS)

    with contextlib.suppress(KeyboardInterrupt):  # ends -w
        _run("status", target, work)


_STILL: Final = datetime(2000, 1, 1, tzinfo=UTC)
"""A fixed "now" for telling whether a report changed: ages move every second, the objects
do not."""


async def _status_now(
    kube: CommandCluster, ns: str, name: str, *, output: str | None
) -> tuple[dict[str, Any], str, str]:
    """The workload, its report now, and the report as compared between two looks."""
    from kaiwo_cli import cluster_access as access
    from kaiwo_cli.workload_views import queue_position, status_report

    found = await access.find_workload(kube, ns, name)
    if output is not None:
        text = _dump([found], output, single=True)
        return found, text, text
    children = await access.children_of(kube, found)
    pods = await access.pods_of(kube, found, children)
    events = await access.events_about(kube, ns, [found, *children, *pods])
    position = queue_position(found, await access.kueue_workloads(kube, namespace=ns))
    estimate, partial = await _estimate(kube, found) if position is not None else (None, False)

    def report(now: datetime, estimate: Placed | None) -> str:
        return status_report(
            found,
            children=children,
            pods=pods,
            events=events,
            position=position,
            now=now,
            estimate=estimate,
            estimate_partial=partial,
        )

    # The estimate moves with the clock; a watch prints again when the objects change.
    return found, report(_now(), estimate), report(_STILL, None)


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
        now=_now(),
    )
    return placed_for(workload, world.kueue_workloads, estimates), not world.whole


# --------------------------------------------------------------------------- logs


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
    -f, where pods come and go) each line starts with [POD/CONTAINER]."""
    target = _target(kubeconfig, context, state)
    ns, name = _reference("logs", workload, namespace=namespace, target=target)

    async def work(kube: CommandCluster) -> int:
        from kaiwo_cli.workload_logs import follow_logs, print_logs

        if follow:
            return await follow_logs(kube, ns, name, container=container, tail=tail)
        return await print_logs(kube, ns, name, container=container, tail=tail)

    with contextlib.suppress(KeyboardInterrupt):  # ends -f
        code = _run("logs", target, work)
        if code:
            raise click.exceptions.Exit(code)


# --------------------------------------------------------------------------- delete


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
    """Delete a KaiwoJob or KaiwoService (its children go with it)."""
    target = _target(kubeconfig, context, state)
    ns, name = _reference("delete", workload, namespace=namespace, target=target)

    async def work(kube: CommandCluster) -> str:
        from kaiwo_cli import cluster_access as access
        from kaiwo_cli.workload_views import qualified_name

        found = await access.find_workload(kube, ns, name)
        await kube.delete(resource_of(found), name, namespace=ns, uid=found["metadata"].get("uid"))
        return f"{qualified_name(found)} deleted from {ns}"

    click.echo(_run("delete", target, work))
