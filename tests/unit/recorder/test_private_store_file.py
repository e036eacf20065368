"""The SQLite event store is its owner's only: created 0600, and made so if it was not."""

from __future__ import annotations

import stat
from pathlib import Path

from kaiwo_recorder.__main__ import private_sqlite_file


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_store_is_created_0600_in_a_new_0700_directory(tmp_path: Path) -> None:
    database = tmp_path / "state" / "events.db"

    private_sqlite_file(database)

    assert (mode(database.parent), mode(database)) == (0o700, 0o600)


def test_an_old_world_readable_store_and_its_journal_become_private(tmp_path: Path) -> None:
    database = tmp_path / "events.db"
    database.write_bytes(b"")
    wal = tmp_path / "events.db-wal"
    wal.write_bytes(b"")
    database.chmod(0o644)
    wal.chmod(0o644)

    private_sqlite_file(database)

    assert (mode(database), mode(wal)) == (0o600, 0o600)
