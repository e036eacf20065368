"""The autoscaler around its pure tick: reports taken in, decisions published once, the
windows saved to the bucket and continued by the next leader. Clock and bucket injected."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kaiwo_contracts.events.autoscaling import ActiveRequestsV1, ModelLoad, ScaleDecidedV1
from kaiwo_contracts.events.envelope import Envelope
from kaiwo_contracts.plans import ObjectRef
from kaiwo_gateway.autoscaler_leader import Autoscaler, AutoscalerSettings, Backlog
from kaiwo_gateway.domain.catalog import Catalog
from kaiwo_gateway.domain.load import RequestCounts, model_ref
from kaiwo_gateway.load_reports import LoadReporter
from kaiwo_gateway.metrics import GatewayMetrics
from kaiwo_runtime.kv import MemoryKeyValue

from tests.unit.gateway.model_objects import model_object

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SETTINGS = AutoscalerSettings(interval_seconds=10.0, window_seconds=20.0)  # two samples
LLM = ObjectRef(
    api_version="kubeai.org/v1", kind="Model", name="llm", namespace="team-a", uid="m-1"
)

pytestmark = pytest.mark.asyncio


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


class Published:
    def __init__(self) -> None:
        self.sent: list[tuple[str, Envelope[Any]]] = []

    async def publish(self, envelope: Envelope[Any], subject: str) -> None:
        self.sent.append((subject, envelope))

    def decisions(self) -> list[ScaleDecidedV1]:
        return [e.data for _, e in self.sent if isinstance(e.data, ScaleDecidedV1)]


def catalog_with(**spec: Any) -> Catalog:
    catalog = Catalog()
    catalog.apply(
        kind="Model",
        event="ADDED",
        obj=model_object("llm", uid="m-1", generation=2, targetRequests=10, **spec),
    )
    return catalog


def load(gateway: str, active: int, waiting: int = 0) -> ActiveRequestsV1:
    models = (
        (ModelLoad(model=LLM, active_requests=active, waiting_requests=waiting),) if active else ()
    )
    return ActiveRequestsV1(gateway=gateway, interval_seconds=10.0, models=models)


def autoscaler(
    catalog: Catalog,
    bucket: MemoryKeyValue,
    clock: Clock,
    out: Published,
    *,
    backlog: Backlog | None = None,
) -> Autoscaler:
    return Autoscaler(
        catalog=catalog,
        publisher=out,
        state=bucket,
        clock=clock,
        settings=SETTINGS,
        metrics=GatewayMetrics(),
        backlog=backlog,
    )


async def test_a_tick_sums_the_replicas_publishes_the_decision_once_and_saves_the_window() -> None:
    clock, bucket, out = Clock(), MemoryKeyValue(), Published()
    scaler = autoscaler(catalog_with(replicas=1, maxReplicas=5), bucket, clock, out)
    await scaler.restore()
    scaler.receive(load("gw-a", 30))
    scaler.receive(load("gw-b", 50))

    await scaler.tick_once()
    # (0 + 80) / 2 = 40 active requests on average, target 10: 4 replicas.
    [decision] = out.decisions()
    assert (decision.from_replicas, decision.replicas, decision.generation) == (1, 4, 2)
    assert (decision.active_requests, decision.average_active_requests) == (80.0, 40.0)
    assert (decision.window_seconds, decision.samples, decision.target_requests) == (20.0, 2, 10)
    assert decision.cause == "load"
    subject, envelope = out.sent[0]
    assert subject == "kaiwo.gateway.scale.team-a.m-1"
    assert (envelope.correlationid, envelope.subject) == ("m-1", "team-a/llm")
    assert json.loads(await bucket.get("m-1") or b"") == {
        "samples": [0.0, 80.0],
        "fewerWantedSince": None,
    }

    # The Model's new replicas have not been observed yet: (80 + 0) / 2 decides 4 again,
    # which is not sent again.
    clock.advance(10)
    scaler.receive(load("gw-a", 0))
    scaler.receive(load("gw-b", 0))
    assert await scaler.tick_once() == ()
    assert len(out.decisions()) == 1


async def test_the_next_leader_continues_the_saved_window() -> None:
    clock, bucket, out = Clock(), MemoryKeyValue(), Published()
    first = autoscaler(catalog_with(replicas=1, maxReplicas=9), bucket, clock, out)
    await first.restore()
    first.receive(load("gw-a", 60))
    await first.tick_once()  # samples (0, 60): average 30 -> 3

    clock.advance(10)
    successor = autoscaler(catalog_with(replicas=3, maxReplicas=9), bucket, clock, Published())
    await successor.restore()
    successor.receive(load("gw-a", 100))
    [decision] = await successor.tick_once()
    # (60 + 100) / 2 = 80 -> 8: the 60 of the first leader's tick is still in the window.
    assert (decision.from_replicas, decision.replicas, decision.average) == (3, 8, 80.0)


async def test_a_waiting_request_scales_a_model_at_zero_without_a_tick() -> None:
    clock, bucket, out = Clock(), MemoryKeyValue(), Published()
    scaler = autoscaler(catalog_with(), bucket, clock, out)
    scaler.receive(load("gw-a", 1, waiting=1))

    [decision] = await scaler.scale_from_zero_once()
    assert (decision.from_replicas, decision.replicas, decision.cause) == (0, 1, "request")
    assert out.decisions()[0].reason == "scale from zero: 1 request waits for a ready endpoint"
    assert await scaler.scale_from_zero_once() == ()  # asked once per generation
    assert await bucket.get("m-1") is None  # no sample was taken


class ReportArrivesDuringTheRead:
    """The backlog read, during which a replica's report that a request waits comes in."""

    def __init__(self) -> None:
        self.scaler: Autoscaler | None = None

    async def stored_requests(self) -> dict[str, int]:
        assert self.scaler is not None
        self.scaler.receive(load("gw-a", 1, waiting=1))
        return {}


