"""`kaiwo nats provision --messenger` declares the messenger's streams and consumer with the
administrator's key, and a gateway with the messenger on refuses to start without them
(decision 0049)."""

from __future__ import annotations

from pathlib import Path

import pytest
from kaiwo_cli.commands.nats import _provision
from kaiwo_contracts.events.messenger import MESSENGER_CONSUMER, REQUEST_STREAM, RESPONSE_STREAM
from kaiwo_contracts.events.permissions import ADMIN, inbox_prefix, operator_identities
from kaiwo_contracts.events.streams import bus_topology
from kaiwo_gateway.messenger import Messenger
from kaiwo_gateway.messenger_settings import MessengerNotProvisionedError, MessengerSettings
from kaiwo_gateway.settings import GatewaySettings
from kaiwo_runtime.nats_bus import NatsBus
from kaiwo_runtime.nats_connection import NatsConnection
from kaiwo_runtime.nats_credentials import write_credentials
from kaiwo_runtime.nats_server import NatsServer
from kaiwo_runtime.settings import ServiceSettings
from kaiwo_runtime.work_queue import NatsWorkQueue

pytestmark = [pytest.mark.nats]


async def test_provision_declares_the_messenger_only_when_asked(tmp_path: Path) -> None:
    credentials = write_credentials(tmp_path / "c", operator_identities(bus_topology()))
    async with NatsServer(config=credentials.server_config.read_text()) as server:
        settings = ServiceSettings(
            nats_url=server.url, nats_credentials_file=credentials.seed(ADMIN)
        )
        gateway = await NatsBus.connect(
            NatsConnection(
                url=server.url,
                credentials_file=credentials.seed("gateway"),
                inbox_prefix=inbox_prefix("gateway"),
            ),
            topology=bus_topology(),
        )
        try:
            await _provision(settings, within=30, messenger=False)
            messenger = Messenger(
                queue=NatsWorkQueue(gateway),
                gateway=None,  # type: ignore[arg-type]  # open() does not route
                settings=MessengerSettings(),
                metrics=None,  # type: ignore[arg-type]
            )
            with pytest.raises(MessengerNotProvisionedError) as refused:
                await messenger.open()
            assert str(refused.value) == (
                "the messenger's stream KAIWO_MSG_REQ, stream KAIWO_MSG_RES, consumer "
                "gateway-messenger of KAIWO_MSG_REQ are not declared (kaiwo nats provision "
                "--messenger, with the administrator's key)"
            )

            await _provision(settings, within=30, messenger=True)

            js = gateway.client.jetstream()
            for stream in (REQUEST_STREAM, RESPONSE_STREAM):
                assert (await js.stream_info(stream)).config.name == stream
            declared = await js.consumer_info(REQUEST_STREAM, MESSENGER_CONSUMER)
            assert declared.config.max_deliver == 5
            await messenger.open()
            assert messenger.reading
            assert messenger.consumer.backoff_seconds == (30.0, 30.0, 60.0, 120.0)
            await messenger.close()
        finally:
            await gateway.close()


def test_the_gateway_reads_the_messenger_settings_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KAIWO_MESSENGER_ENABLED", "true")
    monkeypatch.setenv("KAIWO_MESSENGER_HANDLERS", "32")

    settings = GatewaySettings()

    assert (settings.messenger_enabled, settings.messenger_handlers) == (True, 32)
