"""The console's settings (``KAIWO_CONSOLE_*`` and ``KAIWO_EVENTSTORE_URL`` environment
variables, on top of the shared ones)."""

from __future__ import annotations

from typing import Literal, Self

from kaiwo_contracts.access import is_loopback_host
from kaiwo_runtime.settings import ServiceSettings
from pydantic import Field, model_validator

DEFAULT_EVENTSTORE_URL = "sqlite:///.kaiwo/events.db"


class ConsoleSettings(ServiceSettings):
    """``KAIWO_CONSOLE_HOST``, ``KAIWO_CONSOLE_PORT``, ``KAIWO_CONSOLE_ANONYMOUS``..."""

    console_host: str = "0.0.0.0"  # noqa: S104 - people reach the console through a Service
    console_port: int = Field(default=8090, ge=0, le=65535)
    """Port of the pages (``/workloads``, ``/queues``, ``/nodes``, ``/models``); 0: a free one."""
    console_listen_fd: int | None = Field(default=None, ge=0)
    """A listening socket inherited from the parent (``kaiwo up`` binds the port itself, so
    two stacks cannot both choose it); host and port are then the socket's."""
    console_anonymous: Literal["off", "loopback"] = "off"
    """``loopback``: every request from a loopback address is the anonymous caller, who sees
    every namespace, without a token (``kaiwo up`` and the demo set it), and the API server
    is asked nothing. Only with a loopback ``KAIWO_CONSOLE_HOST``: behind a proxy every
    request would come from 127.0.0.1."""
    console_token_audiences: tuple[str, ...] = ()
    """Audiences a bearer token must be valid for; empty: the API server's own."""
    console_access_cache_seconds: float = Field(default=30.0, ge=0)
    console_access_denied_cache_seconds: float = Field(default=5.0, ge=0)
    console_access_cache_entries: int = Field(default=4096, ge=1)
    console_token_reviews_in_flight: int = Field(default=32, ge=1)
    console_resync_seconds: float = Field(default=30.0, gt=0)
    """How often the observations are read again without being woken."""
    console_history_seconds: float = Field(default=5.0, gt=0)
    """How often the event store is read for new records (queue history)."""
    eventstore_url: str = DEFAULT_EVENTSTORE_URL
    """``KAIWO_EVENTSTORE_URL``: the recorder's event store (read only)."""
    startup_timeout_seconds: float = Field(default=10.0, gt=0)

    @model_validator(mode="after")
    def _anonymous_only_on_loopback(self) -> Self:
        if self.console_anonymous == "loopback" and not is_loopback_host(self.console_host):
            raise ValueError(
                "KAIWO_CONSOLE_ANONYMOUS=loopback needs a loopback KAIWO_CONSOLE_HOST "
                f"(127.0.0.1 or ::1), not {self.console_host!r}: clients elsewhere would "
                "reach it through a proxy that connects from loopback"
            )
        return self
