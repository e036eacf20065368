"""What the executor already did, per owner, kept in the ``kaiwo-executor`` key-value bucket.

One JSON record per owner (key ``owner/<uid>``) holds:

* the ids of the last plans carried out to the end (result published): a redelivered plan is
  skipped without a single API call;
* per desired object, the hash of the manifest last applied: an unchanged object is not
  written again (unless the plan lists it as ``absent``);
* the hash of the status last written, the Events already emitted for the current plan
  fingerprint, and the prune inventory last enforced;
* (by its mere existence) that the executor has touched the owner: the record is written
  before the first API call for an owner. So an owner without one can have no children of
  ours *if the bucket was keeping records when the owner was created*: a bucket lost, or
  deleted to start it afresh, knows nothing of the children made before. The bucket's key
  ``memo-since`` holds when it began (:meth:`ExecutionMemo.since`); an owner without a
  record that the API server created after that (by more than :data:`CLOCK_MARGIN`) is new,
  and its first plan needs no list calls to find children to prune. Any other owner without
  a record lists them once (decision 0215);
* the ``KAIWO_PLAN`` stream sequence and ``planned_at`` of the newest plan started: plans of
  one owner may be in flight together, and a plan nak'ed for a retry comes back after a later
  one; being a whole desired state, the later plan supersedes it (:meth:`OwnerMemo.superseded`);
* since when a name the owner's plans want has been taken by an object the owner does not
  control (:mod:`kaiwo_executor.child_ownership`): the ``NameConflict`` condition keeps that
  time while the conflict lasts.

The record survives restarts, so a restarted executor does not re-apply what it applied
before. It is a cache of the executor's own writes, never a view of the cluster: drift made by
others reaches the executor only through the planner (``absent``, or a new plan).
One record per owner keeps the bucket's size proportional to the live owners; a record is
emptied (but its plan ids kept) when the plan deletes the owner.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from kaiwo_contracts.plans import ObjectRef, canonical_json_bytes
from kaiwo_runtime.kv import KeyValue

RECENT_PLANS = 16
"""Plan ids remembered per owner; redelivery only ever repeats the latest, a few spare."""
SINCE_KEY = "memo-since"
"""The bucket key holding when the bucket began to record owners; no owner's key (``owner/...``)
and not ``cluster-identity``."""
CLOCK_MARGIN = timedelta(seconds=1)
"""How much later than ``memo-since`` an owner must have been created to be known new: that time
is the executor's clock, ``creationTimestamp`` the API server's, and an executor whose clock is
behind by more than this could take an owner created before a bucket was started afresh for a
new one. NTP keeps them within milliseconds. Every owner created within it after a bucket
began lists its children once (5 s did so for most of the benchmark's first step)."""
SINCE_READ_EVERY = 60.0
"""Seconds ``memo-since`` is used before it is read again: another process may have started the
bucket afresh under this one (NATS lost it and a replica starting made it anew)."""


def content_hash(value: Any) -> str:
    return hashlib.sha256(canonical_json_bytes(value)).hexdigest()


def object_key(*, api_version: str, kind: str, namespace: str | None, name: str) -> str:
    """``group/kind/namespace/name``: the version is left out, it addresses the same object."""
    group = api_version.rpartition("/")[0]
    return f"{group}/{kind}/{namespace or ''}/{name}"


def manifest_key(manifest: dict[str, Any]) -> str:
    metadata = manifest.get("metadata") or {}
    return object_key(
        api_version=str(manifest.get("apiVersion", "")),
        kind=str(manifest.get("kind", "")),
        namespace=metadata.get("namespace"),
        name=str(metadata.get("name", "")),
    )


def ref_key(ref: ObjectRef) -> str:
    return object_key(
        api_version=ref.api_version, kind=ref.kind, namespace=ref.namespace, name=ref.name
    )


def owner_memo_key(owner: ObjectRef) -> str:
    return f"owner/{owner.uid or ref_key(owner)}"


@dataclass(slots=True)
class OwnerMemo:
    """The working copy of one owner's record while a plan is carried out."""

    plan_ids: list[str] = field(default_factory=list)
    objects: dict[str, str] = field(default_factory=dict)
    status: str | None = None
    events_fingerprint: str | None = None
    events_done: list[str] = field(default_factory=list)
    pruned_for: str | None = None
    latest_sequence: int = 0
    latest_planned_at: datetime | None = None
    name_conflict_since: datetime | None = None
    stored: bool = False
    """Loaded from the bucket (False: no record, this executor never touched the owner)."""

    def executed(self, plan_id: str) -> bool:
        return plan_id in self.plan_ids

    def superseded(self, *, sequence: int, planned_at: datetime | None) -> bool:
        """A later plan of this owner was started already. Both the stream sequence and
        the planning time must say so, so a re-created stream (sequences from 1 again)
        cannot make new plans look old."""
        if sequence >= self.latest_sequence:
            return False
        if planned_at is None or self.latest_planned_at is None:
            return True
        return planned_at <= self.latest_planned_at

    def start_plan(self, *, sequence: int, planned_at: datetime | None) -> None:
        self.latest_sequence, self.latest_planned_at = sequence, planned_at

    def remember_plan(self, plan_id: str) -> None:
        if plan_id not in self.plan_ids:
            self.plan_ids = [*self.plan_ids, plan_id][-RECENT_PLANS:]

    def event_done(self, *, fingerprint: str, name: str) -> bool:
        return self.events_fingerprint == fingerprint and name in self.events_done

    def remember_event(self, *, fingerprint: str, name: str) -> None:
        if self.events_fingerprint != fingerprint:
            self.events_fingerprint, self.events_done = fingerprint, []
        if name not in self.events_done:
            self.events_done.append(name)

    def forget_effects(self) -> None:
        """The owner is gone: keep only the plan ids."""
        self.objects, self.status, self.pruned_for = {}, None, None
        self.name_conflict_since = None
        self.events_fingerprint, self.events_done = None, []

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "planIds": self.plan_ids,
                "objects": self.objects,
                "status": self.status,
                "eventsFingerprint": self.events_fingerprint,
                "eventsDone": self.events_done,
                "prunedFor": self.pruned_for,
                "latestSequence": self.latest_sequence,
                "latestPlannedAt": (
                    self.latest_planned_at.isoformat() if self.latest_planned_at else None
                ),
                "nameConflictSince": (
                    self.name_conflict_since.isoformat() if self.name_conflict_since else None
                ),
            },
            sort_keys=True,
        ).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> OwnerMemo:
        try:
            data = json.loads(raw)
            return cls(
                plan_ids=[str(i) for i in data.get("planIds") or []],
                objects={str(k): str(v) for k, v in (data.get("objects") or {}).items()},
                status=data.get("status"),
                events_fingerprint=data.get("eventsFingerprint"),
                events_done=[str(n) for n in data.get("eventsDone") or []],
                pruned_for=data.get("prunedFor"),
                latest_sequence=int(data.get("latestSequence") or 0),
                latest_planned_at=_datetime_or_none(data.get("latestPlannedAt")),
                name_conflict_since=_datetime_or_none(data.get("nameConflictSince")),
            )
        except (ValueError, AttributeError, TypeError):
            # An unreadable memo only costs writes: start afresh rather than stop.
            return cls()


