"""Value objects, row decoding and URL handling of the event store (no database)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta, timezone

import pytest
from kaiwo_eventstore import AppendResult, NewEvent, StoredEvent
from kaiwo_eventstore.codec import encode_document
from kaiwo_eventstore.sql.engines import async_url, is_memory_sqlite
from kaiwo_eventstore.sql.rows import row_decoder
from kaiwo_eventstore.sql.schema import UtcDateTime
from sqlalchemy.dialects.postgresql.base import PGDialect
from sqlalchemy.dialects.sqlite.base import SQLiteDialect
from sqlalchemy.engine import make_url

NOON = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def new_event(**changes: object) -> NewEvent:
    fields: dict[str, object] = {
        "event_id": "0b7c:4711",
        "stream_id": "kaiwojob/0b7c",
        "type": "ai.silogen.kaiwo.kaiwojob.observed.v1",
        "time": NOON,
        "source": "/kaiwo/watcher",
        "correlation_id": "0b7c",
        "data": {"a": 1},
    }
    fields.update(changes)
    return NewEvent(**fields)  # type: ignore[arg-type]


def stored(position: int) -> StoredEvent:
    return StoredEvent(
        position, f"e{position}", "s", position, "t", None, "src", NOON, "c", None, {}, {}, NOON
    )


def test_new_event_is_frozen_and_defaults_optional_fields() -> None:
    created = new_event()
    assert created.subject is None
    assert created.causation_id is None
    assert created.metadata == {}
    with pytest.raises(dataclasses.FrozenInstanceError):
        created.event_id = "other"  # type: ignore[misc]


@pytest.mark.parametrize("field", ["event_id", "stream_id", "type", "source", "correlation_id"])
def test_new_event_rejects_empty_identifiers(field: str) -> None:
    with pytest.raises(ValueError, match=f"NewEvent.{field} must be a non-empty string"):
        new_event(**{field: ""})


def test_new_event_rejects_naive_time() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        new_event(time=datetime(2025, 3, 1, 12, 0))


def test_stored_event_is_immutable() -> None:
    with pytest.raises(AttributeError):
        stored(1).event_id = "x"  # type: ignore[misc]


def test_append_result_summaries() -> None:
    assert AppendResult(stored=(), duplicates=("a",)).only_duplicates
    assert not AppendResult(stored=()).only_duplicates
    assert AppendResult(stored=(stored(3), stored(9))).last_position == 9
    assert AppendResult(stored=()).last_position is None


def test_sqlite_rows_inflate_documents_and_decode_utc_timestamps() -> None:
    decode = row_decoder("sqlite")
    row: tuple[object, ...] = (
        12, "u:1", "node/u", 3, "t", "team/x", "/kaiwo/watcher", "2025-03-01 12:00:00.250000",
        "corr", "cause", encode_document({"spec": {"n": 2}}),
        encode_document({"traceparent": "00-x"}), "2025-03-02 08:30:00",
    )  # fmt: skip

    event = decode(row)

    assert event == StoredEvent(
        global_position=12,
        event_id="u:1",
        stream_id="node/u",
        stream_version=3,
        type="t",
        subject="team/x",
        source="/kaiwo/watcher",
        time=datetime(2025, 3, 1, 12, 0, 0, 250_000, tzinfo=UTC),
        correlation_id="corr",
        causation_id="cause",
        data={"spec": {"n": 2}},
        metadata={"traceparent": "00-x"},
        recorded_at=datetime(2025, 3, 2, 8, 30, tzinfo=UTC),
    )
    assert event.time.tzinfo is UTC


def test_postgres_rows_are_normalised_to_utc() -> None:
    decode = row_decoder("postgresql")
    plus_one = timezone(timedelta(hours=1))
    at_one = datetime(2025, 3, 1, 13, 0, tzinfo=plus_one)
    row: tuple[object, ...] = (
        1,
        "i",
        "s",
        1,
        "t",
        None,
        "src",
        at_one,
        "c",
        None,
        encode_document({"a": 1}),
        encode_document({}),
        NOON,
    )

    event = decode(row)

    assert event.time == NOON
    assert event.time.tzinfo is UTC
    assert event.data == {"a": 1}


def test_utc_datetime_stores_utc_without_offset_on_sqlite_and_with_it_on_postgres() -> None:
    column_type: UtcDateTime = UtcDateTime()
    plus_two = datetime(2025, 3, 1, 14, 0, tzinfo=timezone(timedelta(hours=2)))

    on_sqlite = column_type.process_bind_param(plus_two, SQLiteDialect())
    on_postgres = column_type.process_bind_param(plus_two, PGDialect())  # type: ignore[no-untyped-call]

    assert on_sqlite == datetime(2025, 3, 1, 12, 0)
    assert on_postgres == NOON
    assert on_postgres is not None
    assert on_postgres.tzinfo is UTC
    assert column_type.process_result_value(datetime(2025, 3, 1, 12, 0), SQLiteDialect()) == NOON
    with pytest.raises(ValueError, match="naive datetime"):
        column_type.process_bind_param(datetime(2025, 3, 1), SQLiteDialect())


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("sqlite:///var/kaiwo/events.db", "sqlite+aiosqlite:///var/kaiwo/events.db"),
        ("sqlite://", "sqlite+aiosqlite://"),
        ("postgresql://kaiwo@db:5432/events", "postgresql+asyncpg://kaiwo@db:5432/events"),
        ("postgresql+psycopg://kaiwo@db/events", "postgresql+asyncpg://kaiwo@db/events"),
    ],
)
def test_urls_get_the_async_driver(given: str, expected: str) -> None:
    assert async_url(given).render_as_string() == expected


def test_other_databases_are_refused() -> None:
    with pytest.raises(ValueError, match="unsupported event store database 'mysql'"):
        async_url("mysql://root@localhost/events")


@pytest.mark.parametrize(
    ("url", "memory"),
    [
        ("sqlite+aiosqlite://", True),
        ("sqlite+aiosqlite:///:memory:", True),
        ("sqlite+aiosqlite:///file:es?mode=memory&cache=shared&uri=true", True),
        ("sqlite+aiosqlite:///tmp/events.db", False),
        ("postgresql+asyncpg://db/events", False),
    ],
)
def test_in_memory_sqlite_is_recognised(url: str, *, memory: bool) -> None:
    assert is_memory_sqlite(make_url(url)) is memory
