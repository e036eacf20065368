"""Observations of objects for planner tests that feed a projection."""

from __future__ import annotations

from typing import Any

from kaiwo_contracts.events import ObservedObjectV1
from kaiwo_contracts.events.observed import WatchEventType


def observed(
    obj: dict[str, Any], version: int, event_type: WatchEventType = "ADDED"
) -> ObservedObjectV1:
    """``obj`` as the watcher publishes it at resourceVersion ``version``."""
    meta = obj["metadata"]
    return ObservedObjectV1(
        kind=obj["kind"],
        api_version=obj["apiVersion"],
        namespace=meta.get("namespace"),
        name=meta["name"],
        uid=meta["uid"],
        resource_version=str(version),
        event_type=event_type,
        object={**obj, "metadata": {**meta, "resourceVersion": str(version)}},
    )
