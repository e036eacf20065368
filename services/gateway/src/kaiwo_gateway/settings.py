"""The gateway's settings (``KAIWO_GATEWAY_*`` environment variables, on top of the shared ones)."""

from __future__ import annotations

from kaiwo_runtime.settings import ServiceSettings
from pydantic import Field

from kaiwo_gateway.domain.catalog import ANY_NAMESPACE


class GatewaySettings(ServiceSettings):
    """``KAIWO_GATEWAY_HOST``, ``KAIWO_GATEWAY_PORT``, ..."""

    gateway_host: str = "0.0.0.0"  # noqa: S104 - clients reach the gateway from other pods
    gateway_port: int = Field(default=8000, ge=0, le=65535)
    """Port of the OpenAI API (``/openai/v1/...``); 0 picks a free one."""
    gateway_namespaces: tuple[str, ...] = ANY_NAMESPACE
    """``KAIWO_GATEWAY_NAMESPACES`` (JSON list): serve only Models of these namespaces;
    empty: every namespace the watcher observes."""
    gateway_endpoint_wait_seconds: float = Field(default=60.0, ge=0)
    """How long a request waits for a ready endpoint of its Model before a 503."""
    gateway_connect_timeout_seconds: float = Field(default=5.0, gt=0)
    """How long to wait for a backend to accept the connection before trying another."""
    gateway_attempts: int = Field(default=4, ge=1, le=16)
    """Endpoints tried per request when connections fail before a byte was sent."""
    gateway_resync_seconds: float = Field(default=30.0, gt=0)
    """How often the observations are read again without being woken (a missed wake-up)."""
    startup_timeout_seconds: float = Field(default=10.0, gt=0)
