"""What an observed object is filed under in the
:class:`~kaiwo_planner.domain.state.object_index.ObjectIndex`, worked out once per version
(:class:`Entry`): its identity and sort key, its owners, its indexed labels, its node, the
queue a Kaiwo workload declares, and whether the operator wrote it last; and the API groups,
kinds and labels the index knows."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwojob import on_existing_ray_cluster
from kaiwo_contracts.gpu_workloads import deployment_of_pod, made_by_kaiwo
from kaiwo_contracts.models_config import CONFIG_MAP_LABEL
from kaiwo_contracts.plans import OPERATOR_FIELD_MANAGERS

from kaiwo_planner.domain.state.nodes import NodeInfo

CORE_GROUP: Final = ""
KUEUE_GROUP: Final = "kueue.x-k8s.io"
KAIWO_GROUP: Final = "kaiwo.silogen.ai"
CONFIG_GROUP: Final = "config.kaiwo.silogen.ai"
KUEUE_JOB_UID_LABEL: Final = "kueue.x-k8s.io/job-uid"
RUN_ID_LABEL: Final = "kaiwo.silogen.ai/run-id"

INDEXED_LABELS: Final = frozenset({RUN_ID_LABEL, CONFIG_MAP_LABEL})
"""Label keys :meth:`ObjectIndex.labelled` answers for."""

LISTED_KINDS: Final = frozenset(
    {
        (KAIWO_GROUP, "KaiwoJob"),
        (KAIWO_GROUP, "KaiwoService"),
        (KAIWO_GROUP, "KaiwoQueueConfig"),
        (KAIWO_GROUP, "GpuWorkload"),
        (CONFIG_GROUP, "KaiwoConfig"),
        (CONFIG_GROUP, "AIMNamespaceConfig"),
        ("kubeai.org", "Model"),
        ("scheduling.k8s.io", "PriorityClass"),
        (KUEUE_GROUP, "WorkloadPriorityClass"),
        # What the queued public event's estimate reads (decision 0055).
        (KUEUE_GROUP, "ClusterQueue"),
        (KUEUE_GROUP, "LocalQueue"),
        (KUEUE_GROUP, "Workload"),
        # The cohort tree, which idle preemption's quota scope follows (decision 0271).
        (KUEUE_GROUP, "Cohort"),
    }
)
"""(API group, kind) pairs :meth:`ObjectIndex.of_kind` answers for."""

_WORKLOAD_KINDS: Final = frozenset({"KaiwoJob", "KaiwoService"})

Kind = tuple[str, str]
"""(API group, kind)."""
QueueUse = tuple[str, str]
"""(cluster queue a workload declares, "" for the default; its namespace)."""
Identity = tuple[str, str, str, str]
"""(API group, kind, namespace or "", name): an object's identity across API versions."""
SortKey = tuple[str, str, str, str, str]
"""(apiVersion, kind, namespace, name, uid): the order of every group handed out."""

NODE: Final = "node"
NAMESPACE: Final = "namespace"
KUEUE_WORKLOAD: Final = "workload"
OBJECT: Final = "object"


def api_group_of(api_version: str) -> str:
    """``batch/v1`` -> ``batch``; ``v1`` -> "" (the core group)."""
    return api_version.rpartition("/")[0]


def object_identity(obj: Mapping[str, Any]) -> Identity:
    """The identity of a JSON object (a desired manifest: with or without its uid)."""
    meta = obj.get("metadata") or {}
    return (
        api_group_of(str(obj.get("apiVersion", ""))),
        str(obj.get("kind", "")),
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
    )


def category_of(group: str, kind: str) -> str:
    """How the index files an object of this kind: node, namespace, Kueue Workload, other."""
    if group == CORE_GROUP and kind == "Node":
        return NODE
    if group == CORE_GROUP and kind == "Namespace":
        return NAMESPACE
    if group == KUEUE_GROUP and kind == "Workload":
        return KUEUE_WORKLOAD
    return OBJECT


@dataclass(frozen=True, slots=True)
class Entry:
    """One observed object and everything it is filed under, worked out once.

    ``resource_version`` and ``sequence`` (the observation's stream sequence) say which
    version this is; ``written_last_by_operator`` is read from ``managedFields``, which the
    projection does not keep.
    """

    object: Mapping[str, Any]
    uid: str
    resource_version: str
    sequence: int
    sort_key: SortKey
    identity: Identity
    category: str
    owners: tuple[str, ...] = ()
    label_groups: tuple[str, ...] = ()
    node: NodeInfo | None = None
    queue_use: QueueUse | None = None
    """For a KaiwoJob or KaiwoService: its declared cluster queue ("" for the default) and
    namespace, counted so the queues' namespaces need no scan of every workload."""
    written_last_by_operator: bool = False

    @classmethod
    def of(
        cls,
        obj: Mapping[str, Any],
        *,
        api_version: str,
        kind: str,
        uid: str,
        resource_version: str,
        sequence: int,
        stored: Mapping[str, Any] | None = None,
    ) -> Entry:
        """What ``obj`` is filed under; ``stored`` is the form kept (default: ``obj``).

        A malformed object raises here (TypeError, ValueError, ...) and nothing is filed.
        """
        _check_shape(obj)
        meta = _metadata(obj)
        namespace = str(meta.get("namespace") or "")
        name = str(meta.get("name") or "")
        group = api_group_of(api_version)
        category = category_of(group, kind)
        owners: tuple[str, ...] = ()
        label_groups: tuple[str, ...] = ()
        node = None
        if category == NODE:
            node = NodeInfo.from_wire(obj)
        elif category == KUEUE_WORKLOAD:
            owners = _workload_owner_uids(obj)
        elif category == OBJECT:
            owners = owner_uids(obj) + _deployment_of(group, kind, namespace, obj)
            label_groups = tuple(
                label_group(key, value)
                for key, value in _labels(obj).items()
                if key in INDEXED_LABELS
            )
        return cls(
            object=obj if stored is None else stored,
            uid=uid,
            resource_version=resource_version,
            sequence=sequence,
            sort_key=(api_version, kind, namespace, name, uid),
            identity=(group, kind, namespace, name),
            category=category,
            owners=owners,
            label_groups=label_groups,
            node=node,
            queue_use=_queue_use(group, kind, obj),
            written_last_by_operator=written_last_by_operator(obj),
        )

    @classmethod
    def of_wire(
        cls, obj: Mapping[str, Any], *, sequence: int = 0, kueue_workload: bool = False
    ) -> Entry:
        """An object given whole (tests, ``kaiwo plan``): type and uid from the object;
        ``kueue_workload``: filed as a Kueue Workload whatever its ``apiVersion`` says."""
        meta = _metadata(obj)
        api_version = str(obj.get("apiVersion", ""))
        if kueue_workload and api_group_of(api_version) != KUEUE_GROUP:
            api_version = f"{KUEUE_GROUP}/v1beta1"
        return cls.of(
            obj,
            api_version=api_version,
            kind="Workload" if kueue_workload else str(obj.get("kind", "")),
            uid=str(meta.get("uid") or ""),
            resource_version=str(meta.get("resourceVersion") or ""),
            sequence=sequence,
        )


