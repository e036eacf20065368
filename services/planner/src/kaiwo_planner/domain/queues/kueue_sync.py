"""Are the Kueue objects as the KaiwoQueueConfig describes them, and what to do when the API
server will not change one in place (decision 0048). Pure.

For each Kueue object the queue plan wants, the observed one (the watcher sees every object
the operator labels) is judged:

* **missing**, or **not yet as desired** (an apply on its way, one the API server refused, or
  a hand edit the next apply undoes: an atomic field such as a ClusterQueue's
  ``resourceGroups`` or ``namespaceSelector`` not exactly as asked, decision 0226): pending.
  The KaiwoQueueConfig is READY only when none is. (Its status does not name these: each one
  coming back would change it; the executor names a refused one.)
* **an immutable change**: the wanted spec changes a field Kueue's CRDs guard with a CEL
  transition rule (:func:`immutable_changes`). The API server refuses such an update, so the
  object is *replaced*: the plan deletes the observed object (by uid) and the executor creates
  the wanted one once it is gone, as upstream Kaiwo does. Unless admitted workloads still use
  it (:func:`users_of`): then it is *held*, kept as it is (the wanted manifest takes the
  guarded fields from the observed object, so the rest still applies) and the status says
  why; it is replaced once they are gone.
* **being deleted** (a ``deletionTimestamp``: replaced by an earlier plan, or deleted by
  hand, and a finalizer keeps it): pending until it is gone, then created again.

A replaced or deleted object that carries Kueue's ``resource-in-use`` finalizer has it
released by the plan when no admitted workload uses it (Kueue keeps a ResourceFlavor while
any ClusterQueue names it, which ours always does).

An object the spec no longer describes is pruned; Kueue's ``resource-in-use`` finalizer keeps
a ClusterQueue (a ResourceFlavor, a Topology) while admitted workloads use it, which can be
for as long as a job runs. Such an object is *leaving* (:func:`leaving_objects`): the status
names it and its users until it is gone, never READY meanwhile (decision 0126). So is an
object being deleted that the spec wants again (``deleting``).

An object another owner holds is pending too; the executor never adopts it and says so
(``NameConflict``).

Even when every object is as desired, Kueue may refuse to admit anything to a ClusterQueue:
its ``Active`` condition is False when, for instance, a flavor names a Topology that does not
exist or the queue names an AdmissionCheck that does not (:func:`inactive_queues`, decision
0121). Then the KaiwoQueueConfig is not ready either.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from kaiwo_contracts.confinement import KUEUE_RESOURCE_IN_USE_FINALIZER
from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwoqueueconfig import KaiwoQueueConfigSpec
from kaiwo_contracts.plans import ObjectRef

from kaiwo_planner.domain.scheduling.quota_scope import cluster_queue_cohort
from kaiwo_planner.domain.state.cluster import ClusterState, api_group_of
from kaiwo_planner.domain.state.first_few import first_few
from kaiwo_planner.domain.state.manifest_comparison import carries, contains
from kaiwo_planner.domain.status.kueue_admission import assigned_flavors

KUEUE_GROUP: Final = "kueue.x-k8s.io"
SYNCED_KINDS: Final = frozenset(
    {"Topology", "ResourceFlavor", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass"}
)

RESOURCE_FLAVOR_GUARDED: Final = (
    ("topologyName", "topologyName is immutable when topologyName is set"),
    ("nodeLabels", "nodeLabels are immutable when topologyName is set"),
    ("tolerations", "tolerations are immutable when topologyName is set"),
)
"""The fields of a ResourceFlavor's spec Kueue's CRD guards once ``topologyName`` is set
(its ``x-kubernetes-validations`` on ``spec``, with their messages)."""
IMMUTABLE_FIELD: Final = "field is immutable"
"""The message of the ``self == oldSelf`` rules (a Topology's levels, a LocalQueue's queue)."""
MAX_USERS_NAMED: Final = 3

State = Literal["ok", "missing", "updating", "foreign", "replaced", "deleting", "held", "leaving"]
"""What a wanted Kueue object needs (see the module docstring)."""


@dataclass(frozen=True, slots=True)
class ImmutableChange:
    """A field the wanted manifest changes that the API server will not change in place."""

    path: str
    """Where, e.g. ``spec.topologyName``."""
    rule: str
    """Why: the message of Kueue's validation rule."""

    def describe(self) -> str:
        return f"{self.path} cannot change in place ({self.rule})"


