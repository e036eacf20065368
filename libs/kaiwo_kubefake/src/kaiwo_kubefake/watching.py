"""Watch subscriptions: which stored changes a watcher sees, and as which event type.

A watch with a selector sees an object that starts matching as ADDED and one that stops
matching as DELETED, as the real API server's watch cache does.
"""

from __future__ import annotations

import asyncio
import copy
from dataclasses import dataclass, field
from typing import Any

from kaiwo_kubefake.selectors import FieldSelector, LabelSelector

# What a queue carries: (event type, object), or None when the server stops the watch.
WatchItem = tuple[str, dict[str, Any]] | None


@dataclass(frozen=True, slots=True)
class Change:
    """One committed change, kept in the bounded history for watch resumption."""

    resource_version: int
    type: str  # ADDED, MODIFIED or DELETED
    kind_key: tuple[str, str]
    obj: dict[str, Any]
    old: dict[str, Any] | None


@dataclass(eq=False)
class Watcher:
    kind_key: tuple[str, str]
    namespace: str | None
    labels: LabelSelector
    fields: FieldSelector
    queue: asyncio.Queue[WatchItem] = field(default_factory=asyncio.Queue)

    def _matches(self, obj: dict[str, Any] | None) -> bool:
        if obj is None:
            return False
        metadata = obj.get("metadata") or {}
        if self.namespace is not None and metadata.get("namespace") != self.namespace:
            return False
        return self.labels.matches(metadata.get("labels")) and self.fields.matches(obj)

    def event_for(self, change: Change) -> tuple[str, dict[str, Any]] | None:
        """The event this watcher gets for ``change``, if any."""
        if change.kind_key != self.kind_key:
            return None
        now_matches = self._matches(change.obj)
        if change.type == "DELETED":
            return ("DELETED", change.obj) if now_matches else None
        before_matches = change.type == "MODIFIED" and self._matches(change.old)
        if now_matches and before_matches:
            return ("MODIFIED", change.obj)
        if now_matches:
            return ("ADDED", change.obj)
        if before_matches:
            return ("DELETED", change.obj)
        return None

    def offer(self, change: Change) -> None:
        event = self.event_for(change)
        if event is not None:
            self.queue.put_nowait((event[0], copy.deepcopy(event[1])))

    def close(self) -> None:
        self.queue.put_nowait(None)
