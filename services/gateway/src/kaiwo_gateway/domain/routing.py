"""Which Model (and adapter) a request is for, and the prefix PrefixHash hashes.

``model`` is ``<model>`` or ``<model>_<adapter>`` (split at the first ``_``: Model names are
DNS labels and carry none). A Model is found when its name matches, every
``X-Label-Selector`` matches its labels and, for an adapter, its spec lists that adapter;
otherwise it is unknown (404). Models live in many namespaces here (upstream serves one): a
name found in more than one namespace after the selectors is ambiguous and refused, naming the
namespaces, rather than routed to either. Only the namespaces the caller may use count: a
Model elsewhere is unknown to them (decision 0040).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from kaiwo_gateway.domain.catalog import Catalog, ServedModel
from kaiwo_gateway.domain.selectors import LabelSelector

CHAT_PATH = "/v1/chat/completions"
COMPLETIONS_PATH = "/v1/completions"


@dataclass(frozen=True, slots=True)
class Route:
    """Where one request goes: the Model, the adapter (or None), and the ``model`` the
    backend is asked for (the adapter's name for an adapter, as upstream)."""

    model: ServedModel
    adapter: str | None

    @property
    def backend_model(self) -> str:
        return self.adapter or self.model.name


@dataclass(frozen=True, slots=True)
class Unknown:
    requested: str

    @property
    def message(self) -> str:
        return f'model not found: "{self.requested}"'


@dataclass(frozen=True, slots=True)
class Ambiguous:
    requested: str
    namespaces: tuple[str, ...]

    @property
    def message(self) -> str:
        return (
            f'model "{self.requested}" is served in namespaces {", ".join(self.namespaces)}; '
            "send an X-Label-Selector header that matches only one of them"
        )


def split_model(requested: str) -> tuple[str, str | None]:
    """``llama_sql`` -> (``llama``, ``sql``); ``llama`` -> (``llama``, None)."""
    name, separator, adapter = requested.partition("_")
    return name, (adapter if separator else None)


def candidate_namespaces(catalog: Catalog, requested: str, selector: LabelSelector) -> set[str]:
    """The namespaces that hold a Model ``requested`` could name: the caller's access to
    each is asked before the route is found."""
    name, _adapter = split_model(requested)
    return {model.namespace for model in catalog.named(name, selector)}


def find_route(
    catalog: Catalog,
    requested: str,
    selector: LabelSelector,
    *,
    namespaces: Collection[str] | None = None,
) -> Route | Unknown | Ambiguous:
    """The route among the Models of ``namespaces`` (None: every namespace). A Model in a
    namespace the caller may not use is not found, exactly as one that does not exist, and
    is never named in an ambiguity: its existence is not the caller's to learn."""
    name, adapter = split_model(requested)
    found = [
        model
        for model in catalog.named(name, selector)
        if (adapter is None or adapter in model.adapters)
        and (namespaces is None or model.namespace in namespaces)
    ]
    if not found:
        return Unknown(requested)
    if len(found) > 1:
        return Ambiguous(requested, tuple(sorted(model.namespace for model in found)))
    return Route(model=found[0], adapter=adapter)


def balancing_prefix(model: ServedModel, path: str, body: Mapping[str, Any]) -> str:
    """What a request to ``model`` is balanced on: its :func:`prompt_prefix` of the Model's
    ``prefixCharLength`` under PrefixHash, nothing under any other strategy. The one rule of
    the HTTP API and the messenger alike."""
    if model.strategy != "PrefixHash":
        return ""
    return prompt_prefix(path, body, model.prefix_hash.prefix_char_length)


def prompt_prefix(path: str, body: Mapping[str, Any], length: int) -> str:
    """The first ``length`` characters of what PrefixHash hashes: for chat the *last* message
    with role ``user`` (text parts joined; the issue's rule, upstream takes the first), for
    completions ``prompt`` (or its first element); empty for every other request."""
    if path == CHAT_PATH:
        text = _last_user_message(body.get("messages"))
    elif path == COMPLETIONS_PATH:
        text = _prompt(body.get("prompt"))
    else:
        text = ""
    return text[:length]


def _last_user_message(messages: Any) -> str:
    if not isinstance(messages, list):
        return ""
    for message in reversed(messages):
        if isinstance(message, Mapping) and message.get("role") == "user":
            return _content_text(message.get("content"))
    return ""


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text") or "")
            for part in content
            if isinstance(part, Mapping) and part.get("type") == "text"
        )
    return ""


def _prompt(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], str):
        return prompt[0]
    return ""