@dataclass(frozen=True, slots=True)
class ObjectVerdict:
    """What one wanted Kueue object needs, and the manifest the plan carries for it."""

    manifest: dict[str, Any]
    """The manifest to put in the plan (a held object's keeps its guarded fields)."""
    state: State
    changes: tuple[ImmutableChange, ...] = ()
    users: tuple[str, ...] = ()
    delete: ObjectRef | None = None
    """The observed object to delete first (replaced, deleting)."""
    release: tuple[str, ...] = ()
    """Kueue's finalizers to take off the deleted object (no admitted workload uses it)."""

    @property
    def display(self) -> str:
        meta = self.manifest.get("metadata") or {}
        namespace = meta.get("namespace")
        name = f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))
        return f"{self.manifest.get('kind')} {name}"

    def describe(self) -> str:
        """What is not yet as desired, for the status (empty for ``ok``)."""
        changes = "; ".join(change.describe() for change in self.changes)
        what = {
            "ok": "",
            "missing": "is not created yet",
            "updating": "is being updated",
            "foreign": "exists and is not this KaiwoQueueConfig's",
            "replaced": f"is deleted to be created again: {changes}",
            "deleting": (
                f"is being deleted; {self._kept_by_kueue()}it is created again once it is gone"
            ),
            "held": (
                f"{changes}; it is not deleted to be created again while admitted workloads "
                f"use it ({'; '.join(self.users)})"
            ),
            "leaving": (
                "is no longer in the KaiwoQueueConfig and is being deleted; "
                f"{self._kept_by_kueue()}it is gone once they finish"
            ),
        }[self.state]
        separator = ": " if self.state == "held" else " "
        return f"{self.display}{separator}{what}" if what else ""

    def _kept_by_kueue(self) -> str:
        if not self.users:
            return ""
        return f"Kueue keeps it while admitted workloads use it ({'; '.join(self.users)}); "


ACTIVE_CONDITION: Final = "Active"
"""Kueue's condition on a ClusterQueue: False while it admits no new workloads."""
STOPPED_REASON: Final = "Stopped"
"""Kueue's reason for a queue its ``stopPolicy`` holds: what the user asked, not a fault."""


@dataclass(frozen=True, slots=True)
class InactiveQueue:
    """A ClusterQueue Kueue says admits no new workloads (its ``Active`` condition False)."""

    name: str
    reason: str
    """Kueue's reason, e.g. ``TopologyNotFound`` or ``AdmissionCheckNotFound``."""
    message: str
    """Kueue's message, which names the missing object."""
    settling: bool
    """Kueue has not caught up: the condition predates the queue's spec, or the flavors and
    Topologies it says are missing are all observed (created with the queue, a moment ago)."""

    def describe(self) -> str:
        return (
            f"Kueue admits no workloads to ClusterQueue {self.name} ({self.reason}): {self.message}"
        )


def inactive_queues(
    spec: KaiwoQueueConfigSpec, *, cluster: ClusterState
) -> tuple[InactiveQueue, ...]:
    """The ClusterQueues of ``spec`` whose observed ``Active`` condition is False, in the
    spec's order; one held by its ``stopPolicy`` (``Stopped``) is as the user asked."""
    topology_of = {f.name: f.topology_name for f in spec.resource_flavors or ()}
    found = []
    for queue in spec.cluster_queues or ():
        live = cluster.find_object(group=KUEUE_GROUP, kind="ClusterQueue", name=queue.name)
        active = _condition(live, ACTIVE_CONDITION) if live is not None else None
        if active is None or active.get("status") != "False":
            continue
        reason = str(active.get("reason") or "")
        if reason == STOPPED_REASON:
            continue
        flavors = {f.name for g in queue.spec.resource_groups or () for f in g.flavors}
        topologies = {t for f in flavors if (t := topology_of.get(f))}
        generation = ((live or {}).get("metadata") or {}).get("generation")
        observed = active.get("observedGeneration")
        stale = isinstance(generation, int) and isinstance(observed, int) and observed < generation
        # Kueue names what it misses; when the cluster holds all of it, Kueue is catching up.
        catching_up = {
            "FlavorNotFound": _all_observed(cluster, "ResourceFlavor", flavors),
            "TopologyNotFound": _all_observed(cluster, "Topology", topologies),
        }.get(reason, False)
        settling = stale or catching_up
        found.append(
            InactiveQueue(
                queue.name, reason or "Unknown", str(active.get("message") or ""), settling
            )
        )
    return tuple(found)


def _all_observed(cluster: ClusterState, kind: str, names: Iterable[str]) -> bool:
    return all(cluster.find_object(group=KUEUE_GROUP, kind=kind, name=name) for name in names)


def _condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    return next(
        (
            c
            for c in (obj.get("status") or {}).get("conditions") or ()
            if isinstance(c, Mapping) and c.get("type") == kind
        ),
        None,
    )


