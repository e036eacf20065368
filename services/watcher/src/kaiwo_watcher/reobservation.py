"""Observing again what a refused plan was made from (decision 0038).

The executor refuses a plan whose sources (its owner, a configuration object) are not what
the API server holds: the planner planned from a copy the cluster never had (a forged
observation, or a projection gone wrong, e.g. resourceVersions that went back after an etcd
restore). Its ``PlanRefusedV1`` names those objects (``reobserve``). The watcher, the one
service that reads the cluster for the planner, reads each again and publishes it marked
``reobserved``: the planner takes that in over whatever it held, whatever version it claimed,
and plans again from the truth. An object the API server does not hold under the refused uid
(a forged owner, a deleted one) is published as a reobserved ``DELETED``.

Only kinds the watcher watches are read, within its namespaces and label selectors (so a
refusal cannot make it read what it would not observe anyway), by a list narrowed to the
name (``metadata.name`` field selector): the watcher's role lists and watches, it does not
get. One object is read at most once per ``min_interval`` seconds, so a burst of refusals
costs one list. The refusals arrive on a plain subscription (``kaiwo.res.refused.>``): a
refusal missed while the watcher is away is made good by the next plan's refusal.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from kaiwo_contracts.events.decoding import decode_envelope
from kaiwo_contracts.events.results import PlanRefusedV1
from kaiwo_contracts.plans import ObjectRef

from kaiwo_watcher.watch_state import WatchStream


@dataclass(frozen=True, slots=True)
class RefusedSources:
    """What one refusal asks to observe again."""

    refusal_id: str
    objects: tuple[ObjectRef, ...]


def refused_sources(
    headers: Mapping[str, str] | None, body: bytes, *, subject: str
) -> RefusedSources:
    """The objects a ``PlanRefusedV1`` message asks to observe again; raises
    :class:`~kaiwo_contracts.events.envelope.EnvelopeFormatError` for anything else."""
    envelope = decode_envelope(headers, body, PlanRefusedV1, subject=subject)
    return RefusedSources(refusal_id=envelope.id, objects=envelope.data.reobserve)


class RecentlyRead:
    """Which objects were read again lately (by kind, namespace and name), to read each at
    most once per ``min_interval`` seconds."""

    def __init__(
        self, *, min_interval: float = 5.0, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self._min_interval = min_interval
        self._monotonic = monotonic
        self._read: dict[tuple[str, str, str, str], float] = {}

    def due(self, ref: ObjectRef) -> bool:
        """Whether ``ref`` may be read now (and, if so, remember that it is)."""
        now = self._monotonic()
        self._read = {k: at for k, at in self._read.items() if now - at < self._min_interval}
        key = (ref.api_version, ref.kind, ref.namespace or "", ref.name)
        if key in self._read:
            return False
        self._read[key] = now
        return True


def stream_for(streams: Iterable[WatchStream], ref: ObjectRef) -> WatchStream | None:
    """The stream that watches ``ref``'s kind where ``ref`` lives (one limited to that
    namespace first: it has the narrower selector, e.g. the Models' configuration)."""
    candidates = [
        stream
        for stream in streams
        if (stream.target.resource.api_version, stream.kind) == (ref.api_version, ref.kind)
        and (stream.namespace is None or stream.namespace == ref.namespace)
    ]
    candidates.sort(key=lambda stream: stream.namespace is None)
    return candidates[0] if candidates else None
