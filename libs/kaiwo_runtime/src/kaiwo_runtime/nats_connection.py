"""How a client reaches NATS: the URL, its identity's credentials file, TLS, its own inbox.

Credentials are read from a file, never from the URL in our deployments: an NKey seed file
(one line ``SU…``, what ``kaiwo up`` and ``kaiwo nats credentials`` write) or a NATS
``.creds`` file (a user JWT and its seed, from ``nsc``). A password in the URL still works
for servers configured that way; it is redacted wherever the URL is shown
(:func:`kaiwo_runtime.redaction.redact_url`).

TLS: a ``tls://`` URL or a CA file turns it on; the client verifies the server's certificate
against the CA (the system's trust store when none is given) and presents a client
certificate when one is configured (for servers that verify clients).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

import nats
import nats.errors
from nats.aio.client import Client

from kaiwo_runtime.redaction import redact_url

_CREDS_MARKER = "BEGIN NATS USER JWT"
_SEED_PREFIX = "SU"
DEFAULT_INBOX_PREFIX = "_INBOX"


class NatsCredentialsError(RuntimeError):
    """The credentials or TLS files cannot be used; the message never contains a secret."""


CONNECT_ERRORS: Final[tuple[type[Exception], ...]] = (
    OSError,
    nats.errors.Error,
    NatsCredentialsError,
)
"""What :func:`connect_client` may raise when NATS cannot be reached, refuses the client, or
the credentials cannot be used: callers catch these without importing nats-py."""


@dataclass(frozen=True, slots=True)
class ClientTls:
    """The CA that signed the server's certificate, and this client's own (optional)."""

    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None

    def context(self) -> ssl.SSLContext:
        try:
            context = ssl.create_default_context(
                ssl.Purpose.SERVER_AUTH, cafile=str(self.ca_file) if self.ca_file else None
            )
            if self.cert_file is not None:
                context.load_cert_chain(
                    str(self.cert_file), str(self.key_file) if self.key_file else None
                )
        except (OSError, ssl.SSLError) as error:
            raise NatsCredentialsError(f"the NATS TLS files cannot be used: {error}") from error
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        return context


@dataclass(frozen=True, slots=True)
class NatsConnection:
    """Everything a client needs to connect as one identity (no secret is held here: only the
    path of the file that holds it)."""

    url: str
    credentials_file: Path | None = None
    tls: ClientTls | None = None
    inbox_prefix: str = DEFAULT_INBOX_PREFIX
    name: str = "kaiwo"

    @property
    def redacted_url(self) -> str:
        return redact_url(self.url)

    @property
    def anonymous(self) -> bool:
        """No credentials at all: only a server without authentication lets it in."""
        return self.credentials_file is None and "@" not in urlsplit(self.url).netloc

    def connect_options(self) -> dict[str, Any]:
        """Keyword arguments for ``nats.connect`` (servers, credentials, TLS, inbox, name)."""
        options: dict[str, Any] = {
            "servers": [self.url],
            "name": self.name,
            "inbox_prefix": self.inbox_prefix,
        }
        if self.credentials_file is not None:
            options.update(_credentials_options(self.credentials_file))
        if self.tls is not None or urlsplit(self.url).scheme == "tls":
            options["tls"] = (self.tls or ClientTls()).context()
            host = urlsplit(self.url).hostname
            if host:
                options["tls_hostname"] = host
        return options


def _credentials_options(path: Path) -> dict[str, Any]:
    """``nkeys_seed`` for a seed file, ``user_credentials`` for a ``.creds`` file."""
    try:
        text = path.read_text()
    except OSError as error:
        raise NatsCredentialsError(
            f"the NATS credentials file {path} cannot be read: {error.strerror}"
        ) from error
    if _CREDS_MARKER in text:
        return {"user_credentials": str(path)}
    if text.strip().startswith(_SEED_PREFIX):
        return {"nkeys_seed": str(path)}
    raise NatsCredentialsError(
        f"the NATS credentials file {path} holds neither a user NKey seed (SU…) nor a "
        ".creds user JWT"
    )


async def connect_client(connection: NatsConnection, **options: Any) -> Client:
    """``nats.connect`` with ``connection``'s settings; ``options`` add or override others."""
    return await nats.connect(**{**connection.connect_options(), **options})


async def flush_written(client: Client, *, seconds: int) -> None:
    """Return once the server has taken in every command written before the call.

    nats-py (2.16) writes a flush's PING straight to the socket, while the commands before it
    (subscriptions, acknowledgements) wait in its buffer for its flusher task: the server may
    answer the PING before it reads them. A first flush lets the flusher write them (its
    round trip yields to it); the second PING then goes after them, and its answer after the
    server's replies to them (a refused subscription's error among them). Each PING waits at
    most ``seconds``."""
    await client.flush(timeout=seconds)
    await client.flush(timeout=seconds)