async def test_a_request_waiting_when_a_tick_decides_is_named_as_the_cause() -> None:
    clock, bucket, out = Clock(), MemoryKeyValue(), Published()
    stream = ReportArrivesDuringTheRead()
    scaler = autoscaler(catalog_with(), bucket, clock, out, backlog=stream)
    stream.scaler = scaler
    await scaler.restore()

    # The tick alone would scale to 1 replica for load ((0 + 1) / 2 = 0.5 active requests,
    # target 10); the waiting request asked for that replica, and is named.
    [decision] = await scaler.tick_once()
    assert (decision.from_replicas, decision.replicas, decision.cause) == (0, 1, "request")
    assert [d.cause for d in out.decisions()] == ["request"]
    assert await scaler.scale_from_zero_once() == ()  # the same decision, not sent again
    assert json.loads(await bucket.get("m-1") or b"")["samples"] == [0.0, 1.0]


async def test_a_model_no_longer_autoscaled_loses_its_window_and_damaged_ones_start_empty() -> None:
    clock, bucket, out = Clock(), MemoryKeyValue(), Published()
    await bucket.put("m-1", json.dumps({"samples": [4.0, 4.0]}).encode())
    await bucket.put("m-gone", b"{not json")
    scaler = autoscaler(catalog_with(replicas=1, autoscalingDisabled=True), bucket, clock, out)
    await scaler.restore()
    scaler.receive(load("gw-a", 0))

    await scaler.tick_once()
    assert out.decisions() == []
    assert [key async for key, _ in bucket.items()] == ["m-gone"]


async def test_a_model_deleted_or_no_longer_autoscaled_loses_its_autoscaler_series() -> None:
    clock, out, metrics = Clock(), Published(), GatewayMetrics()
    catalog = catalog_with(replicas=1)
    catalog.apply(
        kind="Model",
        event="ADDED",
        obj=model_object("chat", uid="m-2", generation=1, replicas=1, targetRequests=10),
    )
    scaler = Autoscaler(
        catalog=catalog,
        publisher=out,
        state=MemoryKeyValue(),
        clock=clock,
        settings=SETTINGS,
        metrics=metrics,
    )

    def series() -> list[str]:
        return [
            line
            for line in metrics.registry.exposition().decode().splitlines()
            if line.startswith("kaiwo_autoscaler_a")
        ]

    scaler.receive(load("gw-a", 6))
    await scaler.tick_once()
    # llm: samples (0, 6); chat: (0, 0).
    assert series() == [
        'kaiwo_autoscaler_active_requests{model="chat",namespace="team-a"} 0.0',
        'kaiwo_autoscaler_active_requests{model="llm",namespace="team-a"} 6.0',
        'kaiwo_autoscaler_average_active_requests{model="chat",namespace="team-a"} 0.0',
        'kaiwo_autoscaler_average_active_requests{model="llm",namespace="team-a"} 3.0',
    ]

    catalog.apply(
        kind="Model",
        event="DELETED",
        obj=model_object("llm", uid="m-1", version="5", generation=2),
    )
    disabled = model_object("chat", uid="m-2", version="6", generation=2, replicas=1)
    disabled["spec"]["autoscalingDisabled"] = True
    catalog.apply(kind="Model", event="MODIFIED", obj=disabled)
    clock.advance(10)
    scaler.receive(load("gw-a", 0))
    await scaler.tick_once()

    # Before, both kept their last values for good.
    assert series() == []


