"""The messenger on a real nats-server (decision 0049): a tenant's requests, published with
its own key on ``kaiwo-messenger.<namespace>.requests``, answered through the gateway's
routing by stand-in model servers on ``kaiwo-messenger.<namespace>.responses``.

Models: ``alpha`` (team-a, endpoints a1 and a2), ``beta`` (team-b, endpoint b1), ``idle``
(team-a, at zero replicas, no endpoint until a test gives it one), ``gone`` (team-a, one
endpoint whose port nobody listens on), ``crowd`` (team-c, at zero replicas, for a backlog).
The messenger's consumer is declared with three deliveries one second apart (the product's
are minutes apart), so giving up is quick; it hands out at most 64 requests at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import nats
import nats.errors
import nats.js.errors
import pytest
import pytest_asyncio
from kaiwo_contracts.events.autoscaling import ScaleDecidedV1
from kaiwo_contracts.events.envelope import Envelope
from kaiwo_contracts.events.messenger import (
    MESSENGER_CONSUMER,
    REQUEST_STREAM,
    RESPONSE_STREAM,
    dead_subject,
    live_response_subject,
    messenger_streams,
    request_subject,
    response_subject,
    tenant_key_name,
)
from kaiwo_contracts.events.permissions import (
    ADMIN,
    WATCHER,
    inbox_prefix,
    operator_identities,
    tenant_identity,
)
from kaiwo_contracts.events.streams import BusTopology, ConsumerSpec, bus_topology
from kaiwo_gateway.__main__ import serve
from kaiwo_gateway.settings import GatewaySettings
from kaiwo_runtime.nats_bus import NatsBus
from kaiwo_runtime.nats_credentials import CredentialsDirectory, write_credentials
from kaiwo_runtime.nats_server import NatsServer, free_port
from nats.aio.client import Client
from nats.aio.msg import Msg

from tests.integration.gateway.table_access import TableAccess
from tests.integration.gateway.test_gateway import (
    connect,
    observe,
    standin_pod,
    start_standin,
    until,
)
from tests.unit.gateway.model_objects import model_object

pytestmark = [pytest.mark.nats, pytest.mark.asyncio(loop_scope="module")]

BATCH_CLIENT = Path(__file__).parents[3] / "examples" / "batch_client.py"
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
TEST_CONSUMER = ConsumerSpec(
    durable_name=MESSENGER_CONSUMER,
    stream=REQUEST_STREAM,
    filter_subjects=("kaiwo-messenger.*.requests",),
    description="messenger, three deliveries 1 s apart",
    max_deliver=3,
    backoff_seconds=(1.0, 1.0),
    max_ack_pending=64,
)


@dataclass
class Messaging:
    server: NatsServer
    credentials: CredentialsDirectory
    watcher: NatsBus
    admin: NatsBus
    ports: dict[str, int]
    clients: list[Client] = field(default_factory=list)
    versions: dict[str, int] = field(default_factory=dict)
    settings: GatewaySettings | None = None
    running: tuple[asyncio.Event, asyncio.Task[None]] | None = None

    async def start_gateway(self) -> None:
        assert self.settings is not None
        stop = asyncio.Event()
        access = TableAccess(tokens={}, namespaces={})
        self.running = (stop, asyncio.create_task(serve(self.settings, stop, access=access)))

    async def stop_gateway(self) -> None:
        assert self.running is not None
        stop, task = self.running
        stop.set()
        await asyncio.wait_for(task, 20)
        self.running = None

    async def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.ports['health']}/metrics"
        async with aiohttp.ClientSession() as session, session.get(url) as response:
            return await response.text()

    async def tenant(self, namespace: str) -> Client:
        """A client with the tenant's own key, as a batch job would connect."""
        key = tenant_key_name(namespace)
        client = await nats.connect(
            self.server.url,
            nkeys_seed=str(self.credentials.seed(key)),
            inbox_prefix=inbox_prefix(key),
            allow_reconnect=False,
            max_reconnect_attempts=0,
        )
        self.clients.append(client)
        return client

    async def observe(self, obj: dict[str, Any]) -> None:
        await observe(self.watcher, self.versions, obj)

    async def requests_drained(self) -> None:
        """The request work queue empties. The messenger publishes an answer before it
        acknowledges the request, so a reader can hold every answer a moment before the
        last acknowledgement reaches the server."""
        js = self.admin.client.jetstream()

        async def drained() -> bool:
            return (await js.stream_info(REQUEST_STREAM)).state.messages == 0

        await until(drained, within=30)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def messaging(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Messaging]:
    directory = tmp_path_factory.mktemp("messenger")
    identities = (
        *operator_identities(bus_topology()),
        tenant_identity("team-a"),
        tenant_identity("team-b"),
        tenant_identity("team-c"),
    )
    credentials = write_credentials(directory / "credentials", identities)
    ports = {name: free_port() for name in ("a1", "a2", "b1", "gone", "gateway", "health")}
    processes = await asyncio.gather(
        *(start_standin(name, ports[name]) for name in ("a1", "a2", "b1"))
    )
    async with NatsServer(config=credentials.server_config.read_text()) as server:
        admin = await connect(server, credentials, ADMIN)
        await admin.ensure_streams()
        await admin.declare(
            BusTopology(partitions=1, streams=messenger_streams(), consumers=(TEST_CONSUMER,))
        )
        watcher = await connect(server, credentials, WATCHER)
        messaging = Messaging(
            server=server, credentials=credentials, watcher=watcher, admin=admin, ports=ports
        )
        for obj in (
            model_object("alpha", uid="alpha"),
            standin_pod("a1", model="alpha", model_uid="alpha", port=ports["a1"]),
            standin_pod("a2", model="alpha", model_uid="alpha", port=ports["a2"]),
            model_object("beta", namespace="team-b", uid="beta"),
            standin_pod("b1", namespace="team-b", model="beta", model_uid="beta", port=ports["b1"]),
            model_object("idle", uid="idle", replicas=0, minReplicas=0, targetRequests=1),
            model_object("gone", uid="gone"),
            standin_pod("g1", model="gone", model_uid="gone", port=ports["gone"]),
            model_object(
                "crowd",
                namespace="team-c",
                uid="crowd",
                replicas=0,
                minReplicas=0,
                maxReplicas=20,
                targetRequests=100,
            ),
        ):
            await messaging.observe(obj)
        settings = GatewaySettings(
            nats_url=server.url,
            nats_credentials_file=credentials.seed("gateway"),
            gateway_host="127.0.0.1",
            gateway_port=ports["gateway"],
            health_host="127.0.0.1",
            health_port=ports["health"],
            gateway_connect_timeout_seconds=1.0,
            autoscaler_interval_seconds=0.5,
            autoscaler_window_seconds=2.0,
            messenger_enabled=True,
            messenger_endpoint_wait_seconds=15.0,
        )
        messaging.settings = settings
        await messaging.start_gateway()
        try:
            yield messaging
        finally:
            await messaging.stop_gateway()
            for client in messaging.clients:
                with contextlib.suppress(Exception):
                    await client.close()
            await watcher.close()
            await admin.close()
            for process in processes:
                process.terminate()
                await process.wait()


