"""GPU workloads no Kaiwo kind owns: which object is a workload's root, what it holds, and
what preempting it does (upstream §11, decision 0047).

Upstream Kaiwo tracks every GPU pod by its *root owner*: the object at the top of its chain of
controller owner references (a Deployment above a ReplicaSet above the Pod; a RayJob above
its RayCluster). Here the roots of these kinds are tracked, each with what preemption does to
it (:data:`ROOT_KINDS`):

* a bare **Pod**, a batch **Job**, a **RayJob**, a **RayCluster**: deleted, background
  propagation (upstream's one action);
* a **Deployment**, a **StatefulSet**: scaled to zero replicas (upstream deletes them too):
  the object, its configuration and its history stay, and ``kubectl scale`` brings it back.

A **CronJob**'s runs are tracked one by one (decision 0056): a Job whose controller is a
CronJob is a root of its own (:data:`TRACKED_CONTROLLERS`), opted in by its own annotations
(the CronJob's ``spec.jobTemplate.metadata.annotations``, which the CronJob controller copies
onto every Job it makes) or its namespace's, and preempting it deletes that run only: the
CronJob and its schedule stay. A root of another kind (a LeaderWorkerSet, a JobSet, an
operator's custom resource) is not tracked: what stopping it means is that kind's own
business. Objects the operator makes
(``app.kubernetes.io/managed-by=kaiwo``, ``kaiwo.silogen.ai/owner-uid``,
``kaiwo.silogen.ai/run-id``) are Kaiwo workloads' and never roots here.

GPUs are the extended resources named ``<vendor>/gpu`` (``amd.com/gpu``, ``nvidia.com/gpu``)
or starting with ``amd.com/`` (upstream counts every ``amd.com/*`` resource); a container
holds the larger of its request and limit; an init container runs alone, so a pod holds the
larger of its containers' sum and its largest init container.

Pure: every function reads JSON objects as the API server returns them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, Final, Literal

PreemptAction = Literal["delete", "scale-to-zero"]
Kind = tuple[str, str]
"""(apiVersion, kind)."""

POD: Final[Kind] = ("v1", "Pod")
JOB: Final[Kind] = ("batch/v1", "Job")
DEPLOYMENT: Final[Kind] = ("apps/v1", "Deployment")
STATEFUL_SET: Final[Kind] = ("apps/v1", "StatefulSet")
RAY_JOB: Final[Kind] = ("ray.io/v1", "RayJob")
RAY_CLUSTER: Final[Kind] = ("ray.io/v1", "RayCluster")

ROOT_KINDS: Final[Mapping[Kind, PreemptAction]] = MappingProxyType(
    {
        POD: "delete",
        JOB: "delete",
        DEPLOYMENT: "scale-to-zero",
        STATEFUL_SET: "scale-to-zero",
        RAY_JOB: "delete",
        RAY_CLUSTER: "delete",
    }
)
"""The kinds whose roots are tracked, and what preempting one does."""

CRON_JOB: Final[Kind] = ("batch/v1", "CronJob")
TRACKED_CONTROLLERS: Final[Mapping[Kind, frozenset[Kind]]] = MappingProxyType(
    {JOB: frozenset({CRON_JOB})}
)
"""Controllers a root may have and still be one: a CronJob's Job is tracked run by run."""

REPLICA_SET: Final[Kind] = ("apps/v1", "ReplicaSet")
INTERMEDIATE_KINDS: Final[frozenset[Kind]] = frozenset({REPLICA_SET})
"""Kinds met between a pod and its root that are never roots themselves (a Deployment's
ReplicaSet): resolving a pod's root walks through them."""
WAITING_POD_CONTROLLERS: Final[frozenset[Kind]] = frozenset({JOB, REPLICA_SET, STATEFUL_SET})
"""The controllers of the pods whose wait for GPUs presses for a tracked root (decision
0066): a Job's (a CronJob's run's too), a Deployment's ReplicaSet's, a StatefulSet's."""
POD_TEMPLATE_HASH_LABEL: Final = "pod-template-hash"

MANAGED_BY_LABEL: Final = "app.kubernetes.io/managed-by"
OWNER_UID_LABEL: Final = "kaiwo.silogen.ai/owner-uid"
RUN_ID_LABEL: Final = "kaiwo.silogen.ai/run-id"
WORKLOAD_UID_LABEL: Final = "kaiwo.silogen.ai/workload-uid"
"""On a GpuWorkload: the uid of the root it tracks."""
NAME_LIMIT: Final = 253

