"""The API server's audit log, reduced to what tests and benchmarks count: who wrote what.

The policy records writes (create, update, patch, delete, deletecollection) at Metadata level,
once per request when the response is complete, and nothing else, so the log stays small and
every line is one write request the server answered.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

MUTATING_VERBS: Final = ("create", "update", "patch", "delete", "deletecollection")

AUDIT_POLICY: Final[dict[str, Any]] = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    # One event per request (at ResponseComplete), not one more when the request arrived.
    "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "Metadata", "verbs": list(MUTATING_VERBS)},
        {"level": "None"},
    ],
}

Who = Literal["user", "user_agent"]


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """One write request as the API server recorded it."""

    verb: str
    user: str
    user_agent: str
    resource: str
    subresource: str
    namespace: str
    name: str
    code: int

    def who(self, by: Who) -> str:
        return self.user if by == "user" else self.user_agent


def parse_event(line: str) -> AuditEvent | None:
    """The write in one JSON line of the log; None for a blank line or a read."""
    if not line.strip():
        return None
    event = json.loads(line)
    if event.get("verb") not in MUTATING_VERBS:
        return None
    target = event.get("objectRef") or {}
    return AuditEvent(
        verb=event["verb"],
        user=(event.get("user") or {}).get("username", ""),
        user_agent=event.get("userAgent", ""),
        resource=target.get("resource", ""),
        subresource=target.get("subresource", ""),
        namespace=target.get("namespace", ""),
        name=target.get("name", ""),
        code=int((event.get("responseStatus") or {}).get("code", 0)),
    )


def count_writes(events: Iterable[AuditEvent], *, by: Who = "user") -> Counter[tuple[str, str]]:
    """Write requests per (user or user agent, verb)."""
    return Counter((event.who(by), event.verb) for event in events)


@dataclass(frozen=True, slots=True)
class AuditLog:
    """The log file of a running API server; read it as often as needed.

    ``mark()`` then ``events(since=mark)`` reads only what was written after the mark, so a
    test on a shared control plane counts its own writes. The server writes a request's line
    just after answering it: read after the client's last request has returned and a moment
    has passed, or poll.
    """

    path: Path

    def mark(self) -> int:
        return self.path.stat().st_size if self.path.exists() else 0

    def events(self, *, since: int = 0) -> list[AuditEvent]:
        if not self.path.exists():
            return []
        with self.path.open("rb") as log:
            log.seek(since)
            # A line still being written has no newline yet: leave it for the next read.
            complete = log.read().rpartition(b"\n")[0]
        parsed = (parse_event(line) for line in complete.decode().splitlines())
        return [event for event in parsed if event is not None]

    def writes(self, *, since: int = 0, by: Who = "user") -> Counter[tuple[str, str]]:
        return count_writes(self.events(since=since), by=by)
