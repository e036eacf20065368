"""The event store's read-only role (``deploy/k8s/overlays/dev/postgresql-init``), on a real
PostgreSQL: made as the dev overlay's and compose's PostgreSQL make it, before the recorder's
first start; the console, connected as it, reads everything the recorder stored, and the
role can write nothing. The console held the recorder's login, which may create tables and
insert: a console taken over could rewrite the history replay proves plans against."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import pytest
from kaiwo_eventstore import NewEvent, open_event_store
from kaiwo_eventstore.scratch import run_admin_statement, scratch_database
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

pytestmark = [pytest.mark.postgres]

SCRIPT: Final = (
    Path(__file__).resolve().parents[3] / "deploy/k8s/overlays/dev/postgresql-init/kaiwo-reader.psql"
)
PASSWORD: Final = "reader-secret"


def statements(role: str) -> list[str]:
    """The script's statements with its psql variables given, as ``psql -v`` gives them."""
    text = "\n".join(
        line for line in SCRIPT.read_text().splitlines() if not line.startswith(("--", "\\"))
    )
    text = text.replace(':"reader_role"', f'"{role}"').replace(":'reader_password'", f"'{PASSWORD}'")
    assert not re.search(r":['\"]\w+['\"]", text), text  # every variable given
    return [statement.strip() for statement in text.split(";") if statement.strip()]


@pytest.fixture
async def database(postgres_server: str) -> AsyncIterator[tuple[str, str]]:
    """A fresh database with the reader role made in it; its owner's URL and the reader's."""
    role = f"kaiwo_reader_{uuid.uuid4().hex[:8]}"
    try:
        async with scratch_database(postgres_server, prefix="kaiwo_reader_test") as owner_url:
            for statement in statements(role):
                await run_admin_statement(owner_url, statement)
            reader = make_url(owner_url).set(username=role, password=PASSWORD)
            yield owner_url, reader.render_as_string(hide_password=False)
    finally:  # once its database is gone: the grants there depend on it
        await run_admin_statement(postgres_server, f'DROP ROLE IF EXISTS "{role}"')


def event(number: int) -> NewEvent:
    return NewEvent(
        event_id=f"event-{number}",
        stream_id="workload/w",
        type="ai.silogen.kaiwo.observed.v1",
        subject="team-a/train",
        time=datetime(2026, 3, 1, 12, 0, number, tzinfo=UTC),
        source="/kaiwo/watcher",
        correlation_id="w",
        causation_id=None,
        data={"n": number},
        metadata={},
    )


async def test_the_reader_reads_what_the_recorder_stores_and_writes_nothing(
    database: tuple[str, str],
) -> None:
    owner_url, reader_url = database
    # The recorder's first start, after the role was made: it makes the tables and stores.
    recorder = await open_event_store(owner_url)
    try:
        await recorder.append_next([event(1), event(2)])
    finally:
        await recorder.close()

    console = await open_event_store(reader_url, migrate=False)
    try:
        read = [e.event_id async for batch in console.iter_all() for e in batch]
        assert read == ["event-1", "event-2"]
        with pytest.raises(DBAPIError, match="permission denied"):
            await console.append_next([event(3)])
        with pytest.raises(DBAPIError, match="permission denied"):
            await console.save_position("console", 2)
    finally:
        await console.close()
