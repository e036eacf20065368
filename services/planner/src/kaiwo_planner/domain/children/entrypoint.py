"""``spec.entrypoint`` turned into a container command or a Ray job entrypoint."""

from __future__ import annotations

import re

DEFAULT_SHELL = "/bin/sh"

# A backslash, optional whitespace, then a line break: a shell line continuation.
_LINE_CONTINUATION = re.compile(r"\\\s*\n")


def _joined(entrypoint: str) -> str:
    return _LINE_CONTINUATION.sub(" ", entrypoint.strip())


def ray_entrypoint(entrypoint: str) -> str:
    """The string for ``RayJob.spec.entrypoint``: trimmed, continuations joined, no shell."""
    return _joined(entrypoint)


def shell_command(entrypoint: str) -> list[str]:
    """The ``command`` of the primary container: ``[<shell...>, "-c", <script>]``.

    A first line ``#!<interpreter> [args]`` selects the interpreter and is removed from the
    script; the remaining lines are kept verbatim (indentation, comments, blank lines).
    Interpreter arguments are split on whitespace, so ``#!/usr/bin/env bash`` becomes
    ``["/usr/bin/env", "bash", "-c", ...]``; upstream kept the whole shebang as one word, which
    only works for argument-less interpreters.
    """
    script = _joined(entrypoint)
    first_line, _, rest = script.partition("\n")
    if first_line.startswith("#!"):
        interpreter = first_line[2:].split() or [DEFAULT_SHELL]
        return [*interpreter, "-c", rest]
    return [DEFAULT_SHELL, "-c", script]
