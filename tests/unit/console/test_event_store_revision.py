"""The console checks the event store's schema revision when it opens it (decision 0242).

It opened the store without looking at the revision (decision 0230 made ``kaiwo events``
check it, the console was left as it was): a store taken back to 0001 or written by a newer
kaiwo was read as this version's. Now the console ends at start, status 1 and one line
saying which revision the store is at and how to upgrade it, before it waits for NATS (the
address below answers nothing: without the check the line was about NATS).
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import sqlite3
from pathlib import Path

import pytest
from kaiwo_console.__main__ import serve
from kaiwo_console.event_store import open_readable_store
from kaiwo_console.settings import ConsoleSettings
from kaiwo_eventstore import open_event_store
from kaiwo_eventstore.sql.migrate import migrate_to
from kaiwo_runtime.startup import run_until_signalled

NOBODY = "nats://127.0.0.1:9"
"""The discard port: no NATS there."""


def migrated(path: Path) -> Path:
    async def make() -> None:
        store = await open_event_store(f"sqlite:///{path}")
        await store.close()

    asyncio.run(make())
    return path


def console_run(store_url: str) -> int:
    settings = ConsoleSettings(
        eventstore_url=store_url, nats_url=NOBODY, startup_timeout_seconds=2, health_port=0
    )
    return asyncio.run(run_until_signalled("kaiwo-console", lambda stop: serve(settings, stop)))


def test_a_store_at_an_older_revision_ends_the_console_saying_how_to_upgrade_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    older = migrated(tmp_path / "events.db")
    asyncio.run(migrate_to(f"sqlite:///{older}", "0001"))

    assert console_run(f"sqlite:///{older}") == 1

    assert capsys.readouterr().err == (
        f"kaiwo-console: the event store sqlite:///{older} is at schema revision 0001, "
        "older than this kaiwo reads (0002 to 0003): upgrade it by starting this "
        "version's recorder (it migrates at start) or with "
        "`python -m kaiwo_eventstore.sql.migrate URL`, after a backup\n"
    )


def test_a_store_a_newer_kaiwo_wrote_ends_the_console_naming_its_revision(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    newer = migrated(tmp_path / "events.db")
    with contextlib.closing(sqlite3.connect(newer)) as database:
        database.execute("UPDATE eventstore_alembic_version SET version_num = '0004'")
        database.commit()

    assert console_run(f"sqlite:///{newer}") == 1

    assert capsys.readouterr().err == (
        f"kaiwo-console: the event store sqlite:///{newer} is at schema revision 0004, which "
        "this kaiwo does not know (it reads 0002 to 0003): a newer kaiwo wrote it; read it "
        "with that version\n"
    )


def test_a_readable_store_and_one_no_recorder_made_yet_are_opened(tmp_path: Path) -> None:
    """At the head, or at 0002 (the oldest this version reads); a database without the
    schema is the recorder's to make, possibly after the console started."""
    head = migrated(tmp_path / "head.db")
    oldest = tmp_path / "0002.db"
    shutil.copy(head, oldest)
    asyncio.run(migrate_to(f"sqlite:///{oldest}", "0002"))
    sqlite3.connect(tmp_path / "empty.db").close()

    async def open_each() -> list[str]:
        opened = []
        for name in ("head.db", "0002.db", "empty.db"):
            store = await open_readable_store(f"sqlite:///{tmp_path / name}")
            await store.close()
            opened.append(name)
        return opened

    assert asyncio.run(open_each()) == ["head.db", "0002.db", "empty.db"]
