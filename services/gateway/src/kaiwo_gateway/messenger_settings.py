"""The messenger's settings: how many requests a replica handles, how long each may wait and
take, and how often it is reported alive."""

from __future__ import annotations

from dataclasses import dataclass, field

from kaiwo_gateway.domain.bodies import BodyLimits


@dataclass(frozen=True, slots=True)
class MessengerSettings:
    handlers: int = 256
    """Requests this replica handles at once. The autoscaler sees requests being handled,
    not those queued behind them: with ``targetRequests`` 100 and 3 replicas of the gateway,
    256 handlers each let a backlog drive a Model up to 7 replicas (decision 0049)."""
    endpoint_wait_seconds: float = 600.0
    """How long a request waits for a ready endpoint (a Model starting from zero) before it
    is left for another delivery."""
    request_timeout_seconds: float = 900.0
    """How long a model server may take to answer one request."""
    connect_timeout_seconds: float = 5.0
    attempts: int = 4
    progress_seconds: float = 10.0
    """How often a request being handled is reported alive (below the consumer's ack wait)."""
    fetch_wait_seconds: float = 1.0
    bodies: BodyLimits = field(default_factory=BodyLimits)


class MessengerNotProvisionedError(RuntimeError):
    """The messenger's streams or consumer are not declared."""
