"""The bus's trust boundary on a real nats-server: every identity of
``kaiwo_contracts.events.permissions`` with the permissions rendered by
``kaiwo_runtime.nats_credentials``, and what each may and may not do.

The attack this answers: a client on the network publishes one hand-written plan and the
executor carries it out. Here nobody but the planner can put a plan where the executor's
consumer reads it, and nobody at all gets in without a key.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import nats
import nats.errors
import nats.js.errors
import pytest
from kaiwo_cli.commands.nats import _provision
from kaiwo_contracts.events.envelope import Envelope
from kaiwo_contracts.events.identity_names import LEASE_BUCKET, STATE_BUCKETS
from kaiwo_contracts.events.permissions import (
    ADMIN,
    CLI,
    EXECUTOR,
    GATEWAY,
    MONITOR,
    PLANNER,
    RECORDER,
    SUBSCRIBER,
    WATCHER,
    inbox_prefix,
    namespace_subscriber_identity,
    operator_identities,
    reader_identity,
)
from kaiwo_contracts.events.plans import PlanDecidedV1
from kaiwo_contracts.events.streams import (
    OBSERVED_STREAM,
    PLAN_STREAM,
    PUBLIC_STREAM,
    RESULT_STREAM,
    BusTopology,
    bus_topology,
)
from kaiwo_contracts.events.subjects import (
    live_subject,
    load_report_subject,
    monitor_subject,
    observed_subject,
    plan_subject,
    public_workload_subject,
    result_subject,
    scale_subject,
)
from kaiwo_contracts.plans import ObjectRef, Plan
from kaiwo_runtime.bus import BusError, Delivery
from kaiwo_runtime.cluster_binding import CLUSTER_KEY
from kaiwo_runtime.kv import ForeignBucketError, NatsKeyValue
from kaiwo_runtime.leases import NatsLeaseStore
from kaiwo_runtime.nats_bus import NatsBus
from kaiwo_runtime.nats_connection import NatsConnection, connect_client
from kaiwo_runtime.nats_credentials import (
    CredentialsDirectory,
    issue,
    write_credentials,
    write_seed,
)
from kaiwo_runtime.nats_server import NatsServer
from kaiwo_runtime.settings import ServiceSettings
from kaiwo_runtime.startup import watchers_cluster
from nats.js.api import ConsumerConfig, StreamConfig

pytestmark = pytest.mark.nats

READER = "audit-dashboard"
UID = "6f1c2d3e-0000-4000-8000-00000000beef"
OTHER_UID = "6f1c2d3e-0000-4000-8000-00000000cafe"
WHEN = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
REFUSED_WITHIN = 1.0
"""How long a refused JetStream publish waits for the acknowledgement that never comes."""
ARRIVES_WITHIN = 20.0
"""How long a message that must arrive may take. It ends the wait as soon as it arrives, so it
is long: CI shares two cores with the real stack, and 2 s was once not enough in CI."""


@dataclass
class SecuredBus:
    server: NatsServer
    credentials: CredentialsDirectory
    topology: BusTopology
    opened: list[NatsBus]

    def connection(self, identity: str) -> NatsConnection:
        return NatsConnection(
            url=self.server.url,
            credentials_file=self.credentials.seed(identity),
            inbox_prefix=inbox_prefix(identity),
            name=f"test-{identity}",
        )

    async def bus(self, identity: str) -> NatsBus:
        bus = await NatsBus.connect(
            self.connection(identity), topology=self.topology, publish_timeout=REFUSED_WITHIN
        )
        self.opened.append(bus)
        return bus


@pytest.fixture
async def secured(tmp_path: Path) -> AsyncIterator[SecuredBus]:
    topology = bus_topology()
    credentials = write_credentials(
        tmp_path / "credentials", (*operator_identities(topology), reader_identity(READER))
    )
    async with NatsServer(config=credentials.server_config.read_text()) as server:
        secured = SecuredBus(server=server, credentials=credentials, topology=topology, opened=[])
        admin = await secured.bus(ADMIN)
        await admin.ensure_streams()
        try:
            yield secured
        finally:
            for bus in secured.opened:
                await bus.close()


def hand_written_plan() -> tuple[Envelope[PlanDecidedV1], str]:
    """What the attacker sent: a privileged Deployment in kube-system."""
    owner = ObjectRef(
        api_version="kaiwo.silogen.ai/v1alpha1",
        kind="KaiwoJob",
        name="innocent",
        namespace="team-a",
        uid=UID,
    )
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "miner", "namespace": "kube-system"},
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "x", "image": "evil", "securityContext": {"privileged": True}}
                    ]
                }
            }
        },
    }
    envelope = Envelope.new(
        data=PlanDecidedV1.of(Plan(owner=owner, desired=(deployment,)), planned_at=WHEN),
        source="/kaiwo/planner",
        time=WHEN,
        correlationid=UID,
        subject="team-a/innocent",
    )
    return envelope, plan_subject(kind="KaiwoJob", namespace="team-a", uid=UID)


async def stored(admin: NatsBus, stream: str) -> int:
    return int((await admin.client.jetstream().stream_info(stream)).state.messages)


async def executor_sees(bus: NatsBus, topology: BusTopology) -> list[str]:
    """What the executor's consumer delivers now (acknowledged, as the executor would)."""
    seen: list[str] = []

    async def record(delivery: Delivery) -> None:
        seen.append(delivery.subject)

    await bus.process(topology.consumer("executor-plan"), record, wait_seconds=0.5)
    return seen


