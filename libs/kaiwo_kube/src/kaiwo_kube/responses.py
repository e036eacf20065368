"""Decoding the API server's answers: bodies, list pages, watch lines, CRD conditions (pure).

Everything the adapter reads from the wire passes through here, so whatever the API server
(or something in between) sends ends in the port's typed errors (:mod:`kaiwo_kube.errors`):
an answer that is not what the API promises raises :class:`MalformedResponse`, which callers
retry like a dropped connection. Strings holding a lone UTF-16 surrogate (``"\\ud800"``,
valid JSON that no UTF-8 encoder takes) get U+FFFD in its place, as the API server's own
Go decoder does, so a published object can always be encoded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, NamedTuple, cast

from pydantic_core import from_json

from kaiwo_kube.errors import KubeError, MalformedResponse, error_from_status
from kaiwo_kube.port import WatchEvent, WatchEventType

WATCH_EVENT_TYPES: frozenset[str] = frozenset({"ADDED", "MODIFIED", "DELETED", "BOOKMARK"})
_SURROGATE = re.compile("[\ud800-\udfff]")
_MAYBE_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")
"""Where a decoded string may hold a surrogate: an escape, or the three bytes that would
encode one in UTF-8 (invalid UTF-8, which ``json.loads`` decodes with ``surrogatepass``)."""
_SHALLOW_BRACKETS = 200
"""Fewer opening brackets than this cannot nest deeper than the encoder recurses."""


class ListPage(NamedTuple):
    """One page of a list answer (``resource_version`` is "" on pages that continue)."""

    items: list[dict[str, Any]]
    continue_token: str
    resource_version: str


def decode_body(data: bytes) -> Any:
    """The JSON of an answer body; ``{}`` for none, ``{"message": text}`` for text that is
    not JSON (an error page of a proxy)."""
    if not data:
        return {}
    try:
        return _json(data)
    except MalformedResponse:
        return {"message": data.decode(errors="replace")}


def _json(data: bytes) -> Any:
    try:
        # pydantic's parser (jiter): a watch event in less than half json.loads's time.
        # What it takes, it reads as json.loads does; it refuses a lone surrogate, a byte
        # order mark, UTF-16 and nesting beyond 200 levels, which are read below as before.
        return from_json(data)
    except ValueError:
        pass
    try:
        decoded = json.loads(data)
    except (ValueError, RecursionError) as error:  # also bad UTF-8; nesting too deep
        raise MalformedResponse(f"not JSON: {_short(error)}") from error
    if (
        json.detect_encoding(data) == "utf-8"  # UTF-16 and UTF-32 carry surrogates as units
        and _MAYBE_SURROGATE.search(data) is None
        and data.count(b"{") + data.count(b"[") < _SHALLOW_BRACKETS
    ):
        # Nothing the check below could find; it encoded every answer again (a third of
        # decoding a watch event).
        return decoded
    try:
        json.dumps(decoded, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return _without_surrogates(decoded)
    except RecursionError as error:  # depth the decoder took and the encoder does not
        raise MalformedResponse("JSON nested too deep") from error
    return decoded


def _without_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [_without_surrogates(child) for child in value]
    if isinstance(value, dict):
        return {_without_surrogates(k): _without_surrogates(v) for k, v in value.items()}
    return value


def _short(error: BaseException) -> str:
    return str(error)[:200]


def list_page_of(page: Mapping[str, Any]) -> ListPage:
    """The items, continue token and resourceVersion of one list page."""
    metadata = page.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    token = metadata.get("continue") or ""
    version = metadata.get("resourceVersion")
    items = page.get("items") or []
    if not isinstance(token, str):
        raise MalformedResponse("a list's metadata.continue is not a string")
    if not token and not isinstance(version, str | int):
        raise MalformedResponse("a list answer without metadata.resourceVersion")
    if not isinstance(items, list) or not all(_is_object(item) for item in items):
        raise MalformedResponse("a list answer whose items are not objects")
    return ListPage(
        items=items, continue_token=token, resource_version="" if token else str(version)
    )


def _is_object(value: object) -> bool:
    """A JSON object whose metadata, when present, is an object too."""
    return isinstance(value, dict) and isinstance(value.get("metadata", {}), dict)


def watch_event_of(line: bytes) -> WatchEvent:
    """One line of a watch stream. An ERROR event raises its typed error (410 Gone:
    ResourceExpired); anything that is not a watch event raises MalformedResponse."""
    event = _json(line)
    if not isinstance(event, dict):
        raise MalformedResponse("a watch line that is not a JSON object")
    kind = event.get("type")
    obj = event.get("object")
    if kind == "ERROR":
        raise _watch_error(obj)
    if not isinstance(kind, str) or kind not in WATCH_EVENT_TYPES:
        raise MalformedResponse(f"a watch event of no known type: {str(kind)[:40]!r}")
    if not isinstance(obj, dict) or not _is_object(obj):
        raise MalformedResponse(f"a {kind} watch event without an object")
    return WatchEvent(type=cast(WatchEventType, kind), object=obj)


def _watch_error(status: object) -> KubeError:
    body = status if isinstance(status, dict) else {}
    code = body.get("code")
    if isinstance(code, bool) or not isinstance(code, int) or not 100 <= code <= 599:
        code = 500
    return error_from_status(code=code, status=body)


def crd_established(crd: Mapping[str, Any]) -> bool:
    """The CustomResourceDefinition's Established condition is True."""
    status = crd.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    return isinstance(conditions, list) and any(
        isinstance(c, Mapping) and c.get("type") == "Established" and c.get("status") == "True"
        for c in conditions
    )
