"""The Prometheus adapter against a tiny aiohttp server answering like Prometheus does."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest
from aiohttp import web
from kaiwo_monitor.domain.samples import GpuSample
from kaiwo_monitor.prometheus import PrometheusScraper, ScrapeError, query_url
from kaiwo_runtime.nats_server import free_port

# 1772366400 is 2026-03-01T12:00:00Z.
VECTOR_ANSWER = {
    "status": "success",
    "data": {
        "resultType": "vector",
        "result": [
            {
                "metric": {
                    "__name__": "gpu_gfx_activity",
                    "namespace": "team-a",
                    "pod": "train-0",
                    "container": "main",
                    "gpu_id": "0",
                },
                "value": [1772366400, "37.5"],
            },
            {
                "metric": {
                    "__name__": "gpu_gfx_activity",
                    "namespace": "monitoring",
                    "pod": "amd-exporter-x2k9",
                    "exported_namespace": "team-b",
                    "exported_pod": "chat-0",
                    "gpu_id": "3",
                    "gpu_partition_id": "1",
                },
                "value": [1772366400.5, "0"],
            },
            {
                "metric": {
                    "__name__": "gpu_gfx_activity",
                    "k8s.namespace.name": "team-a",
                    "k8s.pod.name": "train-1",
                    "gpu": "7",
                },
                "value": [1772366401, "100"],
            },
            {
                "metric": {"__name__": "gpu_gfx_activity", "gpu_id": "5"},
                "value": [1772366400, "12"],
            },
            {
                "metric": {
                    "__name__": "gpu_gfx_activity",
                    "namespace": "team-a",
                    "pod": "train-2",
                    "gpu_id": "1",
                },
                "value": [1772366400, "NaN"],
            },
        ],
    },
}

# What ``timestamp(...)`` answers for VECTOR_ANSWER's series: train-0's sample was taken
# 5 s before the evaluation, chat-0's 300 s before (frozen), train-1's series is not in it.
TIMES_ANSWER = {
    "status": "success",
    "data": {
        "resultType": "vector",
        "result": [
            {
                "metric": {
                    "namespace": "team-a",
                    "pod": "train-0",
                    "container": "main",
                    "gpu_id": "0",
                },
                "value": [1772366400, "1772366395"],
            },
            {
                "metric": {
                    "namespace": "monitoring",
                    "pod": "amd-exporter-x2k9",
                    "exported_namespace": "team-b",
                    "exported_pod": "chat-0",
                    "gpu_id": "3",
                    "gpu_partition_id": "1",
                },
                "value": [1772366400, "1772366100.25"],
            },
            {"metric": {"gpu_id": "5"}, "value": [1772366400, "1772366399"]},
        ],
    },
}
TIME_QUERY = "timestamp(gpu_gfx_activity) or timestamp(DCGM_FI_DEV_GPU_UTIL)"


@dataclass
class FakePrometheus:
    """Answers /api/v1/query with ``status`` and ``body`` (JSON or text), after ``delay``;
    a ``timestamp(...)`` query with ``times_status`` and ``times``."""

    body: object = field(default_factory=lambda: VECTOR_ANSWER)
    times: object = field(default_factory=lambda: TIMES_ANSWER)
    status: int = 200
    times_status: int = 200
    delay: float = 0.0
    queries: list[dict[str, str]] = field(default_factory=list)
    url: str = ""

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.queries.append({"path": request.path, **request.query})
        await asyncio.sleep(self.delay)
        if request.query.get("query", "").startswith("timestamp("):
            return web.json_response(self.times, status=self.times_status)
        if isinstance(self.body, str):
            return web.Response(status=self.status, text=self.body)
        return web.json_response(self.body, status=self.status)


@pytest.fixture
async def prometheus() -> AsyncIterator[FakePrometheus]:
    fake = FakePrometheus()
    app = web.Application()
    app.router.add_get("/api/v1/query", fake.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    fake.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        yield fake
    finally:
        await runner.cleanup()


async def scrape(
    url: str, *, limit_seconds: float = 5.0, time_query: str = TIME_QUERY
) -> tuple[GpuSample, ...]:
    scraper = PrometheusScraper(url, timeout=limit_seconds, time_query=time_query)
    try:
        return await scraper.scrape()
    finally:
        await scraper.close()


async def test_a_vector_answer_becomes_one_sample_per_gpu_of_a_pod(
    prometheus: FakePrometheus,
) -> None:
    samples = await scrape(prometheus.url, time_query="")

    assert samples == (
        GpuSample(
            namespace="team-a",
            pod="train-0",
            gpu="0",
            percent=37.5,
            at=datetime(2026, 3, 1, 12, 0, tzinfo=UTC),
        ),
        GpuSample(
            namespace="team-b",
            pod="chat-0",
            gpu="3/1",
            percent=0.0,
            at=datetime(2026, 3, 1, 12, 0, 0, 500000, tzinfo=UTC),
        ),
        GpuSample(
            namespace="team-a",
            pod="train-1",
            gpu="7",
            percent=100.0,
            at=datetime(2026, 3, 1, 12, 0, 1, tzinfo=UTC),
        ),
    )
    assert prometheus.queries == [
        {"path": "/api/v1/query", "query": "gpu_gfx_activity or DCGM_FI_DEV_GPU_UTIL"}
    ]


async def test_each_sample_is_taken_when_its_series_was_sampled(
    prometheus: FakePrometheus,
) -> None:
    """Decision 0177: the second query's timestamps, asked at the first answer's time."""
    samples = await scrape(prometheus.url)

    assert [(s.pod, s.at) for s in samples] == [
        ("train-0", datetime(2026, 3, 1, 11, 59, 55, tzinfo=UTC)),
        ("chat-0", datetime(2026, 3, 1, 11, 55, 0, 250000, tzinfo=UTC)),
        ("train-1", datetime(2026, 3, 1, 12, 0, 1, tzinfo=UTC)),  # no time: evaluated at
    ]
    assert [s.percent for s in samples] == [37.5, 0.0, 100.0]
    assert prometheus.queries == [
        {"path": "/api/v1/query", "query": "gpu_gfx_activity or DCGM_FI_DEV_GPU_UTIL"},
        {"path": "/api/v1/query", "query": TIME_QUERY, "time": "1772366400"},
    ]


async def test_without_series_no_time_query_is_sent(prometheus: FakePrometheus) -> None:
    prometheus.body = {"status": "success", "data": {"resultType": "vector", "result": []}}
    assert await scrape(prometheus.url) == ()
    assert [query["query"] for query in prometheus.queries] == [
        "gpu_gfx_activity or DCGM_FI_DEV_GPU_UTIL"
    ]


async def test_a_failing_time_query_fails_the_scrape(prometheus: FakePrometheus) -> None:
    prometheus.times_status = 422
    prometheus.times = {"status": "error", "errorType": "execution", "error": "too many samples"}
    with pytest.raises(ScrapeError, match="answered execution: too many samples") as failed:
        await scrape(prometheus.url)
    assert failed.value.failure == "query_error"


async def test_a_configured_query_is_sent_as_is(prometheus: FakePrometheus) -> None:
    scraper = PrometheusScraper(
        prometheus.url + "/",
        query="avg_over_time(gpu_gfx_activity[1m])",
        time_query="timestamp(gpu_gfx_activity)",
    )
    try:
        await scraper.scrape()
    finally:
        await scraper.close()
    assert prometheus.queries == [
        {"path": "/api/v1/query", "query": "avg_over_time(gpu_gfx_activity[1m])"},
        {"path": "/api/v1/query", "query": "timestamp(gpu_gfx_activity)", "time": "1772366400"},
    ]


async def test_an_empty_time_query_sends_the_one_query(prometheus: FakePrometheus) -> None:
    await scrape(prometheus.url, time_query="")
    assert prometheus.queries == [
        {"path": "/api/v1/query", "query": "gpu_gfx_activity or DCGM_FI_DEV_GPU_UTIL"}
    ]


async def test_an_empty_vector_is_no_samples(prometheus: FakePrometheus) -> None:
    prometheus.body = {"status": "success", "data": {"resultType": "vector", "result": []}}
    assert await scrape(prometheus.url) == ()


async def test_a_query_error_names_prometheus_error(prometheus: FakePrometheus) -> None:
    prometheus.status = 400
    prometheus.body = {
        "status": "error",
        "errorType": "bad_data",
        "error": 'invalid parameter "query": 1:17: parse error',
    }
    with pytest.raises(ScrapeError, match="Prometheus answered bad_data: invalid parameter"):
        await scrape(prometheus.url)


async def test_a_proxy_error_page_names_the_http_status(prometheus: FakePrometheus) -> None:
    prometheus.status = 503
    prometheus.body = "<html>upstream unavailable</html>"
    with pytest.raises(ScrapeError, match="answered HTTP 503: <html>upstream unavailable"):
        await scrape(prometheus.url)


async def test_text_that_is_not_json_is_refused(prometheus: FakePrometheus) -> None:
    prometheus.body = 'gpu_gfx_activity{pod="x"} 3\n'
    with pytest.raises(ScrapeError, match="did not answer JSON"):
        await scrape(prometheus.url)


async def test_a_matrix_result_is_refused(prometheus: FakePrometheus) -> None:
    prometheus.body = {"status": "success", "data": {"resultType": "matrix", "result": []}}
    with pytest.raises(ScrapeError, match="expected a vector result, got 'matrix'"):
        await scrape(prometheus.url)


async def test_a_slow_endpoint_times_out(prometheus: FakePrometheus) -> None:
    prometheus.delay = 0.6
    with pytest.raises(ScrapeError, match="is unreachable"):
        await scrape(prometheus.url, limit_seconds=0.1)


async def test_nobody_listening_is_unreachable() -> None:
    with pytest.raises(ScrapeError, match="is unreachable"):
        await scrape(f"http://127.0.0.1:{free_port()}")


def test_query_urls() -> None:
    assert query_url("http://prometheus:9090") == "http://prometheus:9090/api/v1/query"
    assert query_url("https://prom.example/") == "https://prom.example/api/v1/query"
    assert (
        query_url("http://prom.example/prometheus/api/v1/query")
        == "http://prom.example/prometheus/api/v1/query"
    )
    with pytest.raises(ValueError, match="not an http"):
        query_url("prometheus:9090")