async def test_no_client_without_a_known_key_gets_in(secured: SecuredBus, tmp_path: Path) -> None:
    with pytest.raises(nats.errors.Error, match="Authorization Violation"):
        await nats.connect(
            secured.server.url, allow_reconnect=False, max_reconnect_attempts=0, connect_timeout=2
        )
    # A well-formed key the server was never told about.
    stranger = write_seed(tmp_path / "stranger", issue(reader_identity("stranger")))
    with pytest.raises(nats.errors.Error, match="Authorization Violation"):
        await connect_client(
            NatsConnection(url=secured.server.url, credentials_file=stranger),
            allow_reconnect=False,
            max_reconnect_attempts=0,
            connect_timeout=2,
        )


async def test_only_the_planner_can_publish_a_plan_the_executor_reads(
    secured: SecuredBus,
) -> None:
    admin = await secured.bus(ADMIN)
    executor = await secured.bus(EXECUTOR)
    envelope, subject = hand_written_plan()

    for intruder in (WATCHER, EXECUTOR, MONITOR, RECORDER, CLI, READER):
        bus = await secured.bus(intruder)
        with pytest.raises(BusError, match=r"publish to 'kaiwo\.plan\."):
            await bus.publish(envelope, subject)
    assert await stored(admin, PLAN_STREAM) == 0
    assert await executor_sees(executor, secured.topology) == []

    planner = await secured.bus(PLANNER)
    ack = await planner.publish(envelope, subject)
    assert (ack.stream, ack.sequence) == (PLAN_STREAM, 1)
    assert await executor_sees(executor, secured.topology) == [subject]


async def test_the_server_reports_the_refused_publish_as_a_permissions_violation(
    secured: SecuredBus,
) -> None:
    errors: list[str] = []

    async def collect(error: Exception) -> None:
        errors.append(str(error))

    envelope, subject = hand_written_plan()
    headers, body = envelope.to_nats()
    client = await connect_client(secured.connection(WATCHER), error_cb=collect)
    try:
        await client.publish(subject, body, headers=headers)
        await client.flush(timeout=ARRIVES_WITHIN)
        await asyncio.sleep(0.2)
    finally:
        await client.close()
    assert any(
        "permissions violation for publish" in error.lower() and subject in error
        for error in errors
    ), errors


async def test_the_recorder_publishes_nothing_but_dead_letters(secured: SecuredBus) -> None:
    admin = await secured.bus(ADMIN)
    recorder = await secured.bus(RECORDER)
    body, headers = b"{}", {"Nats-Msg-Id": "forged"}
    for subject, stream in (
        (observed_subject(kind="Pod", namespace="team-a", uid=UID), "KAIWO_OBS"),
        (plan_subject(kind="KaiwoJob", namespace="team-a", uid=UID), PLAN_STREAM),
        (
            result_subject(outcome="applied", kind="KaiwoJob", namespace="team-a", uid=UID),
            RESULT_STREAM,
        ),
        (monitor_subject(topic="preemption", namespace="team-a", uid=UID), "KAIWO_MON"),
    ):
        with pytest.raises(BusError):
            await recorder.publish_raw(subject, body=body, headers=headers)
        assert await stored(admin, stream) == 0, subject
    ack = await recorder.publish_raw(
        "kaiwo.dlq.KAIWO_OBS.planner-obs", body=body, headers={"Nats-Msg-Id": "dlq:1"}
    )
    assert ack.stream == "KAIWO_DLQ"


async def test_each_service_publishes_its_own_family_only(secured: SecuredBus) -> None:
    own = {
        WATCHER: observed_subject(kind="Pod", namespace="team-a", uid=UID),
        PLANNER: plan_subject(kind="KaiwoJob", namespace="team-a", uid=UID),
        EXECUTOR: result_subject(outcome="failed", kind="KaiwoJob", namespace="team-a", uid=UID),
        MONITOR: monitor_subject(topic="utilization", namespace="team-a", uid=UID),
    }
    for service, subject in own.items():
        bus = await secured.bus(service)
        ack = await bus.publish_raw(subject, body=b"{}", headers={"Nats-Msg-Id": service})
        assert not ack.duplicate
        for other, foreign in own.items():
            if other != service:
                with pytest.raises(BusError):
                    await bus.publish_raw(foreign, body=b"{}", headers={})


