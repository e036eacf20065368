"""Open underutilized stretches kept in a key-value bucket, so a new leader continues them.

Without it a leader change would restart every stretch's clock and a workload idle for 23 h
would get another 24 h. One key per workload uid; JSON values: each stretch's start and the
threshold (for idleness also the aggregation) it was last judged with, so a new leader
starts a stretch anew when a threshold was lowered as the old one would have (decision
0213). A value written before that has no thresholds: its stretches are taken as judged
against the thresholds in force, as that monitor took them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime

import structlog
from kaiwo_contracts.gpu_preemption import Aggregation
from kaiwo_runtime.kv import KeyValue

from kaiwo_monitor.domain.utilization import STRICTNESS, UtilizationState

log = structlog.get_logger("kaiwo.monitor")


def encode_state(state: UtilizationState) -> bytes:
    document = {
        "belowSince": _text(state.below_since),
        "belowThreshold": state.below_threshold,
        "idleSince": _text(state.idle_since),
        "idleThreshold": state.idle_threshold,
        "idleAggregation": state.idle_aggregation,
    }
    return json.dumps(document, sort_keys=True).encode()


def _text(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def _moment(uid: str, document: Mapping[str, object], key: str) -> datetime | None:
    value = document.get(key)
    moment = datetime.fromisoformat(value) if isinstance(value, str) else None
    if moment is not None and moment.tzinfo is None:
        raise ValueError(f"state of {uid}: {key} has no time zone")
    return moment


def _ratio(uid: str, document: Mapping[str, object], key: str) -> float | None:
    value = document.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"state of {uid}: {key} is not a number")
    return float(value)


def _aggregation(uid: str, document: Mapping[str, object]) -> Aggregation | None:
    value = document.get("idleAggregation")
    if value is None:
        return None
    for aggregation in STRICTNESS:
        if value == aggregation:
            return aggregation
    raise ValueError(f"state of {uid}: idleAggregation {value!r} is not Min, Max or Avg")


def decode_state(uid: str, value: bytes) -> UtilizationState:
    """ValueError when ``value`` is not a state this module wrote."""
    document = json.loads(value)
    if not isinstance(document, Mapping):
        raise ValueError(f"state of {uid} is not a JSON object")
    return UtilizationState(
        workload_uid=uid,
        below_since=_moment(uid, document, "belowSince"),
        below_threshold=_ratio(uid, document, "belowThreshold"),
        idle_since=_moment(uid, document, "idleSince"),
        idle_threshold=_ratio(uid, document, "idleThreshold"),
        idle_aggregation=_aggregation(uid, document),
    )


class StateStore:
    """Reads all states at once, writes only what changed."""

    def __init__(self, kv: KeyValue) -> None:
        self._kv = kv

    async def load(self) -> dict[str, UtilizationState]:
        states: dict[str, UtilizationState] = {}
        async for uid, value in self._kv.items():
            try:
                states[uid] = decode_state(uid, value)
            except ValueError as error:  # json.JSONDecodeError is a ValueError
                log.warning("ignoring an unreadable monitor state", uid=uid, error=str(error))
        return states

    async def save(
        self,
        uid: str,
        *,
        before: Mapping[str, UtilizationState],
        after: Mapping[str, UtilizationState],
    ) -> None:
        new = after.get(uid)
        if _stretches(new) == _stretches(before.get(uid)):
            return  # ``read_at`` moves every tick and is not kept (decision 0173)
        if new is None:
            await self._kv.delete(uid)
        else:
            await self._kv.put(uid, encode_state(new))


def _stretches(state: UtilizationState | None) -> tuple[object, ...] | None:
    """What the bucket keeps of a state: its stretches and what they were judged with (these
    change only with a stretch or a threshold, so a settled workload is not written). When a
    stretch was last read is the leader's own (a new leader does not know it, and judges its
    first reading as it finds it): written on every tick it would cost a write per idle
    workload and tick."""
    if state is None:
        return None
    return (
        state.below_since,
        state.below_threshold,
        state.idle_since,
        state.idle_threshold,
        state.idle_aggregation,
    )
