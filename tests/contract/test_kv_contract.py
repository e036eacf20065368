"""One behavioural suite for the key-value port: in memory and on a real nats-server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from kaiwo_runtime.kv import KeyValue, MemoryKeyValue, NatsKeyValue, escape_key, unescape_key
from kaiwo_runtime.nats_server import NatsServer
from nats.aio.client import Client


@pytest.fixture(params=["memory", pytest.param("nats", marks=pytest.mark.nats)])
async def kv(request: pytest.FixtureRequest) -> AsyncIterator[KeyValue]:
    if request.param == "memory":
        yield MemoryKeyValue()
        return
    async with NatsServer() as server:
        client = Client()
        await client.connect(server.url)
        try:
            yield await NatsKeyValue.open(client, "kaiwo-test")
        finally:
            await client.close()


async def test_missing_key_reads_none(kv: KeyValue) -> None:
    assert await kv.get("watcher/kaiwojobs") is None


async def test_put_then_get_returns_latest_value(kv: KeyValue) -> None:
    await kv.put("watcher/kaiwojobs", b"41")
    await kv.put("watcher/kaiwojobs", b"42")
    assert await kv.get("watcher/kaiwojobs") == b"42"


async def test_keys_with_dots_colons_and_underscores_round_trip(kv: KeyValue) -> None:
    await kv.put("node/gpu-node-1.example.com:uid_1", b"x")
    assert await kv.get("node/gpu-node-1.example.com:uid_1") == b"x"
    assert [key async for key, _ in kv.items()] == ["node/gpu-node-1.example.com:uid_1"]


async def test_delete_removes_the_key_and_tolerates_absence(kv: KeyValue) -> None:
    await kv.put("a", b"1")
    await kv.put("b", b"2")
    await kv.delete("a")
    await kv.delete("never-there")
    assert [(key, value) async for key, value in kv.items()] == [("b", b"2")]


def test_escape_is_reversible_and_uses_the_bucket_alphabet() -> None:
    assert escape_key("ns/name.x:1_y") == "ns/name.x_3A1_5Fy"
    assert unescape_key("ns/name.x_3A1_5Fy") == "ns/name.x:1_y"
