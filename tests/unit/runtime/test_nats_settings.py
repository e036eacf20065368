"""How a service's settings become its NATS connection, and when it declares the topology."""

from __future__ import annotations

from pathlib import Path

import pytest
from kaiwo_contracts.events.permissions import cli_identity
from kaiwo_runtime.nats_connection import ClientTls, NatsConnection, NatsCredentialsError
from kaiwo_runtime.nats_credentials import issue, server_config, write_seed
from kaiwo_runtime.settings import ServiceSettings
from pydantic import ValidationError

NATS_VARIABLES = (
    "KAIWO_NATS_URL",
    "KAIWO_NATS_CREDENTIALS_FILE",
    "KAIWO_NATS_TLS_CA_FILE",
    "KAIWO_NATS_TLS_CERT_FILE",
    "KAIWO_NATS_TLS_KEY_FILE",
    "KAIWO_NATS_DECLARE_STREAMS",
    "KAIWO_REPLICA",
)


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in NATS_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def test_a_service_connects_with_its_key_its_ca_and_its_own_inbox(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KAIWO_NATS_URL", "tls://nats.kaiwo-system:4222")
    monkeypatch.setenv("KAIWO_NATS_CREDENTIALS_FILE", "/var/run/secrets/kaiwo/nats/nkey")
    monkeypatch.setenv("KAIWO_NATS_TLS_CA_FILE", "/etc/kaiwo/ca.pem")
    monkeypatch.setenv("KAIWO_REPLICA", "kaiwo-planner-7d9f")

    settings = ServiceSettings()
    connection = settings.nats_connection("planner")

    assert connection == NatsConnection(
        url="tls://nats.kaiwo-system:4222",
        credentials_file=Path("/var/run/secrets/kaiwo/nats/nkey"),
        tls=ClientTls(ca_file=Path("/etc/kaiwo/ca.pem")),
        inbox_prefix="_INBOX.planner",
        name="kaiwo-planner-kaiwo-planner-7d9f",
    )
    assert not settings.declares_streams(connection)


@pytest.mark.parametrize(
    ("url", "declare", "declares"),
    [
        ("nats://127.0.0.1:4222", None, True),
        ("nats://kaiwo:pw@127.0.0.1:4222", None, False),
        ("nats://kaiwo:pw@127.0.0.1:4222", "true", True),
        ("nats://127.0.0.1:4222", "false", False),
    ],
)
def test_only_an_anonymous_service_declares_the_topology_unless_told(
    monkeypatch: pytest.MonkeyPatch, url: str, declare: str | None, declares: bool
) -> None:
    monkeypatch.setenv("KAIWO_NATS_URL", url)
    if declare is not None:
        monkeypatch.setenv("KAIWO_NATS_DECLARE_STREAMS", declare)

    settings = ServiceSettings()

    assert settings.declares_streams(settings.nats_connection("watcher")) is declares


def test_a_client_certificate_needs_its_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAIWO_NATS_TLS_CERT_FILE", "/etc/kaiwo/client.pem")

    with pytest.raises(ValidationError, match="KAIWO_NATS_TLS_KEY_FILE"):
        ServiceSettings()


def test_a_seed_file_logs_in_with_the_nkey_and_a_creds_file_with_the_jwt(tmp_path: Path) -> None:
    seed = write_seed(tmp_path, issue(cli_identity()))
    creds = tmp_path / "user.creds"
    creds.write_text("-----BEGIN NATS USER JWT-----\neyJ0eXAi\n------END NATS USER JWT------\n")
    other = tmp_path / "password.txt"
    other.write_text("hunter2\n")

    with_seed = NatsConnection(url="nats://n:4222", credentials_file=seed).connect_options()
    with_creds = NatsConnection(url="nats://n:4222", credentials_file=creds).connect_options()

    assert with_seed["nkeys_seed"] == str(seed)
    assert with_creds["user_credentials"] == str(creds)
    with pytest.raises(NatsCredentialsError, match="neither a user NKey seed") as refused:
        NatsConnection(url="nats://n:4222", credentials_file=other).connect_options()
    assert "hunter2" not in str(refused.value)


def test_the_server_configuration_has_users_with_permissions_and_no_anonymous_access() -> None:
    issued = issue(cli_identity())

    config = server_config([issued])

    assert config.splitlines()[2:9] == [
        "authorization {",
        "  users = [",
        "    # cli: kaiwo events tail: follows the events that carry no object, publishes nothing",
        f'    {{nkey: "{issued.public_key}", permissions: {{',
        '      publish: {deny: [">"]}',
        '      subscribe: {allow: ["kaiwo.live.public.>", "kaiwo.live.res.>", '
        '"kaiwo.live.mon.>", "kaiwo.live.gateway.>", "_INBOX.cli.>"]}',
        "    }}",
    ]
    assert "no_auth_user" not in config
    assert issued.seed.decode() not in config
    with pytest.raises(ValueError, match="no anonymous access"):
        server_config([])


def test_a_seed_is_not_written_through_a_link_planted_at_its_temporary_name(
    tmp_path: Path,
) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    keys = tmp_path / "credentials"
    keys.mkdir()
    (keys / ".cli.nk.tmp").symlink_to(victim)

    seed = write_seed(keys, issue(cli_identity()))

    assert victim.read_text() == "precious\n"
    assert not seed.is_symlink()
    assert seed.read_bytes().startswith(b"SU")
    assert oct(seed.stat().st_mode & 0o777) == "0o600"