def request(model: str, prompt: str, *, number: int, **extra: Any) -> bytes:
    return json.dumps(
        {
            "metadata": {"number": number},
            "path": "/v1/completions",
            "body": {"model": model, "prompt": prompt, **extra},
        }
    ).encode()


async def answers(
    client: Client, namespace: str, request_ids: Sequence[str], *, within: float = 60
) -> list[Msg]:
    """The answers to the requests ``request_ids`` (their ``Nats-Msg-Id``), in that order,
    read from the tenant's responses through its durable consumer.

    The module's tests share each tenant's consumer, and one of them recreates team-a's from
    the stream's start: an answer to another test's request can come first. It is
    acknowledged and passed over; an answer to one of these requests must come once."""
    js = client.jetstream()
    subscription = await js.pull_subscribe(
        response_subject(namespace), durable=tenant_key_name(namespace), stream=RESPONSE_STREAM
    )
    wanted = set(request_ids)
    found: dict[str, Msg] = {}
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while len(found) < len(wanted):
        assert loop.time() < deadline, f"{len(found)} of {len(wanted)} answers"
        with contextlib.suppress(nats.errors.TimeoutError, TimeoutError):
            for message in await subscription.fetch(len(wanted) - len(found), timeout=1):
                await message.ack()
                request_id = (message.headers or {}).get("Kaiwo-Request-Id", "")
                if request_id in wanted:
                    assert request_id not in found, f"{request_id} answered twice"
                    found[request_id] = message
    await subscription.unsubscribe()
    return [found[request_id] for request_id in request_ids]


