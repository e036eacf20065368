"""``python -m kaiwo_executor`` ends with status 1 and one line when NATS does not answer."""

from __future__ import annotations

import os
import socket
import subprocess
import sys


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_unreachable_nats_ends_the_process_with_one_line() -> None:
    port = _closed_port()
    env = {
        **os.environ,
        "KAIWO_NATS_URL": f"nats://127.0.0.1:{port}",
        "KAIWO_STARTUP_TIMEOUT_SECONDS": "1",
        "KAIWO_HEALTH_PORT": "0",
        "KAIWO_LOG_FORMAT": "json",
    }

    finished = subprocess.run(
        [sys.executable, "-m", "kaiwo_executor"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert finished.returncode == 1
    lines = [line for line in finished.stderr.splitlines() if line.startswith("kaiwo-executor:")]
    assert len(lines) == 1
    assert lines[0].startswith(f"kaiwo-executor: NATS at nats://127.0.0.1:{port} is unreachable")
