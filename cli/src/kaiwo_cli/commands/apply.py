"""``kaiwo apply -f FILE_OR_DIR``: server-side apply of manifests, as ``kubectl apply
--server-side`` does, for machines without kubectl (the demo cluster of ``kaiwo up --fake``).

The operator's own kinds (KaiwoJob, KaiwoService, Model, ...) are validated first, as
``kaiwo validate`` does: when one document is invalid, its problems are printed with their
field paths and nothing is applied (exit 1). Other kinds are left to the API server.
``-f -`` reads standard input. The cluster is ``--kubeconfig``, else the one ``kaiwo up``
operates (its state directory), else ``$KUBECONFIG`` / ``~/.kube/config``.

Documents are applied in file order with field manager ``kaiwo-apply``. A namespaced object
without a namespace goes to ``--namespace`` (default ``default``). A field another manager
owns with a different value is a conflict unless ``--force-conflicts``. Kinds outside the
operator's catalogue (``kaiwo_kube.resources``) are reported and skipped. Exit status: 0 when
every document was applied, 1 when one was not, 2 when the cluster cannot be reached.
"""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Annotated, Any, Final

import aiohttp
import typer
from kaiwo_contracts.crds.registry import model_for
from kaiwo_contracts.validation import validate_manifest
from kaiwo_kube import KubeError
from kaiwo_kube.resources import ResourceType, known_type
from rich.console import Console
from rich.markup import escape

from kaiwo_cli.cluster_access import ClusterError, ClusterTarget, cluster_target, connect
from kaiwo_cli.cluster_port import ClusterWriter
from kaiwo_cli.commands.options import HELP
from kaiwo_cli.manifest_files import (
    ManifestDocument,
    ManifestReadError,
    manifest_paths,
    read_documents,
)
from kaiwo_cli.stack.state import state_dir_here

Kubeconfig = Annotated[Path | None, typer.Option("--kubeconfig", help=HELP["kubeconfig"])]
Context = Annotated[str | None, typer.Option("--context", help=HELP["context"])]
State = Annotated[
    Path | None,
    typer.Option("--state", "--state-dir", envvar="KAIWO_STATE", help=HELP["state"]),
]
FIELD_MANAGER: Final = "kaiwo-apply"
DEFAULT_NAMESPACE: Final = "default"


class ClusterUnreachableError(RuntimeError):
    """No API server answers; the message is one line for the user."""


def apply(
    filenames: Annotated[
        list[Path],
        typer.Option(
            "--filename",
            "-f",
            help="A manifest file or a directory of them (repeatable); multi-document YAML; "
            "- for stdin.",
        ),
    ],
    kubeconfig: Kubeconfig = None,
    context: Context = None,
    state: State = None,
    namespace: Annotated[
        str,
        typer.Option("--namespace", "-n", help="For namespaced objects that name none."),
    ] = DEFAULT_NAMESPACE,
    force_conflicts: Annotated[
        bool,
        typer.Option("--force-conflicts", help="Take over fields other managers own."),
    ] = False,
) -> None:
    """Server-side apply manifests to the cluster (like kubectl apply --server-side)."""
    console = Console(highlight=False, soft_wrap=True)
    documents: list[ManifestDocument] = []
    unreadable = 0
    for path in manifest_paths(filenames):
        try:
            documents += read_documents(path)
        except ManifestReadError as error:
            unreadable += 1
            console.print(f"[bold]{escape(str(path))}[/]: [red]{escape(error.reason)}[/]")
    invalid = report_invalid(documents, console)
    if invalid:
        console.print(f"[red]nothing applied: {invalid} document(s) invalid[/]")
        raise typer.Exit(1)
    target = cluster_target(kubeconfig=kubeconfig, context=context, state_dir=state_dir_here(state))
    try:
        failed = asyncio.run(
            _apply_all(
                documents,
                console=console,
                target=target,
                namespace=namespace,
                force=force_conflicts,
            )
        )
    except ClusterUnreachableError as error:
        typer.echo(f"kaiwo apply: {error}", err=True)
        raise typer.Exit(2) from None
    if failed or unreadable or not documents:
        raise typer.Exit(1)


def report_invalid(documents: list[ManifestDocument], console: Console) -> int:
    """Print every problem of the documents of served kinds; how many documents are invalid."""
    invalid = 0
    for document in documents:
        content = document.content
        served = isinstance(content, dict) and (
            model_for(str(content.get("apiVersion", "")), str(content.get("kind", ""))) is not None
        )
        problems = validate_manifest(content) if served or not isinstance(content, dict) else []
        invalid += bool(problems)
        for problem in problems:
            console.print(
                f"{escape(f'{document.source}:doc#{document.number}')} "
                f"[bold]{escape(document.label)}[/]: [red]{escape(str(problem))}[/]"
            )
    return invalid


async def _apply_all(
    documents: list[ManifestDocument],
    *,
    console: Console,
    target: ClusterTarget,
    namespace: str,
    force: bool,
) -> int:
    try:
        kube = await connect(target, user_agent="kaiwo-apply")
    except ClusterError as error:
        raise ClusterUnreachableError(str(error)) from error
    failed = 0
    async with kube:
        for document in documents:
            outcome = await apply_document(kube, document, namespace=namespace, force=force)
            if outcome.startswith("error"):
                failed += 1
                console.print(f"[red]{escape(document.label)}: {escape(outcome)}[/]")
            else:
                console.print(escape(outcome))
    return failed


async def apply_document(
    kube: ClusterWriter, document: ManifestDocument, *, namespace: str, force: bool
) -> str:
    """Apply one document; the line to print (``error: ...`` when it was not applied)."""
    content = document.content
    if not isinstance(content, dict):
        return "error: the document is not an object"
    resource = known_type(str(content.get("apiVersion", "")), str(content.get("kind", "")))
    if resource is None:
        return f"error: kind {content.get('kind')} of {content.get('apiVersion')} is not served"
    manifest = with_namespace(content, resource, namespace)
    try:
        applied = await kube.apply(
            manifest, field_manager=FIELD_MANAGER, force=force, resource=resource
        )
    except KubeError as error:
        return f"error: {' '.join(error.message.split()) or error}"
    except (OSError, aiohttp.ClientError) as error:
        raise ClusterUnreachableError(f"the API server does not answer: {error}") from error
    name = (applied.get("metadata") or {}).get("name", "?")
    kind = f"{resource.plural}.{resource.group}" if resource.group else resource.plural
    return f"{kind}/{name} serverside-applied"


def with_namespace(
    content: dict[str, Any], resource: ResourceType, namespace: str
) -> dict[str, Any]:
    """``content`` with ``namespace`` when the kind is namespaced and it names none."""
    if not resource.namespaced or (content.get("metadata") or {}).get("namespace"):
        return content
    manifest = copy.deepcopy(content)
    manifest.setdefault("metadata", {})["namespace"] = namespace
    return manifest
