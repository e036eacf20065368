"""Plan admission: read what the confinement rules and the plan's sources need, and judge.

Two questions, both answered from the API server's view:

* **Confinement** (:func:`kaiwo_contracts.confinement.refusals` decides): the plan's owner as
  it is now (so a plan for an owner that does not exist, or exists with another uid, is
  refused) and, for plans that touch Nodes, the GPU taint key the KaiwoConfig ``kaiwo`` sets.
* **Sources** (decision 0038, :func:`kaiwo_contracts.plan_sources.source_verdict` decides):
  every object the plan names as computed from (``Plan.sources``: its owner first, then the
  configuration objects it read) is compared with the object as the API server holds it.
  A plan that does not name its owner as its first source is refused. A source the live
  object is a newer version of makes the plan *stale* (dropped quietly: the planner plans
  the newer version as well); a source the API server never held (other content at the
  same or an older version, another uid, or no object at all) makes it *refused*, and the
  source is to be observed again (:attr:`Admission.reobserve`).

What it costs. The owner was read before this check existed; the sources reuse that read.
Every object read is remembered for ``ttl_seconds`` with the digest of what people wrote in
it, so most plans cost no API call at all: the configuration objects are the same for every
plan, and a workload's plans mostly follow each other within seconds. An object is read
again at once when the remembered copy does not match a plan, so a change of the owner or a
configuration costs one read, and a plan is never refused because of a remembered copy. A
remembered copy that matches is trusted for ``ttl_seconds``: a plan made from a version at
most that old is admitted (it was the user's a moment ago; a deleted owner's children go
with it anyway, by garbage collection). Past that, a copy is of no use and is forgotten at
the next read, so the copies held are the last ``ttl_seconds`` of reads (at most
:data:`KNOWN_OBJECTS`); only the uid read under each name is kept longer, to tell an owner
deleted since from one that never was.

A plan that preempts a GPU workload no Kaiwo kind owns, or creates the GpuWorkload tracking
one, is also judged on that workload and its Namespace as they are *now*: both are read for
every such plan, never remembered (an opt-in annotation removed a moment ago must count).
Such plans are rare: one per workload tracked, one per preemption (decision 0047).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final, TypeVar

from kaiwo_contracts.confinement import (
    DEFAULT_GPU_TAINT_KEY,
    NODE,
    PreemptionTarget,
    preemption_target_ref,
    refusals,
)
from kaiwo_contracts.plan_sources import SourceVerdict, source_digest, source_verdict
from kaiwo_contracts.plans import ObjectRef, Plan, PlanSource
from kaiwo_kube import NotFound, resources
from kaiwo_kube.resources import known_type

from kaiwo_executor.cluster_port import LiveReader

_V = TypeVar("_V")

KNOWN_OBJECTS = 4096
"""Objects remembered as read (and uids of objects read), at most; the oldest are forgotten
first."""
SOURCE_KINDS: Final = frozenset(
    {
        ("kaiwo.silogen.ai/v1alpha1", "KaiwoJob"),
        ("kaiwo.silogen.ai/v1alpha1", "KaiwoService"),
        ("kaiwo.silogen.ai/v1alpha1", "KaiwoQueueConfig"),
        ("kubeai.org/v1", "Model"),
        ("config.kaiwo.silogen.ai/v1alpha1", "KaiwoConfig"),
        ("config.kaiwo.silogen.ai/v1alpha1", "AIMNamespaceConfig"),
        ("v1", "ConfigMap"),
        ("v1", "Namespace"),
        ("kaiwo.silogen.ai/v1alpha1", "GpuWorkload"),
    }
)
"""The kinds a plan may name as sources: the owners and the configuration objects."""


@dataclass(frozen=True, slots=True)
class SourceCheck:
    """One source of a plan against the live object."""

    source: PlanSource
    verdict: SourceVerdict
    live_version: str | None
    """The live object's resourceVersion (None: no such object)."""

    def describe(self) -> str:
        ref = self.source.ref
        planned = f"resourceVersion {self.source.resource_version or '?'}"
        if self.live_version is None:
            return f"{ref.display()}, which the plan was made from, does not exist"
        if self.verdict == "stale":
            return f"{ref.display()} changed since the plan was made from its {planned}"
        return (
            f"{ref.display()} as the plan was made from it ({planned}) is not what the API "
            f"server holds (resourceVersion {self.live_version})"
        )


