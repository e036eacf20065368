"""Settings every service shares, read from ``KAIWO_*`` environment variables.

Each service subclasses :class:`ServiceSettings` and adds its own fields; one class per
service, never ``os.getenv`` scattered through modules.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from kaiwo_contracts.events.permissions import inbox_prefix
from kaiwo_contracts.events.streams import BusTopology, bus_topology, stream_max_bytes
from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from kaiwo_runtime.nats_connection import ClientTls, NatsConnection

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR"]
LogFormat = Literal["auto", "json", "console"]

ALL_INTERFACES = "0.0.0.0"  # noqa: S104 - probes and scrapes come from outside the pod


class ServiceSettings(BaseSettings):
    """``KAIWO_NATS_URL``, ``KAIWO_HEALTH_PORT``, ``KAIWO_LOG_LEVEL``, ..."""

    model_config = SettingsConfigDict(env_prefix="KAIWO_", extra="ignore", frozen=True)

    nats_url: str = "nats://127.0.0.1:4222"
    """Where NATS is (``tls://`` for TLS). Credentials belong in the file below, not here;
    a password in the URL works but is redacted wherever the URL is shown."""
    nats_credentials_file: Path | None = None
    """``KAIWO_NATS_CREDENTIALS_FILE``: this service's NKey seed file (``SU…``, from
    ``kaiwo up`` or ``kaiwo nats credentials``) or a NATS ``.creds`` file."""
    nats_tls_ca_file: Path | None = None
    """CA certificate the server's certificate must be signed by (turns TLS on)."""
    nats_tls_cert_file: Path | None = None
    """This client's certificate, for a server that verifies clients (mutual TLS)."""
    nats_tls_key_file: Path | None = None
    nats_declare_streams: bool | None = None
    """Create or update the streams and consumers at start. Unset: only when connecting
    without credentials (a development server); an identity of the operator is not allowed
    to, the administrator does it (``kaiwo up``, ``kaiwo nats provision``), and the service
    waits for them to exist."""
    health_host: str = ALL_INTERFACES
    health_port: int = Field(default=8080, ge=0, le=65535)
    """Port of ``/healthz``, ``/readyz`` and ``/metrics``; 0 picks a free one."""
    health_listen_fd: int | None = Field(default=None, ge=0)
    """``KAIWO_HEALTH_LISTEN_FD``: a socket already listening, inherited from the process that
    started this one (``kaiwo up``), served instead of binding ``health_host`` and
    ``health_port``. A port chosen free and bound later can be taken in between."""
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
    bus_stream_replicas: int = Field(default=1, ge=1, le=5)
    """``KAIWO_BUS_STREAM_REPLICAS``: copies JetStream keeps of each stream and of each
    key-value bucket a service creates (3 on a 3-node NATS cluster, so one node may fail).
    Streams are declared by whoever provisions them, buckets by the services: give every
    service and the provisioning the same value. Provisioning updates existing streams; an
    existing bucket keeps its own."""
    gc_young_allocations: int = Field(default=10_000, ge=700)
    """Container allocations between collections of the garbage collector's youngest
    generation (CPython's default is 700; see
    :func:`kaiwo_runtime.startup.collect_young_objects_every`)."""
    replica: str = "0"
    """This replica's stable identity (StatefulSet ordinal or host name)."""
    kubeconfig: Path | None = None
    """``KAIWO_KUBECONFIG``: the kubeconfig of the cluster to operate; unset means
    ``$KUBECONFIG``, then ``~/.kube/config``, then the in-cluster service account."""

    @model_validator(mode="after")
    def _tls_files_pair(self) -> ServiceSettings:
        if (self.nats_tls_cert_file is None) != (self.nats_tls_key_file is None):
            raise ValueError("KAIWO_NATS_TLS_CERT_FILE and KAIWO_NATS_TLS_KEY_FILE go together")
        return self

    def nats_connection(self, identity: str) -> NatsConnection:
        """How this service connects to NATS as ``identity`` (its service name)."""
        tls = (
            ClientTls(
                ca_file=self.nats_tls_ca_file,
                cert_file=self.nats_tls_cert_file,
                key_file=self.nats_tls_key_file,
            )
            if self.nats_tls_ca_file or self.nats_tls_cert_file
            else None
        )
        return NatsConnection(
            url=self.nats_url,
            credentials_file=self.nats_credentials_file,
            tls=tls,
            inbox_prefix=inbox_prefix(identity),
            name=f"kaiwo-{identity}-{self.replica}",
        )

    def declares_streams(self, connection: NatsConnection) -> bool:
        """Whether this service declares the topology itself (see ``nats_declare_streams``)."""
        if self.nats_declare_streams is not None:
            return self.nats_declare_streams
        return connection.anonymous

    @field_validator("bus_stream_max_bytes")
    @classmethod
    def _known_streams(cls, value: dict[str, int]) -> dict[str, int]:
        stream_max_bytes(value)  # refuses unknown stream names and limits below one message
        return value

    def bus_topology(self) -> BusTopology:
        """The streams and consumers as these settings configure them."""
        return bus_topology(
            partitions=self.bus_partitions,
            replicas=self.bus_stream_replicas,
            max_bytes=self.bus_stream_max_bytes,
        )


class SingleActiveSettings(ServiceSettings):
    """``KAIWO_LEASE_BUCKET`` and ``KAIWO_LEASE_SECONDS``, for services that run one active
    replica per role and keep the others waiting (:mod:`kaiwo_runtime.single_active`)."""

    lease_bucket: str = Field(default="kaiwo-leases", pattern=r"^[A-Za-z0-9_-]+$")
    """JetStream key-value bucket holding the leases; its ttl is the lease duration."""
    lease_seconds: float = Field(default=15.0, ge=1)
    """How long a lease holds without renewal: a crashed replica's successor starts after
    at most this long. The same on every replica (the bucket refuses another)."""