def document(message: Msg) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(message.data)
    return parsed


async def test_a_tenants_requests_are_answered_with_their_ids_and_acknowledged(
    messaging: Messaging,
) -> None:
    client = await messaging.tenant("team-a")
    js = client.jetstream()
    # The answers live too, where the stream republishes them (decision 0287).
    live = await client.subscribe(live_response_subject("team-a"))
    await client.flush()
    for number in range(6):
        await js.publish(
            request_subject("team-a"),
            request("alpha", f"prompt {number}", number=number),
            headers={
                "Nats-Msg-Id": f"batch-1-{number}",
                "X-Batch": "batch-1",
                "traceparent": TRACEPARENT,
            },
        )

    found = await answers(client, "team-a", [f"batch-1-{n}" for n in range(6)])

    by_number = {document(m)["metadata"]["number"]: m for m in found}
    assert sorted(by_number) == [0, 1, 2, 3, 4, 5]
    for number, message in by_number.items():
        answer = document(message)
        assert answer["status_code"] == 200
        server, model, trace = answer["body"]["choices"][0]["text"].split("|")
        assert (model, trace) == ("alpha", TRACEPARENT)
        assert server in {"a1", "a2"}
        assert message.headers is not None
        assert message.headers["Kaiwo-Request-Id"] == f"batch-1-{number}"
        assert message.headers["X-Batch"] == "batch-1"
    # Another test's late answer may come live too: only these six are counted.
    wanted = {f"batch-1-{n}" for n in range(6)}
    heard: dict[str, Msg] = {}
    while len(heard) < len(wanted):
        message = await live.next_msg(timeout=30)
        request_id = (message.headers or {}).get("Kaiwo-Request-Id", "")
        if request_id in wanted:
            assert request_id not in heard, f"{request_id} republished twice"
            heard[request_id] = message
    assert {(m.headers or {})["Nats-Subject"] for m in heard.values()} == {
        response_subject("team-a")
    }
    await live.unsubscribe()
    # Answered means acknowledged: the work queue empties.
    await messaging.requests_drained()


async def test_a_requests_body_reaches_the_model_server_as_the_message_wrote_it(
    messaging: Messaging,
) -> None:
    """Parsed and encoded again, ``1e400`` went on as ``Infinity`` (no JSON) and the decimal
    lost its last digits (decision 0262)."""
    client = await messaging.tenant("team-a")
    body = (
        '{"model": "alpha", "prompt": "body",\n'
        ' "temperature": 1e400, "top_p": 0.10000000000000000001}'
    )
    sent = '{"metadata": {"number": 1}, "body": ' + body + ', "path": "/v1/completions"}'

    await client.jetstream().publish(
        request_subject("team-a"), sent.encode(), headers={"Nats-Msg-Id": "as-sent-1"}
    )

    (found,) = await answers(client, "team-a", ["as-sent-1"])
    assert document(found)["body"]["choices"][0]["text"] == (
        '{"model": "alpha", "prompt": "body",\n'
        ' "temperature": 1e400, "top_p": 0.10000000000000000001}'
    )


async def test_bad_requests_and_unknown_models_are_answered_with_the_error(
    messaging: Messaging,
) -> None:
    client = await messaging.tenant("team-a")
    js = client.jetstream()
    await js.publish(request_subject("team-a"), b"not json", headers={"Nats-Msg-Id": "bad-1"})
    await js.publish(
        request_subject("team-a"),
        json.dumps({"metadata": {"n": 2}, "body": {"prompt": "no model"}}).encode(),
        headers={"Nats-Msg-Id": "bad-2"},
    )
    # beta is team-b's: for team-a it does not exist.
    await js.publish(
        request_subject("team-a"), request("beta", "x", number=3), headers={"Nats-Msg-Id": "bad-3"}
    )

    found = {
        (m.headers or {})["Kaiwo-Request-Id"]: document(m)
        for m in await answers(client, "team-a", ["bad-1", "bad-2", "bad-3"])
    }

    assert found["bad-1"]["status_code"] == 400
    assert found["bad-1"]["metadata"] is None
    assert "not JSON" in found["bad-1"]["body"]["error"]["message"]
    assert (found["bad-2"]["status_code"], found["bad-2"]["metadata"]) == (400, {"n": 2})
    assert "missing 'model' field" in found["bad-2"]["body"]["error"]["message"]
    assert found["bad-3"]["status_code"] == 404
    assert found["bad-3"]["body"]["error"]["code"] == "model_not_found"


