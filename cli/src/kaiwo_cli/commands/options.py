"""The options the cluster commands share, spelt as kubectl spells them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Final

import typer

OUTPUT_FORMATS: Final = ("wide", "yaml", "json", "name")

Namespace = Annotated[
    str | None,
    typer.Option(
        "--namespace",
        "-n",
        help="Namespace (default: the kubeconfig context's; list and queues: every one).",
    ),
]
AllNamespaces = Annotated[bool, typer.Option("--all-namespaces", "-A", help="Every namespace.")]
Kubeconfig = Annotated[
    Path | None,
    typer.Option(
        "--kubeconfig",
        help="Cluster to talk to; default: the one kaiwo up operates, else $KUBECONFIG, "
        "else ~/.kube/config.",
    ),
]
Context = Annotated[str | None, typer.Option("--context", help="The kubeconfig context to use.")]
State = Annotated[
    Path | None,
    typer.Option(
        "--state",
        "--state-dir",
        envvar="KAIWO_STATE",
        help="The state directory of kaiwo up (its stack.json); default: .kaiwo here or in a "
        "parent directory.",
    ),
]
Output = Annotated[
    str | None,
    typer.Option("--output", "-o", help="wide, yaml, json or name (default: a table)."),
]
Watch = Annotated[bool, typer.Option("--watch", "-w", help="Keep printing changes.")]


def check_output(output: str | None, *, allowed: tuple[str, ...] = OUTPUT_FORMATS) -> None:
    if output is not None and output not in allowed:
        raise typer.BadParameter(
            f"{output!r} is not one of {', '.join(allowed)}", param_hint="'--output' / '-o'"
        )
