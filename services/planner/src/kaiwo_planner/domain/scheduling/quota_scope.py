"""Where Kueue counts a GPU workload's quota (:class:`~kaiwo_planner.domain.scheduling.
idle_preemption.QuotaScope`), read from the cluster state, pure (decisions 0236, 0260,
0272).

Quota a workload frees goes back to its own ClusterQueue and is lent only up its cohort tree,
as far as lending limits let it, to queues whose borrowing limits let them take it, flavor by
flavor (decision 0279), and not to a queue whose borrowing limit leaves too little room for
the waiting workload (decision 0281); and what a queue frees within the quota its lending
limit keeps for itself goes to nobody else (decision 0282), so it lends no more than it uses
beyond that quota (decision 0284). So GPU idle preemption asks where both the victim and the
waiting workload are counted (:class:`QuotaTrees`).

* **A KaiwoJob or KaiwoService**: its queue (``spec.clusterQueue`` or the KaiwoConfig's
  default; the operator's LocalQueue carries that name), the observed ClusterQueue of that
  name. A Deployment-based KaiwoService none of whose pods Kueue made a Workload for (a
  namespace Kueue does not manage) holds no quota: unknown.
* **A GPU workload no Kaiwo kind owns** (decision 0047): Kueue queues it by its
  ``kueue.x-k8s.io/queue-name`` label (on the object, or on a Deployment's or StatefulSet's
  pod template, which Kueue's pod integration reads), naming a LocalQueue of its namespace;
  that LocalQueue's ``spec.clusterQueue`` is its ClusterQueue. The watcher sees every
  LocalQueue and ClusterQueue, anyone's (decision 0270); while a LocalQueue is not observed
  yet, the ClusterQueue an admitted Kueue Workload of the root names
  (``status.admission.clusterQueue``) serves.
  Without the label Kueue does not queue it: unknown, matched with anyone by vendor, as
  upstream matches every GpuWorkload (§11.4), and its GPUs are the scheduler's to give.

A ClusterQueue the planner does not observe (not made yet, or gone) has a cohort it cannot
read: a workload no Kaiwo kind owns counted there is unknown too, rather than held to a cohort
of its own that may not be so.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Final

from kaiwo_contracts.crds.config_v1alpha1.kaiwoconfig import KaiwoConfig
from kaiwo_contracts.crds.quantity import quantity_value
from kaiwo_contracts.gpu_workloads import DEPLOYMENT, STATEFUL_SET, gpu_vendor, kind_of

from kaiwo_planner.domain.scheduling.gpu_allocation import running_child_of, wire_workload_shape
from kaiwo_planner.domain.scheduling.gpu_model_flavors import flavors_covering
from kaiwo_planner.domain.scheduling.idle_preemption import FlavorReach, QuotaScope
from kaiwo_planner.domain.settings.cluster_settings import workload_queue
from kaiwo_planner.domain.state.cluster import ClusterState, object_uid
from kaiwo_planner.domain.state.index_entry import KUEUE_GROUP, RUN_ID_LABEL
from kaiwo_planner.domain.state.nodes import GPU_RESOURCE_BY_VENDOR
from kaiwo_planner.domain.status.kueue_admission import assigned_flavors

QUEUE_NAME_LABEL: Final = "kueue.x-k8s.io/queue-name"


@dataclass(frozen=True, slots=True)
class QuotaTrees:
    """The observed ClusterQueues' and Cohorts' specs by name: where quota a queue frees
    goes, and where a queue may borrow from (:meth:`scope`); and the quota each ClusterQueue
    holds now, as its status says."""

    cluster_queues: Mapping[str, Mapping[str, Any]]
    cohorts: Mapping[str, Mapping[str, Any]]
    in_use: Mapping[str, Mapping[tuple[str, str], QuotaInUse]] = field(default_factory=dict)
    """By ClusterQueue name, by (flavor, resource)."""

    @classmethod
    def of(cls, cluster: ClusterState) -> QuotaTrees:
        return cls(
            cluster_queues=_specs_by_name(cluster, "ClusterQueue"),
            cohorts=_specs_by_name(cluster, "Cohort"),
            in_use=_in_use_by_queue(cluster),
        )

    def knows(self, cluster_queue: str) -> bool:
        return cluster_queue in self.cluster_queues

    def scope(
        self,
        cluster_queue: str,
        vendor: str,
        *,
        held_in: Collection[str] = (),
        held_now: bool = False,
        wanting: int = 0,
    ) -> QuotaScope:
        """Where the GPUs of ``vendor`` that a workload of ``cluster_queue`` frees can go,
        and where that queue may borrow them from (decision 0272), flavor by flavor
        (decision 0279): ``held_in``, the flavors Kueue admitted the workload's GPUs into
        (none: not known), are the only ones it lends when freed; ``held_now``: its queue's
        status counts them (a running workload, not one already stopping), so a flavor lends
        no more than its queue uses beyond what its ``lendingLimit`` keeps for it, nothing
        when it uses no more (decisions 0282, 0284).

        A ClusterQueue's cohort is :func:`cluster_queue_cohort`. Kueue lends a queue's unused
        quota of a flavor to its cohort, and a cohort's on to its parent (a Cohort's
        ``parentName``, decision 0271), unless the lender's ``lendingLimit`` for that flavor
        of the resource is 0; a queue or cohort whose ``borrowingLimit`` for it is 0 borrows
        nothing of it from above, nor does a queue whose limit leaves too little room for the
        ``wanting`` GPUs of a waiting workload (decision 0281). A queue borrows only the
        flavors it lists."""
        resource = GPU_RESOURCE_BY_VENDOR.get(vendor.lower(), "")
        spec = self.cluster_queues.get(cluster_queue, {})
        cohort = cluster_queue_cohort(spec)
        flavors = tuple(
            self._flavor_reach(
                cluster_queue,
                spec,
                (flavor, resource),
                lends=not held_in or flavor in held_in,
                held_now=held_now,
                wanting=wanting,
            )
            for flavor in flavors_covering(spec, resource)
        )
        if not flavors:
            return QuotaScope(
                cluster_queue=cluster_queue,
                lends_to=self._reach(cohort, spec, resource, "lendingLimit"),
                borrows_from=self._reach(cohort, spec, resource, "borrowingLimit"),
                held_in=frozenset(held_in),
            )
        return QuotaScope(
            cluster_queue=cluster_queue,
            lends_to=_longest(reach.lends_to for reach in flavors),
            borrows_from=_longest(reach.borrows_from for reach in flavors),
            flavors=flavors,
            held_in=frozenset(held_in),
        )

    def _flavor_reach(
        self,
        cluster_queue: str,
        spec: Mapping[str, Any],
        flavor_resource: tuple[str, str],
        *,
        lends: bool,
        held_now: bool,
        wanting: int,
    ) -> FlavorReach:
        """:meth:`scope` for one flavor's resource of the queue (of ``spec``)."""
        cohort = cluster_queue_cohort(spec)
        flavor, resource = flavor_resource
        beyond = self._beyond_kept(cluster_queue, spec, flavor_resource) if held_now else None
        return FlavorReach(
            flavor,
            lends_to=(
                self._reach(cohort, spec, resource, "lendingLimit", flavor)
                if lends and beyond != 0
                else ()
            ),
            borrows_from=(
                ()
                if self._no_room_to_borrow(cluster_queue, spec, flavor_resource, wanting)
                else self._reach(cohort, spec, resource, "borrowingLimit", flavor)
            ),
            lends_at_most=beyond,
        )

    def _reach(
        self,
        cohort: str,
        spec: Mapping[str, Any],
        resource: str,
        limit: str,
        flavor: str | None = None,
    ) -> tuple[str, ...]:
        """The cohorts up from a queue (of ``spec``) whose edges ``limit`` leaves open, for
        ``flavor`` (any flavor: None). A cycle of parents (Kueue deactivates its queues)
        ends the walk where it repeats."""
        reached: list[str] = []
        while cohort and cohort not in reached and _limit_open(spec, resource, limit, flavor):
            reached.append(cohort)
            spec = self.cohorts.get(cohort, {})
            cohort = _text(spec.get("parentName"))
        return tuple(reached)

    def _beyond_kept(
        self, cluster_queue: str, spec: Mapping[str, Any], flavor_resource: tuple[str, str]
    ) -> int | None:
        """How much of a flavor's resource the queue (of ``spec``) has in use beyond its
        guaranteed quota, the part of its nominal quota its ``lendingLimit`` keeps from its
        cohort. Kueue counts in the cohort only that much of a queue's use, so stopping its
        workloads gives the cohort no more (decisions 0282, 0284): nothing when all it uses
        is within that part. None when not known (no lending limit, no status read, or
        nothing in use while a workload is counted there)."""
        held = self.in_use.get(cluster_queue, {}).get(flavor_resource)
        quota = _quota_of(spec, flavor_resource)
        lending = _quantity(quota.get("lendingLimit"))
        if held is None or held.total <= 0 or lending is None:
            return None
        guaranteed = _amount(quota, "nominalQuota") - lending
        return max(int(held.total - guaranteed), 0)

    def _no_room_to_borrow(
        self,
        cluster_queue: str,
        spec: Mapping[str, Any],
        flavor_resource: tuple[str, str],
        wanting: int,
    ) -> bool:
        """Whether the queue (of ``spec``) can borrow no more of a flavor's resource for a
        workload ``wanting`` that much of it: it borrows as much as its ``borrowingLimit``
        lets it already, or what it holds and the workload's together pass its nominal quota
        and that limit. Kueue admits no workload of it on more borrowed quota, whatever other
        queues of its cohort free (decision 0281)."""
        held = self.in_use.get(cluster_queue, {}).get(flavor_resource, QuotaInUse())
        quota = _quota_of(spec, flavor_resource)
        limit = _quantity(quota.get("borrowingLimit"))
        if limit is None:
            return False
        ceiling = _amount(quota, "nominalQuota") + limit
        return held.borrowed >= limit or (wanting > 0 and held.total + wanting > ceiling)


