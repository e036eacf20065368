"""``kaiwo validate -f FILE_OR_DIR``: check manifests offline against the served kinds."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from kaiwo_contracts.validation import Problem, validate_manifest
from rich.console import Console
from rich.markup import escape

from kaiwo_cli.manifest_files import (
    STDIN,
    ManifestDocument,
    ManifestReadError,
    manifest_paths,
    read_documents,
)


def _existing_or_stdin(paths: list[Path]) -> list[Path]:
    """``exists=True`` (its words), but ``-`` is standard input (read by ``read_documents``)."""
    for path in paths:
        if str(path) != STDIN and not path.exists():
            raise typer.BadParameter(f"path {str(path)!r} does not exist.")
    return paths


def validate(
    filenames: Annotated[
        list[Path],
        typer.Option(
            "--filename",
            "-f",
            help="A manifest file or a directory of them (repeatable); multi-document YAML; "
            "- for stdin.",
            callback=_existing_or_stdin,
        ),
    ],
) -> None:
    """Check manifests (KaiwoJob, KaiwoService, Model, ...) and name every invalid field."""
    console = Console(highlight=False, soft_wrap=True)
    documents = invalid = problems = unreadable = 0
    for path in manifest_paths(filenames):
        try:
            parsed = list(read_documents(path))
        except ManifestReadError as error:
            unreadable += 1
            console.print(f"[bold]{escape(str(path))}[/]: [red]{escape(error.reason)}[/]")
            continue
        for document in parsed:
            documents += 1
            found = validate_manifest(document.content)
            if found:
                invalid += 1
                problems += len(found)
                _print_problems(console, document, found)
    _print_summary(
        console, documents=documents, invalid=invalid, problems=problems, unreadable=unreadable
    )
    if invalid or unreadable or not documents:
        raise typer.Exit(code=1)


def _print_problems(console: Console, document: ManifestDocument, problems: list[Problem]) -> None:
    where = escape(f"{document.source}:doc#{document.number}")
    label = escape(document.label)
    for problem in problems:
        field = f"{escape(problem.path)}: " if problem.path else ""
        console.print(f"{where} [bold]{label}[/]: {field}[red]{escape(problem.message)}[/]")


def _print_summary(
    console: Console, *, documents: int, invalid: int, problems: int, unreadable: int
) -> None:
    unread = f", {unreadable} file(s) unreadable" if unreadable else ""
    if not documents:
        console.print(f"[red]no manifests found[/]{unread}")
    elif invalid or unreadable:
        console.print(
            f"[red]{invalid} of {documents} document(s) invalid[/] ({problems} problem(s)){unread}"
        )
    else:
        console.print(f"[green]{documents} document(s) valid[/]")