def judge_kueue_objects(
    desired: Sequence[dict[str, Any]], *, cluster: ClusterState, owner_uid: str | None
) -> tuple[ObjectVerdict, ...]:
    """One verdict per Kueue object of ``desired`` (other manifests are left out)."""
    owned = cluster.children_of(owner_uid) if owner_uid else ()
    verdicts = []
    for manifest in desired:
        if api_group_of(str(manifest.get("apiVersion", ""))) != KUEUE_GROUP:
            continue
        if manifest.get("kind") not in SYNCED_KINDS:
            continue
        verdicts.append(_judge(manifest, cluster=cluster, owner_uid=owner_uid, owned=owned))
    return tuple(verdicts)


def cohorts_set_elsewhere(
    judged: Sequence[ObjectVerdict], *, cluster: ClusterState
) -> tuple[str, ...]:
    """Each ClusterQueue as desired whose observed cohort (:func:`~kaiwo_planner.domain.
    scheduling.quota_scope.cluster_queue_cohort`) the spec leaves unset: set by hand or by
    another controller, and left, since the operator's apply cannot remove another manager's
    field (decision 0226). Kueue lends the queue's unused quota to that cohort and lets it
    borrow there, and idle preemption follows Kueue (decision 0272), so the KaiwoQueueConfig
    says so (decision 0274)."""
    found = []
    for verdict in judged:
        manifest = verdict.manifest
        if verdict.state != "ok" or manifest.get("kind") != "ClusterQueue":
            continue
        if (manifest.get("spec") or {}).get("cohort"):
            continue
        name = str((manifest.get("metadata") or {}).get("name"))
        live = cluster.find_object(group=KUEUE_GROUP, kind="ClusterQueue", name=name)
        if cohort := cluster_queue_cohort((live or {}).get("spec") or {}):
            found.append(f"ClusterQueue {name} is in cohort {cohort}")
    return tuple(found)


def leaving_objects(
    desired: Sequence[Mapping[str, Any]], *, cluster: ClusterState, owner_uid: str | None
) -> tuple[ObjectVerdict, ...]:
    """The KaiwoQueueConfig's Kueue objects being deleted that ``desired`` no longer holds and
    admitted workloads still use (Kueue's finalizer keeps them until those finish), sorted by
    kind and name. Being deleted, they admit nothing new; the plan does nothing more to them
    (deleting again changes nothing, and Kueue's finalizer is Kueue's to release here)."""
    if not owner_uid:
        return ()
    wanted = {
        (
            m.get("kind"),
            (m.get("metadata") or {}).get("name"),
            (m.get("metadata") or {}).get("namespace"),
        )
        for m in desired
    }
    owned = cluster.children_of(owner_uid)
    found = []
    for live in owned:
        kind = str(live.get("kind"))
        meta = live.get("metadata") or {}
        if kind not in SYNCED_KINDS or api_group_of(str(live.get("apiVersion", ""))) != KUEUE_GROUP:
            continue
        if not meta.get("deletionTimestamp") or not _controlled_by(meta, owner_uid):
            continue
        if (kind, meta.get("name"), meta.get("namespace")) in wanted:
            continue
        users = users_of(kind, live, cluster=cluster, owned=owned)
        if users:
            identity = {"apiVersion": live.get("apiVersion"), "kind": kind, "metadata": dict(meta)}
            found.append(ObjectVerdict(identity, "leaving", users=users))
    return tuple(sorted(found, key=lambda v: (str(v.manifest["kind"]), v.display)))


def _judge(
    manifest: dict[str, Any],
    *,
    cluster: ClusterState,
    owner_uid: str | None,
    owned: Sequence[Mapping[str, Any]],
) -> ObjectVerdict:
    kind = str(manifest.get("kind"))
    meta = manifest.get("metadata") or {}
    live = cluster.find_object(
        group=KUEUE_GROUP, kind=kind, name=str(meta.get("name")), namespace=meta.get("namespace")
    )
    if live is None:
        return ObjectVerdict(manifest, "missing")
    live_meta = live.get("metadata") or {}
    if owner_uid and not _controlled_by(live_meta, owner_uid):
        return ObjectVerdict(manifest, "foreign")
    if live_meta.get("deletionTimestamp"):
        users = users_of(kind, live, cluster=cluster, owned=owned)
        release = () if users else _kueue_finalizers(live_meta)
        return ObjectVerdict(
            manifest, "deleting", users=users, delete=_ref(manifest, live_meta), release=release
        )
    changes = immutable_changes(kind, live=live, wanted=manifest)
    if changes:
        return _replace_or_hold(manifest, live, changes, cluster=cluster, owned=owned)
    if not carries(live, manifest):
        return ObjectVerdict(manifest, "updating")
    return ObjectVerdict(manifest, "ok")


