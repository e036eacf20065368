"""What the watcher keeps across restarts, in the ``kaiwo-watcher`` key-value bucket.

Per watch stream (one resource type, in one namespace or all):

* ``rv|<stream>``: the checkpoint, the resourceVersion up to which every event of the stream
  has been published. Replicas share it: it only moves forward (numeric versions are
  compared; the API server's are etcd revisions), so a lagging replica cannot pull it back,
  and whichever replica restarts resumes after what *some* replica published. A relist sets
  it outright.
* ``known|<stream>|<uid>``: each object the stream has published and not yet seen deleted
  (namespace, name, correlation id). A relist compares it with what the API server returns
  and publishes an inferred DELETED for each object that is gone (its DELETED event fell in
  a 410 gap, or happened while no watcher ran). Kept in the bucket, not only in memory,
  because that gap is typically a restart after a long outage. It is written when an
  object is first seen and when it goes, not on every change, so it costs little.

The checkpoint is written at most once per ``checkpoint_every`` seconds per stream (and by
:meth:`WatchState.flush`, which the service calls periodically and on stop): a restart after a
crash resumes at most that much earlier and re-publishes those events under their
``Nats-Msg-Id``, which JetStream drops as duplicates, where a write per event cost two
bucket round trips.

Two replicas writing the same known keys race harmlessly: the worst outcome is a stale key
whose inferred DELETED is published for an object that is already gone, which consumers
(level-triggered) treat as the no-op it is.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from kaiwo_runtime.kv import KeyValue

from kaiwo_watcher.observation import KnownObject
from kaiwo_watcher.watch_list import WatchTarget

BUCKET = "kaiwo-watcher"
_CHECKPOINT = "rv"
_KNOWN = "known"
_SEPARATOR = "|"


@dataclass(frozen=True, slots=True)
class WatchStream:
    """One list+watch: a target, in one namespace or (None) all of them."""

    target: WatchTarget
    namespace: str | None = None

    @property
    def key(self) -> str:
        base = str(self.target.resource)
        if self.target.stream:
            base = f"{base}#{self.target.stream}"
        return f"{base}@{self.namespace}" if self.namespace else base

    @property
    def kind(self) -> str:
        return self.target.kind


def is_newer(candidate: str, current: str | None) -> bool:
    """Whether ``candidate`` moves a checkpoint at ``current`` forward.

    Numeric versions compare as numbers; anything else counts as newer when it differs.
    """
    if not current:
        return True
    if candidate.isdigit() and current.isdigit():
        return int(candidate) > int(current)
    return candidate != current


class WatchState:
    """Checkpoints and known objects of every stream, cached in memory, kept in ``kv``."""

    def __init__(
        self,
        kv: KeyValue,
        *,
        checkpoint_every: float = 0.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._kv = kv
        self._known: dict[str, dict[str, KnownObject]] = {}
        self._written: dict[str, str] = {}
        self._pending: dict[str, tuple[WatchStream, str]] = {}
        self._written_at: dict[str, float] = {}
        self._every = checkpoint_every
        self._monotonic = monotonic

    async def load(self) -> None:
        """Read every known object of every stream (once, at start)."""
        self._known.clear()
        async for key, value in self._kv.items():
            parts = key.split(_SEPARATOR)
            if len(parts) != 3 or parts[0] != _KNOWN:
                continue
            _, stream_key, uid = parts
            self._known.setdefault(stream_key, {})[uid] = _decode_known(value)

    # ------------------------------------------------------------------ checkpoints

    async def checkpoint(self, stream: WatchStream) -> str | None:
        raw = await self._kv.get(_checkpoint_key(stream))
        return raw.decode() if raw else None

    async def advance(self, stream: WatchStream, resource_version: str) -> None:
        """Move the checkpoint forward to ``resource_version`` (never back); written now, or
        by a later call or :meth:`flush` when the last write is less than the interval ago."""
        pending = self._pending.get(stream.key)
        latest = pending[1] if pending else self._written.get(stream.key)
        if not resource_version or not is_newer(resource_version, latest):
            return
        written_at = self._written_at.get(stream.key)
        if written_at is not None and self._monotonic() - written_at < self._every:
            self._pending[stream.key] = (stream, resource_version)
            return
        await self._write(stream, resource_version)

    async def flush(self) -> None:
        """Write every checkpoint that moved since its last write."""
        for stream, resource_version in list(self._pending.values()):
            await self._write(stream, resource_version)

    async def _write(self, stream: WatchStream, resource_version: str) -> None:
        stored = await self.checkpoint(stream)
        if is_newer(resource_version, stored):
            await self._kv.put(_checkpoint_key(stream), resource_version.encode())
        self._written[stream.key] = resource_version
        self._written_at[stream.key] = self._monotonic()
        self._pending.pop(stream.key, None)

    async def reset(self, stream: WatchStream, resource_version: str) -> None:
        """Set the checkpoint after a relist, whatever it was."""
        await self._kv.put(_checkpoint_key(stream), resource_version.encode())
        self._written[stream.key] = resource_version
        self._written_at[stream.key] = self._monotonic()
        self._pending.pop(stream.key, None)

    # ------------------------------------------------------------------ known objects

    def known(self, stream: WatchStream) -> Mapping[str, KnownObject]:
        return dict(self._known.get(stream.key, {}))

    def knows(self, stream: WatchStream, uid: str) -> bool:
        return uid in self._known.get(stream.key, {})

    async def remember(self, stream: WatchStream, uid: str, known: KnownObject) -> None:
        objects = self._known.setdefault(stream.key, {})
        if objects.get(uid) == known:
            return
        await self._kv.put(_known_key(stream, uid), _encode_known(known))
        objects[uid] = known

    async def forget(self, stream: WatchStream, uid: str) -> None:
        objects = self._known.setdefault(stream.key, {})
        await self._kv.delete(_known_key(stream, uid))
        objects.pop(uid, None)


def _checkpoint_key(stream: WatchStream) -> str:
    return _SEPARATOR.join((_CHECKPOINT, stream.key))


def _known_key(stream: WatchStream, uid: str) -> str:
    return _SEPARATOR.join((_KNOWN, stream.key, uid))


def _encode_known(known: KnownObject) -> bytes:
    document = {"namespace": known.namespace, "name": known.name, "correlation": known.correlation}
    return json.dumps(document, sort_keys=True).encode()


def _decode_known(value: bytes) -> KnownObject:
    document = json.loads(value)
    return KnownObject(
        namespace=document.get("namespace") or None,
        name=str(document.get("name", "")),
        correlation=str(document.get("correlation", "")),
    )


def watch_streams(
    watch_list: Iterable[WatchTarget], namespaces: Iterable[str] = ()
) -> tuple[WatchStream, ...]:
    """One stream per target, or per target and namespace for namespaced kinds when the
    watcher is limited to ``namespaces``; a target of one namespace is watched there only."""
    limited = tuple(dict.fromkeys(namespaces))
    streams: list[WatchStream] = []
    for target in watch_list:
        if target.namespace is not None:
            streams.append(WatchStream(target=target, namespace=target.namespace))
        elif target.resource.namespaced and limited:
            streams.extend(WatchStream(target=target, namespace=ns) for ns in limited)
        else:
            streams.append(WatchStream(target=target))
    return tuple(streams)
