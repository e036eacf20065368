"""How a test's client connects to its own nats-server with one of the keys it wrote."""

from __future__ import annotations

from kaiwo_contracts.events.permissions import inbox_prefix
from kaiwo_runtime.nats_connection import NatsConnection
from kaiwo_runtime.nats_credentials import CredentialsDirectory


def connected_as(url: str, credentials: CredentialsDirectory, identity: str) -> NatsConnection:
    """``identity``'s key of ``credentials`` at ``url``, with the inbox its permissions allow."""
    return NatsConnection(
        url=url, credentials_file=credentials.seed(identity), inbox_prefix=inbox_prefix(identity)
    )
