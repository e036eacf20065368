from __future__ import annotations

from kaiwo_runtime.metrics import MetricsRegistry


def test_every_metric_gets_the_kaiwo_prefix_once() -> None:
    metrics = MetricsRegistry()
    metrics.gauge("planner_known_objects", "Objects in the projection")
    metrics.histogram("kaiwo_executor_apply_duration_seconds", "Apply time", buckets=(0.1, 1.0))

    text = metrics.exposition().decode()

    assert "# TYPE kaiwo_planner_known_objects gauge" in text
    assert "# TYPE kaiwo_executor_apply_duration_seconds histogram" in text
    assert "kaiwo_kaiwo_" not in text


def test_registries_are_independent() -> None:
    first, second = MetricsRegistry(), MetricsRegistry()
    first.counter("a_events", "a").inc()
    second.counter("a_events", "a")

    assert "kaiwo_a_events_total 1.0" in first.exposition().decode().splitlines()
    assert "kaiwo_a_events_total 0.0" in second.exposition().decode().splitlines()
