"""The gateway's settings (``KAIWO_GATEWAY_*`` and ``KAIWO_AUTOSCALER_*`` environment
variables, on top of the shared ones and the lease's)."""

from __future__ import annotations

from typing import Literal, Self

from kaiwo_contracts.access import is_loopback_host
from kaiwo_contracts.events.permissions import AUTOSCALER_BUCKET
from kaiwo_runtime.settings import SingleActiveSettings
from pydantic import Field, model_validator

from kaiwo_gateway.domain.catalog import ANY_NAMESPACE

MIB = 1024 * 1024


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
    gateway_anonymous: Literal["off", "loopback"] = "off"
    """``KAIWO_GATEWAY_ANONYMOUS``: ``loopback`` serves every request from a loopback address
    as the anonymous caller, for every namespace, without a token (``kaiwo up`` sets it), and
    asks the API server nothing. Only with a loopback ``KAIWO_GATEWAY_HOST``: behind a proxy
    or a mesh sidecar every request would come from 127.0.0.1."""
    gateway_token_audiences: tuple[str, ...] = ()
    """``KAIWO_GATEWAY_TOKEN_AUDIENCES`` (JSON list): audiences a bearer token must be valid
    for (e.g. ``["kaiwo-gateway"]``); empty: the API server's own."""
    gateway_access_cache_seconds: float = Field(default=30.0, ge=0)
    """How long an authenticated token and an allowed namespace are remembered."""
    gateway_access_denied_cache_seconds: float = Field(default=5.0, ge=0)
    """How long a refused token or namespace is remembered."""
    gateway_access_cache_entries: int = Field(default=4096, ge=1)
    """Remembered answers per kind (tokens, namespaces; allowed and refused apart)."""
    gateway_token_reviews_in_flight: int = Field(default=32, ge=1)
    """TokenReviews at once; past that a request with an unknown token gets a 429."""
    gateway_caller_max_requests: int = Field(default=64, ge=1)
    """Requests one caller may have in flight; 429 past it."""
    gateway_caller_max_body_bytes: int = Field(default=64 * MIB, ge=1)
    """Request body bytes one caller's requests in flight may hold; 429 past it."""
    gateway_max_body_bytes: int = Field(default=8 * MIB, ge=1)
    """The body limit of the JSON routes; 413 past it."""
    gateway_max_audio_body_bytes: int = Field(default=32 * MIB, ge=1)
    """The body limit of ``audio/transcriptions``; 413 past it."""
    gateway_max_json_depth: int = Field(default=64, ge=1, le=512)
    """How deep a JSON body may nest arrays and objects; 400 past it."""
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

    messenger_enabled: bool = False
    """``KAIWO_MESSENGER_ENABLED``: also serve requests that arrive through JetStream
    (``kaiwo-messenger.<namespace>.requests``, decision 0049); the administrator declares its
    streams and consumer (``kaiwo nats provision --messenger``)."""
    messenger_handlers: int = Field(default=256, ge=1, le=4096)
    """Messenger requests this replica handles at once (the autoscaler counts these)."""
    messenger_endpoint_wait_seconds: float = Field(default=600.0, ge=0)
    """How long a messenger request waits for a ready endpoint (scale from zero) before it
    is left for another delivery."""
    messenger_request_timeout_seconds: float = Field(default=900.0, gt=0)
    """How long a model server may take to answer one messenger request."""

    @model_validator(mode="after")
    def _anonymous_only_on_loopback(self) -> Self:
        if self.gateway_anonymous == "loopback" and not is_loopback_host(self.gateway_host):
            raise ValueError(
                "KAIWO_GATEWAY_ANONYMOUS=loopback needs a loopback KAIWO_GATEWAY_HOST "
                f"(127.0.0.1 or ::1), not {self.gateway_host!r}: clients elsewhere would "
                "reach it through a proxy that connects from loopback"
            )
        return self
