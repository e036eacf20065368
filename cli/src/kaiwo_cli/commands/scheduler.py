"""``kaiwo scheduler``: the kaiwo-scheduler outside Helm and kustomize (decision 0026).

* ``install`` — server-side apply the objects of ``deploy/k8s/scheduler`` into
  ``kaiwo-system`` (what ``kaiwo up`` does by default), and make the KaiwoConfig name it;
* ``name NAME`` — make the KaiwoConfig name the scheduler that serves the operator's pods
  (``default-scheduler`` for a cluster that brings its own; compose's one-shot step);
* ``manifests`` — print those objects as ``kubectl kustomize deploy/k8s/scheduler`` would, or
  with ``--compose`` the KubeSchedulerConfiguration compose mounts (``make scheduler``).

The name is written by server-side apply of that one field without force: a name another
manager set stays, and the command says so (exit 1). A KaiwoConfig created by ``install`` or
``name`` names the installation's ``DEFAULT_CLUSTER_QUEUE_NAME`` when it is set, as the
operator's own would. Exit 2 when the cluster cannot be used.

The cluster is found as every cluster command finds it (docs/cli.md): ``--kubeconfig``, else
the one the stack of ``kaiwo up`` operates (``--state``, ``$KAIWO_STATE``, ``.kaiwo``), else
``$KUBECONFIG`` / ``~/.kube/config`` (decision 0240).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Annotated, Any, Final

import typer
import yaml
from kaiwo_kube import KubeError

from kaiwo_cli.cluster_access import ClusterError, cluster_target, connect
from kaiwo_cli.commands.options import HELP
from kaiwo_cli.stack.scheduler import (
    KAIWO_SCHEDULER,
    SchedulerError,
    SchedulerNaming,
    compose_scheduler_file,
    default_queue_setting,
    install_scheduler,
    name_scheduler,
    scheduler_manifests,
)
from kaiwo_cli.stack.state import state_dir_here

FIELD_MANAGER: Final = "kaiwo-installer"
"""The CLI's field manager for what it installs (the CRDs of ``kaiwo up --install-crds`` too)."""

app = typer.Typer(
    name="scheduler",
    help="The kaiwo-scheduler: install it, name a scheduler in the KaiwoConfig, print it.",
    no_args_is_help=True,
    add_completion=False,
)

Context = Annotated[str | None, typer.Option("--context", help=HELP["context"])]
Kubeconfig = Annotated[Path | None, typer.Option("--kubeconfig", help=HELP["kubeconfig"])]
State = Annotated[
    Path | None,
    typer.Option("--state", "--state-dir", envvar="KAIWO_STATE", help=HELP["state"]),
]


@app.command("install")
def install(kubeconfig: Kubeconfig = None, context: Context = None, state: State = None) -> None:
    """Deploy the kaiwo-scheduler into kaiwo-system and name it in the KaiwoConfig."""
    target = cluster_target(kubeconfig=kubeconfig, context=context, state_dir=state_dir_here(state))

    async def run() -> SchedulerNaming:
        async with await connect(target, user_agent="kaiwo-scheduler") as kube:
            await install_scheduler(kube, field_manager=FIELD_MANAGER)
            return await name_scheduler(
                kube,
                KAIWO_SCHEDULER,
                field_manager=FIELD_MANAGER,
                default_cluster_queue=default_queue_setting(os.environ),
            )

    _report(_on_the_cluster(run), installed=True)


@app.command("name")
def name(
    scheduler: Annotated[
        str, typer.Argument(help="kaiwo-scheduler, default-scheduler or your scheduler's name.")
    ],
    kubeconfig: Kubeconfig = None,
    context: Context = None,
    state: State = None,
) -> None:
    """Make the KaiwoConfig name SCHEDULER for the pods the operator makes."""
    target = cluster_target(kubeconfig=kubeconfig, context=context, state_dir=state_dir_here(state))

    async def run() -> SchedulerNaming:
        async with await connect(target, user_agent="kaiwo-scheduler") as kube:
            return await name_scheduler(
                kube,
                scheduler,
                field_manager=FIELD_MANAGER,
                default_cluster_queue=default_queue_setting(os.environ),
            )

    _report(_on_the_cluster(run), installed=False)


@app.command("manifests")
def manifests(
    compose: Annotated[
        bool, typer.Option("--compose", help="The KubeSchedulerConfiguration compose mounts.")
    ] = False,
) -> None:
    """Print the kaiwo-scheduler's objects (or compose's configuration) as YAML."""
    objects = scheduler_manifests()
    if compose:
        typer.echo(compose_scheduler_file(objects), nl=False)
        return
    typer.echo(yaml.safe_dump_all(objects, sort_keys=False), nl=False)


def _on_the_cluster(run: Callable[[], Coroutine[Any, Any, SchedulerNaming]]) -> SchedulerNaming:
    try:
        result = asyncio.run(run())
    except (ClusterError, KubeError, OSError, SchedulerError) as error:
        typer.echo(f"kaiwo scheduler: {' '.join(str(error).split())}", err=True)
        raise typer.Exit(2) from None
    return result


def _report(naming: SchedulerNaming, *, installed: bool) -> None:
    if installed:
        typer.echo("kaiwo-scheduler deployed in kaiwo-system")
    if naming.kept_another:
        typer.echo(
            f"kaiwo scheduler: the KaiwoConfig names {naming.named!r}, set by another manager; "
            f"left as it is (not {naming.wanted!r})",
            err=True,
        )
        raise typer.Exit(1)
    typer.echo(f"KaiwoConfig kaiwo names {naming.wanted}")
