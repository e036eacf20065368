"""What the planner knows about the cluster: nodes, observed children, Kueue Workloads, namespaces.

Everything here is parsed from the JSON form the API server returns and is immutable, so every
planner can share one :class:`ClusterState` without copying it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeVar

from kaiwo_contracts.crds.quantity import MAX_QUANTITY

if TYPE_CHECKING:
    from kaiwo_planner.domain.status.findings import WorkloadFinding

_T = TypeVar("_T")

AMD_GPU_RESOURCE = "amd.com/gpu"
NVIDIA_GPU_RESOURCE = "nvidia.com/gpu"
GPU_RESOURCE_BY_VENDOR: Mapping[str, str] = MappingProxyType(
    {"amd": AMD_GPU_RESOURCE, "nvidia": NVIDIA_GPU_RESOURCE}
)

AMD_PRODUCT_LABEL = "amd.com/gpu.product-name"
AMD_COUNT_LABEL = "beta.amd.com/gpu.family.AI"
NVIDIA_PRODUCT_LABEL = "nvidia.com/gpu.product"
NVIDIA_COUNT_LABEL = "nvidia.com/gpu.count"
CONTROL_PLANE_LABELS = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")

KUEUE_JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"

# Words the AMD node labeller puts around the model name ("AMD_Instinct_MI300X_OAM" -> "mi300x").
_AMD_NAME_NOISE = ("instinct", "radeon", "_", "oam", "amd", "series", "gpu")

_BINARY_SUFFIXES = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL_SUFFIXES = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}


def parse_quantity(value: int | float | str) -> Decimal:
    """A Kubernetes resource quantity ("16Gi", "500m", "1e3", 4) as an exact number.

    Raises ValueError for anything that is not a quantity (a boolean, NaN, infinity).
    """
    if isinstance(value, bool):  # an int to Python, no quantity to Kubernetes
        raise ValueError(f"not a Kubernetes quantity: {value!r}")
    if isinstance(value, int | float):
        return _decimal(str(value), value)
    text = value.strip()
    for suffix, factor in _BINARY_SUFFIXES.items():
        if text.endswith(suffix):
            return _decimal(text[: -len(suffix)], value) * factor
    if text and text[-1] in _DECIMAL_SUFFIXES and not text[-1].isdigit():
        return _decimal(text[:-1], value) * _DECIMAL_SUFFIXES[text[-1]]
    return _decimal(text, value)


def _decimal(number: str, original: object) -> Decimal:
    try:
        parsed = Decimal(number)
    except InvalidOperation as error:
        raise ValueError(f"not a Kubernetes quantity: {original!r}") from error
    if not parsed.is_finite():
        raise ValueError(f"not a Kubernetes quantity: {original!r}")
    return parsed


def clean_amd_gpu_name(product_name: str) -> str:
    """The short model name used in pool names, e.g. ``AMD_Instinct_MI300X_OAM`` -> ``mi300x``."""
    name = product_name.lower()
    for noise in _AMD_NAME_NOISE:
        name = name.replace(noise, "")
    return name.strip()


def clean_nvidia_gpu_name(product: str) -> str:
    """The short model name used in pool names, e.g. ``Tesla-K80`` -> ``teslak80``."""
    return product.lower().replace("-", "")


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    effect: str
    value: str = ""

    def to_wire(self) -> dict[str, str]:
        wire = {"key": self.key, "effect": self.effect}
        if self.value:
            wire["value"] = self.value
        return wire


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """The facts about one Node that planning decisions use.

    CPU is in millicores and memory in bytes (both ``capacity`` and ``allocatable``); GPU counts
    are keyed by resource name (``amd.com/gpu``, ``nvidia.com/gpu``). ``gpu_vendor``,
    ``gpu_model`` and ``gpu_count`` come from the device plugins' node labels; NVIDIA wins when
    a node carries both vendors' labels, as upstream does.
    """

    name: str
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict, hash=False)
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool = True
    cpu_capacity_millis: int = 0
    cpu_allocatable_millis: int = 0
    memory_capacity_bytes: int = 0
    memory_allocatable_bytes: int = 0
    gpu_capacity: Mapping[str, int] = field(default_factory=dict, hash=False)
    gpu_allocatable: Mapping[str, int] = field(default_factory=dict, hash=False)

    @classmethod
    def from_wire(cls, node: Mapping[str, Any]) -> NodeInfo:
        meta = node.get("metadata") or {}
        spec = node.get("spec") or {}
        status = node.get("status") or {}
        capacity = status.get("capacity") or {}
        allocatable = status.get("allocatable") or {}
        return cls(
            name=str(meta.get("name", "")),
            uid=str(meta.get("uid", "")),
            labels=_string_map(meta.get("labels")),
            taints=tuple(
                Taint(key=t["key"], effect=t.get("effect", ""), value=t.get("value", "") or "")
                for t in spec.get("taints") or ()
            ),
            unschedulable=bool(spec.get("unschedulable", False)),
            ready=_is_ready(status.get("conditions") or ()),
            cpu_capacity_millis=_millis(capacity.get("cpu")),
            cpu_allocatable_millis=_millis(allocatable.get("cpu")),
            memory_capacity_bytes=_whole_units(capacity.get("memory")),
            memory_allocatable_bytes=_whole_units(allocatable.get("memory")),
            gpu_capacity=_gpu_counts(capacity),
            gpu_allocatable=_gpu_counts(allocatable),
        )

    @property
    def capacity_reported(self) -> bool:
        """The kubelet has filled in the node's CPU and memory capacity."""
        return self.cpu_capacity_millis > 0 and self.memory_capacity_bytes > 0

    @property
    def is_control_plane(self) -> bool:
        return any(label in self.labels for label in CONTROL_PLANE_LABELS)

    @property
    def cpu_cores(self) -> int:
        """Whole CPU cores of capacity, rounded up (``Quantity.Value()`` in Go)."""
        return math.ceil(self.cpu_capacity_millis / 1000)

    @property
    def memory_gib(self) -> int:
        """Whole GiB of memory capacity, rounded down."""
        return self.memory_capacity_bytes // 2**30

    @property
    def gpu_vendor(self) -> str | None:
        """``nvidia``, ``amd`` or None, from the device plugins' labels (capacity as fallback)."""
        if NVIDIA_COUNT_LABEL in self.labels or (
            NVIDIA_PRODUCT_LABEL in self.labels and self.gpu_capacity.get(NVIDIA_GPU_RESOURCE)
        ):
            return "nvidia"
        if AMD_COUNT_LABEL in self.labels or (
            AMD_PRODUCT_LABEL in self.labels and self.gpu_capacity.get(AMD_GPU_RESOURCE)
        ):
            return "amd"
        return None

    @property
    def gpu_model(self) -> str | None:
        """The short model name (``mi300x``, ``teslak80``) or None when no product label is set."""
        if NVIDIA_PRODUCT_LABEL in self.labels and self.gpu_vendor == "nvidia":
            return clean_nvidia_gpu_name(self.labels[NVIDIA_PRODUCT_LABEL])
        if AMD_PRODUCT_LABEL in self.labels and self.gpu_vendor != "nvidia":
            return clean_amd_gpu_name(self.labels[AMD_PRODUCT_LABEL])
        return None

    @property
    def gpu_count(self) -> int:
        """GPUs on the node for its vendor: the count label, else the vendor's capacity."""
        vendor = self.gpu_vendor
        if vendor is None:
            return 0
        label = NVIDIA_COUNT_LABEL if vendor == "nvidia" else AMD_COUNT_LABEL
        if label in self.labels:
            try:
                return min(max(int(self.labels[label]), 0), MAX_QUANTITY)
            except ValueError:
                return 0
        return self.gpu_capacity.get(GPU_RESOURCE_BY_VENDOR[vendor], 0)

    def allocatable_gpus(self, vendor: str) -> int:
        resource = GPU_RESOURCE_BY_VENDOR.get(vendor.lower())
        return self.gpu_allocatable.get(resource, 0) if resource else 0

    def has_taint(self, key: str, *, value: str, effect: str) -> bool:
        return any(t.key == key and t.value == value and t.effect == effect for t in self.taints)


