"""The gateway end to end: a real nats-server with every identity's key, the watcher's
observations published as the watcher, stand-in model servers as processes on loopback,
the gateway process's ``serve``, and the ``openai`` client.

Models: ``alpha`` (team-a, LeastLoad, adapter ``sql`` loaded on a1 only; endpoints a1, a2
and one whose port refuses connections), ``beta`` (team-b, labelled ``tenant=b``,
PrefixHash, endpoint b1), ``whisper`` (team-a, SpeechToText, endpoint on b1's server).

Callers (:class:`TableAccess`; the API server's answers are tested in
``test_gateway_access_real_cluster.py``): ``operator`` may use team-a and team-b, ``alice``
team-a, ``bob`` team-b, ``nobody`` nothing. Each caller may have 4 requests in flight
holding 3 MiB of bodies.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest
import pytest_asyncio
from kaiwo_contracts.events.envelope import Envelope
from kaiwo_contracts.events.observed import ObservedObjectV1
from kaiwo_contracts.events.permissions import ADMIN, WATCHER, inbox_prefix, operator_identities
from kaiwo_contracts.events.streams import bus_topology
from kaiwo_contracts.events.subjects import observed_subject
from kaiwo_gateway.__main__ import serve
from kaiwo_gateway.domain.access import Caller
from kaiwo_gateway.settings import GatewaySettings
from kaiwo_runtime.nats_bus import NatsBus
from kaiwo_runtime.nats_connection import NatsConnection
from kaiwo_runtime.nats_credentials import CredentialsDirectory, write_credentials
from kaiwo_runtime.nats_server import NatsServer, free_port

from tests.integration.gateway.table_access import TableAccess
from tests.unit.gateway.model_objects import model_object, pod_object
from tests.waiting import eventually

pytestmark = [pytest.mark.nats, pytest.mark.asyncio(loop_scope="module")]

until = eventually
"""The one waiting helper under the name the console, messenger and gateway-access tests
import from here; those files were being changed on other branches (issue 26): import
``tests.waiting.eventually`` there and drop this name once they are merged."""

STANDIN = Path(__file__).with_name("standin_openai.py")
WHEN = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
OPERATOR_TOKEN = "operator-token"
CALLERS = {
    OPERATOR_TOKEN: Caller(name="operator"),
    "alice-token": Caller(name="alice", groups=("team-a",)),
    "bob-token": Caller(name="bob", groups=("team-b",)),
    "nobody-token": Caller(name="nobody"),
}
NAMESPACES = {
    "operator": frozenset({"team-a", "team-b"}),
    "alice": frozenset({"team-a"}),
    "bob": frozenset({"team-b"}),
}
OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
MIB = 1024 * 1024


@dataclass
class Stack:
    server: NatsServer
    credentials: CredentialsDirectory
    watcher: NatsBus
    base_url: str
    metrics_url: str
    ports: dict[str, int]
    access: TableAccess
    versions: dict[str, int] = field(default_factory=dict)

    def client(self, *, token: str = OPERATOR_TOKEN, **headers: str) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(
            base_url=self.base_url, api_key=token, default_headers=headers, max_retries=0
        )

    async def metrics(self) -> str:
        async with aiohttp.ClientSession() as session, session.get(self.metrics_url) as response:
            return await response.text()

    async def observe(self, obj: dict[str, Any], event: str = "ADDED") -> None:
        await observe(self.watcher, self.versions, obj, event)


async def observe(
    watcher: NatsBus, versions: dict[str, int], obj: dict[str, Any], event: str = "ADDED"
) -> None:
    """Publish ``obj`` as the watcher would, with a resource version newer than before."""
    metadata = obj["metadata"]
    version = versions.get(metadata["uid"], 0) + 1
    versions[metadata["uid"]] = version
    metadata["resourceVersion"] = str(version)
    payload = ObservedObjectV1(
        kind=obj["kind"],
        api_version=obj["apiVersion"],
        namespace=metadata.get("namespace"),
        name=metadata["name"],
        uid=metadata["uid"],
        resource_version=str(version),
        event_type=event,
        object=obj,
    )
    envelope = Envelope.new(
        data=payload,
        source="/kaiwo/watcher",
        time=WHEN,
        id=f"{metadata['uid']}:{version}",
        correlationid=metadata["uid"],
    )
    subject = observed_subject(
        kind=obj["kind"], namespace=metadata.get("namespace"), uid=metadata["uid"]
    )
    await watcher.publish(envelope, subject)


def standin_pod(name: str, *, model: str, model_uid: str, port: int, **extra: Any) -> dict:
    return pod_object(
        name, model=model, model_uid=model_uid, ip="127.0.0.1", port=str(port), **extra
    )


async def start_standin(name: str, port: int) -> asyncio.subprocess.Process:
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(STANDIN), name, str(port), stdout=asyncio.subprocess.PIPE
    )
    assert process.stdout is not None
    line = await asyncio.wait_for(process.stdout.readline(), 20)
    assert line.strip() == b"ready", f"stand-in {name} did not start"
    return process


async def connect(server: NatsServer, credentials: CredentialsDirectory, name: str) -> NatsBus:
    connection = NatsConnection(
        url=server.url,
        credentials_file=credentials.seed(name),
        inbox_prefix=inbox_prefix(name),
        name=f"test-{name}",
    )
    return await NatsBus.connect(connection, topology=bus_topology())


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    directory = tmp_path_factory.mktemp("gateway")
    credentials = write_credentials(directory / "credentials", operator_identities(bus_topology()))
    ports = {name: free_port() for name in ("a1", "a2", "b1", "dead", "gateway", "health")}
    processes = await asyncio.gather(
        *(start_standin(name, ports[name]) for name in ("a1", "a2", "b1"))
    )
    async with NatsServer(config=credentials.server_config.read_text()) as server:
        admin = await connect(server, credentials, ADMIN)
        await admin.ensure_streams()
        watcher = await connect(server, credentials, WATCHER)
        stack = Stack(
            server=server,
            credentials=credentials,
            watcher=watcher,
            base_url=f"http://127.0.0.1:{ports['gateway']}/openai/v1",
            metrics_url=f"http://127.0.0.1:{ports['health']}/metrics",
            ports=ports,
            access=TableAccess(tokens=CALLERS, namespaces=NAMESPACES),
        )
        # Stored before the gateway starts (it reads the history), and after (it is woken).
        await stack.observe(model_object("alpha", uid="alpha", adapters=["sql"]))
        await stack.observe(
            standin_pod("a1", model="alpha", model_uid="alpha", port=ports["a1"], adapters=("sql",))
        )
        settings = GatewaySettings(
            nats_url=server.url,
            nats_credentials_file=credentials.seed("gateway"),
            gateway_host="127.0.0.1",
            gateway_port=ports["gateway"],
            health_host="127.0.0.1",
            health_port=ports["health"],
            gateway_endpoint_wait_seconds=1.5,
            gateway_connect_timeout_seconds=1.0,
            gateway_caller_max_requests=4,
            gateway_caller_max_body_bytes=3 * MIB,
            gateway_max_body_bytes=MIB,
            gateway_max_audio_body_bytes=MIB + MIB // 4,
        )
        stop = asyncio.Event()
        gateway = asyncio.create_task(serve(settings, stop, access=stack.access))
        await stack.observe(standin_pod("a2", model="alpha", model_uid="alpha", port=ports["a2"]))
        await stack.observe(
            standin_pod("dead", model="alpha", model_uid="alpha", port=ports["dead"])
        )
        await stack.observe(
            model_object(
                "beta",
                namespace="team-b",
                uid="beta",
                labels={"tenant": "b"},
                features=["TextGeneration", "TextEmbedding"],
                strategy="PrefixHash",
                owner="research-team",
            )
        )
        await stack.observe(
            standin_pod("b1", namespace="team-b", model="beta", model_uid="beta", port=ports["b1"])
        )
        await stack.observe(model_object("whisper", uid="whisper", features=["SpeechToText"]))
        await stack.observe(
            standin_pod("w1", model="whisper", model_uid="whisper", port=ports["b1"])
        )

        async def serving() -> bool:
            try:
                models = await stack.client().models.list()
            except openai.APIConnectionError:
                return False
            return len(models.data) == 3

        try:
            await eventually(serving)
            yield stack
        finally:
            stop.set()
            await asyncio.wait_for(gateway, 10)
            await watcher.close()
            await admin.close()
            for process in processes:
                process.terminate()
                await process.wait()


async def test_the_openai_client_lists_models_with_adapters_and_features(stack: Stack) -> None:
    models = await stack.client().models.list()

    assert [(m.id, m.owned_by) for m in models.data] == [
        ("alpha", ""),
        ("alpha_sql", ""),
        ("beta", "research-team"),  # the Model's spec.owner
    ]
    assert models.data[2].model_extra == {"features": ["TextGeneration", "TextEmbedding"]}
    async with (
        aiohttp.ClientSession(headers=OPERATOR) as session,
        session.get(f"{stack.base_url}/models?feature=SpeechToText") as response,
    ):
        listed = await response.json()
    assert [m["id"] for m in listed["data"]] == ["whisper"]


async def test_completions_from_two_models_streamed_and_not(stack: Stack) -> None:
    client = stack.client()
    ask = [{"role": "user", "content": "hello"}]

    beta = await client.chat.completions.create(model="beta", messages=ask)
    assert beta.choices[0].message.content == "b1|beta|"
    text = await client.completions.create(model="beta", prompt="once")
    assert text.choices[0].text == "b1|beta|"
    alpha = await client.chat.completions.create(model="alpha", messages=ask)
    assert (alpha.choices[0].message.content or "").split("|")[1] == "alpha"

    for model, servers in (("beta", {"b1"}), ("alpha", {"a1", "a2"})):
        stream = await client.chat.completions.create(model=model, messages=ask, stream=True)
        pieces = [chunk.choices[0].delta.content async for chunk in stream]
        server, named, _trace, done = "".join(p or "" for p in pieces).split("|")
        assert server in servers
        assert (named, done) == (model, "done")


async def test_an_adapter_goes_to_a_pod_that_has_it_loaded_under_its_own_name(
    stack: Stack,
) -> None:
    client = stack.client()
    for _ in range(4):
        answer = await client.chat.completions.create(
            model="alpha_sql", messages=[{"role": "user", "content": "select"}]
        )
        assert answer.choices[0].message.content == "a1|sql|"


async def test_an_adapters_request_reaches_its_server_as_sent_but_for_its_name(
    stack: Stack,
) -> None:
    """Parsed and encoded again, ``1e400`` went on as ``Infinity`` (no JSON), the decimal lost
    its last digits, the first ``n`` was dropped and ``é`` was written as ``\\u00e9``
    (decision 0262)."""
    sent = (
        '{"model": "alpha_sql",  "prompt": "body", "temperature": 1e400,\n'
        ' "top_p": 0.10000000000000000001, "n": 1, "n": 2, "stop": ["\\u00e9", "é"]}'
    )

    status, answer, _ = await post(stack, "completions", sent.encode(), token="alice-token")

    assert status == 200, answer
    assert answer["choices"][0]["text"] == (
        '{"model": "sql",  "prompt": "body", "temperature": 1e400,\n'
        ' "top_p": 0.10000000000000000001, "n": 1, "n": 2, "stop": ["\\u00e9", "é"]}'
    )


async def test_least_load_spreads_and_a_refused_connection_is_retried_elsewhere(
    stack: Stack,
) -> None:
    client = stack.client()
    served = []
    for _ in range(6):
        answer = await client.completions.create(model="alpha", prompt="x")
        served.append(answer.choices[0].text.split("|")[0])

    assert set(served) == {"a1", "a2"}
    metrics = await stack.metrics()
    assert 'kaiwo_gateway_retries_total{model="alpha",namespace="team-a"}' in metrics
    assert 'endpoint="team-a/dead"' in metrics  # chosen, refused, and retried elsewhere


async def test_streaming_is_not_buffered(stack: Stack) -> None:
    body = {"model": "beta", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    async with aiohttp.ClientSession(headers=OPERATOR) as session:
        started = time.monotonic()
        async with session.post(f"{stack.base_url}/chat/completions", json=body) as response:
            assert response.headers["Content-Type"].startswith("text/event-stream")
            arrivals = [time.monotonic() - started async for _ in response.content.iter_any()]

    # The stand-in pauses 0.4 s between its chunks: the first must arrive before the pause.
    assert arrivals[0] < arrivals[-1] - 0.3


async def test_errors_are_openai_json_400_without_model_and_404_for_unknown(
    stack: Stack,
) -> None:
    async with (
        aiohttp.ClientSession(headers=OPERATOR) as session,
        session.post(f"{stack.base_url}/chat/completions", json={"messages": []}) as r,
    ):
        assert r.status == 400
        assert (await r.json())["error"] == {
            "message": "bad request: reading model from body: missing 'model' field",
            "type": "invalid_request_error",
            "param": "model",
            "code": None,
        }
    with pytest.raises(openai.NotFoundError) as unknown:
        await stack.client().chat.completions.create(model="gamma", messages=[])
    assert unknown.value.body == {
        "message": 'model not found: "gamma"',
        "type": "invalid_request_error",
        "param": "model",
        "code": "model_not_found",
    }
    with pytest.raises(openai.NotFoundError):
        await stack.client().chat.completions.create(model="alpha_nosuch", messages=[])


async def test_label_selectors_decide_which_models_a_tenant_sees(stack: Stack) -> None:
    tenant_b = stack.client(**{"X-Label-Selector": "tenant=b"})
    other = stack.client(**{"X-Label-Selector": "tenant=a"})

    assert [m.id for m in (await tenant_b.models.list()).data] == ["beta"]
    assert [m.id for m in (await other.models.list()).data] == []
    with pytest.raises(openai.NotFoundError):
        await other.completions.create(model="beta", prompt="x")
    with pytest.raises(openai.BadRequestError, match="X-Label-Selector: label selector") as bad:
        await stack.client(**{"X-Label-Selector": "tenant in ()"}).models.list()
    assert bad.value.param == "X-Label-Selector"


async def test_a_rerank_is_proxied_and_marked_as_upstream_marks_its_answers(
    stack: Stack,
) -> None:
    body = json.dumps({"model": "beta", "query": "q", "documents": ["a", "b"]}).encode()

    status, answer, headers = await post(stack, "rerank", body, token=OPERATOR_TOKEN)

    assert status == 200
    assert answer == {
        "model": "b1|beta|",
        "results": [{"index": 0, "relevance_score": 1.0}, {"index": 1, "relevance_score": 0.5}],
    }
    assert headers["X-Proxy"] == "lingo"
    # Errors of a proxied route are marked too; the gateway's own list is not.
    status, _, headers = await post(stack, "rerank", b"{}", token=OPERATOR_TOKEN)
    assert (status, headers["X-Proxy"]) == (400, "lingo")
    async with (
        aiohttp.ClientSession(headers=OPERATOR) as session,
        session.get(f"{stack.base_url}/models") as listed,
    ):
        assert listed.status == 200
        assert "X-Proxy" not in listed.headers


async def test_embeddings_transcriptions_and_the_trace_context_reach_the_backend(
    stack: Stack,
) -> None:
    traced = stack.client(traceparent=TRACEPARENT)

    embedded = await traced.embeddings.create(model="beta", input="text")
    assert embedded.model == f"b1|beta|{TRACEPARENT}"
    assert embedded.data[0].embedding == [0.25, 0.5]
    heard = await traced.audio.transcriptions.create(
        model="whisper", file=("clip.wav", b"RIFF0123456789"), language="en"
    )
    # The form reaches the server without its model field, as upstream forwards it.
    assert heard.text == f"b1|None|{TRACEPARENT}|clip.wav|14|en"


async def test_endpoints_follow_observations_and_a_request_waits_for_one(stack: Stack) -> None:
    client = stack.client()
    await stack.observe(model_object("delta", uid="delta"))

    async def no_endpoint() -> bool:
        return 'kaiwo_gateway_endpoints{model="delta",namespace="team-a"} 0.0' in (
            await stack.metrics()
        )

    await eventually(
        no_endpoint
    )  # the gateway knows the Model (it reads observations as they come)
    waiting = asyncio.create_task(client.completions.create(model="delta", prompt="x"))
    await asyncio.sleep(0.3)
    assert not waiting.done()
    await stack.observe(standin_pod("d1", model="delta", model_uid="delta", port=stack.ports["a2"]))
    answer = await asyncio.wait_for(waiting, 5)
    assert answer.choices[0].text == "a2|delta|"

    await stack.observe(
        standin_pod("d1", model="delta", model_uid="delta", port=stack.ports["a2"], ready=False)
    )

    await eventually(no_endpoint)
    started = time.monotonic()
    with pytest.raises(openai.InternalServerError) as gone:
        await client.completions.create(model="delta", prompt="x")
    assert gone.value.status_code == 503
    assert time.monotonic() - started >= 1.4  # it waited the configured 1.5 s for an endpoint
    # delta sets no replicas: at zero, so the gateway asked for one and says so.
    assert gone.value.body == {
        "message": "no ready endpoint of model 'delta' within 1.5s (the model was at 0 replicas: "
        "one was asked for and is not ready yet; model servers may take minutes to start, "
        "try again)",
        "type": "server_error",
        "param": None,
        "code": "no_ready_endpoint",
    }


async def test_a_model_whose_every_endpoint_refuses_gets_a_502_after_trying_each(
    stack: Stack,
) -> None:
    await stack.observe(model_object("omega", uid="omega"))
    for name in ("o1", "o2"):
        await stack.observe(
            standin_pod(name, model="omega", model_uid="omega", port=stack.ports["dead"])
        )

    async def two_endpoints() -> bool:
        return 'kaiwo_gateway_endpoints{model="omega",namespace="team-a"} 2.0' in (
            await stack.metrics()
        )

    await eventually(two_endpoints)
    with pytest.raises(openai.APIStatusError) as refused:
        await stack.client().completions.create(model="omega", prompt="x")
    assert refused.value.status_code == 502
    assert refused.value.body == {
        "message": "Bad Gateway: no endpoint of model 'omega' accepted a connection (2 tried)",
        "type": "server_error",
        "param": None,
        "code": None,
    }


async def test_a_server_that_hangs_up_after_the_request_is_a_502_and_not_retried(
    stack: Stack,
) -> None:
    before = await stack.metrics()
    with pytest.raises(openai.APIStatusError) as hung_up:
        await stack.client().completions.create(model="beta", prompt="hang up")

    assert hung_up.value.status_code == 502
    # The kind of failure, not its text (which may name the server's address).
    assert hung_up.value.body["message"] == (
        "Bad Gateway: the model server failed (ServerDisconnectedError)"
    )
    retried = 'kaiwo_gateway_retries_total{model="beta",namespace="team-b"}'
    assert retried not in before
    assert retried not in await stack.metrics()


# ------------------------------------------------------------------ callers (issue 23)


async def post(
    stack: Stack, route: str, body: bytes, *, token: str | None, **headers: str
) -> tuple[int, dict[str, Any], dict[str, str]]:
    """POST raw bytes; the status, the JSON answer and the response headers."""
    sent = {"Content-Type": "application/json", **headers}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{stack.base_url}/{route}", data=body, headers=sent) as response,
    ):
        return response.status, await response.json(), dict(response.headers)


def routed_to(metrics: str, model: str) -> list[str]:
    """The samples that only a request routed to ``model`` makes: in flight, waiting for an
    endpoint, load the autoscaler saw, a scale decision."""
    routed = (
        "kaiwo_gateway_requests_in_flight",
        "kaiwo_gateway_endpoint_wait",
        "kaiwo_autoscaler_decisions",
    )
    return [
        line
        for line in metrics.splitlines()
        if f'model="{model}"' in line
        and (
            line.startswith(routed)
            or (line.startswith("kaiwo_autoscaler_active_requests") and not line.endswith(" 0.0"))
        )
    ]


async def test_without_a_valid_token_nothing_is_listed_or_served(stack: Stack) -> None:
    ask = json.dumps({"model": "alpha", "prompt": "x"}).encode()
    async with aiohttp.ClientSession() as session:
        async with session.get(f"{stack.base_url}/models") as listed:
            assert listed.status == 401
            assert listed.headers["WWW-Authenticate"] == 'Bearer realm="kaiwo"'
            assert (await listed.json())["error"] == {
                "message": "no bearer token: send Authorization: Bearer <token>",
                "type": "invalid_request_error",
                "param": None,
                "code": "invalid_api_key",
            }
        basic = {"Authorization": "Basic YWxpY2U6cHc="}
        async with session.get(f"{stack.base_url}/models", headers=basic) as wrong_scheme:
            assert wrong_scheme.status == 401

    assert (await post(stack, "completions", ask, token=None))[0] == 401
    status, answer, _ = await post(stack, "completions", ask, token="forged-token")
    assert status == 401
    assert answer["error"]["message"] == (
        "the bearer token is not valid (expired, revoked or unknown)"
    )
    with pytest.raises(openai.AuthenticationError):
        await stack.client(token="forged-token").models.list()


async def test_models_lists_only_the_namespaces_the_caller_may_use(stack: Stack) -> None:
    async def listed(token: str, **headers: str) -> list[str]:
        return [m.id for m in (await stack.client(token=token, **headers).models.list()).data]

    everything, alice, bob = (
        await listed(OPERATOR_TOKEN),
        await listed("alice-token"),
        await listed("bob-token"),
    )
    assert bob == ["beta"]  # team-b's only (other tests add Models to team-a)
    assert alice[:2] == ["alpha", "alpha_sql"] and "beta" not in alice
    assert sorted(alice + bob) == everything
    assert await listed("nobody-token") == []
    # A label selector narrows what a caller may use; it never widens it.
    assert await listed("alice-token", **{"X-Label-Selector": "tenant=b"}) == []


async def test_another_namespace_s_model_is_not_found_and_never_scaled(stack: Stack) -> None:
    # "private" (team-a) is at zero replicas: a request it may serve waits and scales it.
    await stack.observe(model_object("private", uid="private"))
    await stack.observe(model_object("shared", uid="shared-a"))
    await stack.observe(model_object("shared", namespace="team-b", uid="shared-b"))
    await stack.observe(
        standin_pod("s-b", namespace="team-b", model="shared", model_uid="shared-b",
                    port=stack.ports["b1"])
    )  # fmt: skip

    async def known() -> bool:
        return 'kaiwo_gateway_endpoints{model="shared",namespace="team-b"} 1.0' in (
            await stack.metrics()
        )

    await eventually(known)
    with pytest.raises(openai.NotFoundError) as hidden:
        await stack.client(token="bob-token").completions.create(model="private", prompt="x")
    assert hidden.value.body["message"] == 'model not found: "private"'
    # Never routed: not in flight, never waited for a replica, no load, no scale decision.
    assert routed_to(await stack.metrics(), "private") == []
    # Bob may use team-b's "shared" only: routed there, team-a's never named.
    bob_shared = await stack.client(token="bob-token").completions.create(
        model="shared", prompt="x"
    )
    assert bob_shared.choices[0].text == "b1|shared|"
    with pytest.raises(openai.BadRequestError, match="team-a, team-b"):
        await stack.client().completions.create(model="shared", prompt="x")

    with pytest.raises(openai.InternalServerError) as waited:
        await stack.client(token="alice-token").completions.create(model="private", prompt="x")
    assert waited.value.body["code"] == "no_ready_endpoint"
    assert (
        'kaiwo_gateway_endpoint_waits_total{from_zero="true",model="private",'
        'namespace="team-a",outcome="timeout"} 1.0'
    ) in await stack.metrics()


async def test_a_body_over_the_limit_is_refused_before_it_is_read(stack: Stack) -> None:
    twelve_mb = b'{"model": "alpha", "prompt": "' + b"x" * (12 * 1000 * 1000) + b'"}'

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: read until the limit
        for _ in range(10):
            yield b" " * MIB

    status, answer, _ = await post(stack, "completions", twelve_mb, token="alice-token")
    assert status == 413
    assert answer["error"]["message"] == (
        "the request body is larger than 1,048,576 bytes, the limit of this route"
    )
    streamed = await post(stack, "completions", chunks(), token="alice-token")  # type: ignore[arg-type]
    assert streamed[0] == 413
    # An audio upload has a larger limit: 1.1 MiB passes there.
    heard = await stack.client(token="alice-token").audio.transcriptions.create(
        model="whisper", file=("clip.wav", b"R" * (1100 * 1024))
    )
    assert heard.text.endswith(f"|clip.wav|{1100 * 1024}|None")
    with pytest.raises(openai.APIStatusError) as too_long:
        await stack.client(token="alice-token").audio.transcriptions.create(
            model="whisper", file=("clip.wav", b"R" * (1300 * 1024))
        )
    assert too_long.value.status_code == 413
    for content_type in ("multipart/form-data; boundary=b", "multipart/form-data"):
        garbled = await post(
            stack, "audio/transcriptions", b"x" * 100, token="alice-token",
            **{"Content-Type": content_type},
        )  # fmt: skip
        assert garbled[0] == 400, garbled
        assert garbled[1]["error"]["message"].startswith(
            "bad request: the body is not a multipart form: "
        )
    assert 'kaiwo_gateway_refused_requests_total{reason="too_large"} 3.0' in await stack.metrics()


async def test_json_nested_200000_deep_is_a_400_not_a_500(stack: Stack) -> None:
    def nested(depth: int) -> bytes:  # the body object is the first level
        inner = depth - 1
        return b'{"model": "alpha", "prompt": "x", "n": ' + b"[" * inner + b"]" * inner + b"}"

    cases = {
        200_000: "bad request: the body has 200,000 arrays and objects; at most 100,000 are read",
        5_000: "bad request: the body nests arrays and objects more than 64 levels deep",
        65: "bad request: the body nests arrays and objects more than 64 levels deep",
    }
    for depth, message in cases.items():
        status, answer, _ = await post(stack, "completions", nested(depth), token="alice-token")
        assert (status, answer["error"]["message"]) == (400, message), depth
        assert answer["error"]["code"] == "body_too_complex"
    assert (await post(stack, "completions", nested(64), token="alice-token"))[0] == 200


async def test_each_caller_has_at_most_four_requests_in_flight(stack: Stack) -> None:
    alice = stack.client(token="alice-token")
    held = [
        asyncio.create_task(alice.completions.create(model="alpha", prompt="hold 1.5"))
        for _ in range(4)
    ]

    async def four_in_flight() -> bool:
        return 'kaiwo_gateway_requests_in_flight{model="alpha",namespace="team-a"} 4.0' in (
            await stack.metrics()
        )

    await eventually(four_in_flight)
    with pytest.raises(openai.RateLimitError) as refused:
        await alice.completions.create(model="alpha", prompt="x")
    assert refused.value.response.headers["Retry-After"] == "1"
    assert refused.value.body["code"] == "too_many_requests_in_flight"
    # Another caller is not held up by alice's requests.
    bob = await stack.client(token="bob-token").completions.create(model="beta", prompt="y")
    assert bob.choices[0].text == "b1|beta|"
    assert len(await asyncio.gather(*held)) == 4
    await alice.completions.create(model="alpha", prompt="x")  # free again


async def test_each_caller_holds_at_most_three_mib_of_bodies(stack: Stack) -> None:
    padded = json.dumps({"model": "beta", "prompt": "hold 1.5", "pad": "x" * (900 * 1024)})
    held = [
        asyncio.create_task(post(stack, "completions", padded.encode(), token="bob-token"))
        for _ in range(3)
    ]

    async def three_held() -> bool:
        return 'kaiwo_gateway_requests_in_flight{model="beta",namespace="team-b"} 3.0' in (
            await stack.metrics()
        )

    await eventually(three_held)
    status, answer, _ = await post(stack, "completions", padded.encode(), token="bob-token")
    assert status == 429
    assert answer["error"]["code"] == "too_many_bytes_in_flight"
    assert [status for status, _, _ in await asyncio.gather(*held)] == [200, 200, 200]


async def test_credentials_and_forwarding_headers_stay_at_the_gateway(stack: Stack) -> None:
    sent = {
        "Cookie": "session=caller",
        "Proxy-Authorization": "Basic c2VjcmV0",
        "X-Api-Key": "sk-caller",
        "X-Forwarded-For": "10.66.66.66",
        "Forwarded": "for=10.66.66.66",
        "traceparent": TRACEPARENT,
    }
    body = json.dumps({"model": "alpha", "prompt": "headers"}).encode()

    status, answer, headers = await post(stack, "completions", body, token="alice-token", **sent)

    assert status == 200
    received = dict(json.loads(answer["choices"][0]["text"]))
    assert received["traceparent"] == TRACEPARENT
    for name in ("authorization", "cookie", "proxy-authorization", "x-api-key",
                 "x-forwarded-for", "forwarded"):  # fmt: skip
        assert name not in received, received
    assert "Set-Cookie" not in headers
    assert headers["X-Served-By"] == "standin"


async def test_anonymous_callers_are_served_on_loopback_only_where_switched_on(
    stack: Stack,
) -> None:
    gateway_port, health_port = free_port(), free_port()
    settings = GatewaySettings(
        nats_url=stack.server.url,
        nats_credentials_file=stack.credentials.seed("gateway"),
        gateway_host="127.0.0.1",
        gateway_port=gateway_port,
        health_host="127.0.0.1",
        health_port=health_port,
        gateway_anonymous="loopback",
        autoscaler_enabled=False,
    )
    stop = asyncio.Event()
    local = asyncio.create_task(serve(settings, stop))
    client = openai.AsyncOpenAI(
        base_url=f"http://127.0.0.1:{gateway_port}/openai/v1", api_key="unused", max_retries=0
    )

    async def serving() -> bool:
        try:
            return len((await client.models.list()).data) >= 3
        except openai.APIConnectionError:
            return False

    try:
        await eventually(serving)
        answer = await client.completions.create(model="beta", prompt="x")
        assert answer.choices[0].text == "b1|beta|"
    finally:
        stop.set()
        await asyncio.wait_for(local, 10)
    with pytest.raises(ValueError, match="needs a loopback KAIWO_GATEWAY_HOST"):
        GatewaySettings(gateway_host="0.0.0.0", gateway_anonymous="loopback")