@dataclass(frozen=True, slots=True)
class QuotaInUse:
    """A ClusterQueue's quota of one flavor's resource in use (``total``), and how much of
    that it borrows from its cohort, as its status says."""

    total: Decimal = Decimal(0)
    borrowed: Decimal = Decimal(0)


def cluster_queue_cohort(spec: Mapping[str, Any]) -> str:
    """A ClusterQueue's cohort ("" for none): ``spec.cohort`` as the watcher reads
    ClusterQueues (v1beta1), ``spec.cohortName`` as v1beta2 calls it."""
    return _text(spec.get("cohort") or spec.get("cohortName"))


def _specs_by_name(cluster: ClusterState, kind: str) -> dict[str, Mapping[str, Any]]:
    found: dict[str, Mapping[str, Any]] = {}
    for obj in cluster.objects_of_kind(group=KUEUE_GROUP, kind=kind):
        name, spec = _mapping(obj.get("metadata")).get("name"), obj.get("spec")
        if isinstance(name, str):
            found[name] = spec if isinstance(spec, Mapping) else {}
    return found


def _in_use_by_queue(cluster: ClusterState) -> dict[str, dict[tuple[str, str], QuotaInUse]]:
    """The quota each observed ClusterQueue holds, by flavor and resource: the larger of its
    status's ``flavorsReservation`` (quota reserved, which Kueue admits by) and
    ``flavorsUsage`` (quota of admitted workloads), for the total and the borrowed each."""
    found: dict[str, dict[tuple[str, str], QuotaInUse]] = {}
    for obj in cluster.objects_of_kind(group=KUEUE_GROUP, kind="ClusterQueue"):
        name, status = _mapping(obj.get("metadata")).get("name"), _mapping(obj.get("status"))
        if not isinstance(name, str):
            continue
        in_use: dict[tuple[str, str], QuotaInUse] = {}
        for field_name in ("flavorsReservation", "flavorsUsage"):
            for flavor in _mappings(status.get(field_name)):
                for resource in _mappings(flavor.get("resources")):
                    key = (_text(flavor.get("name")), _text(resource.get("name")))
                    before = in_use.get(key, QuotaInUse())
                    in_use[key] = QuotaInUse(
                        total=max(before.total, _amount(resource, "total")),
                        borrowed=max(before.borrowed, _amount(resource, "borrowed")),
                    )
        if in_use:
            found[name] = in_use
    return found