async def test_the_cli_reads_no_observed_object_and_no_other_identity_s_inbox(
    secured: SecuredBus,
) -> None:
    """The cli key (the one handed to people for ``kaiwo events tail``) read every
    namespace's observed objects and plans; now it follows what carries no object."""
    errors: list[str] = []

    async def collect(error: Exception) -> None:
        errors.append(str(error))

    cli = await connect_client(secured.connection(CLI), error_cb=collect)
    try:
        refused = {
            subject: await cli.subscribe(subject)
            for subject in (
                "kaiwo.obs.>",
                "kaiwo.plan.>",
                "kaiwo.dlq.>",
                "kaiwo.>",
                "kaiwo.live.obs.>",
                # Results live, not where KAIWO_RES stores them (decision 0287).
                "kaiwo.res.>",
            )
        }
        results = await cli.subscribe("kaiwo.live.res.>")
        await cli.subscribe(f"{inbox_prefix(EXECUTOR)}.>")
        await cli.flush(timeout=ARRIVES_WITHIN)
        watcher = await secured.bus(WATCHER)
        observed = observed_subject(kind="Pod", namespace="team-a", uid=UID)
        await watcher.publish_raw(observed, body=b"{}", headers={"Nats-Msg-Id": "seen"})
        executor = await secured.bus(EXECUTOR)
        result = result_subject(outcome="applied", kind="KaiwoJob", namespace="team-a", uid=UID)
        await executor.publish_raw(result, body=b"{}", headers={"Nats-Msg-Id": "done"})
        message = await results.next_msg(timeout=ARRIVES_WITHIN)
        assert message.subject == live_subject(result)
        assert (message.headers or {})["Nats-Subject"] == result
        for subscription in refused.values():
            with pytest.raises(nats.errors.TimeoutError):
                await subscription.next_msg(timeout=0.2)
    finally:
        await cli.close()
    violations = [
        e.lower() for e in errors if "permissions violation for subscription" in e.lower()
    ]
    for subject in (
        "kaiwo.obs.>",
        "kaiwo.plan.>",
        "kaiwo.dlq.>",
        "kaiwo.res.>",
        "kaiwo.live.obs.>",
        f"{inbox_prefix(EXECUTOR)}.>",
    ):
        assert any(f'"{subject.lower()}"' in v or subject.lower() in v for v in violations), errors


async def test_no_key_handed_out_can_have_a_consumer_copy_one_stream_into_another(
    secured: SecuredBus,
) -> None:
    """Decision 0287 (decision 0259's hole 1). A push consumer delivers to the subject its
    creator names, whatever stream captures it, once someone subscribes to exactly that
    subject. A reader may create consumers, and subscribed to ``kaiwo.>``: its consumer on
    KAIWO_OBS aimed at a plan subject filled KAIWO_PLAN. Now every key handed out subscribes
    to live subjects only, which no stream stores: aimed at a plan subject, the copies find
    no subscriber; aimed at a live one, they reach the reader and no stream."""
    watcher = await secured.bus(WATCHER)
    observed = observed_subject(kind="Pod", namespace="team-a", uid=UID)
    await watcher.publish_raw(observed, body=b"{}", headers={"Nats-Msg-Id": "seen"})
    admin = await secured.bus(ADMIN)
    plans = await stored(admin, PLAN_STREAM)
    errors: list[str] = []

    async def collect(error: Exception) -> None:
        errors.append(str(error).lower())

    reader = await connect_client(secured.connection(READER), error_cb=collect)
    try:
        await reader.subscribe("kaiwo.plan.copy")
        copies = await reader.subscribe("kaiwo.live.plan.copy")
        await reader.flush(timeout=ARRIVES_WITHIN)
        await push_consumer(reader, OBSERVED_STREAM, READER, deliver="kaiwo.plan.copy")
        # Delivered at once where someone listens: the window is for a loaded machine.
        await asyncio.sleep(1.0)
        assert await stored(admin, PLAN_STREAM) == plans
        await reader.request(
            f"$JS.API.CONSUMER.DELETE.{OBSERVED_STREAM}.{READER}", b"", timeout=ARRIVES_WITHIN
        )
        await push_consumer(reader, OBSERVED_STREAM, READER, deliver="kaiwo.live.plan.copy")
        copy = await copies.next_msg(timeout=ARRIVES_WITHIN)
        assert copy.subject == observed  # push delivery names the stored subject
    finally:
        await reader.close()
    assert await stored(admin, PLAN_STREAM) == plans
    assert any(
        "permissions violation for subscription" in e and '"kaiwo.plan.copy"' in e for e in errors
    ), errors
    # Nor may any other key handed out subscribe where a stream stores.
    for identity, stored_subject in (
        (CLI, "kaiwo.res.copy"),
        (SUBSCRIBER, "kaiwo.public.workload.team-a.copy"),
        (READER, "kaiwo.public.workload.team-a.copy"),
    ):
        assert await refused_subscription(secured, identity, stored_subject), identity


async def push_consumer(client: nats.NATS, stream: str, name: str, *, deliver: str) -> None:
    """Create (the JetStream API, as any client may send it) the push consumer ``name`` on
    ``stream`` delivering every message to ``deliver``."""
    config = {
        "durable_name": name,
        "deliver_subject": deliver,
        "deliver_policy": "all",
        "ack_policy": "none",
    }
    answer = await client.request(
        f"$JS.API.CONSUMER.CREATE.{stream}.{name}",
        json.dumps({"stream_name": stream, "config": config}).encode(),
        timeout=ARRIVES_WITHIN,
    )
    assert "error" not in json.loads(answer.data), answer.data


async def refused_subscription(secured: SecuredBus, identity: str, subject: str) -> bool:
    errors: list[str] = []

    async def collect(error: Exception) -> None:
        errors.append(str(error).lower())

    client = await connect_client(secured.connection(identity), error_cb=collect)
    try:
        await client.subscribe(subject)
        await client.flush(timeout=ARRIVES_WITHIN)
        await asyncio.sleep(0.2)
    finally:
        await client.close()
    return any("permissions violation for subscription" in e and subject in e for e in errors)


