"""Appending a pulled batch to the event store: in one transaction, or row by row when the
store refuses the batch, a refused row stored raw (body as base64), and a row refused even so
left for the dead letters. A store that refuses every write raises
:class:`~kaiwo_eventstore.StoreUnavailableError`: the recorder then holds the batch (see
:mod:`kaiwo_recorder.service`)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import structlog
from kaiwo_eventstore import EventStore, NewEvent, StoreUnavailableError
from kaiwo_runtime.batch_consumer import PulledMessage

from kaiwo_recorder.metrics import RecorderMetrics
from kaiwo_recorder.records import base64_record

log = structlog.get_logger("kaiwo.recorder")


@dataclass(slots=True)
class Row:
    """One pulled message and the row that records it (None: dead-letter it)."""

    message: PulledMessage
    event: NewEvent | None
    problem: str | None = None


@dataclass(slots=True)
class Appended:
    stored: int = 0
    duplicates: int = 0
    refused: dict[int, str] = field(default_factory=dict)
    """Row index -> why the store refused it (those rows are dead-lettered)."""


class BatchAppender:
    """Appends the rows of a batch to ``store``; see the module docstring."""

    def __init__(self, store: EventStore, metrics: RecorderMetrics) -> None:
        self._store = store
        self._metrics = metrics

    async def append(self, rows: Sequence[Row]) -> Appended:
        """Append the rows' events in one transaction; one by one if the store refuses it."""
        present = [row.event for row in rows if row.event is not None]
        if not present:
            return Appended()
        try:
            started = time.perf_counter()
            result = await self._store.append_next(present)
            self._metrics.append_batch_seconds.observe(time.perf_counter() - started)
        except Exception as error:
            await self._raise_unless_store_answers(error)
            log.warning("the store refused a batch; appending one by one", error=str(error))
            return await self._append_one_by_one(rows)
        return Appended(stored=len(result.stored), duplicates=len(result.duplicates))

    async def _append_one_by_one(self, rows: Sequence[Row]) -> Appended:
        outcome = Appended()
        for index, row in enumerate(rows):
            if row.event is None:
                continue
            try:
                result = await self._store.append_next([row.event])
            except Exception as error:
                await self._raise_unless_store_answers(error)
                refused = await self._append_raw(row, reason=one_line(error))
                if refused is None:
                    outcome.stored += 1
                else:
                    outcome.refused[index] = refused
                continue
            outcome.stored += len(result.stored)
            outcome.duplicates += len(result.duplicates)
        return outcome

    async def _append_raw(self, row: Row, *, reason: str) -> str | None:
        """Store the row with its body as base64; why that failed too, or None when stored."""
        assert row.event is not None
        delivery = row.message.delivery
        raw = base64_record(row.event, delivery=delivery, reason=f"store refused: {reason}")
        try:
            await self._store.append_next([raw])
        except Exception as error:
            await self._raise_unless_store_answers(error)
            return f"store refused the event and its raw form: {one_line(error)}"
        return None

    async def _raise_unless_store_answers(self, error: Exception) -> None:
        """Raise :class:`StoreUnavailableError` unless ``error`` may be about the rows alone.

        The store names what refuses every write (full disk, read-only, lost connection);
        for anything else a read tells whether the store is there at all.
        """
        if isinstance(error, StoreUnavailableError):
            raise error
        try:
            await self._store.last_position()
        except Exception as probe_error:
            raise StoreUnavailableError(one_line(probe_error)) from error


def one_line(error: BaseException) -> str:
    return " ".join(f"{type(error).__name__}: {error}".split())[:1024]
