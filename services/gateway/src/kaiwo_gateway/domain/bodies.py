"""How large and how deep a request body may be.

A body is read at most :class:`BodyLimits` bytes (audio transcriptions, a file upload, get a
larger limit than the JSON routes). A JSON body is then bounded in two ways:

* **Containers**: ``json.loads`` turns every ``{}`` into a dictionary of some 60 bytes, so a
  body of 8 MiB of them would become hundreds of MiB. Before parsing, the ``[`` and ``{`` of
  the body are counted (in C, brackets inside strings included, so never too few); only when
  that count passes the limit are strings cut out to count exactly (:func:`json_shape`,
  linear: a regular expression whose match cannot backtrack, then a running sum).
* **Depth**: Python's parser recurses once per level and stops with RecursionError some
  hundreds of levels down (200,000 ``[`` gave a 500); that is a refusal, and a parsed
  document is then measured (:func:`document_depth`, iterative, stopping past the limit).

So a hostile body costs a linear time and a bounded number of Python objects, and an
ordinary one (long prompts, few brackets) only a count of its brackets.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import accumulate
from typing import Any, Final

AUDIO_ROUTES: Final = frozenset({"audio/transcriptions"})

# A string: its quote, then characters or escapes up to the closing quote, or to the end of
# the body when it never closes (the parser refuses it after): each alternative consumes
# input, so there is nothing to backtrack into.
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"?', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = tuple(1 if b in b"[{" else -1 if b in b"]}" else 0 for b in range(256))


@dataclass(frozen=True, slots=True)
class BodyLimits:
    json_bytes: int = 8 * 1024 * 1024
    """The JSON routes (chat, completions, embeddings): a 128k-token prompt is about
    0.5 MiB; images sent inline as base64 make up the rest."""
    audio_bytes: int = 32 * 1024 * 1024
    """``audio/transcriptions``: OpenAI's 25 MB file limit, and the form around it."""
    json_depth: int = 64
    """Nested arrays and objects; a tool's JSON schema needs a dozen or so."""
    json_containers: int = 100_000
    """Arrays and objects in one body (a batch of 2,048 token lists to embed has 2,049)."""

    def bytes_for(self, route: str) -> int:
        return self.audio_bytes if route in AUDIO_ROUTES else self.json_bytes


@dataclass(frozen=True, slots=True)
class JsonShape:
    depth: int
    containers: int


def json_shape(body: bytes) -> JsonShape:
    """The deepest nesting of arrays and objects in ``body`` and how many there are
    (brackets inside strings do not count; unbalanced text gets some answer, and the parser
    refuses it after)."""
    brackets = _STRING.sub(b"", body).translate(None, _NOT_BRACKETS)
    depth = max(accumulate(map(_STEP.__getitem__, brackets)), default=0)
    return JsonShape(depth=max(depth, 0), containers=brackets.count(b"[") + brackets.count(b"{"))


def rough_containers(body: bytes) -> int:
    """``[`` and ``{`` in ``body``, those inside strings too: never fewer than it holds."""
    return body.count(b"[") + body.count(b"{")


def body_problem(body: bytes, limits: BodyLimits) -> str | None:
    """Why a JSON body is refused (400) before it is parsed, or None."""
    if rough_containers(body) <= limits.json_containers:
        return None
    shape = json_shape(body)
    if shape.containers > limits.json_containers:
        return (
            f"bad request: the body has {shape.containers:,} arrays and objects; "
            f"at most {limits.json_containers:,} are read"
        )
    return depth_problem(shape.depth, limits)


def depth_problem(depth: int, limits: BodyLimits) -> str | None:
    """Why a body nested ``depth`` deep is refused (400), or None."""
    if depth <= limits.json_depth:
        return None
    return (
        f"bad request: the body nests arrays and objects more than {limits.json_depth} levels deep"
    )


def document_depth(document: Any, *, beyond: int) -> int:
    """How deep ``document`` nests arrays and objects, counted up to ``beyond + 1``."""
    deepest = 0
    pending: list[tuple[Any, int]] = [(document, 0)]
    while pending:
        value, depth = pending.pop()
        if isinstance(value, Mapping):
            children: Any = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        if deepest > beyond:
            return deepest
        pending.extend((child, depth) for child in children)
    return deepest