async def test_a_model_whose_endpoints_all_fail_is_retried_then_answered_and_dead_lettered(
    messaging: Messaging,
) -> None:
    client = await messaging.tenant("team-a")
    await client.jetstream().publish(
        request_subject("team-a"), request("gone", "x", number=7), headers={"Nats-Msg-Id": "g-7"}
    )

    [answer] = await answers(client, "team-a", ["g-7"])

    body = document(answer)
    assert body["status_code"] == 502
    assert body["metadata"] == {"number": 7}
    assert "gave up after 3 deliveries" in body["body"]["error"]["message"]
    admin_js = messaging.admin.client.jetstream()
    dead = await admin_js.get_last_msg(RESPONSE_STREAM, dead_subject("team-a"))
    assert dead.headers is not None
    assert dead.headers["Kaiwo-Request-Id"] == "g-7"
    assert dead.headers["Kaiwo-Deliveries"] == "3"
    assert json.loads(dead.data or b"{}")["metadata"] == {"number": 7}
    await messaging.requests_drained()


async def test_a_request_for_a_model_at_zero_scales_it_from_zero_and_waits_for_it(
    messaging: Messaging,
) -> None:
    """The request waits like an HTTP one: counted in the load reports, it makes the
    autoscaler decide one replica, and is served once an endpoint is ready (the Model's Pod
    observed). The decision's cause is ``request`` when the waiting request decides it, or
    ``load`` when a tick sampled the request in hand first: the same decision, published
    once."""
    decisions: list[ScaleDecidedV1] = []

    async def decided(message: Msg) -> None:
        envelope = Envelope[ScaleDecidedV1].from_nats(message.headers or {}, message.data)
        decisions.append(envelope.data)

    watching = await messaging.admin.client.subscribe("kaiwo.gateway.scale.team-a.*", cb=decided)
    client = await messaging.tenant("team-a")
    await client.jetstream().publish(
        request_subject("team-a"), request("idle", "wake", number=9), headers={"Nats-Msg-Id": "z"}
    )

    async def scaled_from_zero() -> bool:
        return any(d.model.name == "idle" and d.replicas == 1 for d in decisions)

    await until(scaled_from_zero)
    await watching.unsubscribe()
    [first] = [d for d in decisions if d.model.name == "idle"][:1]
    assert (first.model.name, first.from_replicas, first.replicas) == ("idle", 0, 1)
    assert first.cause in {"request", "load"}
    await messaging.observe(model_object("idle", uid="idle", replicas=1, targetRequests=1))
    await messaging.observe(
        standin_pod("i1", model="idle", model_uid="idle", port=messaging.ports["a1"])
    )

    [answer] = await answers(client, "team-a", ["z"])

    body = document(answer)
    assert (body["status_code"], body["metadata"]) == (200, {"number": 9})
    assert body["body"]["choices"][0]["text"] == "a1|idle|"