async def test_the_watcher_hears_the_executors_refusals_and_nothing_else(
    secured: SecuredBus,
) -> None:
    errors: list[str] = []

    async def collect(error: Exception) -> None:
        errors.append(str(error))

    watcher = await connect_client(secured.connection(WATCHER), error_cb=collect)
    try:
        refusals = await watcher.subscribe("kaiwo.res.refused.>")
        await watcher.subscribe("kaiwo.plan.>")
        await watcher.flush(timeout=ARRIVES_WITHIN)
        executor = await secured.bus(EXECUTOR)
        subject = result_subject(outcome="refused", kind="KaiwoJob", namespace="team-a", uid=UID)
        await executor.publish_raw(subject, body=b"{}", headers={"Nats-Msg-Id": "refused"})
        assert (await refusals.next_msg(timeout=ARRIVES_WITHIN)).subject == subject
        await asyncio.sleep(0.2)
    finally:
        await watcher.close()
    assert any(
        "permissions violation for subscription" in e.lower() and "kaiwo.plan.>" in e.lower()
        for e in errors
    ), errors


async def test_a_reader_uses_its_own_durable_consumer_and_no_operator_s(
    secured: SecuredBus,
) -> None:
    planner = await secured.bus(PLANNER)
    envelope, subject = hand_written_plan()
    await planner.publish(envelope, subject)

    reader = await connect_client(secured.connection(READER))
    try:
        js = reader.jetstream(timeout=REFUSED_WITHIN)
        own = await js.pull_subscribe("kaiwo.plan.>", durable=READER, stream=PLAN_STREAM)
        [message] = await own.fetch(1, timeout=ARRIVES_WITHIN)
        assert message.subject == subject
        await message.ack()
        # The executor's consumer: neither read (stealing its plans) nor reconfigured.
        stolen = await js.pull_subscribe_bind(durable="executor-plan", stream=PLAN_STREAM)
        with pytest.raises(nats.errors.TimeoutError):
            await stolen.fetch(1, timeout=REFUSED_WITHIN)
        with pytest.raises(nats.errors.TimeoutError):
            await js.pull_subscribe("kaiwo.plan.>", durable="executor-plan", stream=PLAN_STREAM)
    finally:
        await reader.close()
    executor = await secured.bus(EXECUTOR)
    assert await executor_sees(executor, secured.topology) == [subject]


async def test_the_gateway_reads_stored_observations_publishes_none_and_consumes_none(
    secured: SecuredBus,
) -> None:
    watcher = await secured.bus(WATCHER)
    pod = observed_subject(kind="Pod", namespace="team-a", uid=UID)
    await watcher.publish_raw(pod, body=b"{}", headers={"Nats-Msg-Id": "pod"})

    gateway = await secured.bus(GATEWAY)
    jsm = gateway.client.jsm()
    stored = await jsm.get_msg("KAIWO_OBS", seq=1, subject="kaiwo.obs.pod.>", next=True)
    assert stored.subject == pod
    with pytest.raises(BusError):
        await gateway.publish_raw(pod, body=b"{}", headers={})
    # No consumer on the observations: the right to create one reaches the planner's.
    js = gateway.client.jetstream(timeout=REFUSED_WITHIN)
    with pytest.raises(nats.errors.TimeoutError):
        await js.subscribe("kaiwo.obs.pod.>", stream="KAIWO_OBS", ordered_consumer=True)


async def test_the_gateway_reports_load_decides_scale_and_leads_by_its_own_lease_only(
    secured: SecuredBus,
) -> None:
    gateway = await secured.bus(GATEWAY)
    planner = await secured.bus(PLANNER)
    reports = await gateway.client.subscribe("kaiwo.gateway.load.>")

    report = load_report_subject("gateway-0/1")
    stored = await gateway.publish_raw(report, body=b"{}", headers={"Nats-Msg-Id": "load-1"})
    assert stored.stream == "KAIWO_GATEWAY"
    assert (await reports.next_msg(timeout=ARRIVES_WITHIN)).subject == report
    decided = scale_subject(namespace="team-a", uid=UID)
    assert (await gateway.publish_raw(decided, body=b"{}", headers={})).stream == "KAIWO_GATEWAY"
    # Nobody else decides a scale; the gateway publishes no plan, result or finding.
    with pytest.raises(BusError):
        await planner.publish_raw(decided, body=b"{}", headers={})
    owner = ObjectRef(api_version="kubeai.org/v1", kind="Model", name="m", namespace="team-a")
    for forged in (
        plan_subject(kind=owner.kind, namespace="team-a", uid=UID),
        result_subject(outcome="applied", kind=owner.kind, namespace="team-a", uid=UID),
        monitor_subject(topic="utilization", namespace="team-a", uid=UID),
    ):
        with pytest.raises(BusError):
            await gateway.publish_raw(forged, body=b"{}", headers={})

    state = await NatsKeyValue.open(gateway.client, "kaiwo-autoscaler")
    await state.put(UID, b"{}")
    assert [key async for key, _ in state.items()] == [UID]
    leases = await NatsLeaseStore.open(gateway.client, "kaiwo-leases", duration_seconds=5)
    assert await leases.claim("autoscaler", "gateway-0") is not None
    # Not the planner's lease, and not the planner's state.
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(leases.claim("planner", "gateway-0"), REFUSED_WITHIN * 3)
    with pytest.raises(nats.errors.TimeoutError):
        await gateway.client.jetstream(timeout=REFUSED_WITHIN).key_value("kaiwo-planner")


