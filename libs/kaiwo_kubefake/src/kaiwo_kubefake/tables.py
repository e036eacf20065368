"""Table answers (``Accept: application/json;as=Table;g=meta.k8s.io;v=v1``), as ``kubectl get``
asks for them: a custom resource's rows carry its CRD version's ``additionalPrinterColumns``
(Name first; Age only when the CRD lists it, as the real server does), a built-in kind's
Name, a few well-known fields and Age.

Column values follow the simple JSONPath the columns use (``.a.b``, ``.a[0].b``); a ``date``
column is shown as an age, as the API server's table convertor does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final

TABLE_MEDIA: Final = "as=Table"
_STEP: Final = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]")
_AGE: Final = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
_BUILTIN_COLUMNS: Final[dict[str, tuple[dict[str, Any], ...]]] = {
    "pods": (
        {"name": "Status", "type": "string", "jsonPath": ".status.phase"},
        _AGE,
        {"name": "Node", "type": "string", "jsonPath": ".spec.nodeName", "priority": 1},
    ),
    "nodes": (
        {"name": "Status", "type": "string", "jsonPath": ".status.conditions[0].type"},
        _AGE,
    ),
    "persistentvolumeclaims": (
        {"name": "Status", "type": "string", "jsonPath": ".status.phase"},
        {"name": "Capacity", "type": "string", "jsonPath": ".status.capacity.storage"},
        _AGE,
    ),
    "jobs": (
        {"name": "Succeeded", "type": "integer", "jsonPath": ".status.succeeded"},
        {"name": "Failed", "type": "integer", "jsonPath": ".status.failed"},
        _AGE,
    ),
    "deployments": (
        {"name": "Ready", "type": "integer", "jsonPath": ".status.readyReplicas"},
        {"name": "Available", "type": "integer", "jsonPath": ".status.availableReplicas"},
        _AGE,
    ),
}


def wants_table(accept: str | None) -> bool:
    return bool(accept) and TABLE_MEDIA in str(accept).replace(" ", "")


def printer_columns(crd: Mapping[str, Any] | None, *, version: str, plural: str) -> list[Any]:
    """The columns after Name: the CRD version's printer columns, else Age (built-ins: their
    own)."""
    if crd is None:
        return list(_BUILTIN_COLUMNS.get(plural, (_AGE,)))
    for served in (crd.get("spec") or {}).get("versions") or ():
        if served.get("name") == version and served.get("additionalPrinterColumns"):
            return list(served["additionalPrinterColumns"])
    return [_AGE]


def table(
    objects: Sequence[Mapping[str, Any]],
    columns: Sequence[Mapping[str, Any]],
    *,
    resource_version: str,
    now: datetime | None = None,
) -> dict[str, Any]:
    moment = now or datetime.now(UTC)
    definitions = [
        {
            "name": "Name",
            "type": "string",
            "format": "name",
            "description": "Name must be unique within a namespace.",
            "priority": 0,
        },
        *(
            {
                "name": column.get("name", ""),
                "type": column.get("type", "string"),
                "format": column.get("format", ""),
                "description": column.get("description", ""),
                "priority": int(column.get("priority", 0)),
            }
            for column in columns
        ),
    ]
    rows = [
        {
            "cells": [
                (obj.get("metadata") or {}).get("name", ""),
                *(_cell(obj, column, moment) for column in columns),
            ],
            "object": {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj.get("metadata") or {},
            },
        }
        for obj in objects
    ]
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": definitions,
        "rows": rows,
    }


def _cell(obj: Mapping[str, Any], column: Mapping[str, Any], now: datetime) -> Any:
    value = json_path(obj, str(column.get("jsonPath", "")))
    if value is None:
        return None
    if column.get("type") == "date" and isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return value
        return human_duration((now - moment).total_seconds())
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return value


def json_path(obj: Any, path: str) -> Any:
    """The value at a simple JSONPath (``.a.b[0].c``, braces optional); None when absent."""
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    value = obj
    for field, index in _STEP.findall(text):
        if field:
            value = value.get(field) if isinstance(value, Mapping) else None
        else:
            position = int(index)
            value = value[position] if isinstance(value, list) and position < len(value) else None
        if value is None:
            return None
    return value


def human_duration(seconds: float) -> str:
    """An age as kubectl shows it: 45s, 3m20s, 2h5m, 3d4h, 2y."""
    whole = max(0, int(seconds))
    minutes, hours, days = whole // 60, whole // 3600, whole // 86400
    if whole < 120:
        result = f"{whole}s"
    elif minutes < 10:
        result = f"{minutes}m{whole % 60}s" if whole % 60 else f"{minutes}m"
    elif minutes < 180:
        result = f"{minutes}m"
    elif hours < 8:
        result = f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    elif hours < 48:
        result = f"{hours}h"
    elif days < 8:
        result = f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    elif days < 730:
        result = f"{days}d"
    else:
        result = f"{days // 365}y"
    return result
