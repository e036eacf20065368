"""The API reference's resource-monitoring settings (``RESOURCE_MONITORING_*``) work beside the
project's own ``KAIWO_MONITOR_*`` names, which decide where both are set (decision 0046); and an
exporter's ``/metrics`` page, what the reference's endpoint names, is read directly."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from kaiwo_monitor.domain.samples import GpuSample
from kaiwo_monitor.exporter import ExporterScraper, samples_from_page, scraper_for
from kaiwo_monitor.prometheus import PrometheusScraper
from kaiwo_monitor.settings import MonitorSettings
from pydantic import ValidationError

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "KAIWO_MONITOR_ENABLED",
        "KAIWO_MONITOR_METRICS_ENDPOINT",
        "KAIWO_MONITOR_POLLING_INTERVAL_SECONDS",
        "RESOURCE_MONITORING_ENABLED",
        "RESOURCE_MONITORING_METRICS_ENDPOINT",
        "RESOURCE_MONITORING_POLLING_INTERVAL",
    ):
        monkeypatch.delenv(name, raising=False)


def test_the_reference_names_configure_the_monitor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESOURCE_MONITORING_ENABLED", "false")
    monkeypatch.setenv("RESOURCE_MONITORING_METRICS_ENDPOINT", "http://exporter:5000/metrics")
    monkeypatch.setenv("RESOURCE_MONITORING_POLLING_INTERVAL", "1m30s")
    settings = MonitorSettings()
    assert settings.monitor_enabled is False
    assert settings.monitor_metrics_endpoint == "http://exporter:5000/metrics"
    assert settings.monitor_polling_interval_seconds == 90.0


def test_the_projects_own_names_win_where_both_are_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RESOURCE_MONITORING_ENABLED", "false")
    monkeypatch.setenv("KAIWO_MONITOR_ENABLED", "true")
    monkeypatch.setenv("RESOURCE_MONITORING_METRICS_ENDPOINT", "http://exporter:5000/metrics")
    monkeypatch.setenv("KAIWO_MONITOR_METRICS_ENDPOINT", "http://prometheus:9090")
    monkeypatch.setenv("RESOURCE_MONITORING_POLLING_INTERVAL", "1m")
    monkeypatch.setenv("KAIWO_MONITOR_POLLING_INTERVAL_SECONDS", "7")
    settings = MonitorSettings()
    assert settings.monitor_enabled is True
    assert settings.monitor_metrics_endpoint == "http://prometheus:9090"
    assert settings.monitor_polling_interval_seconds == 7.0


@pytest.mark.parametrize("given", ["soon", "0s", "-5s"])
def test_a_bad_reference_interval_is_refused_naming_it(
    monkeypatch: pytest.MonkeyPatch, given: str
) -> None:
    monkeypatch.setenv("RESOURCE_MONITORING_POLLING_INTERVAL", given)
    with pytest.raises(ValidationError):
        MonitorSettings()


def test_an_exporter_page_is_read_directly_and_a_server_through_its_query_api() -> None:
    assert isinstance(scraper_for("http://exporter:5000/metrics"), ExporterScraper)
    assert isinstance(scraper_for("http://exporter:5000/metrics/"), ExporterScraper)
    assert isinstance(scraper_for("http://prometheus:9090"), PrometheusScraper)
    assert isinstance(scraper_for("http://prometheus:9090/api/v1/query"), PrometheusScraper)


PAGE = """\
# HELP gpu_gfx_activity GPU activity
# TYPE gpu_gfx_activity gauge
gpu_gfx_activity{gpu_id="0",pod="train-0",namespace="ml-team",hostname="n1"} 87.5
gpu_gfx_activity{gpu_id="1",pod="",namespace="",hostname="n1"} 0
gpu_gfx_activity{gpu_id="2",gpu_partition_id="1",pod="eval-0",namespace="ml-team"} 3 1767268800000
gpu_memory_usage{gpu_id="0",pod="train-0",namespace="ml-team"} 1234
DCGM_FI_DEV_GPU_UTIL{gpu="3",pod="serve-1",namespace="a \\"quoted\\" ns"} NaN
DCGM_FI_DEV_GPU_UTIL{gpu="4",pod="serve-2",namespace="nlp"} 42
"""


def test_an_exporter_page_gives_one_sample_per_gpu_a_pod_uses() -> None:
    assert samples_from_page(PAGE, now=NOW) == (
        GpuSample(namespace="ml-team", pod="train-0", gpu="0", percent=87.5, at=NOW),
        GpuSample(
            namespace="ml-team",
            pod="eval-0",
            gpu="2/1",
            percent=3.0,
            at=datetime(2026, 1, 1, 12, 0, tzinfo=UTC),
        ),
        GpuSample(namespace="nlp", pod="serve-2", gpu="4", percent=42.0, at=NOW),
    )