@dataclass(frozen=True, slots=True)
class Admission:
    """Why a plan must not be carried out (nothing: it may), whether its owner exists with
    the plan's uid (then people can be told on it), which sources are stale, and which
    objects to observe again."""

    refusals: tuple[str, ...]
    owner_found: bool
    stale: tuple[str, ...] = ()
    """The plan was made from older versions of these sources: dropped quietly."""
    checks: tuple[SourceCheck, ...] = ()
    reobserve: tuple[ObjectRef, ...] = ()
    owner_deleted: bool = False
    """The owner is gone, and this executor read it with the plan's uid before: a plan made
    just before its deletion was seen, not a claim about an object that never was."""
    owner_absent: bool = False
    """The API server holds no object of the owner's name (whatever this process read)."""
    owner_created_at: datetime | None = None
    """The owner's ``creationTimestamp``, when it exists with the plan's uid: tells the
    executor whether an owner its memo does not know is new (decision 0215)."""

    @property
    def admitted(self) -> bool:
        return not self.refusals and not self.stale

    @property
    def mismatched(self) -> tuple[SourceCheck, ...]:
        return tuple(check for check in self.checks if check.verdict != "match")


@dataclass(frozen=True, slots=True)
class _Read:
    at: float
    object: Mapping[str, Any] | None
    digest: str | None


