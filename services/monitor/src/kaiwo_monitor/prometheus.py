"""Reads GPU utilization from a Prometheus server through its HTTP API.

``GET <endpoint>/api/v1/query?query=gpu_gfx_activity or DCGM_FI_DEV_GPU_UTIL`` returns an
instant vector: one sample per GPU series the server holds, labelled with the pod using the
GPU by the AMD device-metrics exporter (``gpu_gfx_activity``, percent) or NVIDIA's
dcgm-exporter (``DCGM_FI_DEV_GPU_UTIL``, percent; with its Kubernetes pod mapping on).
Label names differ between set-ups, so each is looked up under several names:

* namespace: ``exported_namespace``, ``namespace``, ``kubernetes_namespace``,
  ``k8s_namespace_name``, ``k8s.namespace.name``;
* pod: ``exported_pod``, ``pod``, ``pod_name``, ``kubernetes_pod_name``, ``k8s_pod_name``,
  ``k8s.pod.name``;
* GPU: ``gpu_id`` (AMD) or ``gpu`` (DCGM), with ``/<gpu_partition_id>`` appended when
  present.

``exported_*`` come first: when Prometheus scrapes the exporter with its own target labels
(``namespace``/``pod`` of the exporter pod), it renames the exporter's labels to
``exported_namespace``/``exported_pod``, and those are the workload's. Series without a
namespace and pod (GPUs no pod uses) and non-finite values are dropped.

The query is configurable (``KAIWO_MONITOR_QUERY``), e.g.
``avg_over_time(gpu_gfx_activity[1m])`` to smooth over a window; any query whose result is a
vector with these labels works.

**When each reading was taken** (decision 0177). An instant query answers every series with
its latest sample within Prometheus' lookback (five minutes by default), stamped with the
evaluation time, not the sample's: a frozen reading (an exporter that stamps its samples
itself and stopped, a Prometheus restarted on its old data) looks current for minutes. So a
second query, ``timestamp(gpu_gfx_activity) or timestamp(DCGM_FI_DEV_GPU_UTIL)``
(``KAIWO_MONITOR_SAMPLE_TIME_QUERY``; empty: not sent), is evaluated at the first answer's
evaluation time, and each sample takes the timestamp of the series with the same labels
(its name aside); the monitor then judges only current samples
(:func:`kaiwo_monitor.domain.samples.current_samples`). A sample whose series the second
query does not answer (a configured query with other labels) keeps the evaluation time, as
without the second query. A failing second query fails the scrape, as the first would.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

import aiohttp

from kaiwo_monitor.domain.samples import GpuSample

AMD_METRIC = "gpu_gfx_activity"
NVIDIA_METRIC = "DCGM_FI_DEV_GPU_UTIL"
DEFAULT_QUERY = f"{AMD_METRIC} or {NVIDIA_METRIC}"
DEFAULT_TIME_QUERY = f"timestamp({AMD_METRIC}) or timestamp({NVIDIA_METRIC})"
QUERY_PATH = "/api/v1/query"
NAMESPACE_LABELS = (
    "exported_namespace",
    "namespace",
    "kubernetes_namespace",
    "k8s_namespace_name",
    "k8s.namespace.name",
)
POD_LABELS = (
    "exported_pod",
    "pod",
    "pod_name",
    "kubernetes_pod_name",
    "k8s_pod_name",
    "k8s.pod.name",
)
GPU_LABELS = ("gpu_id", "gpu")
PARTITION_LABEL = "gpu_partition_id"
_MAX_ERROR_TEXT = 300


SeriesKey = frozenset[tuple[str, str]]
"""A series' labels without its name: ``timestamp()`` drops the name, nothing else."""
ScrapeFailure = Literal["unreachable", "http_error", "query_error", "garbage"]


class ScrapeError(RuntimeError):
    """The metrics endpoint did not give a usable answer; ``failure`` says how."""

    def __init__(self, message: str, *, failure: ScrapeFailure = "garbage") -> None:
        super().__init__(message)
        self.failure: ScrapeFailure = failure


class Scraper(Protocol):
    """Where the monitor gets GPU samples from."""

    async def scrape(self) -> tuple[GpuSample, ...]:
        """Every current sample; :class:`ScrapeError` when the endpoint fails."""
        ...


def query_url(endpoint: str) -> str:
    """The instant-query URL of a Prometheus base URL (a full query URL is kept)."""
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"the metrics endpoint {endpoint!r} is not an http(s) URL")
    base = endpoint.rstrip("/")
    return base if base.endswith(QUERY_PATH) else f"{base}{QUERY_PATH}"


