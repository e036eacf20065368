"""The options the cluster commands share, spelt as kubectl spells them.

The scientist's commands (``submit``, ``list``, ``status``, ``logs``, ``delete``, ``queues``,
``nodes``) are plain click commands: typer builds a pydantic adapter for every parameter of
every command it runs, which cost these quick commands about a third of their start-up.
``HELP`` carries the shared wording for the typer commands too (``kaiwo apply``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Final, TypeVar

import click

F = TypeVar("F", bound=Callable[..., object])

OUTPUT_FORMATS: Final = ("wide", "yaml", "json", "name")
OBJECT_FORMATS: Final = ("yaml", "json", "name")
"""``status -o``: the object itself. Its report is wider than any row (decision 0221)."""
HELP: Final = {
    "namespace": "Namespace (default: the kubeconfig context's; list, queues and gpus: every one).",
    "submit_namespace": "Namespace of a manifest that names none (default: default, as "
    "upstream's; not the kubeconfig context's).",
    "all_namespaces": "Every namespace.",
    "kubeconfig": "Cluster to talk to; default: the one kaiwo up operates, else $KUBECONFIG, "
    "else ~/.kube/config.",
    "context": "The kubeconfig context to use.",
    "state": "The state directory of kaiwo up (its stack.json); default: .kaiwo here or in a "
    "parent directory.",
    "output": "wide, yaml, json or name (default: a table).",
    "status_output": "yaml, json or name: the object (default: the report).",
    "watch": "Keep printing changes.",
}


def namespace_option(command: F) -> F:
    return namespace_option_saying(HELP["namespace"])(command)


def namespace_option_saying(help_text: str) -> Callable[[F], F]:
    """``-n/--namespace`` for a command whose default is not the others' (``submit``)."""
    return click.option("--namespace", "-n", default=None, help=help_text)


def all_namespaces_option(command: F) -> F:
    return click.option(
        "--all-namespaces", "-A", is_flag=True, default=False, help=HELP["all_namespaces"]
    )(command)


def output_option(command: F) -> F:
    return output_option_saying(HELP["output"])(command)


def output_option_saying(help_text: str) -> Callable[[F], F]:
    """``-o/--output`` for a command that takes other formats than ``list`` (``status``)."""
    return click.option("--output", "-o", default=None, help=help_text)


def cluster_options(command: F) -> F:
    """``--kubeconfig``, ``--context`` and ``--state``: which cluster, which stack."""
    command = click.option(
        "--state",
        "--state-dir",
        "state",
        type=click.Path(path_type=Path),
        envvar="KAIWO_STATE",
        default=None,
        help=HELP["state"],
    )(command)
    command = click.option("--context", default=None, help=HELP["context"])(command)
    return click.option(
        "--kubeconfig", type=click.Path(path_type=Path), default=None, help=HELP["kubeconfig"]
    )(command)


def check_output(output: str | None, *, allowed: tuple[str, ...] = OUTPUT_FORMATS) -> None:
    if output is not None and output not in allowed:
        raise click.BadParameter(
            f"{output!r} is not one of {', '.join(allowed)}", param_hint="'--output' / '-o'"
        )


LISTED_KINDS: Final = {
    "kaiwojob": "KaiwoJob",
    "job": "KaiwoJob",
    "kaiwoservice": "KaiwoService",
    "service": "KaiwoService",
}
"""``list --kind``, in any case: the kinds, and upstream's ``job`` and ``service`` as a workload
reference takes them (``job/NS/NAME``)."""
WORKLOAD_PHASES: Final = (
    "NEW",
    "DOWNLOADING",
    "PENDING",
    "STARTING",
    "READY",
    "RUNNING",
    "COMPLETE",
    "ERROR",
    "FAILED",
    "TERMINATING",
    "TERMINATED",
)
"""``list --status``: the phases of ``status.status`` (``WorkloadStatus``; NEW before any is
written), spelt out here so that the command's help imports no contracts; a test holds them
equal."""


def listed_kind(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """``--kind`` as the kind it names; any other word is refused rather than matching no
    workload, which ``list`` would show as "No workloads found" (decision 0240)."""
    if value is None:
        return None
    kind = LISTED_KINDS.get(value.lower())
    if kind is None:
        raise click.BadParameter(f"{value!r} is not KaiwoJob or KaiwoService (or job, service)")
    return kind


def listed_phase(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    """``--status`` in upper case; a word that is no phase is refused, as ``--kind`` is."""
    if value is None:
        return None
    if value.upper() not in WORKLOAD_PHASES:
        raise click.BadParameter(f"{value!r} is not a phase ({', '.join(WORKLOAD_PHASES)})")
    return value.upper()
