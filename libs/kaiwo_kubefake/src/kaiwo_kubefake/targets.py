"""What a resource URL addresses, and how an object is answered for it: in the addressed
version (pruned by its schema), or as the Scale of the scale subresource."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web

from kaiwo_kubefake.custom_resources import served
from kaiwo_kubefake.kinds import ResourceKind
from kaiwo_kubefake.scaling import scale_view
from kaiwo_kubefake.selectors import FieldSelector, LabelSelector


@dataclass(frozen=True, slots=True)
class Target:
    """What a resource URL addresses."""

    kind: ResourceKind
    namespace: str | None
    name: str | None
    subresource: str


def truthy(value: str | None) -> bool:
    return value is not None and value.lower() in ("1", "true")


def field_manager(request: web.Request) -> str:
    """The fieldManager query parameter, else the user agent's product, as the real server does."""
    explicit = request.query.get("fieldManager")
    if explicit:
        return explicit
    agent = request.headers.get("User-Agent", "")
    return agent.split("/")[0] or "unknown"


def served_as(target: Target, obj: dict[str, Any]) -> dict[str, Any]:
    """The object as this version serves it (conversion strategy None: same fields, pruned
    by this version's schema)."""
    obj = served(target.kind, obj)
    obj["apiVersion"] = target.kind.api_version
    return obj


def answer(target: Target, obj: dict[str, Any], *, status: int = 200) -> web.Response:
    if target.subresource == "scale":
        return web.json_response(scale_view(target.kind, obj), status=status)
    return web.json_response(served_as(target, obj), status=status)


def selectors(request: web.Request, target: Target) -> tuple[LabelSelector, FieldSelector]:
    labels = LabelSelector.parse(request.query.get("labelSelector"))
    fields = FieldSelector.parse(request.query.get("fieldSelector"), kind_key=target.kind.key)
    return labels, fields
