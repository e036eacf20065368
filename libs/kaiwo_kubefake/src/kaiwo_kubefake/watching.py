"""Watch subscriptions: which stored changes a watcher sees, and as which event type; the
history a watch resumes from (:class:`ChangeFeed`).

A watch with a selector sees an object that starts matching as ADDED and one that stops
matching as DELETED, as the real API server's watch cache does.
"""

from __future__ import annotations

import asyncio
import copy
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from kaiwo_kubefake import errors
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


class ChangeFeed:
    """The bounded history of committed changes and the open watches: every change is
    offered to each watcher; a watch resumes from the history, or answers 410 Gone for a
    resourceVersion older than what it keeps."""

    def __init__(self, *, history_limit: int) -> None:
        self._history: deque[Change] = deque()
        self._history_limit = history_limit
        self._compacted_through = 0
        self._watchers: set[Watcher] = set()

    @property
    def compacted_through(self) -> int:
        return self._compacted_through

    @property
    def open_watches(self) -> int:
        return len(self._watchers)

    def record(self, change: Change) -> None:
        self._history.append(change)
        while len(self._history) > self._history_limit:
            self._compacted_through = self._history.popleft().resource_version
        for watcher in list(self._watchers):
            watcher.offer(change)

    def compact(self, *, through: int) -> None:
        """Forget the whole change history: older resourceVersions now answer 410 Gone."""
        self._history.clear()
        self._compacted_through = through

    def resume(self, watcher: Watcher, *, since: int) -> None:
        """Queue the changes after ``since`` for ``watcher`` and open it."""
        if since < self._compacted_through:
            raise errors.gone(f"too old resource version: {since} ({self._compacted_through})")
        for change in self._history:
            if change.resource_version > since:
                watcher.offer(change)
        self._watchers.add(watcher)

    def open(self, watcher: Watcher) -> None:
        self._watchers.add(watcher)

    def unwatch(self, watcher: Watcher) -> None:
        self._watchers.discard(watcher)

    def close_watches(self) -> None:
        for watcher in list(self._watchers):
            watcher.close()
        self._watchers.clear()
