"""The API server's audit log, reduced to what tests and benchmarks count: who wrote what,
and, for the users a test names, every request they made.

The policy records writes (create, update, patch, delete, deletecollection) at Metadata level,
once per request when the response is complete, and nothing else, so the log stays small and
every line is one write request the server answered. :func:`audit_policy` can add the users
of some groups (e.g. the service accounts of one namespace), whose every request, reads
included, is recorded too: a watch once when it starts (stage ``ResponseStarted``) and once
when it ends.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

MUTATING_VERBS: Final = ("create", "update", "patch", "delete", "deletecollection")


def audit_policy(every_request_of: Sequence[str] = ()) -> dict[str, Any]:
    """The audit policy: every write at Metadata level, and every request of the users in
    the groups ``every_request_of`` (e.g. ``system:serviceaccounts:kaiwo-system``)."""
    rules: list[dict[str, Any]] = []
    if every_request_of:
        rules.append({"level": "Metadata", "userGroups": list(every_request_of)})
    rules += [{"level": "Metadata", "verbs": list(MUTATING_VERBS)}, {"level": "None"}]
    return {
        "apiVersion": "audit.k8s.io/v1",
        "kind": "Policy",
        # One event per request (at ResponseComplete), not one more when the request arrived.
        "omitStages": ["RequestReceived"],
        "rules": rules,
    }


AUDIT_POLICY: Final[dict[str, Any]] = audit_policy()

Who = Literal["user", "user_agent"]


@dataclass(frozen=True, slots=True)
class AuditEvent:
    """One request as the API server recorded it (a write, unless read with
    :meth:`AuditLog.requests`). A request for no resource (discovery, ``/version``) has an
    empty ``resource`` and its path in ``uri``."""

    verb: str
    user: str
    user_agent: str
    resource: str
    subresource: str
    namespace: str
    name: str
    code: int
    api_group: str = ""
    """``""`` for the core group."""
    uri: str = ""

    def who(self, by: Who) -> str:
        return self.user if by == "user" else self.user_agent

    @property
    def is_write(self) -> bool:
        return self.verb in MUTATING_VERBS


def parse_request(line: str) -> AuditEvent | None:
    """The request in one JSON line of the log, read or write; None for a blank line."""
    if not line.strip():
        return None
    event = json.loads(line)
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
        api_group=target.get("apiGroup", ""),
        uri=event.get("requestURI", ""),
    )


def parse_event(line: str) -> AuditEvent | None:
    """The write in one JSON line of the log; None for a blank line or a read."""
    request = parse_request(line)
    return request if request is not None and request.is_write else None


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
        """The write requests."""
        return [event for event in self.requests(since=since) if event.is_write]

    def requests(self, *, since: int = 0) -> list[AuditEvent]:
        """Every request the policy records: the writes, and the reads of the users it
        names (see :func:`audit_policy`)."""
        if not self.path.exists():
            return []
        with self.path.open("rb") as log:
            log.seek(max(since - 1, 0))
            # A mark taken while the server wrote a line falls inside it: that request was
            # answered before the mark, and the rest of its line is not one of its own.
            inside_a_line = since > 0 and log.read(1) != b"\n"
            written = log.read()
        if inside_a_line:
            written = written.partition(b"\n")[2]
        # A line still being written has no newline yet: leave it for the next read.
        complete = written.rpartition(b"\n")[0]
        parsed = (parse_request(line) for line in complete.decode().splitlines())
        return [event for event in parsed if event is not None]

    def writes(self, *, since: int = 0, by: Who = "user") -> Counter[tuple[str, str]]:
        return count_writes(self.events(since=since), by=by)