def label_group(key: str, value: str) -> str:
    """One string per label pair; "\\x00" cannot occur in a label key or value."""
    return f"{key}\x00{value}"


def _check_shape(obj: Mapping[str, Any]) -> None:
    """Every Kubernetes object's ``spec`` and ``status`` are objects: planning reads into them
    without checking each level (found by fuzzing: a Job whose ``spec`` was ``true``)."""
    for part in ("spec", "status"):
        value = obj.get(part)
        if value is not None and not isinstance(value, Mapping):
            raise TypeError(f"{part} must be an object, not {type(value).__name__}")


def _metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    labels = _metadata(obj).get("labels")
    return labels if isinstance(labels, Mapping) else {}


def deployment_key(namespace: str, name: str) -> str:
    """What a Deployment's pods are filed under besides their ReplicaSet's uid: no uid has a
    NUL in it, so it is never taken for one."""
    return f"Deployment\x00{namespace}\x00{name}"


def _deployment_of(
    group: str, kind: str, namespace: str, obj: Mapping[str, Any]
) -> tuple[str, ...]:
    if (group, kind) != (CORE_GROUP, "Pod") or made_by_kaiwo(obj):
        return ()
    deployment = deployment_of_pod(obj)
    return (deployment_key(namespace, deployment),) if deployment else ()


def owner_uids(obj: Mapping[str, Any]) -> tuple[str, ...]:
    """The uids in ``metadata.ownerReferences``, each once, in order."""
    refs = _metadata(obj).get("ownerReferences") or ()
    return tuple(
        dict.fromkeys(str(r["uid"]) for r in refs if isinstance(r, Mapping) and r.get("uid"))
    )


def kueue_job_key(namespace: str, kind: str, name: str) -> str:
    """What a Kueue Workload is filed under besides its job's uid: the job's kind and name,
    which outlive the job (no uid has a NUL in it, so it is never taken for one)."""
    return f"{kind}\x00{namespace}\x00{name}"


def _workload_owner_uids(workload: Mapping[str, Any]) -> tuple[str, ...]:
    owners = dict.fromkeys(owner_uids(workload))
    job_uid = _labels(workload).get(KUEUE_JOB_UID_LABEL)
    if job_uid:
        owners[str(job_uid)] = None
    # By name too: a Workload of a job that was deleted and is made again under the same
    # name is the new job's to Kueue until the garbage collector removes it (decision 0139).
    namespace = str(_metadata(workload).get("namespace") or "")
    for reference in _metadata(workload).get("ownerReferences") or ():
        if isinstance(reference, Mapping) and reference.get("kind") and reference.get("name"):
            owners[kueue_job_key(namespace, str(reference["kind"]), str(reference["name"]))] = None
    return tuple(owners)


def _queue_use(group: str, kind: str, obj: Mapping[str, Any]) -> QueueUse | None:
    """(declared cluster queue or "", namespace) of a Kaiwo workload Kueue queues, else
    None."""
    if kind not in _WORKLOAD_KINDS or group != KAIWO_GROUP:
        return None
    namespace = _metadata(obj).get("namespace")
    spec = obj.get("spec")
    if not isinstance(namespace, str) or not namespace or not isinstance(spec, Mapping):
        return None
    # A KaiwoJob whose RayJob runs on an existing Ray cluster is not queued (decision 0156)
    # and needs no LocalQueue: made for it, a LocalQueue ``default`` (of a ClusterQueue
    # ``default``) would have Kueue queue and kill it (decision 0159).
    if kind == "KaiwoJob" and on_existing_ray_cluster(spec.get("rayJob")):
        return None
    queue = spec.get("clusterQueue")
    return (queue if isinstance(queue, str) and queue else "", namespace)


def written_last_by_operator(obj: Mapping[str, Any]) -> bool:
    """Whether the newest ``managedFields`` entry outside the status subresource is the
    operator's (a tie with another manager's counts as theirs: their edit may be newer)."""
    entries = [
        entry
        for entry in _metadata(obj).get("managedFields") or ()
        if isinstance(entry, Mapping) and not entry.get("subresource")
    ]
    if not entries:
        return False
    newest = max(str(entry.get("time") or "") for entry in entries)
    last = {
        str(entry.get("manager")) for entry in entries if str(entry.get("time") or "") == newest
    }
    return last <= OPERATOR_FIELD_MANAGERS
