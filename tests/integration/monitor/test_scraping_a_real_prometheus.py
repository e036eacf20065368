"""The monitor's scraper against a real Prometheus (Prometheus 3, from the built stack) that
scrapes a small exporter of chosen GPU series: both vendors' metric names and pod labels,
a pod without data, an endpoint that is down, and an answer that is not Prometheus'; and
frozen readings, which Prometheus answers as current but the monitor does not judge (an
exporter that stamps its own samples, a Prometheus restarted on its old data; decision 0177)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from kaiwo_monitor.domain.samples import current_samples
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
from tests.waiting import eventually

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


async def test_a_reading_stamped_by_its_exporter_keeps_its_own_time(
    exporter: GpuExporter, prometheus: Prometheus
) -> None:
    """The exporter stamps chat-0's reading with a time 150 s ago: Prometheus answers it as
    current (its lookback is five minutes), the monitor sees when it was taken."""
    stamped = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=150)
    exporter.series = [
        GpuSeries("team-a", "train-0", "0", 90.0),
        GpuSeries(
            "team-b", "chat-0", "3", 2.0, NVIDIA, timestamp_ms=int(stamped.timestamp()) * 1000
        ),
    ]
    await wait_for_series(prometheus.url, QUERY, 2)
    scraper = PrometheusScraper(prometheus.url)
    try:
        samples = await scraper.scrape()
        asked_at = datetime.now(UTC)
    finally:
        await scraper.close()

    by_pod = {sample.pod: sample for sample in samples}
    assert sorted(by_pod) == ["chat-0", "train-0"]
    assert by_pod["chat-0"].at == stamped
    current = current_samples(samples, now=asked_at, tolerance=timedelta(seconds=120))
    assert [sample.pod for sample in current] == ["train-0"]


async def test_a_prometheus_restarted_on_old_data_answers_the_old_reading_with_its_time(
    exporter: GpuExporter, tmp_path: Path
) -> None:
    """Prometheus writes no staleness marker when it stops: restarted, it answers a series its
    target no longer serves with the reading from before the stop."""
    exporter.series = [GpuSeries("team-a", "train-0", "0", 2.0)]
    async with running_prometheus(exporter, tmp_path) as before:
        await wait_for_series(before.url, QUERY, 1)
    stopped_at = datetime.now(UTC)
    exporter.series = []
    async with running_prometheus(exporter, tmp_path) as after:
        scrapes = exporter.scrapes
        await eventually(lambda: exporter.scrapes >= scrapes + 2)
        scraper = PrometheusScraper(after.url)
        try:
            samples = await scraper.scrape()
        finally:
            await scraper.close()

    [old] = samples
    assert (old.pod, old.percent) == ("train-0", 2.0)
    assert old.at < stopped_at  # evaluated after the restart, taken before the stop