def _replace_or_hold(
    manifest: dict[str, Any],
    live: Mapping[str, Any],
    changes: tuple[ImmutableChange, ...],
    *,
    cluster: ClusterState,
    owned: Sequence[Mapping[str, Any]],
) -> ObjectVerdict:
    users = users_of(str(manifest.get("kind")), live, cluster=cluster, owned=owned)
    if users:
        kept = keep_guarded_fields(manifest, live=live, changes=changes)
        return ObjectVerdict(kept, "held", changes=changes, users=users)
    live_meta = live.get("metadata") or {}
    return ObjectVerdict(
        manifest,
        "replaced",
        changes=changes,
        delete=_ref(manifest, live_meta),
        release=_kueue_finalizers(live_meta),
    )


def _kueue_finalizers(meta: Mapping[str, Any]) -> tuple[str, ...]:
    """Kueue's ``resource-in-use`` finalizer, when the object carries it. Kueue keeps a
    ResourceFlavor while any ClusterQueue names it (ours always does, by the same name), so a
    replacement would wait forever; upstream Kaiwo takes it off too. Only ever asked for once
    no admitted workload uses the object."""
    finalizers = meta.get("finalizers") or ()
    return (
        (KUEUE_RESOURCE_IN_USE_FINALIZER,) if KUEUE_RESOURCE_IN_USE_FINALIZER in finalizers else ()
    )


def immutable_changes(
    kind: str, *, live: Mapping[str, Any], wanted: Mapping[str, Any]
) -> tuple[ImmutableChange, ...]:
    """The fields ``wanted`` changes that Kueue's CRDs (v1beta1) refuse to change in place.

    * ResourceFlavor, once ``spec.topologyName`` is set: ``topologyName``, ``nodeLabels`` and
      ``tolerations`` (``nodeTaints`` stay mutable);
    * Topology: ``spec.levels``;
    * LocalQueue: ``spec.clusterQueue``.

    A ClusterQueue and a WorkloadPriorityClass have no such field.
    """
    live_spec = live.get("spec") or {}
    wanted_spec = wanted.get("spec") or {}
    if kind == "ResourceFlavor":
        if "topologyName" not in live_spec:
            return ()
        return tuple(
            ImmutableChange(f"spec.{field}", rule)
            for field, rule in RESOURCE_FLAVOR_GUARDED
            if not _same(live_spec.get(field), wanted_spec.get(field))
        )
    guarded = {"Topology": "levels", "LocalQueue": "clusterQueue"}.get(kind)
    if guarded is None or _same(live_spec.get(guarded), wanted_spec.get(guarded)):
        return ()
    return (ImmutableChange(f"spec.{guarded}", IMMUTABLE_FIELD),)


def keep_guarded_fields(
    manifest: Mapping[str, Any], *, live: Mapping[str, Any], changes: Iterable[ImmutableChange]
) -> dict[str, Any]:
    """``manifest`` with the guarded fields as ``live`` holds them (absent where it has none)."""
    spec = dict(manifest.get("spec") or {})
    live_spec = live.get("spec") or {}
    for change in changes:
        field = change.path.removeprefix("spec.")
        if field in live_spec:
            spec[field] = live_spec[field]
        else:
            spec.pop(field, None)
    return {**manifest, "spec": spec}


def users_of(
    kind: str,
    live: Mapping[str, Any],
    *,
    cluster: ClusterState,
    owned: Sequence[Mapping[str, Any]],
) -> tuple[str, ...]:
    """Who keeps ``live`` from being deleted: admitted (or quota-reserving) workloads that use
    it, as the ClusterQueues' status counts them and as the observed Kueue Workloads say.
    ``owned``: the KaiwoQueueConfig's observed Kueue objects (its ClusterQueues and flavors).

    * a ClusterQueue: its ``admittedWorkloads`` / ``reservingWorkloads``, and Workloads
      admitted to it;
    * a ResourceFlavor: ClusterQueues holding quota of it (``flavorsReservation`` or
      ``flavorsUsage``), and Workloads assigned to it;
    * a Topology: the ResourceFlavors naming it that are in use;
    * a LocalQueue: Workloads admitted from it.
    """
    meta = live.get("metadata") or {}
    name = str(meta.get("name", ""))
    if kind == "ClusterQueue":
        return _queue_users(live) + _workloads(
            cluster, lambda w: _admission(w).get("clusterQueue") == name
        )
    if kind == "ResourceFlavor":
        return _flavor_users(name, cluster, owned)
    if kind == "Topology":
        users: list[str] = []
        for flavor in _of_kind(owned, "ResourceFlavor"):
            if (flavor.get("spec") or {}).get("topologyName") == name:
                users.extend(users_of("ResourceFlavor", flavor, cluster=cluster, owned=owned))
        return tuple(users)
    if kind == "LocalQueue":
        namespace = meta.get("namespace")
        return _workloads(
            cluster,
            lambda w: (
                (w.get("metadata") or {}).get("namespace") == namespace
                and (w.get("spec") or {}).get("queueName") == name
            ),
        )
    return ()


