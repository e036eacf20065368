"""Decoding many rows with the cyclic garbage collector paused, and only meanwhile."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest
from kaiwo_eventstore import StoredEvent, cyclic_gc_paused
from kaiwo_eventstore.codec import encode_document
from kaiwo_eventstore.sql.rows import decode_rows, row_decoder


@pytest.fixture(autouse=True)
def _collector_enabled_afterwards() -> Iterator[None]:
    yield
    gc.enable()


def test_the_collector_is_paused_in_the_block_and_runs_again_after() -> None:
    with cyclic_gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_the_collector_runs_again_when_the_block_raises() -> None:
    with pytest.raises(KeyError), cyclic_gc_paused():
        raise KeyError("boom")
    assert gc.isenabled()


def test_a_collector_paused_by_someone_else_stays_paused() -> None:
    gc.disable()
    with cyclic_gc_paused():
        pass
    assert not gc.isenabled()


def test_rows_are_decoded_while_the_collector_is_paused() -> None:
    seen: list[bool] = []
    sqlite = row_decoder("sqlite")

    def decode(row: tuple[Any, ...]) -> StoredEvent:
        seen.append(gc.isenabled())
        return sqlite(row)

    rows = [
        (n, f"e{n}", "s", n, "t", None, "src", "2025-03-01 12:00:00", "c", None,
         encode_document({"n": n}), encode_document({}), "2025-03-01 12:00:01")
        for n in (1, 2)
    ]  # fmt: skip

    events = decode_rows(decode, rows)

    assert [event.data for event in events] == [{"n": 1}, {"n": 2}]
    assert seen == [False, False]
    assert gc.isenabled()
