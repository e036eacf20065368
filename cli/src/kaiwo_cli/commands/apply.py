"""``kaiwo apply -f FILE_OR_DIR``: server-side apply of manifests, as ``kubectl apply
--server-side`` does, for machines without kubectl (the demo cluster of ``kaiwo up --fake``).

Documents are applied in file order with field manager ``kaiwo-apply``. A namespaced object
without a namespace goes to ``--namespace`` (default ``default``). A field another manager
owns with a different value is a conflict unless ``--force-conflicts``. Kinds outside the
operator's catalogue (``kaiwo_kube.resources``) are reported and skipped. Exit status: 0 when
every document was applied, 1 when one was not, 2 when the cluster cannot be reached.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from pathlib import Path
from typing import Annotated, Any, Final

import aiohttp
import typer
from kaiwo_kube import KubeError, KubernetesPort
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_kube.resources import ResourceType, known_type
from rich.console import Console
from rich.markup import escape

from kaiwo_cli.manifest_files import (
    ManifestDocument,
    ManifestReadError,
    manifest_paths,
    read_documents,
)

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
            help="A manifest file or a directory of them (repeatable); multi-document YAML.",
            exists=True,
        ),
    ],
    kubeconfig: Annotated[
        Path | None,
        typer.Option(help="Cluster to apply to; default $KUBECONFIG, then ~/.kube/config."),
    ] = None,
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
    try:
        failed = asyncio.run(
            _apply_all(
                documents,
                console=console,
                kubeconfig=kubeconfig,
                namespace=namespace,
                force=force_conflicts,
            )
        )
    except ClusterUnreachableError as error:
        typer.echo(f"kaiwo apply: {error}", err=True)
        raise typer.Exit(2) from None
    if failed or unreadable or not documents:
        raise typer.Exit(1)


async def _apply_all(
    documents: list[ManifestDocument],
    *,
    console: Console,
    kubeconfig: Path | None,
    namespace: str,
    force: bool,
) -> int:
    kube = await _connect(kubeconfig)
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


async def _connect(kubeconfig: Path | None) -> KubernetesAsyncioAdapter:
    # The client library logs "Config not found" itself; the error below says it.
    logging.getLogger("kubernetes_asyncio.config").setLevel(logging.ERROR)
    try:
        return await KubernetesAsyncioAdapter.from_environment(kubeconfig, user_agent="kaiwo-apply")
    except Exception as error:  # a missing or broken kubeconfig, in any of its forms
        reason = " ".join(str(error).split())
        raise ClusterUnreachableError(f"no usable kubeconfig: {reason}") from error


async def apply_document(
    kube: KubernetesPort, document: ManifestDocument, *, namespace: str, force: bool
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