CONTROLLER_MADE_POD_LABELS: Final = (
    POD_TEMPLATE_HASH_LABEL,  # a ReplicaSet's (a Deployment's) pods
    "controller-revision-hash",  # a StatefulSet's and a DaemonSet's
    "batch.kubernetes.io/controller-uid",  # a Job's (Kubernetes 1.27 and later)
    "controller-uid",  # a Job's (every version)
    "ray.io/node-type",  # a RayCluster's
    RUN_ID_LABEL,  # a KaiwoJob's or KaiwoService's
    OWNER_UID_LABEL,  # the operator's own (a Model's server pods)
)
"""Labels the controllers put on the pods they make: a Pod carrying none of them may be a
bare one. The watcher asks the API server only for Pods without them (a label selector), so
the pods of Jobs, Deployments, StatefulSets and Ray clusters never reach it on that stream
(only on the stream of unbound pods, when they wait for GPUs: decision 0066)."""
BARE_POD_SELECTOR: Final = ",".join(f"!{label}" for label in CONTROLLER_MADE_POD_LABELS)
NOT_KAIWO_SELECTOR: Final = f"!{OWNER_UID_LABEL}"
"""Roots that are no children of a Kaiwo workload (the watcher's selector for the root kinds;
the operator's own Deployments and Jobs carry the owner-uid label)."""
UNBOUND_PENDING_POD_FIELDS: Final = "spec.nodeName=,status.phase=Pending"
"""Pods no node was chosen for yet (the kube-scheduler's own selection): the watcher's field
selector for the pods of Jobs, Deployments and StatefulSets that may wait for GPUs. A pod is
in it from its creation until it is bound, usually a moment (decision 0066)."""
NOT_KAIWO_POD_SELECTOR: Final = f"!{RUN_ID_LABEL},!{OWNER_UID_LABEL}"
"""Pods the operator did not make (a Kaiwo workload's pods are watched on their own)."""

_DNS_TRIM: Final = re.compile(r"[-.]+$")


def kind_of(obj: Mapping[str, Any]) -> Kind:
    return (str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""))