def _queue_users(queue: Mapping[str, Any]) -> tuple[str, ...]:
    status = queue.get("status") or {}
    admitted = _count(status.get("admittedWorkloads"))
    reserving = _count(status.get("reservingWorkloads"))
    if not admitted and not reserving:
        return ()
    name = (queue.get("metadata") or {}).get("name")
    return (f"ClusterQueue {name}: {admitted} admitted, {reserving} reserving quota",)


def _flavor_users(
    flavor: str, cluster: ClusterState, owned: Sequence[Mapping[str, Any]]
) -> tuple[str, ...]:
    users = []
    for queue in _of_kind(owned, "ClusterQueue"):
        status = queue.get("status") or {}
        usage = [*(status.get("flavorsReservation") or ()), *(status.get("flavorsUsage") or ())]
        if any(_holds_quota(entry, flavor) for entry in usage):
            name = (queue.get("metadata") or {}).get("name")
            users.append(f"ClusterQueue {name} holds quota of it")
    assigned = _workloads(cluster, lambda w: flavor in assigned_flavors(w))
    return tuple(users) + assigned


def _holds_quota(entry: Any, flavor: str) -> bool:
    if not isinstance(entry, Mapping) or entry.get("name") != flavor:
        return False
    return any(
        str(resource.get("total", "0")) not in ("0", "")
        for resource in entry.get("resources") or ()
        if isinstance(resource, Mapping)
    )


def _workloads(cluster: ClusterState, uses: Any) -> tuple[str, ...]:
    """The admitted, unfinished Kueue Workloads for which ``uses`` holds, named (a few)."""
    found = sorted(
        f"{(w.get('metadata') or {}).get('namespace')}/{(w.get('metadata') or {}).get('name')}"
        for w in cluster.all_kueue_workloads()
        if _admission(w) and not _finished(w) and uses(w)
    )
    if not found:
        return ()
    return ("Workloads " + first_few(found, shown=MAX_USERS_NAMED),)


def _admission(workload: Mapping[str, Any]) -> Mapping[str, Any]:
    admission = (workload.get("status") or {}).get("admission")
    return admission if isinstance(admission, Mapping) else {}


def _finished(workload: Mapping[str, Any]) -> bool:
    return any(
        isinstance(c, Mapping) and c.get("type") == "Finished" and c.get("status") == "True"
        for c in (workload.get("status") or {}).get("conditions") or ()
    )


def _of_kind(objects: Sequence[Mapping[str, Any]], kind: str) -> list[Mapping[str, Any]]:
    return [
        obj
        for obj in objects
        if obj.get("kind") == kind and api_group_of(str(obj.get("apiVersion", ""))) == KUEUE_GROUP
    ]


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _same(live: Any, wanted: Any) -> bool:
    """Equal as the API server compares them, a missing value being an empty one."""
    live_value = live if live not in (None, "") else None
    wanted_value = wanted if wanted not in (None, "") else None
    if isinstance(live_value, Mapping | list) and not live_value:
        live_value = None
    if isinstance(wanted_value, Mapping | list) and not wanted_value:
        wanted_value = None
    if live_value is None or wanted_value is None:
        return live_value is None and wanted_value is None
    return contains(live_value, wanted_value) and contains(wanted_value, live_value)


def _controlled_by(meta: Mapping[str, Any], owner_uid: str) -> bool:
    return any(
        isinstance(ref, Mapping) and ref.get("controller") and ref.get("uid") == owner_uid
        for ref in meta.get("ownerReferences") or ()
    )


def _ref(manifest: Mapping[str, Any], live_meta: Mapping[str, Any]) -> ObjectRef:
    return ObjectRef(
        api_version=str(manifest.get("apiVersion")),
        kind=str(manifest.get("kind")),
        name=str(live_meta.get("name")),
        namespace=live_meta.get("namespace") or None,
        uid=live_meta.get("uid") or None,
    )
