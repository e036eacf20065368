"""Reads GPU utilization straight from an exporter's ``/metrics`` page, the way the API
reference's ``RESOURCE_MONITORING_METRICS_ENDPOINT`` names the source (the URL of an AMD
device-metrics exporter or of NVIDIA's dcgm-exporter), without a Prometheus in between.

The page is Prometheus' text exposition format; only the samples of ``gpu_gfx_activity`` and
``DCGM_FI_DEV_GPU_UTIL`` are read, with the labels :func:`kaiwo_monitor.prometheus.sample_of`
knows. A sample without its own timestamp is taken at the time of the scrape.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from urllib.parse import urlsplit

import aiohttp

from kaiwo_monitor.domain.samples import GpuSample
from kaiwo_monitor.prometheus import (
    AMD_METRIC,
    DEFAULT_QUERY,
    DEFAULT_TIME_QUERY,
    NVIDIA_METRIC,
    PrometheusScraper,
    ScrapeError,
    Scraper,
    sample_of,
)

METRICS = frozenset({AMD_METRIC, NVIDIA_METRIC})
EXPORTER_PATH = "/metrics"
_MAX_PAGE_BYTES = 64 * 1024 * 1024
"""A node's exporter page is kilobytes; a larger answer is not an exporter's."""
_LINE = re.compile(
    r"^(?P<name>[A-Za-z_:][A-Za-z0-9_:]*)"
    r"(?:\{(?P<labels>.*)\})?"
    r"\s+(?P<value>\S+)"
    r"(?:\s+(?P<timestamp>-?\d+))?\s*$"
)
_LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*,?')
_UNESCAPED = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


def is_exporter_page(endpoint: str) -> bool:
    """Whether ``endpoint`` names an exporter's page (its path ends in ``/metrics``)."""
    return urlsplit(endpoint).path.rstrip("/").endswith(EXPORTER_PATH)


def scraper_for(
    endpoint: str,
    *,
    query: str = DEFAULT_QUERY,
    time_query: str = DEFAULT_TIME_QUERY,
    timeout: float = 5.0,
) -> PrometheusScraper | ExporterScraper:
    """An exporter's page is read directly; anything else is a Prometheus server's URL."""
    if is_exporter_page(endpoint):
        return ExporterScraper(endpoint, timeout=timeout)
    return PrometheusScraper(endpoint, query=query, time_query=time_query, timeout=timeout)


def samples_from_page(text: str, *, now: datetime) -> tuple[GpuSample, ...]:
    """The GPU samples of an exposition page (lines of other metrics are skipped)."""
    return tuple(_samples(text, now))


def _samples(text: str, now: datetime) -> Iterator[GpuSample]:
    for line in text.splitlines():
        if not line.startswith(tuple(METRICS)):
            continue
        matched = _LINE.match(line)
        if matched is None or matched["name"] not in METRICS:
            continue
        try:
            percent = float(matched["value"])
        except ValueError:
            continue
        stamp = matched["timestamp"]
        at = datetime.fromtimestamp(int(stamp) / 1000, UTC) if stamp else now
        sample = sample_of(_labels(matched["labels"] or ""), percent, at)
        if sample is not None:
            yield sample


def _labels(text: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    for name, raw in _LABEL.findall(text):
        labels[name] = re.sub(r"\\[\\\"n]", lambda m: _UNESCAPED[m.group(0)], raw)
    return labels


class ExporterScraper:
    """:class:`~kaiwo_monitor.prometheus.Scraper` over an exporter's page (one session)."""

    def __init__(
        self,
        endpoint: str,
        *,
        timeout: float = 5.0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        parts = urlsplit(endpoint)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"the metrics endpoint {endpoint!r} is not an http(s) URL")
        self.url = endpoint
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._clock = clock
        self._session: aiohttp.ClientSession | None = None

    async def scrape(self) -> tuple[GpuSample, ...]:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        try:
            async with self._session.get(self.url) as response:
                if response.status >= 300:
                    raise ScrapeError(
                        f"{self.url} answered HTTP {response.status}", failure="http_error"
                    )
                body = await response.content.read(_MAX_PAGE_BYTES + 1)
        except (aiohttp.ClientError, TimeoutError) as error:
            reason = str(error) or type(error).__name__
            raise ScrapeError(
                f"{self.url} is unreachable: {reason}", failure="unreachable"
            ) from error
        if len(body) > _MAX_PAGE_BYTES:
            raise ScrapeError(f"{self.url} answered more than {_MAX_PAGE_BYTES} bytes")
        return samples_from_page(body.decode("utf-8", errors="replace"), now=self._clock())

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()


_: type[Scraper] = ExporterScraper  # it is a Scraper (checked by mypy)
