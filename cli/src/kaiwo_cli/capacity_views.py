"""What ``kaiwo queues`` and ``kaiwo nodes`` print, from plain objects: pure functions.

Queues: Kueue's ClusterQueues (nominal quota per flavor and resource, and what admitted
Workloads use of it), LocalQueues, and the Workloads still waiting, in admission order.
Nodes: GPU nodes by vendor and pool (the ``kaiwo/nodepool`` label the queue configuration
writes), with GPUs allocatable and requested by the pods bound to them (upstream's
``kaiwo status amd|nvidia``). Node facts are read as the planner reads them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final

from kaiwo_planner.domain.state.nodes import (
    AMD_PRODUCT_LABEL,
    GPU_RESOURCE_BY_VENDOR,
    NODEPOOL_LABEL,
    NVIDIA_PRODUCT_LABEL,
    NodeInfo,
    parse_quantity,
)

from kaiwo_cli.text_tables import render_table
from kaiwo_cli.workload_views import age

if TYPE_CHECKING:
    from kaiwo_contracts.queue_estimates.kueue import Placed

FINISHED_POD_PHASES: Final = frozenset({"Succeeded", "Failed"})
LOCAL_QUEUE_COUNTS: Final = ("pendingWorkloads", "reservingWorkloads", "admittedWorkloads")
"""A LocalQueue's Workload counts in its status, in the order the table shows them."""


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def _status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("status") or {}


def is_admitted(kueue_workload: Mapping[str, Any]) -> bool:
    status = _status(kueue_workload)
    if status.get("admission"):
        return True
    return any(
        c.get("type") == "Admitted" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )


def is_finished(kueue_workload: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") == "Finished" and c.get("status") == "True"
        for c in _status(kueue_workload).get("conditions") or []
    )


def format_quantity(value: Decimal) -> str:
    """A sum of quantities written back short: ``16``, ``1.5``, ``512Gi``."""
    for suffix, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20)):
        if value >= size and value % size == 0:
            return f"{int(value // size)}{suffix}"
    return f"{value.normalize():f}"


def flavor_usage(
    kueue_workloads: Sequence[Mapping[str, Any]],
) -> dict[tuple[str, str, str], Decimal]:
    """(cluster queue, flavor, resource) -> what admitted, unfinished Workloads use."""
    used: dict[tuple[str, str, str], Decimal] = defaultdict(Decimal)
    for workload in kueue_workloads:
        admission = _status(workload).get("admission") or {}
        if not admission or is_finished(workload):
            continue
        queue = str(admission.get("clusterQueue", ""))
        for assignment in admission.get("podSetAssignments") or []:
            flavors = assignment.get("flavors") or {}
            for resource, amount in (assignment.get("resourceUsage") or {}).items():
                flavor = str(flavors.get(resource, ""))
                used[(queue, flavor, str(resource))] += parse_quantity(amount)
    return used


def cluster_queue_table(
    cluster_queues: Sequence[Mapping[str, Any]], kueue_workloads: Sequence[Mapping[str, Any]]
) -> str:
    """One row per ClusterQueue, flavor and resource: nominal quota and use; with the queue's
    pending and admitted Workload counts on its first row."""
    used = flavor_usage(kueue_workloads)
    counts = _counts_by(kueue_workloads, _cluster_queue_of)
    rows = []
    for queue in sorted(cluster_queues, key=lambda q: str(_meta(q).get("name", ""))):
        name = str(_meta(queue).get("name", ""))
        pending, admitted = counts.get(name, (0, 0))
        first = True
        for group in _spec(queue).get("resourceGroups") or []:
            for flavor in group.get("flavors") or []:
                for resource in flavor.get("resources") or []:
                    key = (name, str(flavor.get("name", "")), str(resource.get("name", "")))
                    rows.append(
                        [
                            name if first else "",
                            key[1],
                            key[2],
                            str(resource.get("nominalQuota", "")),
                            format_quantity(used.get(key, Decimal(0))),
                            str(pending) if first else "",
                            str(admitted) if first else "",
                        ]
                    )
                    first = False
        if first:
            rows.append([name, "-", "-", "-", "-", str(pending), str(admitted)])
    return render_table(
        ["CLUSTERQUEUE", "FLAVOR", "RESOURCE", "QUOTA", "USED", "PENDING", "ADMITTED"], rows
    )


