"""JetStream publishes answered on one reply subscription per connection (decision 0257),
against a real nats-server: what the bus and its buckets get back, and what they raise."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import nats
import nats.errors
import nats.js.errors
import pytest
from kaiwo_contracts.events.streams import BusTopology, StreamSpec
from kaiwo_runtime.bus import BusError
from kaiwo_runtime.jetstream_acks import JetStreamAcks, StreamAck
from kaiwo_runtime.kv import NatsKeyValue
from kaiwo_runtime.nats_bus import NatsBus
from kaiwo_runtime.nats_server import NatsServer
from nats.aio.client import Client
from nats.aio.msg import Msg

pytestmark = pytest.mark.nats

TOPOLOGY = BusTopology(
    partitions=1,
    streams=(
        StreamSpec(name="ORDERS", subjects=("orders.>",), description="", max_age_seconds=3600),
    ),
)


@pytest.fixture
async def server() -> AsyncIterator[NatsServer]:
    async with NatsServer() as started:
        yield started


@pytest.fixture
async def client(server: NatsServer) -> AsyncIterator[Client]:
    connected = await nats.connect(server.url)
    yield connected
    await connected.close()


def requests_of_nats_py(client: Client, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The subjects nats-py's per-request path (a random token, ``wait_for``, a PubAck
    dataclass) is asked for from now on; reads of the JetStream API still take it."""
    asked: list[str] = []
    request = client.request

    async def counted(subject: str, *args: Any, **kwargs: Any) -> Msg:
        asked.append(subject)
        return await request(subject, *args, **kwargs)

    monkeypatch.setattr(client, "request", counted)
    return asked


async def test_publishes_and_key_writes_are_acknowledged_without_a_request_each(
    server: NatsServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    bus = await NatsBus.connect(server.url, topology=TOPOLOGY)
    try:
        await bus.ensure_streams()
        kv = await NatsKeyValue.open(bus.client, "memo")
        asked = requests_of_nats_py(bus.client, monkeypatch)  # after the set-up's own

        first = await bus.publish_raw("orders.a", body=b"1", headers={"Nats-Msg-Id": "one"})
        second = await bus.publish_raw("orders.b", body=b"2", headers={"Nats-Msg-Id": "two"})
        again = await bus.publish_raw("orders.a", body=b"1", headers={"Nats-Msg-Id": "one"})
        await kv.put("job/uid-1", b"claimed")
        assert await kv.create("job/uid-2", b"new") is None
        taken = await kv.create("job/uid-1", b"mine")
    finally:
        await bus.close()

    assert (first.stream, first.sequence, first.duplicate) == ("ORDERS", 1, False)
    assert (second.stream, second.sequence, second.duplicate) == ("ORDERS", 2, False)
    assert (again.stream, again.sequence, again.duplicate) == ("ORDERS", 1, True)
    assert taken == b"claimed"  # the create refused by its expected revision reads the value
    assert asked == ["$JS.API.STREAM.MSG.GET.KV_memo"]  # the refused create's read, only


async def test_the_bus_and_its_buckets_share_one_reply_subscription(client: Client) -> None:
    kv = await NatsKeyValue.open(client, "memo")
    bus = NatsBus(client=client, topology=TOPOLOGY)
    await bus.ensure_streams()
    subscriptions = len(client._subs)

    for index in range(5):
        await bus.publish_raw(f"orders.{index}", body=b"{}", headers={})
        await kv.put(f"key-{index}", b"value")

    assert JetStreamAcks.of(client) is JetStreamAcks.of(client)
    assert len(client._subs) == subscriptions + 1


async def test_a_subject_no_stream_takes_is_a_bus_error(client: Client) -> None:
    bus = NatsBus(client=client, topology=TOPOLOGY)
    await bus.ensure_streams()

    with pytest.raises(BusError, match=r"no stream stores 'elsewhere\.x'"):
        await bus.publish_raw("elsewhere.x", body=b"{}", headers={})


async def test_an_answer_that_never_comes_times_out(client: Client) -> None:
    # A plain subscriber takes the subject: the server has a responder, and it never answers.
    async def silent(_message: Msg) -> None:
        return None

    await client.subscribe("silent.x", cb=silent)
    acks = JetStreamAcks(client)

    with pytest.raises(nats.errors.TimeoutError):
        await acks.publish("silent.x", b"{}", timeout=0.2)
    assert acks._waiting == {}


async def test_jetstreams_own_refusal_is_its_error_type(client: Client) -> None:
    js = client.jetstream()
    await js.add_stream(name="ORDERS", subjects=["orders.>"])
    acks = JetStreamAcks(client)
    assert await acks.publish("orders.a", b"1", timeout=5) == StreamAck(
        stream="ORDERS", sequence=1, duplicate=False
    )

    with pytest.raises(nats.js.errors.APIError) as refused:
        await acks.publish(
            "orders.a", b"2", headers={"Nats-Expected-Last-Sequence": "7"}, timeout=5
        )
    assert refused.value.err_code == 10071  # wrong last sequence
