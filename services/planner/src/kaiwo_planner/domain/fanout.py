"""Which owners to plan again after one observed change.

Plans are made per *owner*: a KaiwoJob, a KaiwoService, or the ``kaiwo`` KaiwoQueueConfig
(and a Model, a GpuWorkload, a GPU workload's root; a KaiwoConfig and an AIMNamespaceConfig,
whose plans carry only a Warning Event when they are invalid). An observed change matters to:

* a KaiwoJob or KaiwoService: itself, and the KaiwoQueueConfig when the set of (queue,
  namespace) pairs in use changed with it (its LocalQueues follow that set);
* a child (a controller ownerReference, or the ``kaiwo.silogen.ai/owner-uid`` or
  ``kaiwo.silogen.ai/run-id`` label): its owner, following owner references upward through
  the projection (Pod -> Job -> KaiwoJob, Kueue Workload -> RayJob -> KaiwoJob, Pod ->
  ReplicaSet -> Deployment -> KaiwoService) until a Kaiwo workload or the KaiwoQueueConfig.
  A Kueue Workload also names its job by the ``kueue.x-k8s.io/job-uid`` label. Both the old
  and the new version count, so a child that changes owner is re-planned by both owners;
  a Kueue Workload removed after its job: the workloads whose main child has the job's name
  (they wait for it to go before they make the child again, decision 0139); a child of a
  deleted KaiwoJob or KaiwoService removed after it: the workload of that kind and name
  submitted again meanwhile, whose child of that name waited for it to go (decision 0165);
* a Node: the KaiwoQueueConfig (node pools, flavors), every workload (GPU statistics,
  schedulability) and every GpuWorkload (whether a node could hold its waiting pod, decision
  0266) — but only when something planning reads changed (labels, taints, schedulability,
  readiness, capacity): a heartbeat re-plans nothing;
* the KaiwoConfig ``kaiwo``: itself (its plan says when it is invalid, decision 0206), the
  KaiwoQueueConfig and every workload; a KaiwoConfig of another name: itself only (it is
  never read, so no other plan can change; its own says so, decision 0209);
* the KaiwoQueueConfig: itself and every workload (queue names, the Schedulable check);
* an AIMNamespaceConfig: itself (its plan says when it is invalid or gives names its
  children cannot use, decision 0206), the other AIMNamespaceConfigs of its namespace (one
  that sorts first, or the one in force deleted, fixed or broken, moves which one is in
  force, and their plans say when another is, decision 0209) and the workloads of its
  namespace;
* a Namespace that appears or disappears: the KaiwoQueueConfig (its LocalQueues);
* a PriorityClass or a Kueue WorkloadPriorityClass: every workload (a ``priorityClass`` may
  name it), and for a WorkloadPriorityClass the KaiwoQueueConfig managing it;
* a Kueue object the KaiwoQueueConfig manages (its label or owner reference): the
  KaiwoQueueConfig; a ClusterQueue or ResourceFlavor whose spec changed (or that appeared
  or went): also every workload, whose ``gpuModels`` flavors follow them (decision 0264);
* a Kueue LocalQueue named ``default`` that appears or goes: also the workloads of its
  namespace (a RayJob sent to an existing Ray cluster is not made beside one, decision 0159);
* a Kueue ClusterQueue or LocalQueue, anyone's, that appears, goes or changes its spec: also
  the GpuWorkloads (of the LocalQueue's namespace): where Kueue counts a workload no Kaiwo
  kind owns follows them (decision 0270); a Kueue Cohort likewise: the GpuWorkloads and every
  workload (quota is lent across the cohort tree, decision 0271);
* a Gateway (the Gateway API's) that appears, goes or changes whether it is programmed: every
  KaiwoService, whose ``RouteAccepted`` follows it (decision 0273); not the attached-route
  counts of its listeners, which move with every route;
* a KubeAI Model: itself; its children follow it as above (it is an owner kind); the
  system configuration, AIMNamespaceConfigs and cache volumes concern Models too
  (:mod:`kaiwo_planner.domain.models.replanning`);
* the root of a GPU workload no Kaiwo kind owns (decision 0047): itself (its plan creates
  its GpuWorkload) and its GpuWorkload; a GpuWorkload: itself; the KaiwoConfig and a
  Namespace whose GPU-preemption annotations changed: the GpuWorkloads (of that namespace);
  a Kueue Workload created for such a root: the root's GpuWorkload (whether Kueue admits it
  says whether it waits for GPUs, decision 0056); a pod of such a root's Job, StatefulSet or
  Deployment (its ReplicaSet, named after the Deployment): the root's GpuWorkload (whether
  the scheduler can place it says whether it waits for GPUs, decision 0066).

Only owners the projection holds are returned (a plan needs the owner object), except a
deleted workload, which is returned so the caller can forget it. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

from kaiwo_contracts.crds.config_v1alpha1.kaiwoconfig import KAIWO_CONFIG_NAME
from kaiwo_contracts.gpu_preemption import ANNOTATION_PREFIX
from kaiwo_contracts.gpu_workloads import (
    controller_reference,
    deployment_of_pod,
    gpu_workload_name,
    is_gpu_root,
    made_by_kaiwo,
)
from kaiwo_contracts.plans import ObjectRef

from kaiwo_planner.domain.children.http_route import GATEWAY_GROUP
from kaiwo_planner.domain.children.naming import main_child_name
from kaiwo_planner.domain.models.replanning import models_concerned
from kaiwo_planner.domain.scheduling.schedulable import DEFAULT_LOCAL_QUEUE
from kaiwo_planner.domain.state.index_entry import (
    CORE_GROUP,
    KUEUE_GROUP,
    KUEUE_JOB_UID_LABEL,
    api_group_of,
)
from kaiwo_planner.domain.state.nodes import NodeInfo
from kaiwo_planner.domain.state.observed_objects import Change
from kaiwo_planner.domain.state.projection import Projection
from kaiwo_planner.domain.status.route_acceptance import gateway_programming

KAIWO_GROUP: Final = "kaiwo.silogen.ai"
CONFIG_GROUP: Final = "config.kaiwo.silogen.ai"
KUBEAI_GROUP: Final = "kubeai.org"

KAIWO_JOB: Final = (KAIWO_GROUP, "KaiwoJob")
KAIWO_SERVICE: Final = (KAIWO_GROUP, "KaiwoService")
KAIWO_QUEUE_CONFIG: Final = (KAIWO_GROUP, "KaiwoQueueConfig")
KAIWO_CONFIG: Final = (CONFIG_GROUP, "KaiwoConfig")
AIM_NAMESPACE_CONFIG: Final = (CONFIG_GROUP, "AIMNamespaceConfig")
KUBEAI_MODEL: Final = (KUBEAI_GROUP, "Model")
NODE: Final = (CORE_GROUP, "Node")
NAMESPACE: Final = (CORE_GROUP, "Namespace")
PRIORITY_CLASS: Final = ("scheduling.k8s.io", "PriorityClass")
WORKLOAD_PRIORITY_CLASS: Final = (KUEUE_GROUP, "WorkloadPriorityClass")
LOCAL_QUEUE: Final = (KUEUE_GROUP, "LocalQueue")
GPU_WORKLOAD: Final = (KAIWO_GROUP, "GpuWorkload")
GATEWAY: Final = (GATEWAY_GROUP, "Gateway")

WORKLOAD_KINDS: Final = (KAIWO_JOB, KAIWO_SERVICE)
OWNER_KINDS: Final = (*WORKLOAD_KINDS, KAIWO_QUEUE_CONFIG, KUBEAI_MODEL)
QUEUE_CONFIG_NAME: Final = "kaiwo"

OWNER_UID_LABEL: Final = "kaiwo.silogen.ai/owner-uid"
RUN_ID_LABEL: Final = "kaiwo.silogen.ai/run-id"
QUEUE_CONFIG_LABEL: Final = "kaiwo.silogen.ai/queue-config"

MAX_OWNER_DEPTH: Final = 8
"""Owner chains are short (Pod -> ReplicaSet -> Deployment -> KaiwoService); this stops
a reference cycle, which the API server does not forbid."""


def owners_to_replan(change: Change, projection: Projection) -> tuple[ObjectRef, ...]:
    """The owners whose plan ``change`` may alter, sorted (apiVersion, kind, namespace, name)."""
    kind = (change.group, change.kind)
    owners: list[ObjectRef]
    if kind in WORKLOAD_KINDS:
        # The queue config owns the LocalQueues in namespaces that use a queue, so it follows
        # the set of (queue, namespace) pairs in use: the first workload of a pair, the last
        # one going, one moving to another queue (not another workload of a pair in use).
        kqc = queue_config(projection) if change.queue_uses_changed else []
        owners = [change.ref, *kqc]
    elif kind == KAIWO_QUEUE_CONFIG:
        owners = [change.ref, *all_workloads(projection)]
    elif kind == KAIWO_CONFIG and change.ref.name != KAIWO_CONFIG_NAME:
        owners = [change.ref]  # never read: no other plan can change (its own says so)
    elif kind == KAIWO_CONFIG:
        owners = [
            change.ref,
            *queue_config(projection),
            *all_workloads(projection),
            *all_gpu_workloads(projection),
        ]
    elif kind == AIM_NAMESPACE_CONFIG:
        namespace = change.ref.namespace or ""
        owners = [
            change.ref,
            *namespace_configs(projection, namespace=namespace),
            *all_workloads(projection, namespace=namespace),
        ]
    elif kind == NODE:
        owners = (
            [
                *queue_config(projection),
                *all_workloads(projection),
                *all_gpu_workloads(projection),
            ]
            if _node_facts_changed(change)
            else []
        )
    elif kind == NAMESPACE:
        appeared_or_went = change.previous is None or change.deleted
        owners = list(queue_config(projection)) if appeared_or_went else []
        if _preemption_annotations_changed(change):
            owners += all_gpu_workloads(projection, namespace=change.ref.name)
    elif kind in (KUBEAI_MODEL, GPU_WORKLOAD):
        owners = [change.ref]
    elif kind == PRIORITY_CLASS:
        owners = all_workloads(projection)
    elif kind == WORKLOAD_PRIORITY_CLASS:
        owners = [*_owners_of_versions(change, projection), *all_workloads(projection)]
    else:
        owners = [
            *_owners_of_versions(change, projection),
            *_gpu_roots(change, projection),
            *_records_of_kueue_jobs(change, projection),
            *_records_of_pods(change, projection),
            *_owners_of_a_deleted_jobs_workload(change, projection),
            *_successors_of_a_previous_runs_child(change, projection),
            *_workloads_beside_a_default_queue(change, projection),
            *_workloads_of_a_queues_flavors(change, projection),
            *_owners_of_a_quota_scope(change, projection),
            *_services_behind_a_gateway(change, projection),
        ]
    owners += models_concerned(change, projection)
    return _sorted_unique(owners)


def _owners_of_versions(change: Change, projection: Projection) -> list[ObjectRef]:
    versions = [change.object] if change.previous is None else [change.previous, change.object]
    return [ref for version in versions for ref in owners_of(version, projection)]


def owners_of(obj: Mapping[str, Any], projection: Projection) -> tuple[ObjectRef, ...]:
    """The owners (workloads, the KaiwoQueueConfig, Models) ``obj`` belongs to, sorted."""
    return _sorted_unique(_walk(obj, projection, depth=0))


def all_workloads(projection: Projection, *, namespace: str | None = None) -> list[ObjectRef]:
    """Every KaiwoJob and KaiwoService the projection holds (in one namespace, if given)."""
    return [
        ObjectRef.of(obj)
        for group, kind in WORKLOAD_KINDS
        for obj in projection.objects_of_kind(group=group, kind=kind, namespace=namespace)
    ]


def _workloads_beside_a_default_queue(change: Change, projection: Projection) -> list[ObjectRef]:
    """The workloads of the namespace of a LocalQueue named ``default`` that appeared or went:
    Kueue puts every job made there without a queue label in it (decision 0159)."""
    # The kind and name first: every change of a child passes here.
    if change.kind != LOCAL_QUEUE[1] or change.ref.name != DEFAULT_LOCAL_QUEUE:
        return []
    if change.group != LOCAL_QUEUE[0]:
        return []
    if change.previous is not None and not change.deleted:
        return []
    return all_workloads(projection, namespace=change.ref.namespace)


QUEUE_FLAVOR_KINDS: Final = frozenset({"ClusterQueue", "ResourceFlavor"})


def _workloads_of_a_queues_flavors(change: Change, projection: Projection) -> list[ObjectRef]:
    """Every workload, when a ClusterQueue or ResourceFlavor appeared, went, or changed its
    spec: the flavors that hold a workload's ``gpuModels`` follow them (decisions 0237,
    0264), and one observed after the workload's child was made may have it made anew.
    Their status, which moves at every admission, re-plans nothing."""
    # The kind first: every change of a child passes here.
    if change.kind not in QUEUE_FLAVOR_KINDS or change.group != KUEUE_GROUP:
        return []
    return all_workloads(projection) if _moved(change, _spec) else []


QUOTA_SCOPE_KINDS: Final = frozenset({"ClusterQueue", "LocalQueue", "Cohort"})


def _owners_of_a_quota_scope(change: Change, projection: Projection) -> list[ObjectRef]:
    """The GpuWorkloads (of a LocalQueue's namespace), when a ClusterQueue, LocalQueue or
    Cohort appeared, went, or changed its spec: a GPU workload no Kaiwo kind owns is counted in
    the ClusterQueue its LocalQueue names, lent to across its cohort tree (decisions 0260,
    0270, 0271). For a Cohort every workload too (a ClusterQueue's spec re-plans them already,
    decision 0264): a waiting one's victims follow the tree."""
    # The kind first: every change of a child passes here.
    if change.kind not in QUOTA_SCOPE_KINDS or change.group != KUEUE_GROUP:
        return []
    if not _moved(change, _spec):
        return []
    owners = all_gpu_workloads(projection, namespace=change.ref.namespace)
    if change.kind == "Cohort":
        owners += all_workloads(projection)
    return owners


def _moved(change: Change, part: Callable[[Mapping[str, Any]], object]) -> bool:
    """The object appeared, went, or changed the ``part`` of it that matters (its spec: its
    status alone moved nothing)."""
    previous = change.previous
    kept = previous is not None and part(previous) == part(change.object)
    return change.deleted or not kept


def _spec(obj: Mapping[str, Any]) -> object:
    return obj.get("spec")


def _services_behind_a_gateway(change: Change, projection: Projection) -> list[ObjectRef]:
    """Every KaiwoService, when a Gateway appeared, went, or changed its ``Programmed``
    condition or that of a listener taking HTTPRoutes (module docstring)."""
    # The kind first: every change of a child passes here.
    if change.kind != GATEWAY[1] or change.group != GATEWAY[0]:
        return []
    if not _moved(change, gateway_programming):
        return []
    return [
        ObjectRef.of(obj)
        for obj in projection.objects_of_kind(group=KAIWO_SERVICE[0], kind=KAIWO_SERVICE[1])
    ]


def configuration_objects(projection: Projection) -> list[ObjectRef]:
    """Every KaiwoConfig and AIMNamespaceConfig the projection holds (their plans say only
    when they are invalid, decision 0206)."""
    return [
        ObjectRef.of(obj)
        for group, kind in (KAIWO_CONFIG, AIM_NAMESPACE_CONFIG)
        for obj in projection.objects_of_kind(group=group, kind=kind)
    ]


def namespace_configs(projection: Projection, *, namespace: str) -> list[ObjectRef]:
    """The AIMNamespaceConfigs the projection holds in ``namespace``."""
    group, kind = AIM_NAMESPACE_CONFIG
    return [
        ObjectRef.of(obj)
        for obj in projection.objects_of_kind(group=group, kind=kind, namespace=namespace)
    ]


def all_gpu_workloads(projection: Projection, *, namespace: str | None = None) -> list[ObjectRef]:
    """Every GpuWorkload the projection holds (in one namespace, if given)."""
    group, kind = GPU_WORKLOAD
    return [
        ObjectRef.of(obj)
        for obj in projection.objects_of_kind(group=group, kind=kind, namespace=namespace)
    ]


def _records_of_kueue_jobs(change: Change, projection: Projection) -> list[ObjectRef]:
    """A Kueue Workload that changed: the GpuWorkloads of the GPU roots it was created for."""
    if (change.group, change.kind) != (KUEUE_GROUP, "Workload"):
        return []
    found: list[ObjectRef] = []
    for version in (change.previous, change.object):
        meta = (version or {}).get("metadata") or {}
        uids = [str(r.get("uid") or "") for r in _owner_references(meta)]
        uids.append(str((meta.get("labels") or {}).get(KUEUE_JOB_UID_LABEL) or ""))
        for uid in filter(None, uids):
            root = projection.by_uid(uid)
            if root is not None and is_gpu_root(root):
                found += _record_ref(root, projection)
    return found


KUEUE_MANAGED_CHILD_KINDS: Final = frozenset({"Job", "RayJob", "AppWrapper"})


def _owners_of_a_deleted_jobs_workload(change: Change, projection: Projection) -> list[ObjectRef]:
    """A Kueue Workload removed after its job (a Job, RayJob or AppWrapper someone deleted):
    the Kaiwo workloads whose main child has the job's name, which wait for it to go before
    they make their child again (decision 0139). The job itself is no longer observed, so
    the owner references lead nowhere."""
    if (change.group, change.kind) != (KUEUE_GROUP, "Workload") or not change.deleted:
        return []
    meta = change.object.get("metadata") or {}
    namespace = str(meta.get("namespace") or "")
    names = {
        str(r.get("name"))
        for r in meta.get("ownerReferences") or ()
        if isinstance(r, Mapping)
        and r.get("kind") in KUEUE_MANAGED_CHILD_KINDS
        and projection.by_uid(str(r.get("uid") or "")) is None
    }
    if not names:
        return []
    return [
        ObjectRef.of(obj)
        for group, kind in WORKLOAD_KINDS
        for obj in projection.objects_of_kind(group=group, kind=kind, namespace=namespace)
        if main_child_name(str((obj.get("metadata") or {}).get("name") or "")) in names
    ]


def _successors_of_a_previous_runs_child(change: Change, projection: Projection) -> list[ObjectRef]:
    """A child removed after its KaiwoJob or KaiwoService (the garbage collector, once a
    pod no longer uses a claim): the workload submitted again under that name, whose child
    of the same name waited for this one to go (decision 0165). Its owner is no longer
    observed, so the owner references lead nowhere."""
    if not change.deleted:
        return []
    meta = change.object.get("metadata") or {}
    reference = next((r for r in _owner_references(meta) if r.get("controller") is True), None)
    if reference is None or projection.by_uid(str(reference.get("uid") or "")) is not None:
        return []
    kind = (api_group_of(str(reference.get("apiVersion") or "")), str(reference.get("kind")))
    if kind not in WORKLOAD_KINDS:
        return []
    group, name = kind[0], str(reference.get("name") or "")
    found = projection.find(
        group=group, kind=kind[1], name=name, namespace=str(meta.get("namespace") or "")
    )
    return [ObjectRef.of(found)] if found is not None else []


def _records_of_pods(change: Change, projection: Projection) -> list[ObjectRef]:
    """A pod that changed: the GpuWorkload of the GPU root its controller is, or whose
    ReplicaSet is named after (a Deployment)."""
    if (change.group, change.kind) != (CORE_GROUP, "Pod"):
        return []
    found: list[ObjectRef] = []
    for version in (change.previous, change.object):
        if version is None or made_by_kaiwo(version):  # a Kaiwo workload's: planned as such
            continue
        meta = version.get("metadata") or {}
        namespace = str(meta.get("namespace") or "")
        deployment = deployment_of_pod(version)
        reference = controller_reference(version)
        if deployment is not None:
            root = projection.find(
                group="apps", kind="Deployment", name=deployment, namespace=namespace
            )
        elif reference is not None and reference.get("uid"):
            root = projection.by_uid(str(reference["uid"]))
        else:
            continue
        if root is not None and is_gpu_root(root):
            found += _record_ref(root, projection)
    return found


def _record_ref(root: Mapping[str, Any], projection: Projection) -> list[ObjectRef]:
    meta = root.get("metadata") or {}
    name = gpu_workload_name(
        kind=str(root.get("kind") or ""),
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
    )
    group, kind = GPU_WORKLOAD
    record = projection.find(
        group=group, kind=kind, name=name, namespace=str(meta.get("namespace") or "")
    )
    return [ObjectRef.of(record)] if record is not None else []


def _gpu_roots(change: Change, projection: Projection) -> list[ObjectRef]:
    """A GPU workload's root that changed: itself (unless deleted) and its GpuWorkload."""
    versions = [v for v in (change.previous, change.object) if v is not None and is_gpu_root(v)]
    if not versions:
        return []
    meta = versions[-1].get("metadata") or {}
    name = gpu_workload_name(kind=change.kind, name=change.ref.name, uid=change.ref.uid or "")
    group, kind = GPU_WORKLOAD
    record = projection.find(
        group=group, kind=kind, name=name, namespace=str(meta.get("namespace") or "")
    )
    found = [ObjectRef.of(record)] if record is not None else []
    return found if change.deleted else [change.ref, *found]


def _preemption_annotations_changed(change: Change) -> bool:
    def prefixed(obj: Mapping[str, Any] | None) -> dict[str, Any]:
        found = ((obj or {}).get("metadata") or {}).get("annotations") or {}
        return {k: v for k, v in found.items() if str(k).startswith(ANNOTATION_PREFIX)}

    return prefixed(change.previous) != prefixed(None if change.deleted else change.object)


def queue_config(projection: Projection) -> list[ObjectRef]:
    """The ``kaiwo`` KaiwoQueueConfig, when the projection holds it."""
    group, kind = KAIWO_QUEUE_CONFIG
    found = projection.find(group=group, kind=kind, name=QUEUE_CONFIG_NAME)
    return [ObjectRef.of(found)] if found is not None else []


def _walk(obj: Mapping[str, Any], projection: Projection, *, depth: int) -> Iterable[ObjectRef]:
    if depth > MAX_OWNER_DEPTH:
        return
    meta = obj.get("metadata") or {}
    for reference in _owner_references(meta):
        uid = reference.get("uid")
        if uid:
            yield from _walk_uid(str(uid), projection, depth=depth)
    labels = meta.get("labels") or {}
    for label in (OWNER_UID_LABEL, RUN_ID_LABEL, KUEUE_JOB_UID_LABEL):
        uid = labels.get(label)
        if uid:
            yield from _walk_uid(str(uid), projection, depth=depth)
    if (
        labels.get(QUEUE_CONFIG_LABEL)
        and api_group_of(str(obj.get("apiVersion", ""))) == KUEUE_GROUP
    ):
        yield from queue_config(projection)


def _walk_uid(uid: str, projection: Projection, *, depth: int) -> Iterable[ObjectRef]:
    found = projection.by_uid(uid)
    if found is None:
        return
    found_kind = (api_group_of(str(found.get("apiVersion", ""))), str(found.get("kind", "")))
    if found_kind in OWNER_KINDS:
        yield ObjectRef.of(found)
    else:
        yield from _walk(found, projection, depth=depth + 1)


def _owner_references(meta: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The controller reference when there is one, else every owner reference."""
    references = [r for r in meta.get("ownerReferences") or () if isinstance(r, Mapping)]
    controllers = [r for r in references if r.get("controller") is True]
    return controllers or references


def _node_facts_changed(change: Change) -> bool:
    if change.previous is None or change.deleted:
        return True
    return NodeInfo.from_wire(change.previous) != NodeInfo.from_wire(change.object)


def _sorted_unique(refs: Iterable[ObjectRef]) -> tuple[ObjectRef, ...]:
    unique = {(*ref.sort_key(), ref.uid or ""): ref for ref in refs}
    return tuple(unique[key] for key in sorted(unique))
