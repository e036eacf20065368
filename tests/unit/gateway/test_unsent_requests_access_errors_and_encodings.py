"""Decision 0219, through the gateway served on loopback as ``__main__`` serves it, with
stand-in model servers in the same process:

* an endpoint that does not accept the connection within the connect timeout is a connection
  that failed before a byte was sent: the request goes to another endpoint (HTTP and
  messenger); a request that was sent and then timed out is not sent again;
* the API server's error, when it cannot be asked about a caller, stays in the gateway's log:
  the caller reads that the access check is unavailable;
* a request's ``Content-Encoding`` is not forwarded (the body sent is the decoded one), a body
  that does not decode is a 400 naming its ``Content-Encoding``, a coding the gateway does
  not decode a 415.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import logging
import socket
import zlib
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from kaiwo_contracts.events.streams import ConsumerSpec
from kaiwo_gateway.access import Access
from kaiwo_gateway.domain.balancing import Balancer
from kaiwo_gateway.domain.catalog import Catalog
from kaiwo_gateway.domain.headers import request_headers_for_backend, undecoded_coding
from kaiwo_gateway.http_api import CallerPolicy, Gateway, ProxySettings
from kaiwo_gateway.kubernetes_access import AccessSettings, KubernetesAccess
from kaiwo_gateway.messenger import Messenger
from kaiwo_gateway.messenger_settings import MessengerSettings
from kaiwo_gateway.metrics import GatewayMetrics
from kaiwo_gateway.relay import NOT_CONNECTED
from kaiwo_kube import Retryable
from kaiwo_kube.errors import KubeError
from kaiwo_runtime.batch_consumer import PulledMessage
from kaiwo_runtime.nats_server import free_port
from structlog.testing import capture_logs

from tests.unit.gateway.model_objects import model_object, pod_object
from tests.unit.gateway.test_catalog_and_routing import catalog_with
from tests.unit.gateway.test_client_gone import NoTokens

CONNECT_TIMEOUT = 0.3
CHAT = {"model": "chat", "prompt": "hello"}
PLAIN = json.dumps(CHAT).encode()


# ------------------------------------------------------------------ stand-ins


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class ModelServer:
    """A model server on loopback that records what it receives (the raw bytes: it decodes
    nothing, so a ``Content-Encoding`` that reached it is seen as sent) and answers who it
    is; ``slow``: it answers after ``slow`` seconds."""

    name: str
    port: int = 0
    received: list[Received] = field(default_factory=list)
    slow: float = 0.0

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.content.read()
        self.received.append(Received(request.path, dict(request.headers), body))
        if self.slow:
            await asyncio.sleep(self.slow)
        return web.json_response({"served_by": self.name})


@contextlib.asynccontextmanager
async def model_server(name: str, *, slow: float = 0.0) -> AsyncIterator[ModelServer]:
    server = ModelServer(name, slow=slow)
    # Bodies are read raw: aiohttp's server would decode a gzip body it was told of.
    app = web.Application()
    app.router.add_post("/v1/{route:.*}", server.handle)
    runner = web.AppRunner(app, access_log=None, auto_decompress=False)
    await runner.setup()
    server.port = free_port()
    await web.TCPSite(runner, "127.0.0.1", server.port).start()
    try:
        yield server
    finally:
        await runner.cleanup()


@contextlib.contextmanager
def silent_endpoint() -> Iterator[int]:
    """A port whose listening socket's backlog is full: the kernel drops further SYNs, so a
    connection to it is neither accepted nor refused (a Pod whose node stopped answering).
    Checked: aiohttp's connect times out there (``ConnectionTimeoutError``)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port: int = listener.getsockname()[1]
    fillers = []
    try:
        for _ in range(4):
            filler = socket.socket()
            filler.setblocking(False)  # noqa: FBT003
            with contextlib.suppress(BlockingIOError):
                filler.connect(("127.0.0.1", port))
            fillers.append(filler)
        yield port
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


async def connect_times_out(port: int) -> bool:
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        try:
            await session.post(f"http://127.0.0.1:{port}/v1/completions", data=b"{}")
        except aiohttp.ConnectionTimeoutError:
            return True
        except aiohttp.ClientError:
            return False
    return False


