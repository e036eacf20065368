"""NATS over TLS with a throw-away CA made here with the openssl command: clients verify the
server against the CA, a service started with ``KAIWO_NATS_TLS_CA_FILE`` works, and with
mutual TLS a client without a certificate signed by the CA is refused."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import nats.errors
import pytest
from kaiwo_cli.stack.local import LocalStack, StackOptions
from kaiwo_contracts.events.permissions import (
    ADMIN,
    PLANNER,
    RECORDER,
    inbox_prefix,
    operator_identities,
)
from kaiwo_contracts.events.streams import PLAN_STREAM, bus_topology
from kaiwo_runtime.nats_bus import NatsBus
from kaiwo_runtime.nats_connection import ClientTls, NatsConnection, connect_client
from kaiwo_runtime.nats_credentials import CredentialsDirectory, ServerTls, write_credentials
from kaiwo_runtime.nats_server import NatsServer, free_port

from tests.integration.pipeline.harness import Pending, eventually
from tests.required import unavailable

pytestmark = pytest.mark.nats
HANG_SECONDS = 90.0
"""How long the recorder process may take to be ready before the test calls it hung: a
guard, not a measure (a few seconds when idle, far more for a Python process on a loaded
machine)."""


@pytest.fixture(autouse=True)
def openssl_is_installed() -> None:
    """The test's certificates are made with the openssl command."""
    if shutil.which("openssl") is None:
        unavailable("the openssl command", "it makes the test's certificates")


@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def openssl(*arguments: str, cwd: Path) -> None:
    subprocess.run(["openssl", *arguments], cwd=cwd, check=True, capture_output=True)


def signed(name: str, *, extensions: str, directory: Path) -> None:
    """``<name>.pem`` and ``<name>.key``: an EC key and a certificate signed by the test CA."""
    (directory / f"{name}.ext").write_text(extensions)
    openssl(
        "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}",
        cwd=directory,
    )  # fmt: skip
    openssl(
        "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "1", "-out", f"{name}.pem", "-extfile", f"{name}.ext",
        cwd=directory,
    )  # fmt: skip


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    directory = tmp_path_factory.mktemp("pki")
    openssl(
        "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-keyout", "ca.key", "-out", "ca.pem", "-days", "1", "-subj", "/CN=kaiwo-test-ca",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        cwd=directory,
    )  # fmt: skip
    signed(
        "server",
        extensions="basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n"
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
        directory=directory,
    )
    signed(
        "client",
        extensions="basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n",
        directory=directory,
    )
    return Pki(
        ca=directory / "ca.pem",
        server_cert=directory / "server.pem",
        server_key=directory / "server.key",
        client_cert=directory / "client.pem",
        client_key=directory / "client.key",
    )


@dataclass(frozen=True)
class TlsBus:
    server: NatsServer
    credentials: CredentialsDirectory

    def connection(self, identity: str, tls: ClientTls | None) -> NatsConnection:
        return NatsConnection(
            url=self.server.url,
            credentials_file=self.credentials.seed(identity),
            tls=tls,
            inbox_prefix=inbox_prefix(identity),
        )


@pytest.fixture
async def tls_bus(pki: Pki, tmp_path: Path) -> AsyncIterator[TlsBus]:
    tls = ServerTls(cert_file=pki.server_cert, key_file=pki.server_key)
    credentials = write_credentials(
        tmp_path / "credentials", operator_identities(bus_topology()), tls=tls
    )
    async with NatsServer(config=credentials.server_config.read_text(), tls=True) as server:
        yield TlsBus(server=server, credentials=credentials)


async def test_a_client_that_trusts_the_ca_publishes_over_tls(tls_bus: TlsBus, pki: Pki) -> None:
    assert tls_bus.server.url.startswith("tls://127.0.0.1:")
    admin = await NatsBus.connect(
        tls_bus.connection(ADMIN, ClientTls(ca_file=pki.ca)), topology=bus_topology()
    )
    planner = await NatsBus.connect(
        tls_bus.connection(PLANNER, ClientTls(ca_file=pki.ca)), topology=bus_topology()
    )
    try:
        await admin.ensure_streams()
        ack = await planner.publish_raw(
            "kaiwo.plan.kaiwojob.team-a.6f1c", body=b"{}", headers={"Nats-Msg-Id": "tls-1"}
        )
        assert (ack.stream, ack.sequence) == (PLAN_STREAM, 1)
        assert planner.client.connected_url is not None
        assert planner.client.connected_url.scheme == "tls"
    finally:
        await planner.close()
        await admin.close()