def _amount(resource: Mapping[str, Any], key: str) -> Decimal:
    return _quantity(resource.get(key)) or Decimal(0)


def _quota_of(spec: Mapping[str, Any], flavor_resource: tuple[str, str]) -> Mapping[str, Any]:
    """The quota of one flavor's resource in ``spec``'s resource groups ({} for none)."""
    for name, quota in _quotas(spec):
        if (name, quota.get("name")) == flavor_resource:
            return quota
    return {}


def _limit_open(
    spec: Mapping[str, Any], resource: str, limit: str, flavor: str | None = None
) -> bool:
    """False when every flavor of ``resource`` in ``spec``'s resource groups (``flavor``
    alone, when given) sets ``limit`` to 0; a queue or cohort that sets no quota of it sets
    no limit either."""
    quotas = [
        quota
        for name, quota in _quotas(spec)
        if quota.get("name") == resource and flavor in (None, name)
    ]
    return not quotas or any(not _zero(quota.get(limit)) for quota in quotas)


def _quotas(spec: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """Each resource's quota in ``spec``'s resource groups, with its flavor's name."""
    return [
        (_text(flavor.get("name")), quota)
        for group in _mappings(spec.get("resourceGroups"))
        for flavor in _mappings(group.get("flavors"))
        for quota in _mappings(flavor.get("resources"))
    ]


def _longest(reaches: Iterable[tuple[str, ...]]) -> tuple[str, ...]:
    """What any of the walks up one tree reach: each is a prefix of the same chain."""
    return max(reaches, key=len, default=())


def _zero(value: object) -> bool:
    return _quantity(value) == 0


def _quantity(value: object) -> Decimal | None:
    """A quantity as Kueue's objects write it (``8``, ``"8"``, ``"500m"``); None for none."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        return None
    return quantity_value(str(value))


def kaiwo_quota_scope(
    obj: Mapping[str, Any],
    cluster: ClusterState,
    config: KaiwoConfig,
    trees: QuotaTrees,
    *,
    held_now: bool = False,
    wanting: int = 0,
) -> QuotaScope | None:
    """Where Kueue counts the Kaiwo workload's GPUs (module docstring), ``wanting`` that many
    more when it waits for them (``held_now``: see :meth:`QuotaTrees.scope`). Its Job, RayJob
    or AppWrapper carries the queue label, so Kueue queues it in any namespace; a
    Deployment's pods only where Kueue manages the namespace, seen by the Workloads Kueue
    made for them."""
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return None
    if wire_workload_shape(str(obj.get("kind") or ""), spec) == "deployment":
        pods = cluster.objects_labelled(RUN_ID_LABEL, object_uid(obj), kind="Pod")
        workloads = tuple(w for pod in pods for w in cluster.kueue_workloads_for(object_uid(pod)))
        if not workloads:
            return None
    else:
        child = running_child_of(cluster, obj)
        workloads = cluster.kueue_workloads_for(object_uid(child)) if child is not None else ()
    vendor = str(spec.get("gpuVendor") or "amd")
    held = _held_flavors(workloads, vendor)
    queue = workload_queue(spec, config)
    return trees.scope(queue, vendor, held_in=held, held_now=held_now, wanting=wanting)


def foreign_quota_scope(
    root: Mapping[str, Any],
    cluster: ClusterState,
    trees: QuotaTrees,
    *,
    held_now: bool = False,
    wanting: int = 0,
) -> QuotaScope | None:
    """Where Kueue counts the GPUs of a workload no Kaiwo kind owns, ``wanting`` that many
    more when it waits for them (``held_now``: see :meth:`QuotaTrees.scope`); None when Kueue
    does not queue it or the planner cannot tell (module docstring)."""
    local_queue = queue_name_of(root)
    if not local_queue:
        return None
    namespace = str((root.get("metadata") or {}).get("namespace") or "")
    found = cluster.find_object(
        group=KUEUE_GROUP, kind="LocalQueue", name=local_queue, namespace=namespace
    )
    cluster_queue = _text(_mapping(_mapping(found).get("spec")).get("clusterQueue"))
    if not cluster_queue:
        cluster_queue = _admitted_cluster_queue(root, cluster)
    if not cluster_queue or not trees.knows(cluster_queue):
        return None
    vendor = gpu_vendor(root)
    held = _held_flavors(cluster.kueue_workloads_for(object_uid(root)), vendor)
    return trees.scope(cluster_queue, vendor, held_in=held, held_now=held_now, wanting=wanting)


def _held_flavors(workloads: Iterable[Mapping[str, Any]], vendor: str) -> frozenset[str]:
    """The flavors Kueue admitted ``workloads`` into for the GPUs of ``vendor`` (none while
    none is admitted, or Kueue's Workloads are not observed: then every flavor of the queue
    may be what the workload frees)."""
    resource = GPU_RESOURCE_BY_VENDOR.get(vendor.lower(), "")
    return frozenset(name for w in workloads for name in assigned_flavors(w, resource=resource))


def queue_name_of(root: Mapping[str, Any]) -> str:
    """The LocalQueue Kueue queues ``root`` in: its ``kueue.x-k8s.io/queue-name`` label, or a
    Deployment's or StatefulSet's pod template's ("" for none)."""
    own = _text(_mapping(_mapping(root.get("metadata")).get("labels")).get(QUEUE_NAME_LABEL))
    if own or kind_of(root) not in (DEPLOYMENT, STATEFUL_SET):
        return own
    template = _mapping(_mapping(root.get("spec")).get("template"))
    return _text(_mapping(_mapping(template.get("metadata")).get("labels")).get(QUEUE_NAME_LABEL))


def _admitted_cluster_queue(root: Mapping[str, Any], cluster: ClusterState) -> str:
    for workload in cluster.kueue_workloads_for(object_uid(root)):
        admission = _mapping(_mapping(workload.get("status")).get("admission"))
        if found := _text(admission.get("clusterQueue")):
            return found
    return ""


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _mappings(value: object) -> list[Mapping[str, Any]]:
    return [item for item in value if isinstance(item, Mapping)] if isinstance(value, list) else []