async def test_without_a_fresh_report_the_tick_is_skipped() -> None:
    clock, bucket, out = Clock(), MemoryKeyValue(), Published()
    scaler = autoscaler(catalog_with(replicas=3), bucket, clock, out)
    scaler.receive(load("gw-a", 0))
    clock.advance(31)  # three intervals of the report and a second

    assert await scaler.tick_once() == ()
    assert await bucket.get("m-1") is None


async def test_a_replica_reports_its_requests_per_model() -> None:
    counts, out = RequestCounts(), Published()
    reporter = LoadReporter(
        counts=counts,
        publisher=out,
        replica="gw-a/7",
        interval_seconds=10.0,
        clock=Clock(),
        metrics=GatewayMetrics(),
    )
    key = model_ref(uid="m-1", namespace="team-a", name="llm")
    counts.started(key)
    counts.started(key)
    counts.wait_started(key)

    await reporter.publish_once()
    [(subject, envelope)] = out.sent
    assert subject == "kaiwo.gateway.load._cluster.gw-a_2F7"
    assert envelope.correlationid == "gw-a/7"
    assert envelope.data == ActiveRequestsV1(
        gateway="gw-a/7",
        interval_seconds=10.0,
        models=(ModelLoad(model=LLM, active_requests=2, waiting_requests=1),),
    )


class Stream:
    """The messenger's request stream as the leader reads it: stored requests per namespace,
    or a failure."""

    def __init__(self, stored: dict[str, int] | None) -> None:
        self.stored = stored

    async def stored_requests(self) -> dict[str, int]:
        if self.stored is None:
            raise TimeoutError("no answer from the stream")
        return self.stored


def messenger_load(gateway: str, in_hand: int) -> ActiveRequestsV1:
    models = (ModelLoad(model=LLM, active_requests=in_hand, messages=in_hand),)
    return ActiveRequestsV1(gateway=gateway, interval_seconds=10.0, models=models)


async def test_the_leader_adds_the_streams_backlog_and_ticks_without_it_when_unread() -> None:
    for stored, expected in ((400, 400.0), (None, 20.0)):
        clock, bucket, out = Clock(), MemoryKeyValue(), Published()
        backlog = Stream(None if stored is None else {"team-a": stored})
        catalog = catalog_with(replicas=1, maxReplicas=50)
        scaler = autoscaler(catalog, bucket, clock, out, backlog=backlog)
        await scaler.restore()
        scaler.receive(messenger_load("gw-a", 20))

        await scaler.tick_once()

        # 400 stored, 20 of them in hand: 400 in all; (0 + 400) / 2 = 200 -> 20 replicas.
        # Unread: the 20 in hand, (0 + 20) / 2 = 10 -> 1 replica, which it has already.
        assert json.loads(await bucket.get("m-1") or b"")["samples"] == [0.0, expected]
        assert [d.replicas for d in out.decisions()] == ([20] if stored else [])


async def test_the_load_crossing_max_replicas_is_restated_each_time_it_crosses() -> None:
    """At ``maxReplicas: 2`` the load goes above it, back within, above again, at one
    generation: each crossing is published (as the replicas restated), none twice, and the
    bucket keeps that the load is held back (decision 0172), with the demand told; the
    demand rising while held back (3 to 5, the window filling) is told too (decision 0175),
    a fall to 3 of 5 is not."""
    clock, bucket, out = Clock(), MemoryKeyValue(), Published()
    scaler = autoscaler(catalog_with(replicas=2, maxReplicas=2), bucket, clock, out)
    await scaler.restore()
    # Window of two samples, target 10: (0 + 50) / 2 = 25 -> 3 wanted, above 2.
    for active in (50, 50, 10, 10, 50, 50):
        scaler.receive(load("gw-a", active))
        await scaler.tick_once()
        clock.advance(10)

    found = [(d.from_replicas, d.replicas, d.average_active_requests) for d in out.decisions()]
    assert found == [(2, 2, 25.0), (2, 2, 50.0), (2, 2, 10.0), (2, 2, 30.0), (2, 2, 50.0)]
    ids = [envelope.id for _, envelope in out.sent]
    assert len(set(ids)) == 5
    assert json.loads(await bucket.get("m-1") or b"") == {
        "samples": [50.0, 50.0],
        "fewerWantedSince": None,
        "heldBack": True,
        "toldDemand": 5,
        "toldAt": "2026-03-01T12:00:50+00:00",  # the sixth tick's
    }


