"""A request whose client hangs up while it waits for an endpoint stops counting as load.

The gateway is served as ``__main__`` serves it (``web.AppRunner``, which does not cancel a
handler when its client disconnects; aiohttp's own test server does, and would hide this) on
loopback; the Model has no ready endpoint, so a request waits for one (up to 30 s here)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiohttp
from aiohttp import web
from kaiwo_gateway.domain.access import Caller
from kaiwo_gateway.domain.balancing import Balancer
from kaiwo_gateway.domain.catalog import Catalog
from kaiwo_gateway.domain.load import ModelRequests
from kaiwo_gateway.endpoint_wait import LoadTracking
from kaiwo_gateway.http_api import CallerPolicy, Gateway, ProxySettings
from kaiwo_gateway.metrics import GatewayMetrics
from kaiwo_runtime.nats_server import free_port

from tests.unit.gateway.model_objects import model_object, pod_object
from tests.unit.gateway.test_catalog_and_routing import catalog_with
from tests.waiting import Pending, eventually

WAIT_SECONDS = 30.0


class NoTokens:
    """Every caller here is the anonymous one on loopback: no token is asked about."""

    async def authenticate(self, token: str) -> Caller | None:
        raise AssertionError(f"asked about a token: {token}")

    async def may_use(self, caller: Caller, namespace: str) -> bool:
        raise AssertionError(f"asked whether {caller.name} may use {namespace}")


@dataclass
class Served:
    gateway: Gateway
    url: str

    def load(self) -> tuple[ModelRequests, ...]:
        return self.gateway.load.counts.current()

    def samples(self) -> str:
        return self.gateway.metrics.registry.exposition().decode()


@contextlib.asynccontextmanager
async def serving(
    catalog: Catalog | None = None, *, balancer: Balancer | None = None
) -> AsyncIterator[Served]:
    """The gateway on loopback, its anonymous callers allowed; ``url`` is its OpenAI API's
    root. By default one Model, ``chat``, scaled to zero."""
    gateway = Gateway(
        catalog=catalog or catalog_with(model_object("chat", minReplicas=0, replicas=0)),
        balancer=balancer or Balancer(),
        metrics=GatewayMetrics(),
        settings=ProxySettings(endpoint_wait_seconds=WAIT_SECONDS),
        access=NoTokens(),
        policy=CallerPolicy(anonymous="loopback"),
        load=LoadTracking(),
    )
    runner = web.AppRunner(gateway.application(), access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield Served(gateway, f"http://127.0.0.1:{port}/openai/v1")
    finally:
        await runner.cleanup()


async def test_a_request_whose_client_hangs_up_while_waiting_stops_counting_at_once() -> None:
    async with serving() as served, aiohttp.ClientSession() as session:
        request = asyncio.create_task(
            session.post(f"{served.url}/completions", json={"model": "chat"})
        )

        def waiting() -> bool | Pending:
            load = served.load()
            return True if [r.waiting for r in load] == [1] else Pending(f"load {load}")

        await eventually(waiting, what="the request waits for an endpoint", within=10)
        request.cancel()  # the client gives up: its connection is closed
        with contextlib.suppress(asyncio.CancelledError):
            await request
        hung_up = time.monotonic()

        def gone() -> bool | Pending:
            return True if served.load() == () else Pending(f"load {served.load()}")

        await eventually(gone, what="the request no longer counts", within=WAIT_SECONDS + 5)
        dropped = time.monotonic() - hung_up
        print(f"\nthe load dropped {dropped:.2f} s after the client hung up")

        assert dropped < 2.0
        samples = served.samples()
        assert (
            'kaiwo_gateway_endpoint_waits_total{from_zero="true",model="chat",'
            'namespace="team-a",outcome="client_gone"} 1.0'
        ) in samples
        assert 'outcome="timeout"' not in samples
        assert (
            'kaiwo_gateway_requests_total{code="499",model="chat",namespace="team-a",'
            'route="completions"} 1.0'
        ) in samples


async def test_a_request_waiting_for_a_model_deleted_meanwhile_is_told_at_once() -> None:
    async with serving() as served, aiohttp.ClientSession() as session:
        request = asyncio.create_task(
            session.post(f"{served.url}/completions", json={"model": "chat"})
        )

        def waiting() -> bool | Pending:
            load = served.load()
            return True if [r.waiting for r in load] == [1] else Pending(f"load {load}")

        await eventually(waiting, what="the request waits for an endpoint", within=10)
        [chat] = served.gateway.catalog.models()
        deleted = model_object("chat", minReplicas=0, replicas=0, version="99")
        assert served.gateway.catalog.apply(kind="Model", event="DELETED", obj=deleted)
        told = time.monotonic()
        served.gateway.catalog_changed()

        async with await request as answer:
            body = await answer.json()
        # At once, not after the whole wait (30 s here) with a 503 "no ready endpoint".
        assert time.monotonic() - told < WAIT_SECONDS / 2
        assert answer.status == 404
        assert body["error"]["code"] == "model_not_found"
        assert "'chat' is no longer served in namespace 'team-a'" in body["error"]["message"]
        assert served.load() == ()
        assert (
            'kaiwo_gateway_endpoint_waits_total{from_zero="true",model="chat",'
            'namespace="team-a",outcome="model_gone"} 1.0'
        ) in served.samples()
        assert chat.uid == deleted["metadata"]["uid"]


@dataclass
class SlowServer:
    """A model server on loopback that takes ``answer_after`` seconds to answer, and notes
    when it finds its own client (the gateway) gone before then: vLLM aborts a generation
    so."""

    answer_after: float
    port: int = 0
    received: float | None = None
    client_left_after: float | None = None
    answered: bool = False

    async def handle(self, request: web.Request) -> web.Response:
        self.received = time.monotonic()
        await request.read()
        while time.monotonic() - self.received < self.answer_after:
            await asyncio.sleep(0.05)
            if request.transport is None or request.transport.is_closing():
                self.client_left_after = time.monotonic() - self.received
                return web.Response()
        self.answered = True
        return web.json_response({"choices": [{"text": "done"}]})


@contextlib.asynccontextmanager
async def slow_server(answer_after: float) -> AsyncIterator[SlowServer]:
    server = SlowServer(answer_after)
    app = web.Application()
    app.router.add_post("/v1/{route:.*}", server.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    server.port = free_port()
    await web.TCPSite(runner, "127.0.0.1", server.port).start()
    try:
        yield server
    finally:
        await runner.cleanup()


async def test_a_client_that_hangs_up_while_a_server_answers_frees_the_server_and_the_load() -> (
    None
):
    async with slow_server(answer_after=10.0) as server:
        catalog = catalog_with(
            model_object("chat", uid="m-chat", replicas=1),
            pod_object(
                "p1", model="chat", model_uid="m-chat", ip="127.0.0.1", port=str(server.port)
            ),
        )
        async with serving(catalog) as served, aiohttp.ClientSession() as session:
            request = asyncio.create_task(
                session.post(f"{served.url}/completions", json={"model": "chat", "prompt": "x"})
            )
            await eventually(lambda: server.received is not None, what="the server has the request")
            assert [(r.active, r.waiting) for r in served.load()] == [(1, 0)]
            request.cancel()  # the client gives up: its connection is closed
            with contextlib.suppress(asyncio.CancelledError):
                await request
            hung_up = time.monotonic()

            def gone() -> bool | Pending:
                return True if served.load() == () else Pending(f"load {served.load()}")

            await eventually(gone, what="the request no longer counts", within=15)
            freed = time.monotonic() - hung_up
            print(f"\nthe server was let go {freed:.2f} s after the client hung up")
            samples = served.samples()

    # Before: the server answered after its 10 s and the request counted as load until then.
    assert freed < 5.0
    assert server.client_left_after is not None
    assert not server.answered
    assert served.gateway.balancer.in_flight("m-chat") == {}
    assert (
        'kaiwo_gateway_requests_total{code="499",model="chat",namespace="team-a",'
        'route="completions"} 1.0'
    ) in samples
