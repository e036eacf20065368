"""Settings every service shares, read from ``KAIWO_*`` environment variables.

Each service subclasses :class:`ServiceSettings` and adds its own fields; one class per
service, never ``os.getenv`` scattered through modules.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from kaiwo_contracts.events.streams import BusTopology, bus_topology, stream_max_bytes
from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]
LogFormat = Literal["auto", "json", "console"]

ALL_INTERFACES = "0.0.0.0"  # noqa: S104 - probes and scrapes come from outside the pod


class ServiceSettings(BaseSettings):
    """``KAIWO_NATS_URL``, ``KAIWO_HEALTH_PORT``, ``KAIWO_LOG_LEVEL``, ..."""

    model_config = SettingsConfigDict(env_prefix="KAIWO_", extra="ignore", frozen=True)

    nats_url: str = "nats://127.0.0.1:4222"
    health_host: str = ALL_INTERFACES
    health_port: int = Field(default=8080, ge=0, le=65535)
    """Port of ``/healthz``, ``/readyz`` and ``/metrics``; 0 picks a free one."""
    log_level: LogLevel = "INFO"
    log_format: LogFormat = "auto"
    """``auto``: console lines on a terminal, JSON otherwise."""
    bus_partitions: int = Field(default=1, ge=1, le=1024)
    """Partitions of the workload streams (see ``kaiwo_contracts.events.streams``)."""
    bus_stream_max_bytes: dict[str, int] = Field(default_factory=dict)
    """``KAIWO_BUS_STREAM_MAX_BYTES``, JSON: bytes a stream may hold before JetStream discards
    its oldest messages, per stream name, e.g. ``{"KAIWO_OBS": 8589934592}`` (-1: no limit).
    Streams not named keep ``DEFAULT_STREAM_MAX_BYTES``. Every service declares the streams,
    so give every service the same value."""
    replica: str = "0"
    """This replica's stable identity (StatefulSet ordinal or host name)."""
    kubeconfig: Path | None = None
    """``KAIWO_KUBECONFIG``: the kubeconfig of the cluster to operate; unset means
    ``$KUBECONFIG``, then ``~/.kube/config``, then the in-cluster service account."""

    @field_validator("bus_stream_max_bytes")
    @classmethod
    def _known_streams(cls, value: dict[str, int]) -> dict[str, int]:
        stream_max_bytes(value)  # refuses unknown stream names and limits below one message
        return value

    def bus_topology(self) -> BusTopology:
        """The streams and consumers as these settings configure them."""
        return bus_topology(partitions=self.bus_partitions, max_bytes=self.bus_stream_max_bytes)


class SingleActiveSettings(ServiceSettings):
    """``KAIWO_LEASE_BUCKET`` and ``KAIWO_LEASE_SECONDS``, for services that run one active
    replica per role and keep the others waiting (:mod:`kaiwo_runtime.single_active`)."""

    lease_bucket: str = Field(default="kaiwo-leases", pattern=r"^[A-Za-z0-9_-]+$")
    """JetStream key-value bucket holding the leases; its ttl is the lease duration."""
    lease_seconds: float = Field(default=15.0, ge=1)
    """How long a lease holds without renewal: a crashed replica's successor starts after
    at most this long. The same on every replica (the bucket refuses another)."""