class PrometheusScraper:
    """:class:`Scraper` over the Prometheus HTTP API (one aiohttp session, reused)."""

    def __init__(
        self,
        endpoint: str,
        *,
        query: str = DEFAULT_QUERY,
        time_query: str = DEFAULT_TIME_QUERY,
        timeout: float = 5.0,
    ) -> None:
        self.url = query_url(endpoint)
        self.query = query
        self.time_query = time_query
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None

    async def scrape(self) -> tuple[GpuSample, ...]:
        document = await self._get({"query": self.query})
        evaluated_at = evaluation_time(document)
        if not self.time_query or evaluated_at is None:
            return samples_from_response(document)
        # At the same evaluation time: both answers then come from the same samples.
        times = await self._get({"query": self.time_query, "time": evaluated_at})
        return samples_from_response(document, times=sample_times_from_response(times))

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    async def _get(self, params: Mapping[str, str]) -> Any:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self._timeout)
        try:
            async with self._session.get(self.url, params=params) as response:
                text = await response.text()
                if response.status >= 300 and not _is_prometheus_error(text):
                    raise ScrapeError(
                        f"{self.url} answered HTTP {response.status}: {_short(text)}",
                        failure="http_error",
                    )
                return _json(text, self.url)
        except (aiohttp.ClientError, TimeoutError) as error:
            reason = str(error) or type(error).__name__
            raise ScrapeError(
                f"{self.url} is unreachable: {reason}", failure="unreachable"
            ) from error


def samples_from_response(
    document: Any, *, times: Mapping[SeriesKey, datetime] | None = None
) -> tuple[GpuSample, ...]:
    """The samples of an instant-query answer; :class:`ScrapeError` for an error or non-vector.

    ``times``: when each series' sample was taken (:func:`sample_times_from_response`); a
    series not in it is taken at the evaluation time."""
    found = (_sample(entry, times or {}) for entry in _vector(document))
    return tuple(sample for sample in found if sample is not None)


def sample_times_from_response(document: Any) -> dict[SeriesKey, datetime]:
    """The sample times a ``timestamp(...)`` instant query answered, by series."""
    times: dict[SeriesKey, datetime] = {}
    for entry in _vector(document):
        at = _time(_value(entry, 1))
        if at is not None:
            times[series_key(entry.get("metric") or {})] = at
    return times


def evaluation_time(document: Any) -> str | None:
    """The evaluation time of an instant-query answer as Prometheus wrote it; None when it
    has no series (or is no answer)."""
    try:
        entries = _vector(document)
    except ScrapeError:
        return None
    stamp = _value(entries[0], 0) if entries else None
    return None if stamp is None else str(stamp)


def series_key(labels: Mapping[str, str]) -> SeriesKey:
    return frozenset((name, value) for name, value in labels.items() if name != "__name__")


def _vector(document: Any) -> list[Mapping[str, Any]]:
    if not isinstance(document, Mapping):
        raise ScrapeError("the answer is not a JSON object")
    if document.get("status") != "success":
        kind = document.get("errorType", "error")
        raise ScrapeError(
            f"Prometheus answered {kind}: {_short(str(document.get('error', '')))}",
            failure="query_error",
        )
    data = document.get("data") or {}
    if data.get("resultType") != "vector":
        raise ScrapeError(f"expected a vector result, got {data.get('resultType')!r}")
    return [entry for entry in data.get("result") or [] if isinstance(entry, Mapping)]


def _value(entry: Mapping[str, Any], index: int) -> Any:
    """Part ``index`` of a vector entry's ``[time, "value"]``; None when it has no pair."""
    point = entry.get("value")
    if not isinstance(point, Sequence) or isinstance(point, str) or len(point) != 2:
        return None
    return point[index]


def _time(stamp: Any) -> datetime | None:
    try:
        return datetime.fromtimestamp(float(stamp), UTC)
    except (TypeError, ValueError, OverflowError, OSError):
        return None


def _sample(entry: Mapping[str, Any], times: Mapping[SeriesKey, datetime]) -> GpuSample | None:
    labels: Mapping[str, str] = entry.get("metric") or {}
    evaluated_at = _time(_value(entry, 0))
    try:
        percent = float(_value(entry, 1))
    except (TypeError, ValueError):
        return None
    if evaluated_at is None:
        return None
    return sample_of(labels, percent, times.get(series_key(labels), evaluated_at))


def sample_of(labels: Mapping[str, str], percent: float, at: datetime) -> GpuSample | None:
    """One GPU's reading from a series' labels (see the module docstring for the names); None
    for a GPU no pod uses and for a value that is not finite."""
    namespace = _first_label(labels, NAMESPACE_LABELS)
    pod = _first_label(labels, POD_LABELS)
    if not namespace or not pod or not math.isfinite(percent):
        return None
    gpu = _first_label(labels, GPU_LABELS) or "?"
    partition = labels.get(PARTITION_LABEL)
    return GpuSample(
        namespace=namespace,
        pod=pod,
        gpu=f"{gpu}/{partition}" if partition else gpu,
        percent=percent,
        at=at,
    )


def _first_label(labels: Mapping[str, str], names: Sequence[str]) -> str:
    return next((labels[name] for name in names if labels.get(name)), "")


def _is_prometheus_error(text: str) -> bool:
    """Prometheus answers query errors with a 4xx/5xx *and* a JSON body naming the error."""
    return text.lstrip().startswith("{") and '"status"' in text


def _json(text: str, url: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as error:
        raise ScrapeError(f"{url} did not answer JSON: {_short(text)}") from error


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _MAX_ERROR_TEXT else f"{flat[:_MAX_ERROR_TEXT]}..."