def chat_with(*pods: tuple[str, int]) -> Catalog:
    """Model ``chat`` (team-a, LeastLoad) with an endpoint per (pod name, port) on loopback."""
    return catalog_with(
        model_object("chat", uid="m-chat"),
        *(
            pod_object(name, model="chat", model_uid="m-chat", ip="127.0.0.1", port=str(port))
            for name, port in pods
        ),
    )


@dataclass
class Served:
    gateway: Gateway
    url: str

    def samples(self) -> str:
        return self.gateway.metrics.registry.exposition().decode()


@contextlib.asynccontextmanager
async def serving(
    catalog: Catalog, *, access: Access | None = None, metrics: GatewayMetrics | None = None
) -> AsyncIterator[Served]:
    """The gateway on loopback; without ``access``, every caller is the anonymous one."""
    gateway = Gateway(
        catalog=catalog,
        balancer=Balancer(),
        metrics=metrics or GatewayMetrics(),
        settings=ProxySettings(
            endpoint_wait_seconds=1.0, connect_timeout_seconds=CONNECT_TIMEOUT, attempts=4
        ),
        access=access or NoTokens(),
        policy=CallerPolicy(anonymous="off" if access else "loopback"),
    )
    runner = web.AppRunner(gateway.application(), access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield Served(gateway, f"http://127.0.0.1:{port}/openai/v1")
    finally:
        await runner.cleanup()


async def post(
    url: str, data: bytes, headers: Mapping[str, str] | Sequence[tuple[str, str]]
) -> tuple[int, Any, dict[str, str]]:
    """Status, JSON body and headers of the answer; the body sent as given (no coding added)."""
    async with (
        aiohttp.ClientSession(auto_decompress=False) as session,
        session.post(url, data=data, headers=headers) as response,
    ):
        return response.status, await response.json(), dict(response.headers)


# ------------------------------------------------------------------ connect timeouts


async def test_an_endpoint_that_does_not_accept_in_time_is_retried_on_another() -> None:
    with silent_endpoint() as silent:
        assert await connect_times_out(silent), "the full backlog should not accept"
        async with (
            model_server("healthy") as healthy,
            serving(chat_with(("a-silent", silent), ("b-healthy", healthy.port))) as served,
        ):
            # LeastLoad breaks ties by requests given, then by key: a-silent is tried first
            # every time (it is given one, then b-healthy one).
            answers = [
                await post(f"{served.url}/completions", PLAIN, {"Content-Type": "application/json"})
                for _ in range(3)
            ]
            samples = served.samples()

    assert [(status, body) for status, body, _ in answers] == [
        (200, {"served_by": "healthy"}),
        (200, {"served_by": "healthy"}),
        (200, {"served_by": "healthy"}),
    ]
    assert [r.body for r in healthy.received] == [PLAIN, PLAIN, PLAIN]
    assert 'kaiwo_gateway_retries_total{model="chat",namespace="team-a"} 3.0' in samples
    assert (
        'kaiwo_gateway_endpoint_choices_total{endpoint="team-a/a-silent",fallback="false",'
        'home="true",model="chat",namespace="team-a",strategy="LeastLoad"} 3.0'
    ) in samples


async def test_a_model_whose_every_endpoint_does_not_accept_in_time_gets_the_502_after_each() -> (
    None
):
    with silent_endpoint() as first, silent_endpoint() as second:
        async with serving(chat_with(("a-silent", first), ("b-silent", second))) as served:
            status, body, _ = await post(
                f"{served.url}/completions", PLAIN, {"Content-Type": "application/json"}
            )

    assert (status, body) == (
        502,
        {
            "error": {
                "message": "Bad Gateway: no endpoint of model 'chat' accepted a connection "
                "(2 tried)",
                "type": "server_error",
                "param": None,
                "code": None,
            }
        },
    )


def test_only_failures_before_a_byte_was_sent_count_as_not_connected() -> None:
    connect_timeout = aiohttp.ConnectionTimeoutError("Connection timeout to host http://x/")
    read_timeout = aiohttp.SocketTimeoutError("Timeout on reading data from socket")

    assert isinstance(connect_timeout, NOT_CONNECTED)
    # Both are ServerTimeoutErrors; a read timeout comes after the request was sent.
    assert isinstance(read_timeout, aiohttp.ServerTimeoutError)
    assert not isinstance(read_timeout, NOT_CONNECTED)
    assert not isinstance(aiohttp.ServerDisconnectedError(), NOT_CONNECTED)
    assert not isinstance(TimeoutError(), NOT_CONNECTED)


class NoQueue:
    """The messenger's queue, for calling :meth:`Messenger.answer` directly."""

    message_limit = 1024 * 1024

    async def bind(self, consumer: ConsumerSpec, *, streams: Sequence[str]) -> ConsumerSpec:
        return consumer

    async def pull(
        self, consumer: ConsumerSpec, *, max_messages: int, wait_seconds: float
    ) -> Sequence[PulledMessage]:
        raise AssertionError("not pulled here")

    async def publish(self, subject: str, *, body: bytes, headers: Mapping[str, str]) -> None:
        raise AssertionError("not published here")


@contextlib.asynccontextmanager
async def messenger_for(catalog: Catalog, *, request_timeout: float) -> AsyncIterator[Messenger]:
    metrics = GatewayMetrics()
    gateway = Gateway(
        catalog=catalog,
        balancer=Balancer(),
        metrics=metrics,
        settings=ProxySettings(),
        access=NoTokens(),
    )
    messenger = Messenger(
        queue=NoQueue(),
        gateway=gateway,
        settings=MessengerSettings(
            endpoint_wait_seconds=1.0,
            request_timeout_seconds=request_timeout,
            connect_timeout_seconds=CONNECT_TIMEOUT,
        ),
        metrics=metrics,
    )
    await messenger.open()
    try:
        yield messenger
    finally:
        await messenger.close()


MESSAGE = json.dumps({"metadata": {"id": 7}, "path": "/v1/completions", "body": CHAT}).encode()


async def test_a_messenger_request_goes_to_another_endpoint_when_one_does_not_accept() -> None:
    with silent_endpoint() as silent:
        async with (
            model_server("healthy") as healthy,
            messenger_for(
                chat_with(("a-silent", silent), ("b-healthy", healthy.port)), request_timeout=30
            ) as messenger,
        ):
            metadata, answer = await messenger.answer("team-a", MESSAGE, {})

    assert (metadata, answer.status, answer.body) == ({"id": 7}, 200, {"served_by": "healthy"})
    assert len(healthy.received) == 1


async def test_a_messenger_request_that_times_out_once_sent_is_not_sent_again() -> None:
    async with (
        model_server("a-slow", slow=1.5) as slow,
        model_server("b-healthy") as healthy,
        messenger_for(
            chat_with(("a-slow", slow.port), ("b-healthy", healthy.port)), request_timeout=0.5
        ) as messenger,
    ):
        _metadata, answer = await messenger.answer("team-a", MESSAGE, {})

    assert (answer.status, answer.body["error"]["message"]) == (
        502,
        "Bad Gateway: the model server failed (TimeoutError)",
    )
    assert (len(slow.received), len(healthy.received)) == (1, 0)


# ------------------------------------------------------------------ the API server's errors


@dataclass
class FailingApiServer:
    """Authenticates ``known`` tokens and then fails every SubjectAccessReview with
    ``review_failure``; fails every TokenReview of another token with ``token_failure``."""

    token_failure: KubeError
    review_failure: KubeError
    known: Mapping[str, dict[str, Any]] = field(default_factory=dict)

    async def create(
        self,
        obj: dict[str, Any],
        *,
        field_manager: str | None = None,
    ) -> dict[str, Any]:
        if obj["kind"] == "TokenReview":
            user = self.known.get(obj["spec"]["token"])
            if user is None:
                raise self.token_failure
            return {"status": {"authenticated": True, "user": user}}
        raise self.review_failure


FORBIDDEN = (
    'tokenreviews.authentication.k8s.io is forbidden: User "system:serviceaccount:'
    'kaiwo-system:kaiwo-gateway" cannot create resource "tokenreviews" in API group '
    '"authentication.k8s.io" at the cluster scope'
)
UNREACHABLE = (
    "POST https://10.96.0.1:443/apis/authorization.k8s.io/v1/subjectaccessreviews: "
    "Cannot connect to host 10.96.0.1:443 ssl:default [Connect call failed]"
)
UNAVAILABLE = {
    "error": {
        "message": "the access check is unavailable: the gateway cannot ask the Kubernetes "
        "API server about this caller now; try again in a moment",
        "type": "server_error",
        "param": None,
        "code": "access_check_unavailable",
    }
}


async def test_the_api_servers_error_goes_to_the_log_and_not_to_the_caller() -> None:
    metrics = GatewayMetrics()
    api = FailingApiServer(
        token_failure=KubeError(FORBIDDEN, code=403, reason="Forbidden"),
        review_failure=Retryable(UNREACHABLE, code=0),
        known={"alice-token": {"username": "alice", "groups": ["team-a"]}},
    )
    access = KubernetesAccess(api, AccessSettings(), metrics=metrics)
    async with serving(chat_with(), access=access, metrics=metrics) as served:
        with capture_logs() as logs:
            token_check = await post(
                f"{served.url}/completions", PLAIN, {"Authorization": "Bearer bogus-s3cret"}
            )
            namespace_check = await post(
                f"{served.url}/completions", PLAIN, {"Authorization": "Bearer alice-token"}
            )
            async with (
                aiohttp.ClientSession() as session,
                session.get(
                    f"{served.url}/models", headers={"Authorization": "Bearer bogus-s3cret-2"}
                ) as listed,
            ):
                listing = (listed.status, await listed.json())

    assert token_check[:2] == (503, UNAVAILABLE)
    assert token_check[2]["Retry-After"] == "1"
    assert namespace_check[:2] == (503, UNAVAILABLE)
    assert listing == (503, UNAVAILABLE)
    # The detail is the log's: structured, with the review's kind, and no token anywhere.
    assert [(log["event"], log["kind"], log["error"]) for log in logs] == [
        ("a review was not answered", "TokenReview", FORBIDDEN),
        ("a review was not answered", "SubjectAccessReview", UNREACHABLE),
        ("a review was not answered", "TokenReview", FORBIDDEN),
    ]
    assert not [log for log in logs if "s3cret" in repr(log) or "alice-token" in repr(log)]
    assert 'kaiwo_gateway_refused_requests_total{reason="unavailable"} 3.0' in served.samples()


# ------------------------------------------------------------------ Content-Encoding


@pytest.mark.parametrize(
    ("coding", "encoded"),
    [
        ("gzip", gzip.compress(PLAIN)),
        ("deflate", zlib.compress(PLAIN)),
        ("GZip", gzip.compress(PLAIN)),
    ],
    ids=["gzip", "deflate", "GZip"],
)
async def test_a_compressed_body_reaches_the_model_server_decoded_without_its_coding(
    coding: str, encoded: bytes
) -> None:
    async with (
        model_server("healthy") as healthy,
        serving(chat_with(("b", healthy.port))) as served,
    ):
        status, body, _ = await post(
            f"{served.url}/completions",
            encoded,
            {"Content-Type": "application/json", "Content-Encoding": coding},
        )

    assert (status, body) == (200, {"served_by": "healthy"})
    [received] = healthy.received
    assert received.body == PLAIN
    assert "Content-Encoding" not in received.headers
    assert received.headers["Content-Length"] == str(len(PLAIN))  # the decoded body's, 34


async def test_a_compressed_form_reaches_the_model_server_decoded_without_its_coding() -> None:
    form = aiohttp.FormData()
    form.add_field("model", "chat")
    form.add_field("file", b"RIFF....WAVE", filename="a.wav", content_type="audio/wav")
    payload = form()
    collected: list[bytes] = []

    class Sink:
        async def write(self, data: bytes) -> None:
            collected.append(data)

    await payload.write(Sink())  # type: ignore[arg-type]
    async with (
        model_server("healthy") as healthy,
        serving(chat_with(("b", healthy.port))) as served,
    ):
        status, body, _ = await post(
            f"{served.url}/audio/transcriptions",
            gzip.compress(b"".join(collected)),
            {"Content-Type": payload.content_type, "Content-Encoding": "gzip"},
        )

    assert (status, body) == (200, {"served_by": "healthy"})
    [received] = healthy.received
    assert "Content-Encoding" not in received.headers
    assert received.headers["Content-Length"] == str(len(received.body))
    assert b"RIFF....WAVE" in received.body
    assert b'name="model"' not in received.body


UNDECODABLE = {
    "error": {
        "message": "bad request: the body does not decode as its Content-Encoding says (gzip)",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_content_encoding",
    }
}


async def test_a_body_that_does_not_decode_is_a_400_naming_its_content_encoding(
    caplog: pytest.LogCaptureFixture,
) -> None:
    not_gzip = b"\x1f\x8b this is not gzip"
    async with (
        model_server("healthy") as healthy,
        serving(chat_with(("b", healthy.port))) as served,
    ):
        with caplog.at_level(logging.WARNING):
            json_route = await post(
                f"{served.url}/completions",
                not_gzip,
                {"Content-Type": "application/json", "Content-Encoding": "gzip"},
            )
            form_route = await post(
                f"{served.url}/audio/transcriptions",
                not_gzip,
                {"Content-Type": "multipart/form-data; boundary=b", "Content-Encoding": "gzip"},
            )
        samples = served.samples()

    assert json_route[:2] == (400, UNDECODABLE)
    assert json_route[2]["X-Proxy"] == "lingo"
    assert json_route[2]["Connection"] == "close"  # the rest of the body is not read
    assert form_route[:2] == (400, UNDECODABLE)
    assert healthy.received == []
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    assert 'kaiwo_gateway_refused_requests_total{reason="undecodable_body"} 2.0' in samples


async def test_a_coding_the_gateway_does_not_decode_is_a_415_before_the_body_is_read() -> None:
    async with (
        model_server("healthy") as healthy,
        serving(chat_with(("b", healthy.port))) as served,
    ):
        compress = await post(
            f"{served.url}/completions",
            b"\x1f\x9d...",
            {"Content-Type": "application/json", "Content-Encoding": "compress"},
        )
        twice = await post(
            f"{served.url}/completions",
            gzip.compress(gzip.compress(PLAIN)),
            [
                ("Content-Type", "application/json"),
                ("Content-Encoding", "gzip"),
                ("Content-Encoding", "gzip"),
            ],
        )

    assert compress[:2] == (
        415,
        {
            "error": {
                "message": "unsupported Content-Encoding 'compress': send the body plain, or in "
                "one of gzip, deflate",
                "type": "invalid_request_error",
                "param": None,
                "code": "unsupported_content_encoding",
            }
        },
    )
    assert compress[2]["Accept-Encoding"] == "gzip, deflate"
    assert twice[0] == 415
    assert twice[1]["error"]["message"].startswith("unsupported Content-Encoding 'gzip, gzip'")
    assert healthy.received == []


def test_which_codings_reach_the_gateway_still_encoded() -> None:
    assert undecoded_coding([]) is None
    assert undecoded_coding(["gzip"]) is None
    assert undecoded_coding(["DEFLATE"]) is None
    assert undecoded_coding(["br"]) is None
    assert undecoded_coding(["zstd"]) is None
    assert undecoded_coding(["identity"]) is None
    assert undecoded_coding([""]) is None
    assert undecoded_coding(["compress"]) == "compress"
    assert undecoded_coding(["gzip, br"]) == "gzip, br"
    assert undecoded_coding(["gzip", "gzip"]) == "gzip, gzip"
    assert undecoded_coding(["gz\u0131p"]) == "gz\u0131p"  # not ASCII: aiohttp leaves it


def test_the_content_encoding_of_a_request_is_not_forwarded() -> None:
    assert request_headers_for_backend(
        [
            ("Content-Type", "application/json"),
            ("Content-Encoding", "gzip"),
            ("content-encoding", "deflate"),
            ("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        ]
    ) == [
        ("Content-Type", "application/json"),
        ("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
    ]