async def test_services_open_their_own_buckets_and_leases_only(secured: SecuredBus) -> None:
    planner = await secured.bus(PLANNER)
    executor = await secured.bus(EXECUTOR)

    planner_kv = await NatsKeyValue.open(planner.client, "kaiwo-planner")
    await planner_kv.put("snapshot/0", b"state")
    assert [key async for key, _ in planner_kv.items()] == ["snapshot/0"]
    leases = await NatsLeaseStore.open(planner.client, "kaiwo-leases", duration_seconds=5)
    revision = await leases.claim("planner", "planner-0")
    assert revision is not None
    assert await leases.renew("planner", "planner-0", revision=revision) is not None

    executor_leases = await NatsLeaseStore.open(executor.client, "kaiwo-leases", duration_seconds=5)
    assert await executor_leases.claim("executor", "executor-0") is not None
    assert await executor_leases.holder("planner") == "planner-0"
    # The executor can neither take the planner's lease nor read the planner's state.
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(executor_leases.claim("planner", "executor-0"), REFUSED_WITHIN * 3)
    with pytest.raises(nats.errors.TimeoutError):
        await executor.client.jetstream(timeout=REFUSED_WITHIN).key_value("kaiwo-planner")


async def test_the_planner_and_the_recorder_read_the_watchers_cluster_and_write_nothing_there(
    secured: SecuredBus,
) -> None:
    watcher = await secured.bus(WATCHER)
    watcher_kv = await NatsKeyValue.open(watcher.client, "kaiwo-watcher")
    await watcher_kv.put(CLUSTER_KEY, b"uid-of-the-cluster")
    await watcher_kv.put("checkpoint.pods", b"41")

    for name in (PLANNER, RECORDER):
        service = await secured.bus(name)
        assert await watchers_cluster(service.client, within_seconds=10) == "uid-of-the-cluster"
        # Read only: the cluster the watcher recorded is the watcher's to write.
        found = await NatsKeyValue.open_existing(service.client, "kaiwo-watcher")
        assert found is not None
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(found.put(CLUSTER_KEY, b"forged"), REFUSED_WITHIN * 3)
    assert await watcher_kv.get(CLUSTER_KEY) == b"uid-of-the-cluster"


async def test_the_monitor_leads_through_its_own_lease_only(secured: SecuredBus) -> None:
    """One leader-election mechanism (decision 0025): the monitor's lease sits beside the
    planner's and the executor's, and it may touch no other."""
    planner = await secured.bus(PLANNER)
    monitor = await secured.bus(MONITOR)
    planner_leases = await NatsLeaseStore.open(planner.client, "kaiwo-leases", duration_seconds=5)
    assert await planner_leases.claim("planner", "planner-0") is not None

    leases = await NatsLeaseStore.open(monitor.client, "kaiwo-leases", duration_seconds=5)
    revision = await leases.claim("monitor", "monitor-0")
    assert revision is not None
    renewed = await leases.renew("monitor", "monitor-0", revision=revision)
    assert renewed is not None
    assert await planner_leases.holder("monitor") == "monitor-0"
    with pytest.raises(asyncio.TimeoutError):
        await asyncio.wait_for(leases.claim("executor", "monitor-0"), REFUSED_WITHIN * 3)
    await leases.release("monitor", revision=renewed)
    assert await planner_leases.holder("monitor") is None


async def test_the_subscriber_reads_the_public_events_and_nothing_else(
    secured: SecuredBus,
) -> None:
    public = public_workload_subject(namespace="team-a", kind="KaiwoJob", uid=UID)
    planner = await secured.bus(PLANNER)
    watcher = await secured.bus(WATCHER)
    ack = await planner.publish_raw(public, body=b"{}", headers={"Nats-Msg-Id": "told"})
    assert ack.stream == PUBLIC_STREAM
    with pytest.raises(BusError):  # only the planner tells subscribers anything
        await watcher.publish_raw(public, body=b"{}", headers={"Nats-Msg-Id": "forged"})
    errors: list[str] = []

    async def collect(error: Exception) -> None:
        errors.append(str(error).lower())

    subscriber = await connect_client(secured.connection(SUBSCRIBER), error_cb=collect)
    try:
        js = subscriber.jetstream(timeout=REFUSED_WITHIN)
        # The public stream: an ordered (ephemeral) consumer and a durable one of any name.
        ordered = await js.subscribe("kaiwo.public.>", stream=PUBLIC_STREAM, ordered_consumer=True)
        assert (await ordered.next_msg(timeout=ARRIVES_WITHIN)).subject == public
        durable = await js.pull_subscribe("kaiwo.public.>", durable="my-tool", stream=PUBLIC_STREAM)
        [message] = await durable.fetch(1, timeout=ARRIVES_WITHIN)
        await message.ack()
        # Nothing else: no internal subject, stream or consumer.
        internal = await subscriber.subscribe("kaiwo.obs.>")
        await subscriber.flush(timeout=ARRIVES_WITHIN)
        await watcher.publish_raw(
            observed_subject(kind="Pod", namespace="team-a", uid=UID),
            body=b"{}",
            headers={"Nats-Msg-Id": "pod"},
        )
        refused = await asyncio.gather(
            internal.next_msg(timeout=REFUSED_WITHIN),
            js.stream_info(OBSERVED_STREAM),
            js.pull_subscribe("kaiwo.obs.>", durable=SUBSCRIBER, stream=OBSERVED_STREAM),
            js.subscribe("kaiwo.plan.>", stream=PLAN_STREAM, ordered_consumer=True),
            return_exceptions=True,
        )
        assert [type(answer) for answer in refused] == [nats.errors.TimeoutError] * 4
        await subscriber.publish(public, b"{}")
        await subscriber.flush(timeout=ARRIVES_WITHIN)
        await asyncio.sleep(0.2)
    finally:
        await subscriber.close()
    assert any("permissions violation for subscription" in e and "kaiwo.obs.>" in e for e in errors)
    assert any("permissions violation for publish" in e and public.lower() in e for e in errors)
    assert await stored(await secured.bus(ADMIN), PUBLIC_STREAM) == 1


