"""What the workload commands share: the cluster they talk to, a workload's reference, running
one piece of work against the cluster with one clear line on failure, and their exit codes."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

import click

if TYPE_CHECKING:
    from kaiwo_cli.cluster_access import ClusterTarget
    from kaiwo_cli.cluster_port import CommandCluster


T = TypeVar("T")


F = TypeVar("F", bound=Callable[..., object])


POLL_SECONDS = 1.0


USER_AGENT = "kaiwo-cli"


EXIT_FAILED: Final = 1


EXIT_NOTHING_TO_SHOW: Final = 1
"""No such workload, or nothing of it to show yet: the cluster answered (not 2)."""


EXIT_UNREACHABLE: Final = 2


EXIT_TIMED_OUT: Final = 3


def utc_now() -> datetime:
    return datetime.now(UTC)


def exit_with(command: str, message: str, *, code: int = 2) -> click.exceptions.Exit:
    click.echo(f"kaiwo {command}: {message}", err=True)
    return click.exceptions.Exit(code)


def resolve_target(
    kubeconfig: Path | None, context: str | None, state: Path | None
) -> ClusterTarget:
    from kaiwo_cli.cluster_access import cluster_target
    from kaiwo_cli.stack.state import state_dir_here

    return cluster_target(kubeconfig=kubeconfig, context=context, state_dir=state_dir_here(state))


def workload_reference(
    command: str, workload: str, *, namespace: str | None, target: ClusterTarget
) -> tuple[str, str, str | None]:
    """``[job/|service/]NS/NAME`` (or ``NAME`` in ``-n`` or the context's namespace) ->
    (namespace, name, kind or None), or exit 1 naming why."""
    from kaiwo_cli.cluster_access import ClusterError, context_namespace, parse_reference

    try:
        return parse_reference(workload, default_namespace=namespace or context_namespace(target))
    except ClusterError as error:
        raise exit_with(command, str(error), code=1) from None


def run_on_cluster(
    command: str, target: ClusterTarget, work: Callable[[CommandCluster], Awaitable[T]]
) -> T:
    """Connect, run ``work`` and turn every cluster failure into one line and exit 2; nothing
    to show (no such workload) is one line and exit 1."""
    import aiohttp
    from kaiwo_kube import KubeError

    from kaiwo_cli.cluster_access import ClusterError, NothingToShowError, connect, one_line

    async def session() -> T:
        kube = await connect(target, user_agent=f"{USER_AGENT}/{command}")
        async with kube:
            return await work(kube)

    try:
        return asyncio.run(session())
    except NothingToShowError as error:
        raise exit_with(command, str(error), code=EXIT_NOTHING_TO_SHOW) from None
    except ClusterError as error:
        raise exit_with(command, str(error)) from None
    except (KubeError, OSError, aiohttp.ClientError) as error:
        raise exit_with(command, one_line(error)) from None


async def read_in_scope(
    command: str,
    target: ClusterTarget,
    scope: str | None,
    read: Callable[[str | None], Awaitable[T]],
    *,
    every_asked: bool,
) -> tuple[T, str | None]:
    """``read`` in ``scope`` (None: every namespace) and the scope it was read in. When the
    API server refuses every namespace (403: a scientist's ``edit`` role is granted in their
    namespace only) and -A did not ask for every one, the context's namespace, said on
    stderr (decision 0138)."""
    from kaiwo_kube import KubeError

    from kaiwo_cli.cluster_access import context_namespace, is_forbidden

    try:
        return await read(scope), scope
    except KubeError as error:
        if scope is not None or every_asked or not is_forbidden(error):
            raise
    own = context_namespace(target)
    click.echo(
        f"kaiwo {command}: you may not list every namespace; showing {own}, your "
        "context's namespace (-n for another)",
        err=True,
    )
    return await read(own), own


def dump_objects(objects: Sequence[dict[str, Any]], output: str, *, single: bool) -> str:
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


def workload_argument(command: F) -> F:
    """[job/|service/]NAMESPACE/NAME, or NAME with -n (click arguments take no help text)."""
    return click.argument("workload", metavar="[job/|service/]NAMESPACE/NAME")(command)