def _string_map(value: object) -> dict[str, str]:
    """A label map as the API server holds it: string keys to string values. Anything else
    in an observed Node (a forged or damaged observation) is left out rather than let it
    break every decision that reads the node's labels."""
    if not isinstance(value, Mapping):
        return {}
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}


def _is_ready(conditions: Iterable[Mapping[str, Any]]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _millis(value: object) -> int:
    if value is None:
        return 0
    try:
        return math.ceil(_within_range(parse_quantity(value)) * 1000)  # type: ignore[arg-type]
    except (ValueError, TypeError):
        return 0


def _whole_units(value: object) -> int:
    if value is None:
        return 0
    try:
        return math.ceil(_within_range(parse_quantity(value)))  # type: ignore[arg-type]
    except (ValueError, TypeError):
        return 0


def _within_range(value: Decimal) -> Decimal:
    """``value`` capped at the largest quantity Kubernetes holds (and never below 0): a Node
    that reports more (``1e100Gi``) neither becomes a number of a hundred digits in a pool's
    name and quotas nor costs the arithmetic of one."""
    return min(max(value, Decimal(0)), Decimal(MAX_QUANTITY))


def _gpu_counts(resources: Mapping[str, Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for resource in (AMD_GPU_RESOURCE, NVIDIA_GPU_RESOURCE):
        if resource in resources:
            counts[resource] = _whole_units(resources[resource])
    return counts


def _owner_uids(obj: Mapping[str, Any]) -> list[str]:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or ()
    return [str(ref["uid"]) for ref in refs if ref.get("uid")]


def _uid(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    labels: Mapping[str, str] = (obj.get("metadata") or {}).get("labels") or {}
    return labels


def _by_identity(obj: Mapping[str, Any]) -> tuple[str, str, str, str]:
    meta = obj.get("metadata") or {}
    return (
        str(obj.get("apiVersion", "")),
        str(obj.get("kind", "")),
        str(meta.get("namespace") or ""),
        str(meta.get("name") or ""),
    )


QueueUse = tuple[str, str]
"""(cluster queue a workload declares, "" for the default; its namespace)."""


@dataclass(frozen=True)
class ClusterState:
    """A read-only snapshot of the cluster as the planner's projection knows it.

    ``objects``: every observed object that may be a child of something we own (Jobs, RayJobs,
    Deployments, AppWrappers, RayServices, PVCs, ConfigMaps, Pods, LocalQueues, ...), in JSON.
    ``kueue_workloads``: observed ``kueue.x-k8s.io/v1beta1`` Workloads.
    ``namespaces``: names of the namespaces that exist.
    ``findings``: the monitor's latest finding per workload uid.
    """

    nodes: tuple[NodeInfo, ...] = ()
    objects: tuple[dict[str, Any], ...] = ()
    kueue_workloads: tuple[dict[str, Any], ...] = ()
    namespaces: frozenset[str] = frozenset()
    findings: Mapping[str, WorkloadFinding] = field(default_factory=dict)
    """The monitor's latest finding per workload uid
    (:mod:`kaiwo_planner.domain.status.findings`)."""
    _children: Mapping[str, tuple[dict[str, Any], ...]] = field(
        init=False, repr=False, compare=False, hash=False
    )
    _workloads: Mapping[str, tuple[dict[str, Any], ...]] = field(
        init=False, repr=False, compare=False, hash=False
    )
    # Values derived from this snapshot (parsed KaiwoConfig, GPU statistics, ...), computed on
    # first use. The snapshot never changes, so neither do they; see :meth:`derived`.
    _derived: dict[Hashable, Any] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", tuple(sorted(self.nodes, key=lambda n: n.name)))
        object.__setattr__(self, "_children", _index_by_owner(self.objects))
        by_owner: dict[str, list[dict[str, Any]]] = {}
        for workload in sorted(self.kueue_workloads, key=_by_identity):
            owners = set(_owner_uids(workload))
            job_uid = _labels(workload).get(KUEUE_JOB_UID_LABEL)
            if job_uid:
                owners.add(job_uid)
            for owner in owners:
                by_owner.setdefault(owner, []).append(workload)
        object.__setattr__(self, "_workloads", {k: tuple(v) for k, v in by_owner.items()})

    @classmethod
    def from_wire(
        cls,
        *,
        nodes: Iterable[Mapping[str, Any]] = (),
        objects: Iterable[dict[str, Any]] = (),
        kueue_workloads: Iterable[dict[str, Any]] = (),
        namespaces: Iterable[str] = (),
    ) -> ClusterState:
        """Build the state from API-server JSON (Node objects, children, Workloads)."""
        return cls(
            nodes=tuple(NodeInfo.from_wire(n) for n in nodes),
            objects=tuple(objects),
            kueue_workloads=tuple(kueue_workloads),
            namespaces=frozenset(namespaces),
        )

    def children_of(self, owner_uid: str) -> tuple[dict[str, Any], ...]:
        """Objects with an ownerReference to ``owner_uid``, in plan order.

        A reference across namespaces is ignored: a namespaced owner's children live in its
        namespace (Kubernetes' garbage collector ignores such references too), so a Job in
        ``vision`` naming a KaiwoJob of ``ml-team`` by uid changes nothing of that KaiwoJob.
        """
        children = self._children.get(owner_uid, ())
        owner_namespace = self.namespace_of(owner_uid) if children else None
        if not owner_namespace:  # owner not observed, or cluster-scoped
            return children
        if all(_namespace(child) == owner_namespace for child in children):
            return children
        return tuple(child for child in children if _namespace(child) == owner_namespace)

    def namespace_of(self, uid: str) -> str | None:
        """The namespace of the observed object with this uid ("" cluster-scoped, None unknown)."""
        namespaces = self.derived(
            ("namespace-by-uid",), lambda: {_uid(o): _namespace(o) for o in self.objects}
        )
        return namespaces.get(uid)

    def child_of(
        self, owner_uid: str, *, kind: str, name: str | None = None
    ) -> dict[str, Any] | None:
        """The first child of ``owner_uid`` of this kind (and name, when given), or None."""
        for child in self.children_of(owner_uid):
            meta = child.get("metadata") or {}
            if child.get("kind") == kind and (name is None or meta.get("name") == name):
                return child
        return None

    def kueue_workloads_for(self, job_uid: str) -> tuple[dict[str, Any], ...]:
        """Kueue Workloads created for the Kueue-managed object with this uid.

        ``job_uid`` is the uid of the Job, RayJob, AppWrapper or Pod Kueue manages (its owner
        reference or the ``kueue.x-k8s.io/job-uid`` label), not the KaiwoJob's.
        """
        return self._workloads.get(job_uid, ())

    def kueue_workload_for(self, job_uid: str) -> dict[str, Any] | None:
        found = self.kueue_workloads_for(job_uid)
        return found[0] if found else None

    def workload_queue_uses(self) -> tuple[QueueUse, ...] | None:
        """Every distinct (declared queue, namespace) of the Kaiwo workloads, sorted, when an
        index keeps them (the projection's state); None: callers scan the workloads."""
        return None

    def objects_labelled(
        self, key: str, value: str, *, kind: str | None = None
    ) -> tuple[dict[str, Any], ...]:
        """Observed objects carrying label ``key=value`` (optionally of one kind), in plan order."""
        index = self.derived(("objects-by-label",), lambda: _index_by_label(self.objects))
        found = index.get((key, value), ())
        return found if kind is None else tuple(obj for obj in found if obj.get("kind") == kind)

    def derived(self, key: Hashable, compute: Callable[[], _T]) -> _T:
        """``compute()``, worked out once per snapshot and ``key``.

        For values that depend only on this state (and on ``key``): planning one object after
        another against the same snapshot then parses the KaiwoConfig or sums GPUs once.
        """
        try:
            return self._derived[key]  # type: ignore[no-any-return]
        except KeyError:
            value = compute()
            self._derived[key] = value
            return value

    def across_snapshots(
        self,
        key: Hashable,
        kinds: tuple[tuple[str, str], ...],  # noqa: ARG002 (read by the projection's states)
        compute: Callable[[], _T],
    ) -> _T:
        """``compute()`` for a value read from objects of ``kinds`` (group, kind) alone.

        Here once per snapshot, like :meth:`derived`; a state taken from a projection keeps
        the value across snapshots until an object of one of ``kinds`` changes.
        """
        return self.derived(key, compute)

    def objects_of_kind(self, *, group: str, kind: str) -> tuple[dict[str, Any], ...]:
        """Observed objects of one API group (``""`` for core) and kind, in plan order."""
        index = self.derived(("objects-by-kind",), lambda: _index_by_kind(self.objects))
        return index.get((group, kind), ())

    def find_object(
        self, *, group: str, kind: str, name: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        """The observed object of this group, kind, namespace and name, or None."""
        for obj in self.objects_of_kind(group=group, kind=kind):
            meta = obj.get("metadata") or {}
            if meta.get("name") == name and (meta.get("namespace") or None) == (namespace or None):
                return obj
        return None

    def node(self, name: str) -> NodeInfo | None:
        return next((n for n in self.nodes if n.name == name), None)

    def has_namespace(self, name: str) -> bool:
        return name in self.namespaces


def _index_by_owner(
    objects: Iterable[dict[str, Any]],
) -> dict[str, tuple[dict[str, Any], ...]]:
    index: dict[str, list[dict[str, Any]]] = {}
    for obj in sorted(objects, key=_by_identity):
        for owner in dict.fromkeys(_owner_uids(obj)):
            index.setdefault(owner, []).append(obj)
    return {owner: tuple(children) for owner, children in index.items()}


def api_group_of(api_version: str) -> str:
    """``batch/v1`` -> ``batch``; ``v1`` -> "" (the core group)."""
    return api_version.rpartition("/")[0]


def _index_by_label(
    objects: Iterable[dict[str, Any]],
) -> dict[tuple[str, str], tuple[dict[str, Any], ...]]:
    index: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for obj in sorted(objects, key=_by_identity):
        for label, value in _labels(obj).items():
            index.setdefault((str(label), str(value)), []).append(obj)
    return {key: tuple(found) for key, found in index.items()}


def _index_by_kind(
    objects: Iterable[dict[str, Any]],
) -> dict[tuple[str, str], tuple[dict[str, Any], ...]]:
    index: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for obj in sorted(objects, key=_by_identity):
        key = (api_group_of(str(obj.get("apiVersion", ""))), str(obj.get("kind", "")))
        index.setdefault(key, []).append(obj)
    return {key: tuple(found) for key, found in index.items()}


def _namespace(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")


def object_uid(obj: Mapping[str, Any]) -> str:
    """The ``metadata.uid`` of a JSON object ("" when absent)."""
    return _uid(obj)
