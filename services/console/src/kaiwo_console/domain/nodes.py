"""What each GPU node's GPUs do: the monitor's readings mapped to nodes through the Pods. Pure.

The monitor reads GPU utilization per *workload* (``UtilizationV1``: the workload's uid, one
ratio over its Pods, and the stretches below its thresholds); Kubernetes places *Pods* on
nodes (``spec.nodeName``). Every Pod of a KaiwoJob or KaiwoService carries its workload's uid
(label ``kaiwo.silogen.ai/run-id``), so a node's GPUs in use are, over the workloads'
Pods bound to it, the Pod's GPUs times its workload's latest ratio. A workload spread over
several nodes counts its one ratio on each (the monitor aggregates its Pods with ``Max``, so
a node's figure is then an upper bound).

* :func:`node_views`: the page now, from the live state (which Pods are where, and each
  workload's conditions) and the latest readings; a workload is flagged idle when the
  planner says so (``GpuIdle`` or ``ResourceUnderutilization`` True on it) or, before the
  planner has, when the monitor's fresh reading has an open stretch below a threshold.
* :class:`NodeRecords`: the record over time, folded from the event store in order: Pod
  observations (where each Pod ran when) and readings. Each reading, and each Pod's arrival
  or departure, gives its nodes a sample of GPUs in use; samples within one minute are
  merged and those older than the window dropped, so memory stays bounded (a day of minutes
  per node).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Final

from kaiwo_console.domain.cluster import (
    POD,
    ClusterState,
    Visible,
    condition,
    meta,
    spec,
    status,
)
from kaiwo_console.domain.node_rows import NodeRow, node_rows, pod_gpus

LABEL_RUN_ID: Final = "kaiwo.silogen.ai/run-id"
LABEL_TYPE: Final = "kaiwo.silogen.ai/type"
LABEL_NAME: Final = "kaiwo.silogen.ai/name"
WORKLOAD_TYPES: Final = {"job": "KaiwoJob", "service": "KaiwoService"}
FRESH_FOR: Final = timedelta(minutes=5)
"""A reading older than this says nothing about now (the planner's rule: ten monitor ticks)."""
IDLE_CONDITIONS: Final = ("GpuIdle", "ResourceUnderutilization")
"""The planner's verdicts on the monitor's readings, strongest first."""
DONE_PHASES: Final = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True, slots=True)
class Placement:
    """A workload's Pod bound to a node, holding ``gpus`` of its GPUs."""

    node: str
    uid: str
    """The workload's uid (its Pods' ``kaiwo.silogen.ai/run-id``)."""
    kind: str
    namespace: str
    name: str
    gpus: int


def placement_of(pod: Mapping[str, Any]) -> Placement | None:
    """Where a workload's Pod holds GPUs; None for a Pod of no workload, not bound, done,
    or holding no GPU."""
    labels = meta(pod).get("labels") or {}
    uid, node = str(labels.get(LABEL_RUN_ID) or ""), str(spec(pod).get("nodeName") or "")
    if not uid or not node or status(pod).get("phase") in DONE_PHASES:
        return None
    gpus = pod_gpus(pod)
    if not gpus:
        return None
    return Placement(
        node=node,
        uid=uid,
        kind=WORKLOAD_TYPES.get(str(labels.get(LABEL_TYPE) or ""), "KaiwoJob"),
        namespace=str(meta(pod).get("namespace") or ""),
        name=str(labels.get(LABEL_NAME) or ""),
        gpus=gpus,
    )


@dataclass(frozen=True, slots=True)
class Reading:
    """The monitor's latest reading of one workload (``UtilizationV1``, reduced)."""

    at: datetime
    """The end of its window."""
    ratio: float | None
    """None: the metrics endpoint had no sample for the workload's Pods."""
    below_since: datetime | None = None
    """Start of the open stretch below the low-utilization or the idle threshold."""
    namespace: str = ""
    """The workload's namespace ("": not told). Anyone who may create a Pod elsewhere may
    label it with the workload's uid: the reading is of the Pods of this namespace only
    (decision 0252)."""

    def fresh(self, now: datetime) -> bool:
        return now - self.at <= FRESH_FOR

    def of(self, placement: Placement) -> bool:
        """Whether this reading is of the workload ``placement``'s Pod runs for."""
        return not self.namespace or self.namespace == placement.namespace


