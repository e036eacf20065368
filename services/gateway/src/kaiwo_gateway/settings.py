"""The gateway's settings (``KAIWO_GATEWAY_*`` and ``KAIWO_AUTOSCALER_*`` environment
variables, on top of the shared ones and the lease's)."""

from __future__ import annotations

from kaiwo_contracts.events.permissions import AUTOSCALER_BUCKET
from kaiwo_runtime.settings import SingleActiveSettings
from pydantic import Field

from kaiwo_gateway.domain.catalog import ANY_NAMESPACE


class GatewaySettings(SingleActiveSettings):
    """``KAIWO_GATEWAY_HOST``, ``KAIWO_GATEWAY_PORT``, ``KAIWO_AUTOSCALER_INTERVAL_SECONDS``..."""

    gateway_host: str = "0.0.0.0"  # noqa: S104 - clients reach the gateway from other pods
    gateway_port: int = Field(default=8000, ge=0, le=65535)
    """Port of the OpenAI API (``/openai/v1/...``); 0 picks a free one."""
    gateway_namespaces: tuple[str, ...] = ANY_NAMESPACE
    """``KAIWO_GATEWAY_NAMESPACES`` (JSON list): serve only Models of these namespaces;
    empty: every namespace the watcher observes."""
    gateway_endpoint_wait_seconds: float = Field(default=60.0, ge=0)
    """How long a request waits for a ready endpoint of its Model (a Model scaling from zero
    included) before a 503."""
    gateway_connect_timeout_seconds: float = Field(default=5.0, gt=0)
    """How long to wait for a backend to accept the connection before trying another."""
    gateway_attempts: int = Field(default=4, ge=1, le=16)
    """Endpoints tried per request when connections fail before a byte was sent."""
    gateway_resync_seconds: float = Field(default=30.0, gt=0)
    """How often the observations are read again without being woken (a missed wake-up)."""
    startup_timeout_seconds: float = Field(default=10.0, gt=0)
    autoscaler_enabled: bool = True
    """``KAIWO_AUTOSCALER_ENABLED``: this replica may lead the autoscaler (one replica does,
    by the ``autoscaler`` lease). Every replica reports its load either way."""
    autoscaler_interval_seconds: float = Field(default=10.0, gt=0)
    """How often each replica reports its load and the leader samples it (upstream's
    ``modelAutoscaling.interval``)."""
    autoscaler_window_seconds: float = Field(default=600.0, gt=0)
    """The moving average's window (upstream's ``modelAutoscaling.timeWindow``)."""
    autoscaler_bucket: str = Field(default=AUTOSCALER_BUCKET, pattern=r"^[A-Za-z0-9_-]+$")
    """Key-value bucket of the averages, so a restart or a new leader continues them."""
