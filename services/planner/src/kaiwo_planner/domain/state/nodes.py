"""What the planner knows of a Node, and Kubernetes resource quantities.

Everything here is parsed from the JSON form the API server returns and is immutable.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from types import MappingProxyType
from typing import Any

from kaiwo_contracts.confinement import (
    GPU_TAINT_EFFECT,
    GPU_TAINT_RECORD_ANNOTATION,
    GPU_TAINT_VALUE,
)
from kaiwo_contracts.crds.quantity import MAX_QUANTITY

AMD_GPU_RESOURCE = "amd.com/gpu"
NVIDIA_GPU_RESOURCE = "nvidia.com/gpu"
GPU_RESOURCE_BY_VENDOR: Mapping[str, str] = MappingProxyType(
    {"amd": AMD_GPU_RESOURCE, "nvidia": NVIDIA_GPU_RESOURCE}
)

AMD_PRODUCT_LABEL = "amd.com/gpu.product-name"
AMD_COUNT_LABEL = "beta.amd.com/gpu.family.AI"
NVIDIA_PRODUCT_LABEL = "nvidia.com/gpu.product"
NVIDIA_COUNT_LABEL = "nvidia.com/gpu.count"
NODEPOOL_LABEL = "kaiwo/nodepool"
"""The node pool the operator put a node in (:mod:`kaiwo_planner.domain.queues.node_pools`);
Kueue's flavor of that pool selects its nodes by it."""
CONTROL_PLANE_LABELS = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")

# Words the AMD node labeller puts around the model name ("AMD_Instinct_MI300X_OAM" -> "mi300x").
_AMD_NAME_NOISE = ("instinct", "radeon", "_", "oam", "amd", "series", "gpu")

_BINARY_SUFFIXES: Mapping[str, int] = MappingProxyType(
    {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
)
_DECIMAL_SUFFIXES: Mapping[str, Decimal] = MappingProxyType(
    {
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
)


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


def gpu_taint(key: str) -> Taint:
    """The GPU taint the operator puts on GPU nodes under ``key`` (``<key>=true:NoSchedule``)."""
    return Taint(key=key, effect=GPU_TAINT_EFFECT, value=GPU_TAINT_VALUE)


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
    gpu_taint_record: str = ""
    """The annotation ``kaiwo/gpu-taint``: the key of the GPU taint the operator added to the
    node (decision 0145), or empty."""

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
            gpu_taint_record=_string_map(meta.get("annotations")).get(
                GPU_TAINT_RECORD_ANNOTATION, ""
            ),
        )

    @property
    def recorded_gpu_taint_key(self) -> str | None:
        """The key of the GPU taint the operator recorded on this node, while the node still
        carries that taint as the operator adds it (``<key>=true:NoSchedule``): a record whose
        taint was removed by hand, or changed to another value or effect, names nothing.

        The projection holds no ``managedFields``, so the record is taken by its value alone,
        not by its field manager (as the executor does before moving it, decision 0145): read
        here only to let GPU pods tolerate the taint (decision 0149), a record an
        administrator wrote at most lets a GPU pod onto a node whose taint they named so."""
        record = self.gpu_taint_record
        if record and gpu_taint(record) in self.taints:
            return record
        return None

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
