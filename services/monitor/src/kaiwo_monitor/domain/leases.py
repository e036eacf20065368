"""Leader election by a ``coordination.k8s.io/v1`` Lease: the pure rules.

The Lease names its holder and how long a claim lasts (``leaseDurationSeconds``). A
candidate may take it when nobody holds it, when it holds it already, or when the record has
not changed for a whole lease duration *as measured on the candidate's own clock*: we note
when we first saw the current record and never compare our clock with the holder's
``renewTime``, so clock skew between machines cannot make two instances lead at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

LEASE_API_VERSION = "coordination.k8s.io/v1"
MICRO_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """The election fields of a Lease's spec."""

    holder: str = ""
    duration_seconds: int = 15
    acquire_time: datetime | None = None
    renew_time: datetime | None = None
    transitions: int = 0

    @classmethod
    def from_lease(cls, lease: Mapping[str, Any]) -> LeaseRecord:
        spec = lease.get("spec") or {}
        return cls(
            holder=str(spec.get("holderIdentity") or ""),
            duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=_parse_time(spec.get("acquireTime")),
            renew_time=_parse_time(spec.get("renewTime")),
            transitions=int(spec.get("leaseTransitions") or 0),
        )

    def to_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "holderIdentity": self.holder,
            "leaseDurationSeconds": self.duration_seconds,
            "leaseTransitions": self.transitions,
        }
        if self.acquire_time is not None:
            spec["acquireTime"] = micro_time(self.acquire_time)
        if self.renew_time is not None:
            spec["renewTime"] = micro_time(self.renew_time)
        return spec


@dataclass(frozen=True, slots=True)
class LeaseObservation:
    """A record and the moment (our clock) we first saw it unchanged."""

    record: LeaseRecord
    since: datetime


def observe(
    previous: LeaseObservation | None, record: LeaseRecord, now: datetime
) -> LeaseObservation:
    """Keep the old ``since`` while the record is the same; a changed record restarts it."""
    if previous is not None and previous.record == record:
        return previous
    return LeaseObservation(record=record, since=now)


def may_claim(observation: LeaseObservation, *, identity: str, now: datetime) -> bool:
    """Whether ``identity`` may write itself into the Lease now."""
    record = observation.record
    if not record.holder or record.holder == identity:
        return True
    return now - observation.since >= timedelta(seconds=record.duration_seconds)


def claimed(
    record: LeaseRecord, *, identity: str, now: datetime, duration_seconds: int
) -> LeaseRecord:
    """The record after ``identity`` acquires or renews it at ``now``."""
    taking_over = record.holder != identity
    return LeaseRecord(
        holder=identity,
        duration_seconds=duration_seconds,
        acquire_time=now if taking_over or record.acquire_time is None else record.acquire_time,
        renew_time=now,
        transitions=record.transitions + 1 if taking_over and record.holder else record.transitions,
    )


def released(record: LeaseRecord, *, now: datetime) -> LeaseRecord:
    """The record after its holder steps down: no holder, so others may take it at once."""
    return replace(record, holder="", duration_seconds=1, renew_time=now)


def lease_manifest(
    *, name: str, namespace: str, record: LeaseRecord, resource_version: str | None = None
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if resource_version is not None:
        metadata["resourceVersion"] = resource_version
    return {
        "apiVersion": LEASE_API_VERSION,
        "kind": "Lease",
        "metadata": metadata,
        "spec": record.to_spec(),
    }


def micro_time(moment: datetime) -> str:
    """Kubernetes ``MicroTime``: RFC 3339 in UTC with microseconds."""
    return moment.astimezone(UTC).strftime(MICRO_TIME_FORMAT)


def _parse_time(value: object) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
