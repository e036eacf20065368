"""``kaiwo nats credentials`` and ``kaiwo nats provision`` as compose and Kubernetes use them:
the configuration a real nats-server accepts, keys kept or rotated, the topology declared
by the administrator and found by a service that may not declare it."""

from __future__ import annotations

import asyncio
import stat
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from kaiwo_cli.main import app
from kaiwo_contracts.events.permissions import RECORDER, inbox_prefix
from kaiwo_contracts.events.streams import bus_topology
from kaiwo_runtime.nats_bus import NatsBus
from kaiwo_runtime.nats_connection import NatsConnection
from kaiwo_runtime.nats_server import NatsServer, find_nats_server

pytestmark = pytest.mark.nats

OPERATOR_KEYS = [
    "admin",
    "cli",
    "console",
    "executor",
    "gateway",
    "monitor",
    "planner",
    "recorder",
    "subscriber",
    "watcher",
]


def credentials(out: Path, *options: str) -> None:
    result = CliRunner().invoke(app, ["nats", "credentials", "--out", str(out), *options])
    assert result.exit_code == 0, result.output


def assert_nats_server_accepts(config: Path) -> None:
    """The configuration passes nats-server's own check (``-t``)."""
    checked = subprocess.run(
        [str(find_nats_server()), "-t", "-c", str(config)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stderr + checked.stdout


def test_the_written_configuration_is_one_nats_server_accepts(tmp_path: Path) -> None:
    out = tmp_path / "nats-credentials"
    credentials(out, "--reader", "audit-dashboard", "--http", "127.0.0.1:8222")

    assert sorted(path.stem for path in out.glob("*.nk")) == sorted(
        [*OPERATOR_KEYS, "audit-dashboard"]
    )
    assert_nats_server_accepts(out / "nats-server.conf")
    assert 'http: "127.0.0.1:8222"' in (out / "nats-server.conf").read_text()


def test_keep_adds_a_reader_without_rotating_and_rotate_replaces_every_key(
    tmp_path: Path,
) -> None:
    out = tmp_path / "nats-credentials"
    credentials(out)
    before = {path.name: path.read_bytes() for path in out.glob("*.nk")}

    credentials(out, "--keep", "--reader", "audit-dashboard")
    kept = {path.name: path.read_bytes() for path in out.glob("*.nk")}
    credentials(out, "--rotate")
    rotated = {path.name: path.read_bytes() for path in out.glob("*.nk")}

    assert {name: kept[name] for name in before} == before
    assert "audit-dashboard.nk" in kept
    assert all(rotated[name] != before[name] for name in before)


def test_helm_values_hold_the_same_configuration_and_keys_privately(tmp_path: Path) -> None:
    """The Helm chart takes the keys as values, never as files of its own (decision 0036)."""
    out, values = tmp_path / "nats-credentials", tmp_path / "nats-credentials.yaml"
    credentials(out, "--helm-values", str(values))

    loaded = yaml.safe_load(values.read_text())["nats"]["credentials"]
    assert loaded["config"] == (out / "nats-server.conf").read_text()
    assert loaded["keys"] == {
        path.stem: path.read_text().strip() for path in sorted(out.glob("*.nk"))
    }
    assert sorted(loaded["keys"]) == OPERATOR_KEYS
    assert stat.S_IMODE(values.stat().st_mode) == 0o600


def test_a_reader_name_of_the_operator_is_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["nats", "credentials", "--out", str(tmp_path), "--reader", "executor"]
    )

    assert result.exit_code == 2
    assert "'executor' is taken by the operator" in result.output


def test_a_subscriber_of_one_namespace_gets_a_key_of_its_own(tmp_path: Path) -> None:
    """``--subscriber-namespace`` (decision 0164): one key per namespace, named after it, in
    a configuration nats-server accepts; a name that is no namespace is refused in one line,
    and no reader may take such a key's name."""
    out = tmp_path / "nats-credentials"
    credentials(out, "--subscriber-namespace", "team-a", "--subscriber-namespace", "team-b")

    assert sorted(path.stem for path in out.glob("*.nk")) == sorted(
        [*OPERATOR_KEYS, "subscriber-team-a", "subscriber-team-b"]
    )
    assert_nats_server_accepts(out / "nats-server.conf")
    config = (out / "nats-server.conf").read_text()
    assert '"kaiwo.live.public.workload.team-a.>"' in config
    assert '"kaiwo.live.public.workload.team-b.>"' in config

    runner = CliRunner()
    refused = runner.invoke(
        app, ["nats", "credentials", "--out", str(out), "--subscriber-namespace", "Team_A"]
    )
    assert refused.exit_code == 2
    assert refused.output == (
        "kaiwo nats credentials: 'Team_A' is not a namespace name (a DNS label)\n"
    )
    taken = runner.invoke(
        app, ["nats", "credentials", "--out", str(out), "--reader", "subscriber-team-a"]
    )
    assert taken.exit_code == 2
    assert "taken by the operator" in taken.output


async def test_provision_declares_the_topology_as_the_administrator(tmp_path: Path) -> None:
    out = tmp_path / "nats-credentials"
    credentials(out)
    async with NatsServer(config=(out / "nats-server.conf").read_text()) as server:
        env = {"KAIWO_NATS_URL": server.url, "KAIWO_NATS_CREDENTIALS_FILE": str(out / "admin.nk")}
        result = await asyncio.to_thread(
            CliRunner().invoke, app, ["nats", "provision", "--within", "10"], env=env
        )
        assert result.exit_code == 0, result.output
        assert "streams and consumers declared" in result.output

        recorder = await NatsBus.connect(
            NatsConnection(
                url=server.url,
                credentials_file=out / "recorder.nk",
                inbox_prefix=inbox_prefix(RECORDER),
            ),
            topology=bus_topology(),
        )
        try:
            assert (
                await recorder.missing(
                    streams=("KAIWO_OBS", "KAIWO_DLQ"),
                    consumers=("recorder-obs", "bus-deadletter-relay"),
                )
                == ()
            )
        finally:
            await recorder.close()


async def test_provision_with_a_service_key_fails_in_one_line(tmp_path: Path) -> None:
    out = tmp_path / "nats-credentials"
    credentials(out)
    async with NatsServer(config=(out / "nats-server.conf").read_text()) as server:
        env = {
            "KAIWO_NATS_URL": server.url,
            "KAIWO_NATS_CREDENTIALS_FILE": str(out / "watcher.nk"),
        }
        result = await asyncio.to_thread(
            CliRunner().invoke, app, ["nats", "provision", "--within", "1"], env=env
        )

    assert result.exit_code == 1
    # (the bus's own warnings come first: the server refused the administrator's inbox)
    assert result.output.splitlines()[-1] == (
        "kaiwo nats provision: declaring the streams and consumers failed: JetStream did not "
        "answer within 1 s; is KAIWO_NATS_CREDENTIALS_FILE the administrator's key, and has "
        "the NATS cluster formed?"
    )