async def test_a_tenant_key_reaches_only_its_own_subjects(messaging: Messaging) -> None:
    """team-a's key may not publish to team-b's requests, read team-b's answers (live or
    through a consumer), read the streams by sequence, or publish an answer itself."""
    a = await messaging.tenant("team-a")
    errors: list[Exception] = []

    async def on_error(error: Exception) -> None:
        errors.append(error)

    b_key = tenant_key_name("team-b")
    a2 = await nats.connect(
        messaging.server.url,
        nkeys_seed=str(messaging.credentials.seed(tenant_key_name("team-a"))),
        inbox_prefix=inbox_prefix(tenant_key_name("team-a")),
        error_cb=on_error,
        allow_reconnect=False,
    )
    messaging.clients.append(a2)
    a_js = a.jetstream(timeout=1.0)

    # Publishing to team-b's requests: JetStream never stores it (no ack comes back).
    with pytest.raises((nats.errors.TimeoutError, nats.errors.NoRespondersError)):
        await a_js.publish(request_subject("team-b"), request("beta", "x", number=1))
    # Nor may it pretend to be the messenger.
    with pytest.raises((nats.errors.TimeoutError, nats.errors.NoRespondersError)):
        await a_js.publish(response_subject("team-a"), b'{"forged": true}')
    # Reading team-b's answers live is refused; so is reading team-a's own where the stream
    # stores them (a push consumer of another key could store copies there, decision 0287).
    await a2.subscribe(response_subject("team-b"))
    await a2.subscribe(response_subject("team-a"))
    await a2.flush()

    async def refused() -> bool:
        violations = [str(e).lower() for e in errors if "permissions violation" in str(e).lower()]
        return all(
            any(response_subject(team) in v for v in violations) for team in ("team-a", "team-b")
        )

    await until(refused, within=10)
    # ... through a consumer of team-b's name or filtered to team-b's answers: refused.
    with pytest.raises((nats.errors.TimeoutError, nats.errors.NoRespondersError)):
        await a_js.pull_subscribe(response_subject("team-b"), durable=b_key, stream=RESPONSE_STREAM)
    a_key = tenant_key_name("team-a")
    with contextlib.suppress(nats.js.errors.NotFoundError):
        await a_js.delete_consumer(RESPONSE_STREAM, a_key)
    with pytest.raises((nats.errors.TimeoutError, nats.errors.NoRespondersError)):
        await a_js.pull_subscribe(response_subject("team-b"), durable=a_key, stream=RESPONSE_STREAM)
    # ... nor by its own consumer's create subject with another filter in the request: the
    # server holds the request to the filter named in the subject.
    own_create = f"$JS.API.CONSUMER.CREATE.{RESPONSE_STREAM}.{a_key}.{response_subject('team-a')}"
    refusals: tuple[tuple[dict[str, Any], int], ...] = (
        # JSConsumerCreateFilterSubjectMismatchErr
        ({"filter_subject": response_subject("team-b")}, 10131),
        # JSConsumerMultipleFiltersNotAllowed (on the subject-based API)
        ({"filter_subjects": [response_subject("team-b")]}, 10137),
        # no filter at all: every tenant's answers; refused as a mismatch too
        ({}, 10131),
    )
    for extra, code in refusals:
        config = {"name": a_key, "durable_name": a_key, "ack_policy": "explicit", **extra}
        payload = {"stream_name": RESPONSE_STREAM, "config": config}
        reply = await a.request(own_create, json.dumps(payload).encode(), timeout=5)
        assert json.loads(reply.data)["error"]["err_code"] == code, (config, reply.data)
    # The same request with its own filter is what the key is for (the control).
    own = {"name": a_key, "durable_name": a_key, "filter_subject": response_subject("team-a")}
    payload = {"stream_name": RESPONSE_STREAM, "config": {**own, "ack_policy": "explicit"}}
    reply = await a.request(own_create, json.dumps(payload).encode(), timeout=5)
    assert "error" not in json.loads(reply.data), reply.data
    # ... by sequence: refused.
    with pytest.raises((nats.errors.TimeoutError, nats.errors.NoRespondersError)):
        await a_js.get_msg(RESPONSE_STREAM, 1)
    await messaging.requests_drained()

    # What it may do, it can: team-b's key, meanwhile, gets its own answer.
    b = await messaging.tenant("team-b")
    await b.jetstream().publish(
        request_subject("team-b"), request("beta", "mine", number=2), headers={"Nats-Msg-Id": "b2"}
    )
    [answer] = await answers(b, "team-b", ["b2"])
    assert document(answer)["body"]["choices"][0]["text"] == "b1|beta|"


async def test_the_example_batch_client_sends_a_jsonl_file_and_writes_every_answer(
    messaging: Messaging, tmp_path: Path
) -> None:
    prompts = tmp_path / "prompts.jsonl"
    lines = [{"id": f"row-{n}", "model": "beta", "prompt": f"p{n}"} for n in range(40)]
    lines.append({"model": "nobody", "prompt": "unknown"})  # line 41: its id is its number
    output = tmp_path / "answers.jsonl"
    key = tenant_key_name("team-b")
    environment = {
        **os.environ,
        "KAIWO_NATS_URL": messaging.server.url,
        "KAIWO_NATS_CREDENTIALS_FILE": str(messaging.credentials.seed(key)),
    }
    prompts.write_text("".join(json.dumps(line) + "\n" for line in lines))

    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(BATCH_CLIENT),
        "--namespace",
        "team-b",
        "--input",
        str(prompts),
        "--output",
        str(output),
        "--within",
        "120",
        env=environment,
        stderr=asyncio.subprocess.PIPE,
    )
    _, stderr = await process.communicate()

    assert process.returncode == 0, stderr.decode()
    answers = {record["id"]: record for record in map(json.loads, output.read_text().splitlines())}
    assert sorted(answers) == sorted([f"row-{n}" for n in range(40)] + ["41"])
    assert answers["row-7"]["status_code"] == 200
    assert answers["row-7"]["body"]["choices"][0]["text"] == "b1|beta|"
    assert answers["41"]["status_code"] == 404
    assert "41 answers" in stderr.decode()


