"""How many messenger requests wait per tenant namespace, read from the request stream (the
autoscaler counts them as load, decision 0057)."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Protocol

from kaiwo_contracts.events.messenger import (
    REQUEST_STREAM,
    REQUESTS_FILTER,
    NotATenantError,
    tenant_of,
)


class StoredCounts(Protocol):
    async def stored_per_subject(self, stream: str, *, subjects: str) -> Mapping[str, int]: ...


class StreamBacklog:
    """The requests ``KAIWO_MSG_REQ`` stores per tenant namespace (a work queue: those in
    hand included, until their answers are stored and they are acknowledged), from the
    stream's per-subject counts (decision 0057)."""

    def __init__(self, stream: StoredCounts) -> None:
        self._stream = stream

    async def stored_requests(self) -> Mapping[str, int]:
        counts = await self._stream.stored_per_subject(REQUEST_STREAM, subjects=REQUESTS_FILTER)
        stored: dict[str, int] = {}
        for subject, count in counts.items():
            with contextlib.suppress(NotATenantError):  # the stream stores no other subject
                namespace = tenant_of(subject)
                stored[namespace] = stored.get(namespace, 0) + count
        return stored
