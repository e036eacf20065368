"""The planner service's state in a key-value bucket: chunks, then a manifest naming them.

The document (projection, owner records, timers) is compressed JSON cut into chunks, so a
large projection fits NATS' message size; the manifest is written last.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import zlib
from collections.abc import Mapping
from typing import Any, Final, cast

import structlog
from kaiwo_runtime.kv import KeyValue
from pydantic_core import from_json, to_json

from kaiwo_planner.domain.state.projection import SnapshotFormatError

log = structlog.get_logger("kaiwo.planner")

SNAPSHOT_KEY: Final = "snapshot"
SNAPSHOT_FORMAT: Final = 1
CHUNK_BYTES: Final = 512 * 1024
"""Chunk size of the snapshot in the bucket; NATS refuses messages over 1 MiB by default."""


class SnapshotStore:
    """The service's state in a key-value bucket: chunks, then a manifest naming them.

    The manifest is written last, so a crash while writing leaves the previous snapshot in
    force; chunks of the previous generation are deleted afterwards.
    """

    def __init__(self, kv: KeyValue, *, chunk_bytes: int = CHUNK_BYTES) -> None:
        self._kv = kv
        self._chunk_bytes = chunk_bytes
        self._manifest: dict[str, Any] | None = None

    def forget_manifest(self) -> None:
        """Read the stored manifest again before the next write: another writer (a replica
        that held partition 0 before) may have moved the generation on."""
        self._manifest = None

    async def load(self) -> dict[str, Any] | None:
        """The stored document, or None when there is none or it cannot be read (logged)."""
        raw = await self._kv.get(SNAPSHOT_KEY)
        if raw is None:
            return None
        try:
            manifest = json.loads(raw)
            generation, chunks = int(manifest["generation"]), int(manifest["chunks"])
            parts = [await self._kv.get(_chunk_key(generation, i)) for i in range(chunks)]
            if any(part is None for part in parts):
                raise SnapshotFormatError("a chunk of the snapshot is missing")
            compressed = b"".join(cast("list[bytes]", parts))
            if hashlib.sha256(compressed).hexdigest() != manifest["sha256"]:
                raise SnapshotFormatError("the snapshot's checksum does not match")
            document = await asyncio.to_thread(_decode, compressed)
        except (ValueError, KeyError, TypeError, zlib.error) as error:
            log.warning("snapshot unreadable; starting without it", error=str(error))
            return None
        self._manifest = manifest
        return document

    async def save(self, document: Mapping[str, Any]) -> int:
        """Write ``document``; returns the compressed size."""
        compressed = await asyncio.to_thread(_encode, document)
        previous = self._manifest or await self._stored_manifest()
        generation = int(previous["generation"]) + 1 if previous else 1
        chunks = [
            compressed[start : start + self._chunk_bytes]
            for start in range(0, len(compressed), self._chunk_bytes)
        ] or [b""]
        for index, chunk in enumerate(chunks):
            await self._kv.put(_chunk_key(generation, index), chunk)
        manifest = {
            "format": SNAPSHOT_FORMAT,
            "generation": generation,
            "chunks": len(chunks),
            "sha256": hashlib.sha256(compressed).hexdigest(),
            "bytes": len(compressed),
        }
        await self._kv.put(SNAPSHOT_KEY, json.dumps(manifest).encode())
        self._manifest = manifest
        if previous:
            for index in range(int(previous["chunks"])):
                await self._kv.delete(_chunk_key(int(previous["generation"]), index))
        return len(compressed)

    async def _stored_manifest(self) -> dict[str, Any] | None:
        raw = await self._kv.get(SNAPSHOT_KEY)
        if raw is None:
            return None
        try:
            manifest = json.loads(raw)
            int(manifest["generation"]), int(manifest["chunks"])
        except (ValueError, KeyError, TypeError):
            return None
        return cast("dict[str, Any]", manifest)


def _chunk_key(generation: int, index: int) -> str:
    return f"{SNAPSHOT_KEY}.{generation}.{index}"


def _encode(document: Mapping[str, Any]) -> bytes:
    # pydantic-core's serialiser writes the same document as ``json.dumps`` (UTF-8 where
    # that escapes, which either decoder reads) in a quarter of the time: writing snapshots
    # was about 2% of the one-process operator's CPU (py-spy, issue 28).
    return zlib.compress(to_json(document), 6)


def _decode(compressed: bytes) -> dict[str, Any]:
    document = from_json(zlib.decompress(compressed))
    if not isinstance(document, dict) or document.get("format") != SNAPSHOT_FORMAT:
        raise SnapshotFormatError(f"not a planner snapshot of format {SNAPSHOT_FORMAT}")
    return document
