"""Fixtures of the pipeline and fault tests (the harness lives in ``tests/integration/pipeline``):
the whole operator as ``kaiwo up --fake`` runs it, on SQLite and, when a server answers, on
PostgreSQL."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from tests.integration.pipeline.harness import Pipeline, running_pipeline
from tests.integration.pipeline.postgres import fresh_database, postgres_server


@contextlib.asynccontextmanager
async def event_store_url(kind: str, state_dir: Path) -> AsyncIterator[str | None]:
    """None (the stack's SQLite file in ``state_dir``) or a fresh PostgreSQL database."""
    if kind == "sqlite":
        yield None
        return
    async with fresh_database(await postgres_server()) as url:
        yield url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def pipeline(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Pipeline]:
    """A fresh operator per test, its event store on SQLite or PostgreSQL."""
    async with (
        event_store_url(request.param, tmp_path) as url,
        running_pipeline(tmp_path / "kaiwo", store_url=url) as running,
    ):
        yield running


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared_pipeline(
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Pipeline]:
    """One operator (SQLite) for every test of a module; the tests must not need a fresh one."""
    async with running_pipeline(tmp_path_factory.mktemp("kaiwo")) as running:
        yield running