def _metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    found = obj.get("metadata")
    return found if isinstance(found, Mapping) else {}


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _sequence(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def controller_reference(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The object's controller owner reference, or None (then it is a root)."""
    for reference in _sequence(_metadata(obj).get("ownerReferences")):
        if isinstance(reference, Mapping) and reference.get("controller") is True:
            return reference
    return None


def is_root(obj: Mapping[str, Any]) -> bool:
    """Of a root kind, and controlled by nothing or by a controller :data:`TRACKED_CONTROLLERS`
    allows for its kind (a CronJob above a Job)."""
    kind = kind_of(obj)
    if kind not in ROOT_KINDS:
        return False
    reference = controller_reference(obj)
    if reference is None:
        return True
    above = (str(reference.get("apiVersion") or ""), str(reference.get("kind") or ""))
    return above in TRACKED_CONTROLLERS.get(kind, frozenset())


def made_by_kaiwo(obj: Mapping[str, Any]) -> bool:
    """The operator made this object for a Kaiwo workload or a Model."""
    labels = _mapping(_metadata(obj).get("labels"))
    return (
        labels.get(MANAGED_BY_LABEL) == "kaiwo"
        or bool(labels.get(OWNER_UID_LABEL))
        or bool(labels.get(RUN_ID_LABEL))
    )


def is_gpu_resource(name: str) -> bool:
    return name.endswith("/gpu") or name.startswith("amd.com/")


def pod_gpus(pod_spec: Mapping[str, Any]) -> dict[str, int]:
    """GPUs one pod of ``pod_spec`` holds, per resource name (module docstring)."""
    regular: dict[str, int] = {}
    for container in _sequence(pod_spec.get("containers")):
        for name, count in _container_gpus(container).items():
            regular[name] = regular.get(name, 0) + count
    for container in _sequence(pod_spec.get("initContainers")):
        for name, count in _container_gpus(container).items():
            regular[name] = max(regular.get(name, 0), count)
    return {name: count for name, count in sorted(regular.items()) if count > 0}


def _container_gpus(container: object) -> dict[str, int]:
    resources = _mapping(_mapping(container).get("resources"))
    found: dict[str, int] = {}
    for section in ("requests", "limits"):
        for name, quantity in _mapping(resources.get(section)).items():
            if is_gpu_resource(str(name)):
                found[str(name)] = max(found.get(str(name), 0), whole_number(quantity))
    return found


def whole_number(quantity: object) -> int:
    """A count of an extended resource (always whole); anything else counts as 0."""
    if isinstance(quantity, bool):
        return 0
    if isinstance(quantity, int):
        return max(quantity, 0)
    if isinstance(quantity, str) and quantity.strip().isdigit():
        return int(quantity.strip())
    return 0


def pod_templates(obj: Mapping[str, Any]) -> tuple[tuple[Mapping[str, Any], int], ...]:
    """The pod specs of a root and how many pods of each it runs now (the spec's replicas,
    a Job's parallelism, a Ray cluster's head and workers); () for other kinds."""
    kind = kind_of(obj)
    spec = _mapping(obj.get("spec"))
    if kind == POD:
        return ((spec, 1),)
    template = _mapping(_mapping(spec.get("template")).get("spec"))
    if kind == JOB:
        return ((template, _count(spec.get("parallelism"), default=1)),)
    if kind in (DEPLOYMENT, STATEFUL_SET):
        return ((template, _count(spec.get("replicas"), default=1)),)
    if kind == RAY_CLUSTER:
        return _ray_cluster_templates(spec)
    if kind == RAY_JOB:
        return _ray_cluster_templates(_mapping(spec.get("rayClusterSpec")))
    return ()


def _ray_cluster_templates(spec: Mapping[str, Any]) -> tuple[tuple[Mapping[str, Any], int], ...]:
    head = _mapping(_mapping(_mapping(spec.get("headGroupSpec")).get("template")).get("spec"))
    found: list[tuple[Mapping[str, Any], int]] = [(head, 1)]
    for entry in _sequence(spec.get("workerGroupSpecs")):
        group = _mapping(entry)
        template = _mapping(_mapping(group.get("template")).get("spec"))
        replicas = _count(group.get("replicas"), default=_count(group.get("minReplicas")))
        found.append((template, replicas * _count(group.get("numOfHosts"), default=1)))
    return tuple(found)


def _count(value: object, *, default: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        return default
    return max(value, 0)


def requests_gpus(obj: Mapping[str, Any]) -> bool:
    """Some pod spec of the object asks for GPUs (whatever its replicas are now)."""
    return any(pod_gpus(spec) for spec, _ in pod_templates(obj))


def held_gpus(obj: Mapping[str, Any]) -> int:
    """GPUs the root's pods hold when all of them run (a Deployment scaled to 0: none)."""
    return sum(sum(pod_gpus(spec).values()) * count for spec, count in pod_templates(obj))


def gpu_vendor(obj: Mapping[str, Any]) -> str:
    """``nvidia`` when a pod spec asks for ``nvidia.com/`` GPUs, else ``amd``."""
    names: Iterable[str] = (name for spec, _ in pod_templates(obj) for name in pod_gpus(spec))
    return "nvidia" if any(name.startswith("nvidia.com/") for name in names) else "amd"


def is_gpu_root(obj: Mapping[str, Any]) -> bool:
    """A root the operator tracks: of a root kind, controlled by nothing (or a CronJob's Job,
    :func:`is_root`), not made by the operator, asking for GPUs."""
    return is_root(obj) and not made_by_kaiwo(obj) and requests_gpus(obj)


def preempt_action(api_version: str, kind: str) -> PreemptAction | None:
    return ROOT_KINDS.get((api_version, kind))


def gpu_workload_name(*, kind: str, name: str, uid: str) -> str:
    """The GpuWorkload tracking a root: ``<kind>-<name>-<uid[:8]>`` (upstream's name), the
    root's name shortened when the whole would pass 253 characters."""
    suffix = f"-{uid[:8]}"
    prefix = f"{kind.lower()}-"
    room = NAME_LIMIT - len(prefix) - len(suffix)
    return f"{prefix}{_DNS_TRIM.sub('', name[:room])}{suffix}"


def unschedulable_for_gpus(pod: Mapping[str, Any]) -> frozenset[str]:
    """The GPU resources a ``Pending`` pod cannot be placed for: its ``PodScheduled=False``
    reason ``Unschedulable`` message names "insufficient <resource>" for them (the
    kube-scheduler's "0/3 nodes are available: 3 Insufficient amd.com/gpu."; upstream's
    test). Empty for a pod placed, waiting for anything else, or asking for no GPUs."""
    status = _mapping(pod.get("status"))
    if status.get("phase") != "Pending":
        return frozenset()
    scheduled = next(
        (
            _mapping(c)
            for c in _sequence(status.get("conditions"))
            if _mapping(c).get("type") == "PodScheduled"
        ),
        None,
    )
    if scheduled is None or scheduled.get("status") != "False":
        return frozenset()
    if scheduled.get("reason") != "Unschedulable":
        return frozenset()
    message = str(scheduled.get("message") or "").lower()
    asked = pod_gpus(_mapping(pod.get("spec")))
    return frozenset(name for name in asked if f"insufficient {name.lower()}" in message)


def is_controlled_pod_waiting_for_gpus(pod: Mapping[str, Any]) -> bool:
    """A pod a Job, ReplicaSet or StatefulSet controls (:data:`WAITING_POD_CONTROLLERS`), not
    made by the operator, that the scheduler cannot place for GPUs: what the watcher publishes
    of the unbound pods (decision 0066). Bare Pods are roots, watched on their own."""
    reference = controller_reference(pod)
    if reference is None or made_by_kaiwo(pod):
        return False
    controller = (str(reference.get("apiVersion") or ""), str(reference.get("kind") or ""))
    return controller in WAITING_POD_CONTROLLERS and bool(unschedulable_for_gpus(pod))


def deployment_of_pod(pod: Mapping[str, Any]) -> str | None:
    """The name of the Deployment whose ReplicaSet controls ``pod``, or None.

    The Deployment controller names each ReplicaSet ``<deployment>-<pod-template-hash>`` and
    labels its pods with that hash, so the name is read off the two without observing the
    ReplicaSet. A ReplicaSet named otherwise (made by hand) has no Deployment: None."""
    reference = controller_reference(pod)
    if reference is None or kind_of(reference) != REPLICA_SET:
        return None
    template_hash = _mapping(_metadata(pod).get("labels")).get(POD_TEMPLATE_HASH_LABEL)
    replica_set = str(reference.get("name") or "")
    suffix = f"-{template_hash}"
    if not template_hash or not replica_set.endswith(suffix) or replica_set == suffix:
        return None
    return replica_set[: -len(suffix)]