def reading_of(placement: Placement, latest: Mapping[str, Reading]) -> Reading | None:
    """The latest reading of the workload ``placement``'s Pod runs for, or None."""
    found = latest.get(placement.uid)
    return found if found is not None and found.of(placement) else None


@dataclass(frozen=True, slots=True)
class UsedSample:
    """From ``at`` on, ``used`` of the node's GPUs were busy (None: no reading known)."""

    at: datetime
    used: float | None


def gpus_in_use(
    placements: Iterable[Placement], latest: Mapping[str, Reading], *, now: datetime | None
) -> float | None:
    """GPUs busy over ``placements``: each one's GPUs times its workload's ratio. None when
    GPUs are held and no holder has a (fresh, when ``now`` is given) reading; 0 when none
    is held."""
    held, used, known = False, 0.0, False
    for placement in placements:
        held = True
        reading = reading_of(placement, latest)
        if reading is None or reading.ratio is None:
            continue
        if now is not None and not reading.fresh(now):
            continue
        known = True
        used += placement.gpus * reading.ratio
    if not held:
        return 0.0
    return used if known else None


@dataclass
class NodeRecords:
    """Each node's GPUs in use over time, folded from the event store in its order."""

    window: timedelta = timedelta(hours=24)
    resolution: timedelta = timedelta(minutes=1)
    placements: dict[tuple[str, str], Placement] = field(default_factory=dict)
    """Bound Pods holding GPUs, by (namespace, Pod name)."""
    latest: dict[str, Reading] = field(default_factory=dict)
    """Each workload's latest reading, by uid."""
    samples: dict[str, deque[UsedSample]] = field(default_factory=dict)
    _on_node: dict[str, dict[tuple[str, str], Placement]] = field(default_factory=dict)
    _of_workload: dict[str, dict[tuple[str, str], Placement]] = field(default_factory=dict)
    """The placements indexed by node and by workload uid (a day's readings stay linear)."""

    def pod(self, *, event: str, obj: Mapping[str, Any], recorded: datetime) -> None:
        """Take one recorded observation of a Pod: its nodes before and after get a sample."""
        key = (str(meta(obj).get("namespace") or ""), str(meta(obj).get("name") or ""))
        before = self.placements.get(key)
        after = None if event == "DELETED" else placement_of(obj)
        if before == after:
            return
        if before is not None:
            self._unplace(key, before)
        if after is not None:
            self.placements[key] = after
            self._on_node.setdefault(after.node, {})[key] = after
            self._of_workload.setdefault(after.uid, {})[key] = after
        for node in sorted({p.node for p in (before, after) if p is not None}):
            self._sample(node, recorded)
        if before is not None and before.uid not in self._of_workload:
            self.latest.pop(before.uid, None)  # its last Pod is gone: keep no reading of it

    def _unplace(self, key: tuple[str, str], placement: Placement) -> None:
        del self.placements[key]
        for index, by in ((self._on_node, placement.node), (self._of_workload, placement.uid)):
            held = index[by]
            del held[key]
            if not held:
                del index[by]

    def reading(self, uid: str, reading: Reading) -> None:
        """Take one of the monitor's readings: the nodes of the workload's Pods get a sample."""
        known = self.latest.get(uid)
        if known is not None and known.at > reading.at:
            return  # an older reading recorded late changes nothing
        self.latest[uid] = reading
        for node in sorted({p.node for p in self._of_workload.get(uid, {}).values()}):
            self._sample(node, reading.at)

    def _sample(self, node: str, at: datetime) -> None:
        used = gpus_in_use(self._on_node.get(node, {}).values(), self.latest, now=None)
        series = self.samples.setdefault(node, deque())
        if series and at < series[-1].at:
            at = series[-1].at  # recorded a little out of order: keep the line going forward
        if series and _slot(series[-1].at, self.resolution) == _slot(at, self.resolution):
            series.pop()
        series.append(UsedSample(at, used))
        while series[0].at < at - self.window:
            series.popleft()

    def over_time(self, node: str, *, since: datetime) -> tuple[UsedSample, ...]:
        """The node's samples from ``since`` on."""
        series = self.samples.get(node, ())
        if not series or series[0].at >= since:
            return tuple(series)  # the whole window: no sample to test
        return tuple(s for s in series if s.at >= since)


