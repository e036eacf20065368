"""``kaiwo up`` in a terminal, as a person runs it: one part that cannot start (a metrics
endpoint that does not answer, a taken gateway port) is named in one line while the operator
runs; Ctrl-C is obeyed at once in every phase, restarts nothing and leaves no process behind."""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from kaiwo_runtime.nats_server import free_port

from tests.integration.terminal import Terminal
from tests.waiting import Pending, eventually_blocking

pytestmark = [pytest.mark.nats, pytest.mark.slow, pytest.mark.timeout(300)]

KAIWO = str(Path(sys.executable).parent / "kaiwo")
CORE = {"recorder", "watcher", "planner", "executor"}


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield int(taken.getsockname()[1])


def processes_of(state_dir: Path) -> dict[int, str]:
    """Processes whose command line or environment names ``state_dir`` (every child of
    ``kaiwo up`` does: its credentials, logs, JetStream or kubeconfig live there)."""
    marker = str(state_dir.resolve()).encode()
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
            environment = (entry / "environ").read_bytes()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if marker in command or marker in environment:
            found[int(entry.name)] = command.replace(b"\0", b" ").decode(errors="replace")
    return found


def services_logging_in(log: Path) -> set[str]:
    """The services named by the JSON lines of ``log``."""
    named = set()
    for line in log.read_text().splitlines():
        with contextlib.suppress(ValueError):
            record = json.loads(line)
            if isinstance(record, dict) and "service" in record:
                named.add(str(record["service"]))
    return named


def up(state_dir: Path, *extra: str) -> list[str]:
    # The default console port: stacks of parallel tests share it safely, since kaiwo up
    # claims the port itself and the loser of a race falls back to a free one.
    return [KAIWO, "up", "--fake", "--state-dir", str(state_dir), *extra]


def test_a_part_that_cannot_start_is_named_and_the_operator_runs(
    tmp_path: Path, taken_port: int
) -> None:
    state = tmp_path / "state"
    unreachable = f"http://127.0.0.1:{free_port()}"
    taken = ("--gateway-port", str(taken_port), "--console-port", str(taken_port))
    argv = up(state, *taken, "--metrics-endpoint", unreachable)
    with Terminal(argv, cwd=tmp_path, env=dict(os.environ)) as terminal:
        terminal.wait_for(r"kaiwo is running", within=180)
        terminal.wait_for(r"kaiwo up: monitor: running, not ready: metrics-endpoint", within=10)
        text = terminal.text.replace("\n", "")
        assert (
            f"kaiwo up: gateway: left out: port {taken_port} of 127.0.0.1 is taken "
            "(--gateway-port chooses another; 0: no gateway); the rest runs without it"
        ) in text
        # The console is not left out: kaiwo up claimed another port and handed it over.
        moved = re.search(
            rf"kaiwo up: console: port {taken_port} of 127\.0\.0\.1 is taken; the console "
            r"listens on (\d+) instead \(--console-port chooses another\)",
            text,
        )
        assert moved is not None, text[-3000:]
        console_port = int(moved.group(1))
        assert console_port != taken_port
        assert f"Console: http://127.0.0.1:{console_port}/" in text
        assert "kaiwo up: console:" not in text.replace(moved.group(0), "")
        with urllib.request.urlopen(
            f"http://127.0.0.1:{console_port}/workloads", timeout=10
        ) as page:
            assert page.status == 200
            assert "<table id=workloads>" in page.read().decode()
        # Each service is in the table and writes its log (the table's paths may be wrapped
        # or cut to the terminal's width, so the files are looked for where they are): the
        # four core services in one process by default, each line naming its service.
        for name in (*CORE, "monitor"):
            assert name in terminal.text
        assert (state / "logs" / "monitor.log").is_file()
        assert services_logging_in(state / "logs" / "operator.log") >= CORE
        children = processes_of(state)
        assert len(children) >= 4, children  # the core services, the monitor, NATS, the fake

        terminal.type_ctrl_c()
        code = terminal.wait(within=60)

    assert code == 0, terminal.text[-3000:]
    assert "restarting" not in terminal.text
    assert processes_of(state) == {}


def test_ctrl_c_during_start_up_stops_at_once_and_leaves_nothing(tmp_path: Path) -> None:
    # An event store that never answers keeps the recorder from becoming ready: start-up
    # would wait its whole timeout (60 s) and then fail; Ctrl-C must not wait for that.
    state = tmp_path / "state"
    store = f"postgresql://kaiwo@127.0.0.1:{free_port()}/events"
    argv = up(state, "--gateway-port", "0", "--store", store)
    with Terminal(argv, cwd=tmp_path, env=dict(os.environ)) as terminal:
        terminal.wait_for(r"starting NATS", within=60)
        eventually_blocking(
            lambda: (
                # The recorder runs in the core services' one process (the default).
                any("kaiwo_cli.stack.together" in c for c in processes_of(state).values())
                or Pending(f"the terminal so far:\n{terminal.text[-3000:]}")
            ),
            what="the recorder starts",
            within=120,
        )
        servers = [pid for pid, command in processes_of(state).items() if "nats-server" in command]
        assert servers
        # One Go processor for NATS by default (decision 0082), its heap kept leaner (0093).
        environment = Path(f"/proc/{servers[0]}/environ").read_bytes().split(b"\0")
        assert b"GOMAXPROCS=1" in environment
        assert b"GOGC=50" in environment

        terminal.type_ctrl_c()
        code = terminal.wait(within=120)

    assert "stopped during start-up" in terminal.text, terminal.text[-3000:]
    assert "did not become ready" not in terminal.text
    assert "restarting" not in terminal.text
    assert code == 0
    assert processes_of(state) == {}
