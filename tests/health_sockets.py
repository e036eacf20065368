"""A health socket a test binds and hands to a service process it starts, as ``kaiwo up``
does (decision 0094): a port found free and bound by the service a second later, after its
imports, can be taken in between by another process on the machine."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from kaiwo_cli.stack.ports import Listener, listen_on_a_free_port

LISTEN_FD_ENV = "KAIWO_HEALTH_LISTEN_FD"


def health_env(health: Listener) -> dict[str, str]:
    """The settings that make a service serve ``health``."""
    return {
        "KAIWO_HEALTH_HOST": "127.0.0.1",
        "KAIWO_HEALTH_PORT": str(health.port),
        LISTEN_FD_ENV: str(health.fd),
    }


@contextmanager
def health_socket() -> Iterator[Listener]:
    """A socket listening on a free port of 127.0.0.1, closed at the end; start the service
    with ``pass_fds=(health.fd,)`` and :func:`health_env`."""
    health = listen_on_a_free_port()
    try:
        yield health
    finally:
        health.close()


def inherited_fds(env: dict[str, str]) -> tuple[int, ...]:
    """The descriptor ``env`` tells a service to serve, for ``pass_fds``."""
    return (int(env[LISTEN_FD_ENV]),) if LISTEN_FD_ENV in env else ()
