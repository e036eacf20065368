"""Ports of 127.0.0.1 that ``kaiwo up`` gives its servers.

The console's listening socket, and each service's health socket (``/healthz``, ``/readyz``,
``/metrics``), are bound by ``kaiwo up`` itself and handed to the process that serves them.

Probing a port and letting the console bind it later is a race: two ``kaiwo up`` at once both
found 8090 free, and the loser's console failed to bind and was restarted in a loop. Binding
here, before the console starts, makes the choice and the claim one step: a taken port is
known at once (the bind fails), the fallback is a port the OS gives out, and the console,
started and restarted with the socket's descriptor, never binds and so never loses its port.
"""

from __future__ import annotations

import errno
import socket
from dataclasses import dataclass

HOST = "127.0.0.1"
BACKLOG = 128


@dataclass(frozen=True, slots=True)
class Listener:
    """A socket listening on ``HOST``; ``note`` says why it is not on the port asked for."""

    sock: socket.socket
    note: str | None = None

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    @property
    def fd(self) -> int:
        return self.sock.fileno()

    def close(self) -> None:
        self.sock.close()


def listen_for_console(port: int) -> Listener:
    """A socket listening on ``port`` of 127.0.0.1, or on a free port when ``port`` is taken
    (the console is for reading: a second stack on the machine should not fail for it)."""
    try:
        return Listener(_listening(port))
    except OSError as error:
        if error.errno != errno.EADDRINUSE:
            raise
    fallback = _listening(0)
    note = (
        f"port {port} of {HOST} is taken; the console listens on "
        f"{fallback.getsockname()[1]} instead (--console-port chooses another)"
    )
    return Listener(fallback, note=note)


def listen_on_a_free_port() -> Listener:
    """A socket listening on a port of 127.0.0.1 the OS gives out, for a service's health
    endpoint. A port found free and bound by the service later is a race too: with many
    processes on the machine, an outgoing connection can be given it as its local port in
    between (seen in CI: a recorder restarted for 90 s, its port held by another process)."""
    return Listener(_listening(0))


def _listening(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        # As any server does: a port left in TIME_WAIT by a stopped console is free again;
        # a port someone listens on stays taken (Linux refuses the second listener).
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((HOST, port))
        sock.listen(BACKLOG)
    except BaseException:
        sock.close()
        raise
    return sock


def port_is_taken(port: int) -> bool:
    """Someone listens on ``port`` of 127.0.0.1 already."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False
