"""The gateway end to end: a real nats-server with every identity's key, the watcher's
observations published as the watcher, stand-in model servers as processes on loopback,
the gateway process's ``serve``, and the ``openai`` client.

Models: ``alpha`` (team-a, LeastLoad, adapter ``sql`` loaded on a1 only; endpoints a1, a2
and one whose port refuses connections), ``beta`` (team-b, labelled ``tenant=b``,
PrefixHash, endpoint b1), ``whisper`` (team-a, SpeechToText, endpoint on b1's server).
"""

from __future__ import annotations

import asyncio
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
from kaiwo_gateway.settings import GatewaySettings
from kaiwo_runtime.nats_bus import NatsBus
from kaiwo_runtime.nats_connection import NatsConnection
from kaiwo_runtime.nats_credentials import CredentialsDirectory, write_credentials
from kaiwo_runtime.nats_server import NatsServer, free_port

from tests.unit.gateway.model_objects import model_object, pod_object

pytestmark = [pytest.mark.nats, pytest.mark.asyncio(loop_scope="module")]

STANDIN = Path(__file__).with_name("standin_openai.py")
WHEN = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@dataclass
class Stack:
    server: NatsServer
    credentials: CredentialsDirectory
    watcher: NatsBus
    base_url: str
    metrics_url: str
    ports: dict[str, int]
    versions: dict[str, int] = field(default_factory=dict)

    def client(self, **headers: str) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(
            base_url=self.base_url, api_key="unused", default_headers=headers, max_retries=0
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
        namespace=metadata["namespace"],
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
        kind=obj["kind"], namespace=metadata["namespace"], uid=metadata["uid"]
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


async def until(condition: Any, *, within: float = 60.0) -> None:
    """Poll ``condition`` until it holds; ``within`` is a guard against a hang (the steps
    take moments when idle), generous for a loaded machine."""
    deadline = time.monotonic() + within
    while not await condition():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


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
        )
        stop = asyncio.Event()
        gateway = asyncio.create_task(serve(settings, stop))
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
            await until(serving)
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
        ("beta", ""),
    ]
    assert models.data[2].model_extra == {"features": ["TextGeneration", "TextEmbedding"]}
    async with (
        aiohttp.ClientSession() as session,
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
    async with aiohttp.ClientSession() as session:
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
        aiohttp.ClientSession() as session,
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
    with pytest.raises(openai.BadRequestError, match="label selector"):
        await stack.client(**{"X-Label-Selector": "tenant in ()"}).models.list()


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

    await until(no_endpoint)  # the gateway knows the Model (it reads observations as they come)
    waiting = asyncio.create_task(client.completions.create(model="delta", prompt="x"))
    await asyncio.sleep(0.3)
    assert not waiting.done()
    await stack.observe(standin_pod("d1", model="delta", model_uid="delta", port=stack.ports["a2"]))
    answer = await asyncio.wait_for(waiting, 5)
    assert answer.choices[0].text == "a2|delta|"

    await stack.observe(
        standin_pod("d1", model="delta", model_uid="delta", port=stack.ports["a2"], ready=False)
    )

    await until(no_endpoint)
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

    await until(two_endpoints)
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
    assert str(hung_up.value.body["message"]).startswith("Bad Gateway: the model server failed")
    retried = 'kaiwo_gateway_retries_total{model="beta",namespace="team-b"}'
    assert retried not in before
    assert retried not in await stack.metrics()
