"""Open underutilized stretches kept in a key-value bucket, so a new leader continues them.

Without it a leader change would restart every stretch's clock and a workload idle for 23 h
would get another 24 h. One key per workload uid; JSON values.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime

import structlog
from kaiwo_runtime.kv import KeyValue

from kaiwo_monitor.domain.utilization import UtilizationState

log = structlog.get_logger("kaiwo.monitor")


def encode_state(state: UtilizationState) -> bytes:
    document = {"belowSince": _text(state.below_since), "idleSince": _text(state.idle_since)}
    return json.dumps(document, sort_keys=True).encode()


def _text(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def _moment(uid: str, document: Mapping[str, object], key: str) -> datetime | None:
    value = document.get(key)
    moment = datetime.fromisoformat(value) if isinstance(value, str) else None
    if moment is not None and moment.tzinfo is None:
        raise ValueError(f"state of {uid}: {key} has no time zone")
    return moment


def decode_state(uid: str, value: bytes) -> UtilizationState:
    """ValueError when ``value`` is not a state this module wrote."""
    document = json.loads(value)
    if not isinstance(document, Mapping):
        raise ValueError(f"state of {uid} is not a JSON object")
    return UtilizationState(
        workload_uid=uid,
        below_since=_moment(uid, document, "belowSince"),
        idle_since=_moment(uid, document, "idleSince"),
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


def _stretches(state: UtilizationState | None) -> tuple[datetime | None, ...] | None:
    """What the bucket keeps of a state: its stretches. When a stretch was last read is the
    leader's own (a new leader does not know it, and judges its first reading as it finds
    it): written on every tick it would cost a write per idle workload and tick."""
    return None if state is None else (state.below_since, state.idle_since)