class PlanAdmission:
    """Admission of plans from the API server's view (see the module docstring)."""

    def __init__(
        self,
        kube: LiveReader,
        *,
        ttl_seconds: float = 30.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._kube = kube
        self._ttl = ttl_seconds
        self._monotonic = monotonic
        self._read: OrderedDict[str, _Read] = OrderedDict()
        """The reads of the last ``ttl_seconds``, oldest first."""
        self._uids: OrderedDict[str, str] = OrderedDict()
        """The uid last read under each name (the newest KNOWN_OBJECTS)."""
        self._deleted: OrderedDict[str, None] = OrderedDict()
        """Uids of objects read here before and found gone since (the newest KNOWN_OBJECTS)."""

    async def check(self, plan: Plan) -> Admission:
        taint_key = DEFAULT_GPU_TAINT_KEY
        if any((m.get("apiVersion"), m.get("kind")) == NODE for m in plan.desired):
            taint_key = await self._gpu_taint_key()
        wanted = preemption_target_ref(plan)
        target = await self._preemption_target(wanted) if wanted is not None else None
        if plan.create_only:
            return Admission(refusals=refusals(plan, owner=None, target=target), owner_found=False)
        checks, unnamed = await self._checks(plan)
        owner_read = await self._object(plan.owner)
        owner = owner_read.object
        uid = (owner or {}).get("metadata", {}).get("uid")
        found = refusals(plan, owner=owner, gpu_taint_key=taint_key, target=target)
        differing = tuple(c for c in checks if c.verdict == "differs")
        reobserve = {_key(c.source.ref): c.source.ref for c in differing}
        owner_missing = uid is None or uid != plan.owner.uid
        if owner_missing:
            reobserve.setdefault(_key(plan.owner), plan.owner)
        described = tuple(
            c.describe()
            for c in differing
            # A missing owner is the confinement's first reason already.
            if not (owner_missing and _key(c.source.ref) == _key(plan.owner))
        )
        owner_found = bool(uid) and uid == plan.owner.uid
        return Admission(
            refusals=(*unnamed, *found, *described),
            owner_found=owner_found,
            owner_deleted=owner is None and plan.owner.uid in self._deleted,
            owner_absent=owner is None,
            stale=tuple(c.describe() for c in checks if c.verdict == "stale"),
            checks=checks,
            reobserve=tuple(reobserve.values()),
            owner_created_at=_created_at(owner) if owner_found else None,
        )

    async def _checks(self, plan: Plan) -> tuple[tuple[SourceCheck, ...], tuple[str, ...]]:
        """Each source against the live object; and why the sources cannot be judged."""
        sources = plan.sources
        if not sources or _key(sources[0].ref) != _key(plan.owner):
            return (), (f"the plan does not name its owner {plan.owner.display()} as its source",)
        unreadable = [
            f"the plan names {s.ref.display()} as a source, which is not a kind plans read"
            for s in sources
            if (s.ref.api_version, s.ref.kind) not in SOURCE_KINDS
        ]
        if unreadable:
            return (), tuple(unreadable)
        return tuple([await self._check(source) for source in sources]), ()

    async def _check(self, source: PlanSource) -> SourceCheck:
        remembered = self._remembered(source.ref)
        if remembered is not None:
            verdict = source_verdict(source, remembered.object, live_digest=remembered.digest)
            if verdict == "match":
                return SourceCheck(source, verdict, _version(remembered.object))
        live = await self._object(source.ref, fresh=True)
        verdict = source_verdict(source, live.object, live_digest=live.digest)
        return SourceCheck(source, verdict, _version(live.object))

    def _remembered(self, ref: ObjectRef) -> _Read | None:
        found = self._read.get(_key(ref))
        if found is None or self._monotonic() - found.at >= self._ttl:
            return None
        return found

    async def _object(self, ref: ObjectRef, *, fresh: bool = False) -> _Read:
        """The object ``ref`` names as the API server holds it (remembered for the TTL)."""
        key = _key(ref)
        if not fresh:
            remembered = self._remembered(ref)
            if remembered is not None:
                return remembered
        resource = known_type(ref.api_version, ref.kind)
        if resource is None:
            return _Read(at=self._monotonic(), object=None, digest=None)
        try:
            live = await self._kube.get(resource, ref.name, namespace=ref.namespace)
        except NotFound:
            # Remembered too (a refused plan reads it once); a source that exists after all
            # does not match an absence, so it is read again at once.
            read = _Read(at=self._monotonic(), object=None, digest=None)
            self._note_deleted(self._uids.get(key))
        else:
            read = _Read(at=self._monotonic(), object=live, digest=source_digest(live))
            uid = (live.get("metadata") or {}).get("uid")
            if isinstance(uid, str):
                _keep_newest(self._uids, key, uid)
        self._read.pop(key, None)  # re-inserted last: the reads stay in the order of `at`
        self._read[key] = read
        self._forget_expired(now=read.at)
        return read

    @property
    def remembered_objects(self) -> int:
        """How many reads are held (those of the last ``ttl_seconds``, until the next read)."""
        return len(self._read)

    def _forget_expired(self, *, now: float) -> None:
        while self._read:
            key, oldest = next(iter(self._read.items()))
            if now - oldest.at < self._ttl and len(self._read) <= KNOWN_OBJECTS:
                return
            del self._read[key]

    def _note_deleted(self, uid: str | None) -> None:
        if uid:
            _keep_newest(self._deleted, uid, None)

    async def _preemption_target(self, ref: ObjectRef) -> PreemptionTarget:
        resource = known_type(ref.api_version, ref.kind)
        if resource is None or not ref.namespace:
            return PreemptionTarget(workload=None, namespace=None)
        return PreemptionTarget(
            workload=await self._live(resource, ref.name, namespace=ref.namespace),
            namespace=await self._live(resources.NAMESPACE, ref.namespace),
        )

    async def _live(
        self, resource: resources.ResourceType, name: str, *, namespace: str | None = None
    ) -> Mapping[str, Any] | None:
        """The object as the API server holds it now, never remembered."""
        try:
            return await self._kube.get(resource, name, namespace=namespace)
        except NotFound:
            return None

    async def _gpu_taint_key(self) -> str:
        try:
            config = await self._kube.get(resources.KAIWO_CONFIG, "kaiwo")
        except NotFound:
            return DEFAULT_GPU_TAINT_KEY
        nodes = (config.get("spec") or {}).get("nodes") or {}
        return str(nodes.get("defaultGpuTaintKey") or DEFAULT_GPU_TAINT_KEY)


def _keep_newest(kept: OrderedDict[str, _V], key: str, value: _V) -> None:
    """``kept[key] = value`` as the newest entry, the oldest dropped past KNOWN_OBJECTS."""
    kept[key] = value
    kept.move_to_end(key)
    while len(kept) > KNOWN_OBJECTS:
        kept.popitem(last=False)


def _key(ref: ObjectRef) -> str:
    """Objects are remembered by kind, namespace and name (not uid: a source with a wrong
    uid is compared with the object that holds the name)."""
    return f"{ref.api_version}/{ref.kind}/{ref.namespace or ''}/{ref.name}"


def _created_at(obj: Mapping[str, Any] | None) -> datetime | None:
    """``metadata.creationTimestamp`` (None: missing or unreadable). Never changes for a uid,
    so a remembered copy tells it as well as a fresh read."""
    created = ((obj or {}).get("metadata") or {}).get("creationTimestamp")
    if not isinstance(created, str):
        return None
    try:
        moment = datetime.fromisoformat(created)
    except ValueError:
        return None
    return moment if moment.utcoffset() is not None else None


def _version(obj: Mapping[str, Any] | None) -> str | None:
    if obj is None:
        return None
    version = (obj.get("metadata") or {}).get("resourceVersion")
    return version if isinstance(version, str) else "?"