async def test_partitioned_planners_and_executors_hold_their_own_partition_leases_only(
    tmp_path: Path,
) -> None:
    """Decision 0030: with partitions each planner replica reads the findings by sequence and
    claims ``planner.p<k>``; neither role may touch the other's partition leases."""
    topology = bus_topology(partitions=4)
    credentials = write_credentials(tmp_path / "credentials", operator_identities(topology))
    async with NatsServer(config=credentials.server_config.read_text()) as server:
        secured = SecuredBus(server=server, credentials=credentials, topology=topology, opened=[])
        try:
            admin = await secured.bus(ADMIN)
            await admin.ensure_streams()
            planner = await secured.bus(PLANNER)
            executor = await secured.bus(EXECUTOR)

            planner_leases = await NatsLeaseStore.open(
                planner.client, "kaiwo-leases", duration_seconds=5
            )
            assert await planner_leases.claim("planner.member.pod-a/1", "pod-a/1") is not None
            assert await planner_leases.claim("planner.p3", "pod-a/1") is not None
            assert await planner_leases.names("planner.member.") == ("planner.member.pod-a/1",)
            assert await planner.read_next_stored("KAIWO_MON", 1, subjects="kaiwo.mon.>") is None

            executor_leases = await NatsLeaseStore.open(
                executor.client, "kaiwo-leases", duration_seconds=5
            )
            assert await executor_leases.claim("executor.p3", "pod-b/2") is not None
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(
                    executor_leases.claim("planner.p2", "pod-b/2"), REFUSED_WITHIN * 3
                )
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(
                    planner_leases.claim("executor.p2", "pod-a/1"), REFUSED_WITHIN * 3
                )
            # The executor reads by sequence nothing of the monitor's.
            with pytest.raises(BusError):
                await asyncio.wait_for(
                    executor.read_next_stored("KAIWO_MON", 1, subjects="kaiwo.mon.>"),
                    REFUSED_WITHIN * 3,
                )
        finally:
            for bus in secured.opened:
                await bus.close()