def local_queue_table(
    local_queues: Sequence[Mapping[str, Any]], kueue_workloads: Sequence[Mapping[str, Any]]
) -> str:
    counts = _counts_by(
        kueue_workloads,
        lambda w: f"{_meta(w).get('namespace')}/{_spec(w).get('queueName')}",
    )
    rows = []
    for queue in sorted(
        local_queues, key=lambda q: (str(_meta(q).get("namespace")), str(_meta(q).get("name")))
    ):
        key = f"{_meta(queue).get('namespace')}/{_meta(queue).get('name')}"
        pending, admitted = counts.get(key, (0, 0))
        rows.append(
            [
                str(_meta(queue).get("namespace", "")),
                str(_meta(queue).get("name", "")),
                str(_spec(queue).get("clusterQueue", "")),
                str(pending),
                str(admitted),
            ]
        )
    return render_table(["NAMESPACE", "LOCALQUEUE", "CLUSTERQUEUE", "PENDING", "ADMITTED"], rows)


def local_queue_status_table(local_queues: Sequence[Mapping[str, Any]]) -> str:
    """The LocalQueues as their own status tells them, for a user who may read them but not
    the ClusterQueues or Kueue's Workloads (a namespace's ``edit``, decision 0143): the
    ClusterQueue each points to, its pending, reserving and admitted Workload counts (on its
    first row), and per flavor and resource what its admitted Workloads use."""
    rows = []
    for queue in sorted(
        local_queues, key=lambda q: (str(_meta(q).get("namespace")), str(_meta(q).get("name")))
    ):
        status = _status(queue)
        first = [
            str(_meta(queue).get("namespace", "")),
            str(_meta(queue).get("name", "")),
            str(_spec(queue).get("clusterQueue", "")),
            *(str(status.get(count) or 0) for count in LOCAL_QUEUE_COUNTS),
        ]
        # v1beta1 says flavorUsage; v1beta2 renamed it flavorsUsage.
        usage = [
            (str(flavor.get("name", "")), str(resource.get("name", "")), resource.get("total"))
            for flavor in status.get("flavorUsage") or status.get("flavorsUsage") or []
            for resource in flavor.get("resources") or []
        ]
        if not usage:
            rows.append([*first, "-", "-", "-"])
        for index, (flavor_name, resource_name, total) in enumerate(usage):
            used = format_quantity(parse_quantity(total if total is not None else 0))
            lead = first if index == 0 else [""] * len(first)
            rows.append([*lead, flavor_name, resource_name, used])
    return render_table(
        [
            "NAMESPACE",
            "LOCALQUEUE",
            "CLUSTERQUEUE",
            "PENDING",
            "RESERVING",
            "ADMITTED",
            "FLAVOR",
            "RESOURCE",
            "USED",
        ],
        rows,
    )


def pending_table(
    kueue_workloads: Sequence[Mapping[str, Any]],
    *,
    now: datetime,
    estimates: Mapping[str, Placed] | None = None,
) -> str:
    """The Workloads not admitted yet, by LocalQueue in admission order (priority, then age);
    with ``estimates`` (by Kueue Workload uid), each one's place in its ClusterQueue's GPU lane
    (#), estimated start, the 80% band and the basis (decision 0055)."""
    waiting = [w for w in kueue_workloads if not is_admitted(w) and not is_finished(w)]
    by_queue: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for workload in waiting:
        by_queue[f"{_meta(workload).get('namespace')}/{_spec(workload).get('queueName')}"].append(
            workload
        )
    rows = []
    for queue in sorted(by_queue):
        ordered = sorted(
            by_queue[queue],
            key=lambda w: (
                -int(_spec(w).get("priority") or 0),
                str(_meta(w).get("creationTimestamp", "")),
            ),
        )
        for position, workload in enumerate(ordered, start=1):
            row = [
                queue,
                str(position),
                _owner(workload),
                str(_spec(workload).get("priority") or 0),
                age(_meta(workload).get("creationTimestamp"), now),
            ]
            if estimates is not None:
                row += _estimate_cells(estimates.get(str(_meta(workload).get("uid"))), now=now)
            rows.append(row)
    header = ["LOCALQUEUE", "POSITION", "WORKLOAD", "PRIORITY", "AGE"]
    if estimates is not None:
        header += ["#", "STARTS", "80%", "BASIS"]
    return render_table(header, rows)


def _estimate_cells(placed: Placed | None, *, now: datetime) -> list[str]:
    from kaiwo_contracts.queue_estimates.kueue import band_words, basis_words, start_words

    if placed is None:
        return ["-", "-", "-", "-"]
    eta = placed.eta
    return [
        f"{eta.position} in {placed.queue}",
        start_words(eta, now=now),
        band_words(eta),
        basis_words(eta),
    ]