async def test_a_request_in_hand_when_the_gateway_stops_is_answered_after_it_starts_again(
    messaging: Messaging,
) -> None:
    """At-least-once: the stopping replica gives the request back unanswered (it stays in
    the work queue), and the next one answers it."""
    client = await messaging.tenant("team-b")
    await client.jetstream().publish(
        request_subject("team-b"),
        request("beta", "hold 3", number=11),
        headers={"Nats-Msg-Id": "h"},
    )
    in_flight = 'kaiwo_gateway_requests_in_flight{model="beta",namespace="team-b"} 1.0'

    async def in_hand() -> bool:
        try:
            return in_flight in await messaging.metrics()
        except aiohttp.ClientError:  # not listening yet
            return False

    await until(in_hand)
    await messaging.stop_gateway()
    info = await messaging.admin.client.jetstream().stream_info(REQUEST_STREAM)
    assert info.state.messages == 1  # not acknowledged, not lost
    await messaging.start_gateway()

    [answer] = await answers(client, "team-b", ["h"])

    assert (answer.headers or {})["Kaiwo-Request-Id"] == "h"
    assert document(answer)["status_code"] == 200
    assert document(answer)["body"]["choices"][0]["text"] == "b1|beta|"


async def test_a_backlog_of_a_thousand_requests_for_a_model_at_zero_scales_it_to_ten(
    messaging: Messaging,
) -> None:
    """The consumer hands out at most 64 requests at once (``max_ack_pending``), so the
    replica has 64 in hand and the other 936 wait in the stream; the autoscaler counts them
    all for ``crowd``, the only Model they are for (decision 0057). targetRequests 100:
    1,000 / 100 = 10 replicas once the window (4 samples) is full of the backlog; counting
    only the requests in hand would give ceil(64 / 100) = 1, counting those in hand twice
    ceil(1,064 / 100) = 11. Then the Model gets an endpoint and every request is answered."""
    decisions: list[ScaleDecidedV1] = []

    async def decided(message: Msg) -> None:
        envelope = Envelope[ScaleDecidedV1].from_nats(message.headers or {}, message.data)
        decisions.append(envelope.data)

    watching = await messaging.admin.client.subscribe("kaiwo.gateway.scale.team-c.*", cb=decided)
    client = await messaging.tenant("team-c")
    js = client.jetstream()
    for number in range(1000):
        await js.publish(
            request_subject("team-c"),
            request("crowd", f"p{number}", number=number),
            headers={"Nats-Msg-Id": f"crowd-{number}"},
        )

    async def scaled_to_ten() -> bool:
        return any(d.cause == "load" and d.replicas == 10 for d in decisions)

    await until(scaled_to_ten)
    # Every decision is from zero (the test has not yet shown the Model any replica); the
    # first is one replica for a waiting request, or a tick's, whichever came first.
    assert {d.from_replicas for d in decisions} == {0}
    await messaging.observe(
        model_object(
            "crowd",
            namespace="team-c",
            uid="crowd",
            replicas=10,
            minReplicas=0,
            maxReplicas=20,
            targetRequests=100,
        )
    )
    await messaging.observe(
        standin_pod(
            "c1",
            namespace="team-c",
            model="crowd",
            model_uid="crowd",
            port=messaging.ports["a1"],
        )
    )

    found = await answers(client, "team-c", [f"crowd-{n}" for n in range(1000)], within=120)

    await watching.unsubscribe()
    numbers = sorted(document(m)["metadata"]["number"] for m in found)
    assert numbers == list(range(1000))
    assert {document(m)["status_code"] for m in found} == {200}
    assert max(d.replicas for d in decisions) == 10
    await messaging.requests_drained()
