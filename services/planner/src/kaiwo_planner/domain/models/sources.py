"""Where a Model's files come from: its ``url`` parsed as upstream parses it.

``<scheme>://<ref>[?<query>]``; ``name`` is the ref up to the first ``/`` (a repository
owner, a bucket, a PVC), ``path`` the rest. Query parameters: ``model`` (an Ollama tag
inside a PVC), ``insecure=true`` and ``pull=false`` (Ollama pulls).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final
from urllib.parse import parse_qs

_URL: Final = re.compile(r"^([a-z0-9]+)://([^?]+)(\?.*)?$")


@dataclass(frozen=True, slots=True)
class ModelSource:
    """A parsed Model URL."""

    original: str
    scheme: str
    ref: str
    name: str
    path: str
    model_param: str = ""
    insecure: bool = False
    pull: bool = True


def parse_model_url(url: str) -> ModelSource:
    """The parts of ``url``; ValueError when it does not have the form above."""
    found = _URL.match(url)
    if found is None:
        raise ValueError(f"not a model URL of the form <scheme>://<ref>: {url!r}")
    scheme, ref, query = found.group(1), found.group(2), (found.group(3) or "")[1:]
    name, _, path = ref.partition("/")
    params = parse_qs(query, keep_blank_values=True)
    return ModelSource(
        original=url,
        scheme=scheme,
        ref=ref,
        name=name,
        path=path,
        model_param=_first(params, "model"),
        insecure=_first(params, "insecure") == "true",
        pull=_first(params, "pull") != "false",
    )


def _first(params: dict[str, list[str]], key: str) -> str:
    values = params.get(key) or [""]
    return values[0]
