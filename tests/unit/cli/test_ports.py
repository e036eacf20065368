"""``kaiwo up`` claims the console's port by binding it, so two stacks started at once cannot
both choose it: the second bind fails at once and falls back to a free port, said in one
line; the console inherits the socket and never binds (its restarts keep the port)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest
from kaiwo_cli.stack.ports import listen_for_console


@pytest.fixture
def unused_port() -> Iterator[int]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    yield port


def answers(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as client:
        client.settimeout(10)
        return client.connect_ex(("127.0.0.1", port)) == 0


def test_a_free_port_is_claimed_as_asked(unused_port: int) -> None:
    listener = listen_for_console(unused_port)
    try:
        assert listener.port == unused_port
        assert listener.note is None
        assert answers(unused_port)  # listening already, before any console runs
    finally:
        listener.close()


def test_two_stacks_asking_for_one_port_get_two_and_the_second_is_told(unused_port: int) -> None:
    first = listen_for_console(unused_port)
    second = listen_for_console(unused_port)
    try:
        assert first.port == unused_port
        assert second.port != unused_port
        assert first.note is None
        assert second.note == (
            f"port {unused_port} of 127.0.0.1 is taken; the console listens on {second.port} "
            "instead (--console-port chooses another)"
        )
        assert answers(first.port)
        assert answers(second.port)
    finally:
        first.close()
        second.close()


def test_a_port_someone_else_listens_on_is_not_shared(unused_port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as other:
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        other.bind(("127.0.0.1", unused_port))
        other.listen()
        listener = listen_for_console(unused_port)
        try:
            assert listener.port != unused_port
            assert listener.note is not None
        finally:
            listener.close()


def test_a_child_given_the_descriptor_serves_on_the_claimed_port(unused_port: int) -> None:
    listener = listen_for_console(unused_port)
    child_code = (
        "import socket, sys\n"
        "server = socket.socket(fileno=int(sys.argv[1]))\n"
        "connection, _ = server.accept()\n"
        "connection.sendall(b'served by the child')\n"
        "connection.close()\n"
    )
    try:
        child = subprocess.Popen(
            [sys.executable, "-c", child_code, str(listener.fd)],
            pass_fds=(listener.fd,),
            env=dict(os.environ),
        )
        with socket.create_connection(("127.0.0.1", unused_port), timeout=30) as client:
            received = client.recv(64)
        assert child.wait(timeout=60) == 0
        assert received == b"served by the child"
    finally:
        listener.close()
