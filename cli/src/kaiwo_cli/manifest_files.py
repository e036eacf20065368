"""Reading manifests: YAML files (one or many documents each) from files and directories.

Reading is bounded, so a hostile file is refused quickly with a clear reason instead of
exhausting memory or the stack (limits recorded in docs/decisions, "hostile specs"):

* a file is at most :data:`MAX_FILE_BYTES` (the API server takes no request over 3 MiB);
* nesting is at most :data:`MAX_DEPTH` collections deep (a KaiwoJob with an embedded pod
  template needs about 20);
* a file uses at most :data:`MAX_ALIASES` aliases (``*name``), and what they stand for adds
  up to at most :data:`MAX_EXPANDED_NODES` values: an alias re-uses a whole subtree, so a few
  of them nested make a "billion laughs" document that expands to gigabytes when anything
  walks it;
* an integer has at most :data:`MAX_INTEGER_DIGITS` digits in its own base, hexadecimal and
  binary ones too (Python refuses to convert longer decimal ones; a manifest's largest
  number, 2**63, has 19). Smaller but too large values are the models' to refuse, naming the
  field.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

YAML_SUFFIXES = (".yaml", ".yml")
STDIN = "-"
MAX_FILE_BYTES = 3 * 1024 * 1024
MAX_DEPTH = 100
MAX_ALIASES = 100
MAX_EXPANDED_NODES = 100_000
MAX_INTEGER_DIGITS = 100


class LimitExceededError(yaml.YAMLError):
    """A document goes beyond one of the reading limits (module docstring)."""


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader, counting nesting depth and aliases while it composes."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0
        self._aliases = 0
        self._expanded = 0
        self._sizes: dict[int, int] = {}

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise LimitExceededError(
                    f"more than {MAX_ALIASES} YAML aliases (*name) in one file "
                    f"(line {self._line() + 1}); write the values out"
                )
            anchored = self.anchors.get(self._next_anchor())
            self._expanded += self._size(anchored) if anchored is not None else 0
            if self._expanded > MAX_EXPANDED_NODES:
                raise LimitExceededError(
                    f"YAML aliases that expand to more than {MAX_EXPANDED_NODES:,} values "
                    f"(line {self._line() + 1}): an alias bomb"
                )
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise LimitExceededError(
                    f"nested more than {MAX_DEPTH} levels deep (line {self._line() + 1})"
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def _line(self) -> int:
        event: yaml.Event = self.peek_event()  # type: ignore[no-untyped-call]
        mark = event.start_mark
        return int(mark.line) if mark is not None else 0

    def _next_anchor(self) -> str:
        event: yaml.Event = self.peek_event()  # type: ignore[no-untyped-call]
        return str(getattr(event, "anchor", ""))

    def _size(self, node: yaml.Node) -> int:
        """How many values ``node`` stands for once every alias in it is expanded."""
        known = self._sizes.get(id(node))
        if known is not None:
            return known
        size = 1
        if isinstance(node, yaml.SequenceNode):
            size += sum(self._size(item) for item in node.value)
        elif isinstance(node, yaml.MappingNode):
            size += sum(self._size(key) + self._size(value) for key, value in node.value)
        self._sizes[id(node)] = size
        return size

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        digits = numeral_digits(str(node.value))
        if digits > MAX_INTEGER_DIGITS:
            raise LimitExceededError(
                f"an integer of {digits} digits (line {node.start_mark.line + 1}); "
                f"at most {MAX_INTEGER_DIGITS} are read"
            )
        value: int = super().construct_yaml_int(node)
        return value


def numeral_digits(numeral: str) -> int:
    """The digits of a YAML integer in its own base: ``0x`` followed by 200,000 ``f`` has
    200,000 (Python converts a hexadecimal or binary numeral of any length, then fails to
    print it in decimal, far from the reader)."""
    body = numeral.lstrip("+-").replace("_", "")
    if body[:2].lower() in {"0x", "0b", "0o"}:
        body = body[2:]
    return sum(character.isalnum() for character in body)


_BoundedLoader.add_constructor("tag:yaml.org,2002:int", _BoundedLoader.construct_yaml_int)


def load_bounded(text: str) -> list[Any]:
    """Every document of ``text`` (None for an empty one), within the reading limits.

    Raises :class:`yaml.YAMLError` (:class:`LimitExceededError` for a limit) when the text is
    not YAML or goes beyond a limit.
    """
    if len(text.encode("utf-8", errors="replace")) > MAX_FILE_BYTES:
        raise LimitExceededError(f"larger than {MAX_FILE_BYTES:,} bytes")
    loader = _BoundedLoader(text)
    try:
        documents = []
        while loader.check_data():  # type: ignore[no-untyped-call]
            documents.append(loader.get_data())
        return documents
    except RecursionError as error:  # the limits keep well below; a last line of defence
        raise LimitExceededError("nested too deeply to read") from error
    finally:
        loader.dispose()


@dataclass(frozen=True, slots=True)
class ManifestDocument:
    """One document of a YAML file; ``number`` counts from 1, as people do."""

    source: Path
    number: int
    content: Any

    @property
    def label(self) -> str:
        """``kind/name`` for messages (``?`` for what the document does not say), safe to
        print: a hostile name must not reorder the terminal's line (U+202E) or flood it."""
        content = self.content if isinstance(self.content, dict) else {}
        metadata = content.get("metadata")
        name = metadata.get("name") if isinstance(metadata, dict) else None
        return f"{printable(content.get('kind') or '?')}/{printable(name or '?')}"


LABEL_CHARACTERS = 80


def printable(value: object) -> str:
    """``value`` as text for one line of output: characters other than printable ASCII as
    ``\\u`` escapes, cut to :data:`LABEL_CHARACTERS` with the length said."""
    text = str(value)
    shown = text[:LABEL_CHARACTERS]
    escaped = "".join(
        c if c.isascii() and c.isprintable() else c.encode("unicode_escape").decode() for c in shown
    )
    return escaped if len(text) == len(shown) else f"{escaped}... ({len(text):,} characters)"


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
    """The non-empty documents of one YAML file (``-``: standard input)."""
    try:
        if str(source) == STDIN:
            text = sys.stdin.read(MAX_FILE_BYTES + 1)
        else:
            if source.stat().st_size > MAX_FILE_BYTES:
                raise ManifestReadError(source, f"larger than {MAX_FILE_BYTES:,} bytes")
            text = source.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ManifestReadError(source, f"cannot read: {error}") from error
    try:
        documents = load_bounded(text)
    except LimitExceededError as error:
        raise ManifestReadError(source, f"refused: {error}") from error
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
