"""Bring a database to the latest schema revision with the package's alembic migrations.

Services call :func:`upgrade_to_head` at start-up. It runs every pending revision in one
transaction while holding a lock (PostgreSQL advisory lock, SQLite write lock), so replicas
starting together migrate once and the others find the work done.
"""

from __future__ import annotations

from alembic import command
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import URL, Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from kaiwo_eventstore.sql.engines import WRITE_OPTION, create_engine
from kaiwo_eventstore.sql.revision import VERSION_TABLE

__all__ = ["SCRIPT_LOCATION", "VERSION_TABLE", "alembic_config", "migrate_to", "upgrade_to_head"]

SCRIPT_LOCATION = "kaiwo_eventstore:migrations"

_MIGRATION_LOCK_KEY = 0x6B6169776F5F6573  # pg_advisory_xact_lock key: "kaiwo_es" in ASCII


def alembic_config(url: str | URL | None = None) -> Config:
    """An alembic ``Config`` for the event store's revisions (no alembic.ini needed)."""
    config = Config()
    config.set_main_option("script_location", SCRIPT_LOCATION)
    if url is not None:
        rendered = url.render_as_string(hide_password=False) if isinstance(url, URL) else url
        config.set_main_option("sqlalchemy.url", rendered.replace("%", "%%"))
    return config


async def upgrade_to_head(target: str | URL | AsyncEngine) -> None:
    """Apply every pending revision to the database at ``target`` (a URL or an engine).

    Pass the engine itself for ``sqlite:///:memory:``: another engine would open another,
    empty, database.
    """
    await migrate_to(target, "head")


async def migrate_to(target: str | URL | AsyncEngine, revision: str) -> None:
    """Bring the database at ``target`` to ``revision``, up or down (``head``: the latest)."""
    engine = target if isinstance(target, AsyncEngine) else create_engine(target)
    try:
        async with engine.connect() as connection:
            await connection.execution_options(**{WRITE_OPTION: True})
            async with connection.begin():
                if connection.dialect.name == "postgresql":
                    await connection.exec_driver_sql(
                        f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK_KEY})"
                    )
                await connection.run_sync(_migrate, revision)
    finally:
        if engine is not target:
            await engine.dispose()


def _migrate(connection: Connection, revision: str) -> None:
    config = alembic_config()
    config.attributes["connection"] = connection
    current = MigrationContext.configure(
        connection, opts={"version_table": VERSION_TABLE}
    ).get_current_revision()
    script = ScriptDirectory.from_config(config)
    target = script.get_revision(revision)
    ahead = (
        current is not None
        and target is not None
        and target.revision != current
        and target.revision in {r.revision for r in script.iterate_revisions(current, "base")}
    )
    (command.downgrade if ahead else command.upgrade)(config, revision)


def main(argv: list[str] | None = None) -> int:
    """``python -m kaiwo_eventstore.sql.migrate URL``: bring the store at ``URL`` to the head
    (:func:`kaiwo_eventstore.sql.sqlite_file.upgrade_apart` runs it as a child process)."""
    import asyncio
    import sys

    arguments = sys.argv[1:] if argv is None else argv
    if len(arguments) != 1:
        print("usage: python -m kaiwo_eventstore.sql.migrate URL", file=sys.stderr)  # noqa: T201
        return 2
    asyncio.run(upgrade_to_head(arguments[0]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
