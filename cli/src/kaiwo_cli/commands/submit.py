"""``kaiwo submit``: validate and submit a KaiwoJob or KaiwoService, and with ``--wait`` follow it
until it settles."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from kaiwo_cli.commands.options import (
    HELP,
    cluster_options,
    namespace_option_saying,
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
    from kaiwo_cli.submission import ScientistConfig

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
    "--config",
    "-c",
    "config_file",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="The CLI config (user, clusterQueue); default $KAIWOCONFIG, else "
    "~/.config/kaiwo/kaiwoconfig.yaml.",
)
@click.option(
    "--wait", is_flag=True, default=False, help="Follow it to a final phase (a service: READY)."
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    metavar="SECONDS",
    help="With --wait (required): give up after this many seconds, exit 3.",
)
@namespace_option_saying(HELP["submit_namespace"])
@cluster_options
def submit(
    *,
    filename: Path,
    user: str | None,
    queue: str | None,
    config_file: Path | None,
    wait: bool,
    timeout: float | None,
    namespace: str | None,
    kubeconfig: Path | None,
    context: str | None,
    state: Path | None,
) -> None:
    """Validate a KaiwoJob or KaiwoService, fill in spec.user and spec.clusterQueue, create it.

    The user and queue come from --user/--queue, else the CLI config (--config, else
    $KAIWOCONFIG, else ~/.config/kaiwo/kaiwoconfig.yaml, keys user and clusterQueue, as
    upstream's), and fill only what the
    manifest leaves out. Nothing is sent when any document is invalid or names a workload
    that exists already.

    Exit 1 invalid input, or (--wait) a workload that did not complete or serve; 2 the
    cluster cannot be reached or refused (a name taken), or a usage error; 3 --timeout ran out.
    """
    if timeout is not None and not wait:
        # Without --wait nothing waits: a timeout alone used to be ignored without a word,
        # and a scientist who meant "wait at most an hour" got no wait at all (decision 0141).
        raise click.UsageError(
            "--timeout bounds --wait and means nothing without it: add --wait, or drop --timeout"
        )

    from kaiwo_contracts.validation import validate_manifest

    from kaiwo_cli.manifest_files import ManifestReadError, read_documents
    from kaiwo_cli.submission import (
        SubmissionError,
        effective_config,
        prepare_manifest,
        repeated_names,
    )

    settings = _scientist_config(config_file)
    try:
        documents = list(read_documents(filename))
        config = effective_config(settings, user=user, queue=queue)
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
    for repeated in repeated_names(manifests):
        invalid = True
        click.echo(f"kaiwo submit: {filename}:{repeated}", err=True)
    if invalid:
        raise exit_with("submit", "nothing submitted: the manifest is invalid", code=1)
    target = resolve_target(kubeconfig, context, state)
    try:
        settled = run_on_cluster(
            "submit", target, lambda kube: _submit_all(kube, manifests, wait=wait, within=timeout)
        )
    except NotSettledError as error:
        for line in str(error).splitlines()[:-1]:
            click.echo(f"kaiwo submit: {line}", err=True)
        raise exit_with("submit", str(error).splitlines()[-1], code=EXIT_TIMED_OUT) from None
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
    """Create every workload, or none when one exists already (all are looked up first: a
    later document's name taken left the earlier ones created, decision 0141)."""
    from kaiwo_kube import KubeError

    from kaiwo_cli.cluster_access import ClusterError, one_line
    from kaiwo_cli.submission import workload_name
    from kaiwo_cli.workload_views import qualified_name

    taken = [manifest for manifest in manifests if await _exists(kube, manifest)]
    if taken:
        raise ClusterError(
            f"{', '.join(workload_name(m) for m in taken)} "
            f"{'exists' if len(taken) == 1 else 'exist'} already; nothing submitted "
            "(kaiwo delete it first, or change metadata.name)"
        )
    created: list[dict[str, Any]] = []
    for number, manifest in enumerate(manifests):
        meta = manifest["metadata"]
        try:
            obj = await kube.create(manifest, field_manager="kaiwo-submit")
        except KubeError as error:
            # Made since the look-up above, or refused by the API server (an admission
            # webhook): say exactly what was created and what was not sent.
            raise ClusterError(
                f"{workload_name(manifest)}: {one_line(error)}"
                + _partial(created, manifests[number + 1 :])
            ) from None
        spec = manifest.get("spec") or {}
        click.echo(
            f"{qualified_name(obj)} submitted in {meta['namespace']} "
            f"(user {spec.get('user') or '-'}, queue {spec.get('clusterQueue') or '-'})"
        )
        created.append({"apiVersion": manifest["apiVersion"], "kind": manifest["kind"], **obj})
    if not wait:
        return created
    return await follow_until_settled(kube, created, within=within)


async def _exists(kube: CommandCluster, manifest: dict[str, Any]) -> bool:
    from kaiwo_kube import NotFound

    from kaiwo_cli.workload_follow import resource_of

    meta = manifest["metadata"]
    try:
        await kube.get(resource_of(manifest), meta["name"], namespace=meta["namespace"])
    except NotFound:
        return False
    return True


def _scientist_config(config_file: Path | None) -> ScientistConfig:
    """The CLI config: ``--config`` (which must exist), else ``$KAIWOCONFIG`` or the default
    file (either may be absent). Its mistakes are named by its own path, exit 1."""
    import os

    from kaiwo_cli.submission import SubmissionError, config_path, read_config

    try:
        if config_file is not None:
            return read_config(config_file, given=True)
        return read_config(config_path(os.environ))
    except SubmissionError as error:
        raise exit_with("submit", str(error), code=1) from None


def _partial(created: list[dict[str, Any]], unsent: list[dict[str, Any]]) -> str:
    """What a create refused half-way left behind, for the user to delete or submit."""
    from kaiwo_cli.submission import workload_name

    said = ""
    if created:
        said += f"; created before it: {', '.join(workload_name(m) for m in created)}"
    else:
        said += "; nothing was created"
    if unsent:
        said += f"; not sent: {', '.join(workload_name(m) for m in unsent)}"
    return said