async def test_a_namespace_subscriber_reads_its_namespace_and_nothing_else(
    tmp_path: Path,
) -> None:
    """``kaiwo nats credentials --subscriber-namespace team-a`` (decision 0164): the tool of
    team-a follows team-a's workloads live and through its durable consumer, also what was
    published before it connected, and is refused team-b's, however it asks."""
    topology = bus_topology()
    credentials = write_credentials(
        tmp_path / "credentials",
        (*operator_identities(topology), namespace_subscriber_identity("team-a")),
    )
    own = "subscriber-team-a"
    ours = public_workload_subject(namespace="team-a", kind="KaiwoJob", uid=UID)
    theirs = public_workload_subject(namespace="team-b", kind="KaiwoJob", uid=OTHER_UID)
    async with NatsServer(config=credentials.server_config.read_text()) as server:
        secured = SecuredBus(server=server, credentials=credentials, topology=topology, opened=[])
        try:
            await (await secured.bus(ADMIN)).ensure_streams()
            planner = await secured.bus(PLANNER)
            # Published before the tool connects: it reads them from the stream.
            await planner.publish_raw(theirs, body=b'{"n": "b1"}', headers={"Nats-Msg-Id": "b1"})
            await planner.publish_raw(ours, body=b'{"n": "a1"}', headers={"Nats-Msg-Id": "a1"})
            await planner.publish_raw(theirs, body=b'{"n": "b2"}', headers={"Nats-Msg-Id": "b2"})
            errors: list[str] = []

            async def collect(error: Exception) -> None:
                errors.append(str(error).lower())

            tool = await connect_client(secured.connection(own), error_cb=collect)
            try:
                js = tool.jetstream(timeout=REFUSED_WITHIN)
                durable = await js.pull_subscribe(
                    "kaiwo.public.workload.team-a.>", durable=own, stream=PUBLIC_STREAM
                )
                [missed] = await durable.fetch(5, timeout=ARRIVES_WITHIN)
                assert (missed.subject, missed.data) == (ours, b'{"n": "a1"}')
                await missed.ack()
                live = await tool.subscribe("kaiwo.live.public.workload.team-a.>")
                await tool.flush(timeout=ARRIVES_WITHIN)
                await planner.publish_raw(
                    theirs, body=b'{"n": "b3"}', headers={"Nats-Msg-Id": "b3"}
                )
                await planner.publish_raw(ours, body=b'{"n": "a2"}', headers={"Nats-Msg-Id": "a2"})
                assert (await live.next_msg(timeout=ARRIVES_WITHIN)).data == b'{"n": "a2"}'
                [later] = await durable.fetch(5, timeout=ARRIVES_WITHIN)
                assert later.data == b'{"n": "a2"}'
                await later.ack()
                # team-b, every way: live, a consumer filtered wider or to team-b (under its
                # own name or another), an ordered consumer, a stored read by sequence, the
                # stream's info (it lists subjects), another tool's consumer.
                wide = await tool.subscribe("kaiwo.live.public.>")
                await tool.flush(timeout=ARRIVES_WITHIN)
                refused = await asyncio.gather(
                    wide.next_msg(timeout=REFUSED_WITHIN),
                    js.pull_subscribe("kaiwo.public.>", durable="wide", stream=PUBLIC_STREAM),
                    js.add_consumer(
                        PUBLIC_STREAM,
                        ConsumerConfig(name=own, durable_name=own, filter_subject="kaiwo.public.>"),
                    ),
                    js.pull_subscribe(
                        "kaiwo.public.workload.team-b.>", durable="team-b", stream=PUBLIC_STREAM
                    ),
                    js.subscribe(
                        "kaiwo.public.workload.team-a.>",
                        stream=PUBLIC_STREAM,
                        ordered_consumer=True,
                    ),
                    js.get_msg(PUBLIC_STREAM, seq=1),
                    js.stream_info(PUBLIC_STREAM),
                    return_exceptions=True,
                )
                assert [type(answer) for answer in refused] == [nats.errors.TimeoutError] * 7
                # The one create subject it may use, with a wider filter in the request: the
                # server compares the two and refuses.
                allowed = (
                    f"$JS.API.CONSUMER.CREATE.{PUBLIC_STREAM}.{own}.kaiwo.public.workload.team-a.>"
                )
                for config in (
                    {"durable_name": own, "name": own, "filter_subject": "kaiwo.public.>"},
                    {"durable_name": own, "name": own, "filter_subjects": ["kaiwo.public.>"]},
                ):
                    request = {"stream_name": PUBLIC_STREAM, "config": config}
                    answer = await tool.request(
                        allowed, json.dumps(request).encode(), timeout=ARRIVES_WITHIN
                    )
                    assert "error" in json.loads(answer.data)
                await tool.publish(ours, b"{}")
                await tool.flush(timeout=ARRIVES_WITHIN)
                await asyncio.sleep(0.2)
            finally:
                await tool.close()
            admin = (await secured.bus(ADMIN)).client.jetstream()
            # Its consumer stayed filtered to team-a: the wider filter was refused.
            info = await admin.consumer_info(PUBLIC_STREAM, own)
            assert info.config.filter_subject == "kaiwo.public.workload.team-a.>"
            assert await stored(await secured.bus(ADMIN), PUBLIC_STREAM) == 5
        finally:
            for bus in secured.opened:
                await bus.close()
    assert any(
        "permissions violation for subscription" in e and "kaiwo.live.public.>" in e for e in errors
    )
    assert any("permissions violation for publish" in e and ours.lower() in e for e in errors)


async def test_the_subscriber_key_neither_reads_nor_deletes_a_namespace_keys_consumer(
    tmp_path: Path,
) -> None:
    """Decision 0259: the ``subscriber`` key names consumers of its choice on KAIWO_PUBLIC,
    and could read, acknowledge away and delete team-a's, or, through the create subject
    that names no consumer, widen its filter or give it a one-second ``inactive_threshold``
    (the server then deletes it). The server now refuses each of those requests; the key
    keeps its consumers of any other name, and team-a's tool reads what was published for
    it."""
    topology = bus_topology()
    credentials = write_credentials(
        tmp_path / "credentials",
        (*operator_identities(topology), namespace_subscriber_identity("team-a")),
    )
    own = "subscriber-team-a"
    ours = public_workload_subject(namespace="team-a", kind="KaiwoJob", uid=UID)
    async with NatsServer(config=credentials.server_config.read_text()) as server:
        secured = SecuredBus(server=server, credentials=credentials, topology=topology, opened=[])
        tool = await connect_client(secured.connection(own))
        subscriber = await connect_client(secured.connection(SUBSCRIBER))
        try:
            await (await secured.bus(ADMIN)).ensure_streams()
            planner = await secured.bus(PLANNER)
            tools = tool.jetstream(timeout=REFUSED_WITHIN)
            durable = await tools.pull_subscribe(
                "kaiwo.public.workload.team-a.>", durable=own, stream=PUBLIC_STREAM
            )
            await planner.publish_raw(ours, body=b'{"n": "a1"}', headers={"Nats-Msg-Id": "a1"})
            js = subscriber.jetstream(timeout=REFUSED_WITHIN)
            stolen = await js.pull_subscribe_bind(durable=own, stream=PUBLIC_STREAM)
            refused = await asyncio.gather(
                stolen.fetch(1, timeout=REFUSED_WITHIN),
                js.consumer_info(PUBLIC_STREAM, own),
                js.delete_consumer(PUBLIC_STREAM, own),
                js.add_consumer(
                    PUBLIC_STREAM,
                    ConsumerConfig(name=own, durable_name=own, filter_subject="kaiwo.public.>"),
                ),
                return_exceptions=True,
            )
            assert [type(answer) for answer in refused] == [nats.errors.TimeoutError] * 4
            unnamed = {
                "stream_name": PUBLIC_STREAM,
                "config": {
                    "name": own,
                    "filter_subject": "kaiwo.public.>",
                    "ack_policy": "explicit",
                    "inactive_threshold": 1_000_000_000,
                },
            }
            with pytest.raises(nats.errors.TimeoutError):
                await subscriber.request(
                    f"$JS.API.CONSUMER.CREATE.{PUBLIC_STREAM}",
                    json.dumps(unnamed).encode(),
                    timeout=REFUSED_WITHIN,
                )
            # Its own consumers, of any other name, as before.
            mine = await js.pull_subscribe(
                "kaiwo.public.>", durable="my-tool", stream=PUBLIC_STREAM
            )
            [seen] = await mine.fetch(1, timeout=ARRIVES_WITHIN)
            assert seen.subject == ours
            ephemeral = await js.pull_subscribe("kaiwo.public.>", stream=PUBLIC_STREAM)
            assert len(await ephemeral.fetch(1, timeout=ARRIVES_WITHIN)) == 1
            await asyncio.sleep(1.5)  # past the one-second inactive_threshold refused above
            [message] = await durable.fetch(1, timeout=ARRIVES_WITHIN)
            assert message.data == b'{"n": "a1"}'
            info = await tools.consumer_info(PUBLIC_STREAM, own)
            assert info.config.filter_subject == "kaiwo.public.workload.team-a.>"
        finally:
            await subscriber.close()
            await tool.close()
            for bus in secured.opened:
                await bus.close()


