"""Each service of ``kaiwo up`` serves a health socket the stack bound and holds: a port
chosen free and bound by the service later was taken in between by another process (an
outgoing connection's local port), and the service restarted in a loop on it for 90 s."""

from __future__ import annotations

import errno
import socket
from pathlib import Path

import pytest
from kaiwo_cli.stack.readiness import wait_until_ready

from tests.integration.pipeline.harness import running_pipeline
from tests.waiting import eventually

pytestmark = [pytest.mark.nats, pytest.mark.slow, pytest.mark.timeout(240)]


def bind_refused(port: int) -> bool:
    """Another process on the machine cannot take ``port`` (as a listener or otherwise)."""
    with socket.socket() as other:
        other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            other.bind(("127.0.0.1", port))
        except OSError as error:
            return error.errno == errno.EADDRINUSE
    return False


@pytest.mark.parametrize("one_process", [False, True], ids=["processes", "one-process"])
async def test_a_killed_services_port_stays_held_and_its_restart_serves_it_again(
    tmp_path: Path, one_process: bool
) -> None:
    async with running_pipeline(tmp_path / "kaiwo", one_process=one_process) as pipeline:
        stack = pipeline.stack
        ports = stack.health_ports
        assert {"recorder", "watcher", "planner", "executor"} <= set(ports)
        assert len(set(ports.values())) == len(ports)
        process = stack.services["operator" if one_process else "recorder"]
        port = ports["recorder"]
        await process.kill()
        await eventually(
            lambda: not process.running, what="the killed process exited", interval=0.01
        )
        assert bind_refused(port)  # down (restarted after a second), its port still held
        await wait_until_ready("recorder", process, within=60, port=port if one_process else None)
        assert process.restarts == 1
        assert stack.health_ports == ports
