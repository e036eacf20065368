"""``kaiwo submit``: validate and submit a KaiwoJob or KaiwoService, and with ``--wait`` follow it
until it settles."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from kaiwo_cli.commands.options import (
    cluster_options,
    namespace_option,
)
from kaiwo_cli.workload_follow import (
    NotSettledError,
    current_phase,
    failure_reason,
    follow_until_settled,
    label,
)

if TYPE_CHECKING:
    from kaiwo_cli.cluster_port import CommandCluster

from kaiwo_cli.commands.workload_access import (
    EXIT_FAILED,
    EXIT_TIMED_OUT,
    exit_with,
    resolve_target,
    run_on_cluster,
)


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
        raise exit_with("submit", str(error), code=1) from None
    except SubmissionError as error:
        raise exit_with("submit", f"{filename}: {error}", code=1) from None
    if not manifests:
        raise exit_with("submit", f"{filename}: no manifest in it", code=1)
    invalid = False
    for document, manifest in zip(documents, manifests, strict=True):
        for problem in validate_manifest(manifest):
            invalid = True
            click.echo(
                f"kaiwo submit: {filename}:doc#{document.number} {document.label}: {problem}",
                err=True,
            )
    if invalid:
        raise exit_with("submit", "nothing submitted: the manifest is invalid", code=1)
    target = resolve_target(kubeconfig, context, state)
    try:
        settled = run_on_cluster(
            "submit", target, lambda kube: _submit_all(kube, manifests, wait=wait, within=timeout)
        )
    except NotSettledError as error:
        raise exit_with("submit", str(error), code=EXIT_TIMED_OUT) from None
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
