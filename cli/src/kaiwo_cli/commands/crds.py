"""``kaiwo crds``: the CustomResourceDefinitions of every served kind, from the models."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from kaiwo_cli.crd_files import generated_crds, multi_document_yaml


def crds(
    output_dir: Annotated[
        Path | None,
        typer.Option(
            "--output-dir",
            "-o",
            help="Write one <group>_<plural>.yaml per CRD here instead of printing them.",
            file_okay=False,
        ),
    ] = None,
) -> None:
    """Print the CRDs as multi-document YAML, or write one file per CRD."""
    if output_dir is None:
        typer.echo(multi_document_yaml(), nl=False)
        return
    output_dir.mkdir(parents=True, exist_ok=True)
    console = Console(stderr=True, highlight=False)
    for name, text in generated_crds().items():
        target = output_dir / name
        target.write_text(text, encoding="utf-8")
        console.print(f"wrote {target}")
