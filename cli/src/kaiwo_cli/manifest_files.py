"""Reading manifests: YAML files (one or many documents each) from files and directories."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

YAML_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True, slots=True)
class ManifestDocument:
    """One document of a YAML file; ``number`` counts from 1, as people do."""

    source: Path
    number: int
    content: Any

    @property
    def label(self) -> str:
        """``kind/name`` for messages (``?`` for what the document does not say)."""
        content = self.content if isinstance(self.content, dict) else {}
        metadata = content.get("metadata")
        name = metadata.get("name") if isinstance(metadata, dict) else None
        return f"{content.get('kind') or '?'}/{name or '?'}"


class ManifestReadError(Exception):
    """A file could not be read or is not YAML."""

    def __init__(self, source: Path, reason: str) -> None:
        super().__init__(f"{source}: {reason}")
        self.source = source
        self.reason = reason


def manifest_paths(targets: Iterable[Path]) -> list[Path]:
    """The files to read: each file as given, each directory's YAML files (recursively, sorted)."""
    paths: list[Path] = []
    for target in targets:
        if target.is_dir():
            paths += sorted(
                path
                for path in target.rglob("*")
                if path.suffix in YAML_SUFFIXES and path.is_file()
            )
        else:
            paths.append(target)
    return paths


def read_documents(source: Path) -> Iterator[ManifestDocument]:
    """The non-empty documents of one YAML file."""
    try:
        text = source.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ManifestReadError(source, f"cannot read: {error}") from error
    try:
        documents = list(yaml.safe_load_all(text))
    except yaml.YAMLError as error:
        raise ManifestReadError(source, f"not valid YAML: {error}") from error
    for number, content in enumerate(documents, start=1):
        if content is not None:
            yield ManifestDocument(
                source=source, number=number, content=_without_surrogates(content)
            )


_SURROGATE = re.compile("[\ud800-\udfff]")


def _without_surrogates(value: Any) -> Any:
    """``value`` with U+FFFD for each lone UTF-16 surrogate. YAML's ``"\\ud800"`` escape makes
    one, which no UTF-8 output takes (printing a problem about it raised), and which the
    API server's decoder replaces the same way."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_without_surrogates(child) for child in value]
    if isinstance(value, dict):
        return {_without_surrogates(k): _without_surrogates(v) for k, v in value.items()}
    return value
