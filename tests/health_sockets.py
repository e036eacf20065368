"""A health socket a test binds and hands to a service process it starts, as ``kaiwo up``
does (decision 0094): a port found free and bound by the service a second later, after its
imports, can be taken in between by another process on the machine."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from kaiwo_cli.stack.ports import listen_on_a_free_port

LISTEN_FD_ENV = "KAIWO_HEALTH_LISTEN_FD"


@dataclass(frozen=True, slots=True)
class HealthSocket:
    sock: socket.socket

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    @property
    def fd(self) -> int:
        return self.sock.fileno()

    def env(self) -> dict[str, str]:
        """The settings that make a service serve this socket."""
        return {
            "KAIWO_HEALTH_HOST": "127.0.0.1",
            "KAIWO_HEALTH_PORT": str(self.port),
            LISTEN_FD_ENV: str(self.fd),
        }


@contextmanager
def health_socket() -> Iterator[HealthSocket]:
    """A socket listening on a free port of 127.0.0.1, closed at the end; start the service
    with ``pass_fds=(socket.fd,)`` and :meth:`HealthSocket.env`."""
    sock = listen_on_a_free_port()
    try:
        yield HealthSocket(sock)
    finally:
        sock.close()


def inherited_fds(env: dict[str, str]) -> tuple[int, ...]:
    """The descriptor ``env`` tells a service to serve, for ``pass_fds``."""
    return (int(env[LISTEN_FD_ENV]),) if LISTEN_FD_ENV in env else ()
