"""The monitor's scraper against a real Prometheus (Prometheus 3, from the built stack) that
scrapes a small exporter of chosen GPU series: both vendors' metric names and pod labels,
a pod without data, an endpoint that is down, and an answer that is not Prometheus'."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from kaiwo_monitor.prometheus import PrometheusScraper, ScrapeError

from tests.prometheus_server import (
    AMD,
    NVIDIA,
    GpuExporter,
    GpuSeries,
    Prometheus,
    running_prometheus,
    wait_for_series,
)

pytestmark = [pytest.mark.slow]

QUERY = f"{AMD} or {NVIDIA}"


@pytest.fixture
async def exporter() -> AsyncIterator[GpuExporter]:
    async with GpuExporter().serving() as serving:
        yield serving


@pytest.fixture
async def prometheus(exporter: GpuExporter, tmp_path: Path) -> AsyncIterator[Prometheus]:
    async with running_prometheus(exporter, tmp_path) as server:
        yield server


async def test_amd_and_nvidia_series_become_samples_of_their_pods(
    exporter: GpuExporter, prometheus: Prometheus
) -> None:
    exporter.series = [
        GpuSeries("team-a", "train-0", "0", 12.0),
        GpuSeries("team-a", "train-0", "1", 30.0),
        GpuSeries("team-b", "chat-0", "3", 77.0, metric=NVIDIA),
    ]
    await wait_for_series(prometheus.url, QUERY, 3)
    scraper = PrometheusScraper(prometheus.url)
    try:
        before = datetime.now(UTC)
        samples = await scraper.scrape()
    finally:
        await scraper.close()
    found = sorted((s.namespace, s.pod, s.gpu, s.percent) for s in samples)
    assert found == [
        ("team-a", "train-0", "0", 12.0),
        ("team-a", "train-0", "1", 30.0),
        ("team-b", "chat-0", "3", 77.0),
    ]
    assert all(abs((s.at - before).total_seconds()) < 30 for s in samples)


async def test_a_series_that_goes_away_is_no_longer_reported(
    exporter: GpuExporter, prometheus: Prometheus
) -> None:
    exporter.series = [GpuSeries("team-a", "train-0", "0", 5.0)]
    await wait_for_series(prometheus.url, QUERY, 1)
    exporter.series = []
    await wait_for_series(prometheus.url, QUERY, 0)
    scraper = PrometheusScraper(prometheus.url)
    try:
        assert await scraper.scrape() == ()
    finally:
        await scraper.close()


async def test_an_endpoint_that_is_down_and_one_that_answers_garbage(
    exporter: GpuExporter, prometheus: Prometheus
) -> None:
    prometheus.process.terminate()
    prometheus.process.wait(10)
    down = PrometheusScraper(prometheus.url, timeout=2.0)
    # The exporter answers, but with the text format, not Prometheus' JSON.
    garbage = PrometheusScraper(f"http://{exporter.target}/metrics?")
    try:
        with pytest.raises(ScrapeError) as unreachable:
            await down.scrape()
        assert unreachable.value.failure == "unreachable"
        with pytest.raises(ScrapeError) as not_json:
            await garbage.scrape()
        assert not_json.value.failure == "garbage"
    finally:
        await down.close()
        await garbage.close()
