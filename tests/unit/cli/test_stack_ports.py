"""Every service of one local stack gets a health socket of its own, held by the stack."""

from __future__ import annotations

import errno
import socket
from pathlib import Path

import pytest
from kaiwo_cli.stack.local import StackOptions
from kaiwo_cli.stack.ports import listen_on_a_free_port


def test_each_health_socket_has_its_own_port_and_no_one_else_can_take_it() -> None:
    """A port is claimed when it is chosen: nothing can take it before the service serves it
    (a port found free and bound later was taken in between, and the service restarted in a
    loop)."""
    held = [listen_on_a_free_port() for _ in range(9)]
    try:
        ports = {listener.port for listener in held}
        assert len(ports) == len(held)
        for port in ports:
            with socket.socket() as other, pytest.raises(OSError) as refused:
                other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                other.bind(("127.0.0.1", port))
            assert refused.value.errno == errno.EADDRINUSE
    finally:
        for listener in held:
            listener.close()


def test_replicas_and_partitions_are_positive(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="partitions and replicas"):
        StackOptions(state_dir=tmp_path, partitions=0)
    with pytest.raises(ValueError, match="partitions and replicas"):
        StackOptions(state_dir=tmp_path, replicas={"planner": 0})
