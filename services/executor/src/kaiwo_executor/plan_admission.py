"""Plan admission: read what the confinement rules need, and ask them.

:func:`kaiwo_contracts.confinement.refusals` decides; this reads its inputs from the API
server: the plan's owner as it is now (so a plan for an owner that does not exist, or exists
with another uid, is refused) and, for plans that touch Nodes, the GPU taint key the
KaiwoConfig ``kaiwo`` sets. An owner found recently is not read again for
``owner_ttl_seconds``: a deleted owner's children go with it anyway (garbage collection), and
the namespace, kinds and selectors are checked on every plan.

A plan that preempts a GPU workload no Kaiwo kind owns, or creates the GpuWorkload tracking
one, is judged on that workload and its Namespace as they are *now*: both are read for every
such plan, never remembered (an opt-in annotation removed a moment ago must count). Such plans
are rare: one per workload tracked, one per preemption.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kaiwo_contracts.confinement import (
    DEFAULT_GPU_TAINT_KEY,
    NODE,
    PreemptionTarget,
    preemption_target_ref,
    refusals,
)
from kaiwo_contracts.plans import ObjectRef, Plan
from kaiwo_kube import KubernetesPort, NotFound, resources
from kaiwo_kube.resources import known_type

KNOWN_OWNERS = 4096
"""Owners remembered as found; the oldest are forgotten first."""


@dataclass(frozen=True, slots=True)
class Admission:
    """Why a plan must not be carried out (nothing: it may), and whether its owner exists
    with the plan's uid (then people can be told on it)."""

    refusals: tuple[str, ...]
    owner_found: bool

    @property
    def admitted(self) -> bool:
        return not self.refusals


class PlanAdmission:
    """Admission of plans from the API server's view (see the module docstring)."""

    def __init__(
        self,
        kube: KubernetesPort,
        *,
        owner_ttl_seconds: float = 30.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._kube = kube
        self._ttl = owner_ttl_seconds
        self._monotonic = monotonic
        self._found: OrderedDict[str, tuple[float, Mapping[str, Any]]] = OrderedDict()

    async def check(self, plan: Plan) -> Admission:
        owner = None if plan.create_only else await self._owner(plan.owner)
        taint_key = DEFAULT_GPU_TAINT_KEY
        if any((m.get("apiVersion"), m.get("kind")) == NODE for m in plan.desired):
            taint_key = await self._gpu_taint_key()
        wanted = preemption_target_ref(plan)
        target = await self._preemption_target(wanted) if wanted is not None else None
        uid = (owner or {}).get("metadata", {}).get("uid")
        return Admission(
            refusals=refusals(plan, owner=owner, gpu_taint_key=taint_key, target=target),
            owner_found=bool(uid) and uid == plan.owner.uid,
        )

    async def _owner(self, ref: ObjectRef) -> Mapping[str, Any] | None:
        key = f"{ref.api_version}/{ref.kind}/{ref.namespace or ''}/{ref.name}/{ref.uid}"
        found = self._found.get(key)
        now = self._monotonic()
        if found is not None and now - found[0] < self._ttl:
            return found[1]
        resource = known_type(ref.api_version, ref.kind)
        if resource is None:
            return None  # not a kind the executor knows: the confinement refuses it
        try:
            owner = await self._kube.get(resource, ref.name, namespace=ref.namespace)
        except NotFound:
            self._found.pop(key, None)
            return None
        self._found[key] = (now, owner)
        self._found.move_to_end(key)
        while len(self._found) > KNOWN_OWNERS:
            self._found.popitem(last=False)
        return owner

    async def _preemption_target(self, ref: ObjectRef) -> PreemptionTarget:
        resource = known_type(ref.api_version, ref.kind)
        if resource is None or not ref.namespace:
            return PreemptionTarget(workload=None, namespace=None)
        return PreemptionTarget(
            workload=await self._read(resource, ref.name, namespace=ref.namespace),
            namespace=await self._read(resources.NAMESPACE, ref.namespace),
        )

    async def _read(
        self, resource: resources.ResourceType, name: str, *, namespace: str | None = None
    ) -> Mapping[str, Any] | None:
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
