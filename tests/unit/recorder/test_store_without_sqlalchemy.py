"""The recorder writing to an SQLite file loads neither SQLAlchemy nor alembic (decision 0088):
together 25 MB of the process it runs in, for as long as it runs."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

from kaiwo_eventstore.sql.revision import SCHEMA_HEAD

OPEN_WRITE_AND_LIST = """
import asyncio, datetime, sys
from kaiwo_eventstore import NewEvent
from kaiwo_recorder.__main__ import open_store

async def main() -> None:
    store = await open_store(sys.argv[1])
    await store.append([NewEvent(
        event_id="e-1", stream_id="kaiwojob/u-1", type="ai.silogen.kaiwo.kaiwojob.observed.v1",
        time=datetime.datetime.now(datetime.UTC), source="/kaiwo/watcher", correlation_id="u-1",
        data={"spec": {}}, metadata={},
    )])
    await store.close()

asyncio.run(main())
print(sorted({name.split(".")[0] for name in sys.modules} & {"sqlalchemy", "alembic", "aiosqlite"}))
"""


def test_a_new_sqlite_store_is_migrated_apart_and_written_without_sqlalchemy(
    tmp_path: Path,
) -> None:
    database = tmp_path / "state" / "events.db"

    done = subprocess.run(
        [sys.executable, "-c", OPEN_WRITE_AND_LIST, f"sqlite:///{database}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )

    assert done.stdout.strip().splitlines()[-1] == "[]"
    with sqlite3.connect(database) as connection:
        revision = connection.execute("SELECT version_num FROM eventstore_alembic_version")
        assert revision.fetchall() == [(SCHEMA_HEAD,)]
        assert connection.execute("SELECT event_id FROM events").fetchall() == [("e-1",)]