async def make_capturing_bucket(bus: NatsBus, bucket: str, captured: str) -> None:
    """What the key may do by its own right: create the bucket's stream, subjects its choice,
    and everything else as a bucket's (so that nats-py's own look at it passes)."""
    await bus.client.jetstream().add_stream(
        StreamConfig(
            name=f"KV_{bucket}",
            subjects=[f"$KV.{bucket}.>", captured],
            max_msgs_per_subject=1,
            allow_rollup_hdrs=True,
            deny_delete=True,
            allow_direct=True,
            max_age=60.0,
        )
    )


async def test_a_bucket_made_to_capture_other_subjects_is_refused_by_every_service(
    secured: SecuredBus,
) -> None:
    """Decision 0222: the server checks a stream's name against the key, not its subjects.
    A service that finds its bucket capturing more than its own keys refuses it, naming them,
    rather than write its state where the maker reads other identities' replies."""
    gateway = await secured.bus(GATEWAY)
    await make_capturing_bucket(gateway, "kaiwo-autoscaler", "_INBOX.planner.>")
    with pytest.raises(ForeignBucketError) as refused:
        await NatsKeyValue.open(gateway.client, "kaiwo-autoscaler")
    assert str(refused.value) == (
        "the key-value bucket 'kaiwo-autoscaler' captures ['$KV.kaiwo-autoscaler.>', "
        "'_INBOX.planner.>'], not only its own keys ($KV.kaiwo-autoscaler.>): someone made it "
        "to read other subjects; delete the stream KV_kaiwo-autoscaler as the administrator "
        "(nats stream rm KV_kaiwo-autoscaler) and start again"
    )

    planner = await secured.bus(PLANNER)
    await make_capturing_bucket(planner, "kaiwo-leases", "_INBOX.executor.>")
    with pytest.raises(ForeignBucketError, match="'kaiwo-leases' captures"):
        await NatsLeaseStore.open(planner.client, "kaiwo-leases", duration_seconds=5)

    watcher = await secured.bus(WATCHER)
    await make_capturing_bucket(watcher, "kaiwo-watcher", "_INBOX.monitor.>")
    recorder = await secured.bus(RECORDER)
    with pytest.raises(ForeignBucketError, match="'kaiwo-watcher' captures"):
        await NatsKeyValue.open_existing(recorder.client, "kaiwo-watcher")


async def test_provisioning_declares_every_bucket_so_no_service_key_makes_one_first(
    secured: SecuredBus,
) -> None:
    """``kaiwo nats provision`` (the administrator) declares every state bucket and the
    leases, those of services that are off too: a key's create of one with other subjects is
    then refused by the server (the name is taken), and the services open them as before."""
    settings = ServiceSettings(
        nats_url=secured.server.url, nats_credentials_file=secured.credentials.seed(ADMIN)
    )
    await _provision(settings, within=30, messenger=False)

    admin = await secured.bus(ADMIN)
    js = admin.client.jetstream()
    for bucket in (*STATE_BUCKETS, LEASE_BUCKET):
        info = await js.stream_info(f"KV_{bucket}")
        assert info.config.subjects == [f"$KV.{bucket}.>"], bucket
    assert (await js.stream_info(f"KV_{LEASE_BUCKET}")).config.max_age == 15.0

    for name, bucket in ((GATEWAY, "kaiwo-autoscaler"), (MONITOR, "kaiwo-monitor")):
        service = await secured.bus(name)
        with pytest.raises(nats.js.errors.BadRequestError):
            await make_capturing_bucket(service, bucket, "_INBOX.planner.>")
        kv = await NatsKeyValue.open(service.client, bucket)
        await kv.put("state", b"kept")
        assert await kv.get("state") == b"kept"
