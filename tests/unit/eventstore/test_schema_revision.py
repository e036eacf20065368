"""Which schema revisions a reader of the store reads, and what it says of the others
(``kaiwo events`` opens every store without migrating it)."""

from __future__ import annotations

from alembic.script import ScriptDirectory
from kaiwo_eventstore.sql.migrate import alembic_config
from kaiwo_eventstore.sql.revision import REVISIONS, SCHEMA_HEAD, unreadable_revision


def test_the_revisions_are_alembics_oldest_first() -> None:
    script = ScriptDirectory.from_config(alembic_config())
    chain = [revision.revision for revision in script.walk_revisions("base", "heads")]
    assert tuple(reversed(chain)) == REVISIONS
    assert SCHEMA_HEAD == "0003"


def test_the_revisions_a_reader_reads_pass() -> None:
    # 0002 deflated every document (decision 0052); 0003 only added the cluster's table.
    assert unreadable_revision("0002") is None
    assert unreadable_revision("0003") is None


def test_an_older_store_says_it_is_older_and_how_to_upgrade_it() -> None:
    # It said "a newer kaiwo wrote it?" of a store that operations.md's "Upgrading" step 4
    # took back to 0001.
    assert unreadable_revision("0001") == (
        "is at schema revision 0001, older than this kaiwo reads (0002 to 0003): upgrade it "
        "by starting this version's recorder (it migrates at start) or with "
        "`python -m kaiwo_eventstore.sql.migrate URL`, after a backup"
    )


def test_a_newer_store_says_a_newer_kaiwo_wrote_it() -> None:
    assert unreadable_revision("0004") == (
        "is at schema revision 0004, which this kaiwo does not know (it reads 0002 to 0003): "
        "a newer kaiwo wrote it; read it with that version"
    )


def test_a_database_without_the_schema_says_so() -> None:
    assert unreadable_revision(None) == (
        "holds no event store schema (no table eventstore_alembic_version): not a recorder's "
        "database, or one no recorder has started on yet"
    )
