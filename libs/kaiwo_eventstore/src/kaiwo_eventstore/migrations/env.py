"""Alembic environment of the event store, for async engines.

:func:`kaiwo_eventstore.sql.migrate.upgrade_to_head` hands in an open connection through
``config.attributes["connection"]``; the ``alembic`` command line (with ``sqlalchemy.url``
set) gets an async engine of its own here.
"""

from __future__ import annotations

import asyncio

from alembic import context
from kaiwo_eventstore.sql.engines import create_engine
from kaiwo_eventstore.sql.migrate import VERSION_TABLE
from kaiwo_eventstore.sql.schema import metadata
from sqlalchemy.engine import Connection


def _configure_and_run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_with_own_engine(url: str) -> None:
    engine = create_engine(url)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_configure_and_run)
            await connection.commit()
    finally:
        await engine.dispose()


def _run_offline(url: str) -> None:
    context.configure(
        url=url,
        target_metadata=metadata,
        version_table=VERSION_TABLE,
        literal_binds=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def _main() -> None:
    config = context.config
    given = config.attributes.get("connection")
    if given is not None:
        _configure_and_run(given)
        return
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        msg = "set sqlalchemy.url (or call kaiwo_eventstore.upgrade_to_head)"
        raise RuntimeError(msg)
    if context.is_offline_mode():
        _run_offline(url)
    else:
        asyncio.run(_run_with_own_engine(url))


_main()