async def test_a_scale_up_held_back_by_the_cluster_ceiling_is_published_again_half_hourly() -> None:
    """A Model without ``maxReplicas`` at 3 replicas, the cluster's ceiling (the planner's):
    the load wants 5, every tick decides 3 -> 5, which the planner does not carry out. The
    decision is published once, then again after 30 minutes under a new id, and not in
    between (decision 0238): the planner forgets a decision an hour older than the newest of
    any Model, and its condition would then say the ceiling no longer limits the Model.
    Before, it was published once for good."""
    clock, bucket, out = Clock(), MemoryKeyValue(), Published()
    scaler = autoscaler(catalog_with(replicas=3), bucket, clock, out)
    await bucket.put("m-1", json.dumps({"samples": [50.0, 50.0]}).encode())
    await scaler.restore()

    published_at = []
    for tick in range(2 * 180 + 1):  # an hour of ticks of 10 s, and the first
        scaler.receive(load("gw-a", 50))  # (50 + 50) / 2 = 50, target 10: 5 wanted
        before = len(out.sent)
        await scaler.tick_once()
        if len(out.sent) > before:
            published_at.append(timedelta(seconds=10 * tick))
        clock.advance(10)

    assert published_at == [timedelta(0), timedelta(minutes=30), timedelta(minutes=60)]
    assert [(d.from_replicas, d.replicas) for d in out.decisions()] == [(3, 5)] * 3
    assert len({envelope.id for _, envelope in out.sent}) == 3


class FailingFirst(Published):
    """A publisher whose first ``failures`` publishes fail (NATS unreachable)."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    async def publish(self, envelope: Envelope[Any], subject: str) -> None:
        if self.failures > 0:
            self.failures -= 1
            raise ConnectionError("nats: no servers available")
        await super().publish(envelope, subject)


async def test_a_restatement_that_failed_to_publish_is_published_at_the_next_tick() -> None:
    """The load of a Model at ``maxReplicas: 2`` stays at 5 wanted; the tick that finds it
    held back cannot publish. The next tick tells it: the saved state was left as before
    (decision 0175), where it used to say "told" and nothing was ever published."""
    clock, bucket, out = Clock(), MemoryKeyValue(), FailingFirst(failures=1)
    await bucket.put("m-1", json.dumps({"samples": [50.0, 50.0]}).encode())
    scaler = autoscaler(catalog_with(replicas=2, maxReplicas=2), bucket, clock, out)
    await scaler.restore()

    scaler.receive(load("gw-a", 50))
    assert await scaler.tick_once() == ()
    assert json.loads(await bucket.get("m-1") or b"") == {"samples": [50.0, 50.0]}

    clock.advance(10)
    scaler.receive(load("gw-a", 50))
    [restated] = await scaler.tick_once()
    assert (restated.from_replicas, restated.replicas, restated.average) == (2, 2, 50.0)
    assert restated.reason.startswith("held at spec.maxReplicas 2, 5 wanted")
    assert len(out.decisions()) == 1
    assert json.loads(await bucket.get("m-1") or b"") == {
        "samples": [50.0, 50.0],
        "fewerWantedSince": None,
        "heldBack": True,
        "toldDemand": 5,
        "toldAt": "2026-03-01T12:00:10+00:00",
    }


async def test_a_scale_down_that_failed_to_publish_is_decided_again_at_the_next_tick() -> None:
    """Fewer replicas wanted for the whole delay (30 s): the scale down 3 -> 1 cannot be
    published. The next tick decides it again, where the state said the delay had started
    over (another 30 s at 3 replicas for nothing)."""
    clock, bucket, out = Clock(), MemoryKeyValue(), FailingFirst(failures=1)
    since = (T0 - timedelta(seconds=30)).isoformat()
    await bucket.put("m-1", json.dumps({"samples": [0.0, 0.0], "fewerWantedSince": since}).encode())
    catalog = catalog_with(replicas=3, minReplicas=1, maxReplicas=5, scaleDownDelaySeconds=30)
    scaler = autoscaler(catalog, bucket, clock, out)
    await scaler.restore()

    scaler.receive(load("gw-a", 0))
    assert await scaler.tick_once() == ()

    clock.advance(10)
    scaler.receive(load("gw-a", 0))
    [down] = await scaler.tick_once()
    assert (down.from_replicas, down.replicas) == (3, 1)
    assert [(d.from_replicas, d.replicas) for d in out.decisions()] == [(3, 1)]