def _datetime_or_none(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None


KNOWN_OWNERS_LIMIT = 20_000
"""Owners remembered as having a record, at about 200 bytes each. One forgotten costs a
refused create and a read at its next plan, instead of a read."""


class ExecutionMemo:
    """Loads and saves :class:`OwnerMemo` records in a :class:`KeyValue` bucket.

    It remembers which owners have a record (read or written here): their plans read it,
    and any other owner's first plan creates it, in one round trip where reading the
    missing record and then writing it would take two (issue 28).
    """

    def __init__(
        self,
        kv: KeyValue,
        *,
        known_limit: int = KNOWN_OWNERS_LIMIT,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._kv = kv
        self._known: OrderedDict[str, None] = OrderedDict()
        self._known_limit = known_limit
        self._monotonic = monotonic
        self._since: tuple[datetime, float] | None = None
        """``memo-since`` as last read or written, and when (monotonic seconds)."""

    async def load(self, owner: ObjectRef) -> OwnerMemo:
        key = owner_memo_key(owner)
        raw = await self._kv.get(key)
        if raw is None:
            return OwnerMemo()
        self._know(key)
        return _stored(raw)

    async def claim(self, owner: ObjectRef, fresh: OwnerMemo) -> tuple[OwnerMemo, bool]:
        """The owner's record, and whether it is ``fresh``, written just now because the
        owner had none: "no record" keeps meaning that nothing of ours exists for it."""
        key = owner_memo_key(owner)
        if key in self._known:
            raw = await self._kv.get(key)
            if raw is not None:
                self._know(key)
                return _stored(raw), False
            # Records are never deleted: the bucket was started afresh under this process.
            self._since = None
        held = await self._kv.create(key, fresh.to_json())
        self._know(key)
        if held is not None:
            return _stored(held), False
        fresh.stored = True
        return fresh, True

    async def since(self, *, now: datetime) -> datetime:
        """When the bucket began to record owners (``memo-since``): ``now``, written, when it
        holds no such time (a new bucket, one started afresh, or one of a version before
        this); else the time it holds. One round trip, then none for
        :data:`SINCE_READ_EVERY` seconds, unless a record this memo knew is found gone."""
        moment = self._monotonic()
        if self._since is not None and moment - self._since[1] < SINCE_READ_EVERY:
            return self._since[0]
        held = await self._kv.create(SINCE_KEY, now.isoformat().encode())
        since = now if held is None else _since_or_none(held)
        if since is None:
            # Unreadable: started now, which only costs list calls for the owners before.
            await self._kv.put(SINCE_KEY, now.isoformat().encode())
            since = now
        self._since = (since, moment)
        return since

    async def owner_is_new(self, created_at: datetime, *, now: datetime) -> bool:
        """Whether an owner without a record, created at ``created_at`` (the API server's
        ``creationTimestamp``), can have no children of ours: the bucket was recording owners
        when it was created, so any executor that acted for it would have left its record."""
        return created_at > await self.since(now=now) + CLOCK_MARGIN

    async def save(self, owner: ObjectRef, memo: OwnerMemo) -> None:
        key = owner_memo_key(owner)
        await self._kv.put(key, memo.to_json())
        self._know(key)

    def _know(self, key: str) -> None:
        self._known[key] = None
        self._known.move_to_end(key)
        if len(self._known) > self._known_limit:
            self._known.popitem(last=False)


def _since_or_none(raw: bytes) -> datetime | None:
    try:
        since = datetime.fromisoformat(raw.decode())
    except (ValueError, UnicodeDecodeError):
        return None
    return since if since.utcoffset() is not None else None


def _stored(raw: bytes) -> OwnerMemo:
    memo = OwnerMemo.from_json(raw)
    memo.stored = True
    return memo