def _slot(at: datetime, resolution: timedelta) -> int:
    return int(at.timestamp() // resolution.total_seconds())


@dataclass(frozen=True, slots=True)
class NodeWorkload:
    """A workload with GPUs on a node, as the reader may see it."""

    namespace: str
    name: str
    """"" when the reader may not see its namespace."""
    kind: str
    gpus: int
    ratio: float | None
    """Its latest fresh reading (None: none)."""
    idle: str
    """Why it is flagged idle ("" when it is not)."""


@dataclass(frozen=True, slots=True)
class NodeView:
    row: NodeRow
    used: float | None
    """GPUs busy now (None: GPUs are held and no fresh reading is known)."""
    workloads: tuple[NodeWorkload, ...]
    usage: tuple[UsedSample, ...]


def idle_reason(workload: Mapping[str, Any] | None, reading: Reading | None, now: datetime) -> str:
    """Why a workload counts as idle, or "": the planner's ``GpuIdle`` or
    ``ResourceUnderutilization`` condition when True (reason: message), else the monitor's
    fresh reading when it has an open stretch below a threshold."""
    for kind in IDLE_CONDITIONS:
        found = condition(workload, kind) if workload is not None else None
        if found is not None and found.get("status") == "True":
            return f"{found.get('reason') or kind}: {found.get('message') or ''}".rstrip(": ")
    if reading is not None and reading.fresh(now) and reading.below_since is not None:
        return f"below its threshold since {reading.below_since:%H:%M:%S} UTC (the monitor)"
    return ""


def node_views(
    state: ClusterState,
    records: NodeRecords,
    *,
    visible: Visible,
    now: datetime,
    window: timedelta = timedelta(hours=24),
) -> list[NodeView]:
    """Every GPU node with its GPUs busy now, the workloads on it (idle ones flagged, idle
    first), and its samples over the last ``window``."""
    on_node: dict[str, list[Placement]] = {}
    for pod in state.of(POD):
        placement = placement_of(pod)
        if placement is not None:
            on_node.setdefault(placement.node, []).append(placement)
    views = []
    for row in node_rows(state):
        placements = on_node.get(row.name, [])
        views.append(
            NodeView(
                row=row,
                used=gpus_in_use(placements, records.latest, now=now),
                workloads=_workloads(state, placements, records, visible=visible, now=now),
                usage=records.over_time(row.name, since=now - window),
            )
        )
    return views


def _workloads(
    state: ClusterState,
    placements: Iterable[Placement],
    records: NodeRecords,
    *,
    visible: Visible,
    now: datetime,
) -> tuple[NodeWorkload, ...]:
    # A workload is its namespace and uid: a Pod of another namespace carrying the uid is not
    # one of its Pods (decision 0252).
    gpus: dict[tuple[str, str], int] = {}
    first: dict[tuple[str, str], Placement] = {}
    for placement in placements:
        key = (placement.namespace, placement.uid)
        gpus[key] = gpus.get(key, 0) + placement.gpus
        first.setdefault(key, placement)
    found = []
    for key, placement in first.items():
        reading = reading_of(placement, records.latest)
        workload = state.get(placement.kind, placement.namespace, placement.name)
        shown = visible(placement.namespace)
        idle = idle_reason(workload, reading, now)
        found.append(
            NodeWorkload(
                namespace=placement.namespace if shown else "",
                name=placement.name if shown else "",
                kind=placement.kind,
                gpus=gpus[key],
                ratio=reading.ratio if reading is not None and reading.fresh(now) else None,
                # Another tenant's verdict is theirs: the reader learns only that it idles.
                idle=idle if shown or not idle else "idle",
            )
        )
    return tuple(sorted(found, key=lambda w: (not w.idle, not w.name, w.namespace, w.name)))
