from __future__ import annotations

import pytest
from kaiwo_runtime.settings import ServiceSettings, SingleActiveSettings
from pydantic import ValidationError


def test_settings_come_from_kaiwo_prefixed_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAIWO_NATS_URL", "nats://nats.kaiwo-system:4222")
    monkeypatch.setenv("KAIWO_HEALTH_PORT", "0")
    monkeypatch.setenv("KAIWO_LOG_LEVEL", "DEBUG")
    monkeypatch.setenv("KAIWO_BUS_PARTITIONS", "8")
    monkeypatch.setenv("NATS_URL", "nats://ignored:1")

    settings = ServiceSettings()

    assert settings.nats_url == "nats://nats.kaiwo-system:4222"
    assert settings.health_port == 0
    assert settings.log_level == "DEBUG"
    assert settings.bus_partitions == 8


def test_defaults_suit_a_local_run(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("KAIWO_NATS_URL", "KAIWO_HEALTH_PORT", "KAIWO_LOG_LEVEL", "KAIWO_BUS_PARTITIONS"):
        monkeypatch.delenv(name, raising=False)

    settings = ServiceSettings()

    assert (settings.nats_url, settings.health_port, settings.log_format) == (
        "nats://127.0.0.1:4222",
        8080,
        "auto",
    )


def test_invalid_values_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAIWO_LOG_LEVEL", "LOUD")

    with pytest.raises(ValidationError, match="log_level"):
        ServiceSettings()


def test_the_lease_lasts_fifteen_seconds_unless_told(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAIWO_LEASE_SECONDS", raising=False)
    assert SingleActiveSettings().lease_seconds == 15.0
    assert SingleActiveSettings().lease_bucket == "kaiwo-leases"
    monkeypatch.setenv("KAIWO_LEASE_SECONDS", "0.5")
    with pytest.raises(ValidationError, match="lease_seconds"):
        SingleActiveSettings()


def test_stream_byte_limits_come_from_json_and_shape_the_topology(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KAIWO_BUS_STREAM_MAX_BYTES", '{"KAIWO_OBS": 8589934592}')

    topology = ServiceSettings().bus_topology()

    assert topology.stream("KAIWO_OBS").max_bytes == 8589934592
    assert topology.stream("KAIWO_PLAN").max_bytes == 1073741824


def test_a_byte_limit_for_a_stream_that_does_not_exist_is_refused_at_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KAIWO_BUS_STREAM_MAX_BYTES", '{"KAIWO_OBSERVED": 8589934592}')

    with pytest.raises(ValidationError, match="no stream 'KAIWO_OBSERVED' to limit"):
        ServiceSettings()


def test_stream_replicas_shape_every_stream_of_the_topology(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KAIWO_BUS_STREAM_REPLICAS", "3")

    streams = ServiceSettings().bus_topology().streams

    assert {stream.name: stream.replicas for stream in streams} == {
        "KAIWO_OBS": 3,
        "KAIWO_PLAN": 3,
        "KAIWO_RES": 3,
        "KAIWO_MON": 3,
        "KAIWO_GATEWAY": 3,
        "KAIWO_DLQ": 3,
        "KAIWO_PUBLIC": 3,
    }


def test_stream_replicas_default_to_one_and_stop_at_five(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KAIWO_BUS_STREAM_REPLICAS", raising=False)
    assert {s.replicas for s in ServiceSettings().bus_topology().streams} == {1}

    monkeypatch.setenv("KAIWO_BUS_STREAM_REPLICAS", "7")
    with pytest.raises(ValidationError, match="bus_stream_replicas"):
        ServiceSettings()