def _owner(kueue_workload: Mapping[str, Any]) -> str:
    refs = _meta(kueue_workload).get("ownerReferences") or []
    if refs:
        return f"{refs[0].get('kind')}/{refs[0].get('name')}"
    return f"Workload/{_meta(kueue_workload).get('name')}"


def _cluster_queue_of(kueue_workload: Mapping[str, Any]) -> str:
    admission = _status(kueue_workload).get("admission") or {}
    return str(admission.get("clusterQueue") or "")


def _counts_by(
    kueue_workloads: Sequence[Mapping[str, Any]], key: Any
) -> dict[str, tuple[int, int]]:
    """key -> (pending, admitted) among unfinished Workloads."""
    counts: dict[str, tuple[int, int]] = {}
    for workload in kueue_workloads:
        if is_finished(workload):
            continue
        name = key(workload)
        pending, admitted = counts.get(name, (0, 0))
        counts[name] = (pending, admitted + 1) if is_admitted(workload) else (pending + 1, admitted)
    return counts


# --------------------------------------------------------------------------- nodes


def gpus_requested_by_node(pods: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Node name -> GPUs (any vendor) requested by its pods that have not finished."""
    requested: dict[str, int] = defaultdict(int)
    resources = set(GPU_RESOURCE_BY_VENDOR.values())
    for pod in pods:
        node = _spec(pod).get("nodeName")
        if not node or _status(pod).get("phase") in FINISHED_POD_PHASES:
            continue
        for container in _spec(pod).get("containers") or []:
            wanted = container.get("resources") or {}
            amounts = {**(wanted.get("limits") or {}), **(wanted.get("requests") or {})}
            for resource in resources & amounts.keys():
                requested[str(node)] += int(parse_quantity(amounts[resource]))
    return requested


def node_table(
    nodes: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    *,
    vendor: str | None = None,
) -> str:
    """GPU nodes by vendor, pool and name: model, GPUs used of allocatable, readiness."""
    requested = gpus_requested_by_node(pods)
    rows = []
    for gpu_vendor, node in sorted(
        gpu_nodes(nodes, vendor=vendor),
        key=lambda found: (found[0], found[1].labels.get(NODEPOOL_LABEL, ""), found[1].name),
    ):
        allocatable = node.allocatable_gpus(gpu_vendor)
        rows.append(
            [
                gpu_vendor,
                node.labels.get(NODEPOOL_LABEL, "-"),
                node.name,
                _product(node),
                f"{requested.get(node.name, 0)}/{allocatable}",
                "Ready" if node.ready else "NotReady",
            ]
        )
    return render_table(["VENDOR", "POOL", "NODE", "MODEL", "GPUS USED", "STATUS"], rows)


def _product(node: NodeInfo) -> str:
    """The GPU model as the device plugin labels it (the planner's short name otherwise)."""
    return (
        node.labels.get(NVIDIA_PRODUCT_LABEL)
        or node.labels.get(AMD_PRODUCT_LABEL)
        or node.gpu_model
        or "-"
    )


def gpu_nodes(
    nodes: Sequence[Mapping[str, Any]], *, vendor: str | None = None
) -> list[tuple[str, NodeInfo]]:
    """The nodes with GPUs (of ``vendor``, when given), each with its GPUs' vendor."""
    found = (NodeInfo.from_wire(n) for n in nodes)
    return [
        (node.gpu_vendor, node)
        for node in found
        if node.gpu_vendor is not None and (vendor is None or node.gpu_vendor == vendor)
    ]


def pool_summary(
    nodes: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    *,
    vendor: str | None = None,
) -> str:
    """Per vendor and pool: nodes, and GPUs used of allocatable."""
    requested = gpus_requested_by_node(pods)
    totals: dict[tuple[str, str], list[int]] = {}
    for gpu_vendor, node in gpu_nodes(nodes, vendor=vendor):
        key = (gpu_vendor, node.labels.get(NODEPOOL_LABEL, "-"))
        entry = totals.setdefault(key, [0, 0, 0])
        entry[0] += 1
        entry[1] += requested.get(node.name, 0)
        entry[2] += node.allocatable_gpus(gpu_vendor)
    rows = [
        [vendor, pool, str(count), f"{used}/{allocatable}"]
        for (vendor, pool), (count, used, allocatable) in sorted(totals.items())
    ]
    return render_table(["VENDOR", "POOL", "NODES", "GPUS USED"], rows)