async def test_a_client_that_does_not_trust_the_ca_is_not_connected(tls_bus: TlsBus) -> None:
    # The system's trust store knows nothing of the test CA.
    with pytest.raises(Exception, match=r"CERTIFICATE_VERIFY_FAILED|certificate verify failed"):
        await connect_client(
            tls_bus.connection(PLANNER, ClientTls()),
            allow_reconnect=False,
            max_reconnect_attempts=0,
            connect_timeout=2,
        )


async def test_with_mutual_tls_a_client_needs_a_certificate_from_the_ca(
    pki: Pki, tmp_path: Path
) -> None:
    tls = ServerTls(
        cert_file=pki.server_cert, key_file=pki.server_key, ca_file=pki.ca, verify_clients=True
    )
    credentials = write_credentials(
        tmp_path / "credentials", operator_identities(bus_topology()), tls=tls
    )
    async with NatsServer(config=credentials.server_config.read_text(), tls=True) as server:
        secured = TlsBus(server=server, credentials=credentials)
        with pytest.raises((nats.errors.Error, OSError)):
            await connect_client(
                secured.connection(PLANNER, ClientTls(ca_file=pki.ca)),
                allow_reconnect=False,
                max_reconnect_attempts=0,
                connect_timeout=2,
            )
        client = await connect_client(
            secured.connection(
                PLANNER,
                ClientTls(ca_file=pki.ca, cert_file=pki.client_cert, key_file=pki.client_key),
            )
        )
        try:
            assert client.is_connected
        finally:
            await client.close()


@pytest.fixture
def recorder_process() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)


def start_recorder(env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "kaiwo_recorder"], env=env, stdout=out, stderr=out
        )


async def test_a_service_configured_with_the_ca_and_its_key_works_over_tls(
    tls_bus: TlsBus, pki: Pki, tmp_path: Path, recorder_process: list[subprocess.Popen[bytes]]
) -> None:
    admin = await NatsBus.connect(
        tls_bus.connection(ADMIN, ClientTls(ca_file=pki.ca)), topology=bus_topology()
    )
    try:
        await admin.ensure_streams()
    finally:
        await admin.close()
    port = free_port()
    log = tmp_path / "recorder.log"
    env = {
        **os.environ,
        "KAIWO_NATS_URL": tls_bus.server.url,
        "KAIWO_NATS_CREDENTIALS_FILE": str(tls_bus.credentials.seed(RECORDER)),
        "KAIWO_NATS_TLS_CA_FILE": str(pki.ca),
        "KAIWO_EVENTSTORE_URL": f"sqlite:///{tmp_path / 'store' / 'events.db'}",
        "KAIWO_HEALTH_HOST": "127.0.0.1",
        "KAIWO_HEALTH_PORT": str(port),
        "KAIWO_LOG_FORMAT": "json",
    }
    recorder_process.append(start_recorder(env, log))

    async def ready() -> bool | Pending:
        try:
            async with (
                aiohttp.ClientSession() as http,
                http.get(f"http://127.0.0.1:{port}/readyz") as response,
            ):
                return response.status == 200 or Pending(f"readyz {response.status}")
        except aiohttp.ClientError as error:
            return Pending(f"{error}; {log.read_text()[-1000:]}")

    await eventually(ready, what="the recorder is ready over TLS", within=HANG_SECONDS)
    assert "violation" not in log.read_text().lower()
    assert oct((tmp_path / "store").stat().st_mode & 0o777) == oct(0o700)
    assert oct((tmp_path / "store" / "events.db").stat().st_mode & 0o777) == oct(0o600)


@pytest.mark.slow
async def test_kaiwo_up_with_a_certificate_runs_every_service_over_tls(
    pki: Pki, tmp_path: Path
) -> None:
    options = StackOptions(
        state_dir=tmp_path / "kaiwo",
        fake_cluster=True,
        seed_fake_cluster=False,
        nats_tls=ServerTls(cert_file=pki.server_cert, key_file=pki.server_key, ca_file=pki.ca),
        ready_timeout=90.0,
    )
    async with LocalStack(options) as stack:  # every service answered /readyz
        state = stack.state()
        assert state.nats_url.startswith("tls://127.0.0.1:")
        assert state.nats_tls_ca_file == pki.ca
        cli = await connect_client(stack.nats_connection("cli"))
        try:
            assert cli.connected_url is not None
            assert cli.connected_url.scheme == "tls"
        finally:
            await cli.close()
        logs = [path.read_text() for path in (tmp_path / "kaiwo" / "logs").glob("*.log")]
    assert len(logs) >= 4
    assert not [log for log in logs if "violation" in log.lower()]
