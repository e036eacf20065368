"""The monitor service against the fake API server, an in-memory JetStream and a fake scraper."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest
from kaiwo_contracts.events import PAYLOAD_TYPES, Envelope
from kaiwo_contracts.events.monitor import UnderutilizedV1, UtilizationV1
from kaiwo_contracts.events.streams import MONITOR_STREAM, bus_topology
from kaiwo_contracts.plans import ObjectRef
from kaiwo_kube import resources
from kaiwo_monitor.__main__ import StartupError, serve
from kaiwo_monitor.domain.samples import GpuSample
from kaiwo_monitor.domain.utilization import UtilizationState
from kaiwo_monitor.metrics import MonitorMetrics
from kaiwo_monitor.service import MonitorService
from kaiwo_monitor.settings import LEASE_ROLE, MonitorSettings
from kaiwo_monitor.state_store import StateStore, decode_state, encode_state
from kaiwo_runtime.kv import MemoryKeyValue
from kaiwo_runtime.leases import MemoryLeaseStore
from kaiwo_runtime.memory_bus import MemoryBus
from kaiwo_runtime.memory_jetstream import MemoryJetStream
from kaiwo_runtime.single_active import SingleActive
from kaiwo_runtime.startup import LeaseLostError

from tests.unreachable_bucket import UnansweredReads

if TYPE_CHECKING:  # conftest is not importable under --import-mode=importlib
    from conftest import Cluster, FakeScraper

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
SEEN = datetime(2026, 3, 1, 11, 59, 55, tzinfo=UTC)
UID_TRAIN = "11111111-1111-4111-8111-111111111111"
UID_CHAT = "22222222-2222-4222-8222-222222222222"
TRAIN = ObjectRef(
    api_version="kaiwo.silogen.ai/v1alpha1",
    kind="KaiwoJob",
    name="train",
    namespace="team-a",
    uid=UID_TRAIN,
)
CHAT = ObjectRef(
    api_version="kaiwo.silogen.ai/v1alpha1",
    kind="KaiwoService",
    name="chat",
    namespace="team-b",
    uid=UID_CHAT,
)
LEASE_SECONDS = 1.0
"""Renewals and claims every 0.13 s; a leader stops 0.67 s after its last renewal."""
IDLE_TRAIN = [
    GpuSample(namespace="team-a", pod="train-0", gpu="0", percent=0.2, at=SEEN),
    GpuSample(namespace="team-a", pod="train-0", gpu="1", percent=0.4, at=SEEN),
]
BUSY_CHAT = [GpuSample(namespace="team-b", pod="chat-0", gpu="0", percent=50.0, at=SEEN)]


class Clock:
    def __init__(self, now: datetime = T0) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def workload_pod(
    name: str, ref: ObjectRef, *, gpus: int, workload_type: str, phase: str = "Running"
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ref.namespace,
            "labels": {
                "kaiwo.silogen.ai/run-id": ref.uid,
                "kaiwo.silogen.ai/type": workload_type,
                "kaiwo.silogen.ai/name": ref.name,
            },
        },
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"requests": {"amd.com/gpu": str(gpus)}},
                }
            ]
        },
        "status": {"phase": phase},
    }


def kaiwo_config(resource_monitoring: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfig",
        "metadata": {"name": "kaiwo"},
        "spec": {"resourceMonitoring": resource_monitoring},
    }


def settings(**overrides: Any) -> MonitorSettings:
    values: dict[str, Any] = {
        "monitor_metrics_endpoint": "http://prometheus.example:9090",
        "monitor_polling_interval_seconds": 0.05,
    }
    return MonitorSettings(**(values | overrides))


def published(jetstream: MemoryJetStream) -> list[tuple[str, Envelope[Any]]]:
    """Every monitor event stored, typed by its ``ce-type``."""
    events = []
    for message in jetstream.stream_messages(MONITOR_STREAM):
        payload = PAYLOAD_TYPES[message.headers["ce-type"]]
        events.append((message.subject, Envelope[payload].from_nats(message.headers, message.body)))  # type: ignore[valid-type]
    return events


def topics_of(jetstream: MemoryJetStream) -> list[tuple[str, str]]:
    """(topic, uid) of every monitor event stored."""
    return [(s.split(".")[2], s.split(".")[4]) for s, _ in published(jetstream)]


def sample_value(metrics: MonitorMetrics, name: str, labels: dict[str, str] | None = None) -> Any:
    return metrics.registry.registry.get_sample_value(name, labels or {})


@pytest.fixture
def cluster_with_workloads(cluster: Cluster) -> Cluster:
    cluster.put(resources.POD, workload_pod("train-0", TRAIN, gpus=2, workload_type="job"))
    cluster.put(resources.POD, workload_pod("chat-0", CHAT, gpus=1, workload_type="service"))
    cluster.put(
        resources.POD,
        {"metadata": {"name": "other-0", "namespace": "team-a"}, "status": {"phase": "Running"}},
    )
    return cluster


def lease_time_stands_still() -> float:
    return 0.0


class Kit:
    def __init__(self, cluster: Cluster, jetstream: MemoryJetStream, scraper: FakeScraper) -> None:
        self.cluster = cluster
        self.jetstream = jetstream
        self.scraper = scraper
        self.clock = Clock()
        self.kv = MemoryKeyValue()
        self.leases = MemoryLeaseStore(
            duration_seconds=LEASE_SECONDS, clock=lease_time_stands_still
        )
        """One lease store for every instance, as the NATS bucket is in a deployment. Its time
        stands still: a lease changes hands only when released, never because a loaded
        machine ran the event loop late past its expiry."""

    def service(self, *, holder: str = "monitor-0", **options: Any) -> MonitorService:
        return MonitorService(
            options.pop("bus", MemoryBus(server=self.jetstream, topology=bus_topology())),
            self.cluster.kube,
            scraper=options.pop("scraper", self.scraper),
            clock=options.pop("clock", self.clock),
            settings=options.pop("settings", settings()),
            single_active=SingleActive(
                self.leases, name=LEASE_ROLE, holder=holder, clock=lease_time_stands_still
            ),
            kv=options.pop("kv", self.kv),
            metrics=options.pop("metrics", MonitorMetrics()),
            **options,
        )


@pytest.fixture
def kit(cluster_with_workloads: Cluster, jetstream: MemoryJetStream, scraper: FakeScraper) -> Kit:
    return Kit(cluster_with_workloads, jetstream, scraper)


# ------------------------------------------------------------------ one tick


async def test_a_tick_publishes_utilization_per_workload_and_the_underutilized_one(
    kit: Kit,
) -> None:
    kit.scraper.samples = [*IDLE_TRAIN, *BUSY_CHAT]
    service = kit.service()

    assessment = await service.tick()

    assert assessment is not None
    events = published(kit.jetstream)
    assert [subject for subject, _ in events] == [
        f"kaiwo.mon.utilization.team-a.{UID_TRAIN}",
        f"kaiwo.mon.underutilized.team-a.{UID_TRAIN}",
        f"kaiwo.mon.utilization.team-b.{UID_CHAT}",
    ]
    train_use, train_low, chat_use = (event for _, event in events)
    assert train_use.data == UtilizationV1(
        workload=TRAIN,
        vendor="amd",
        gpu_count=2,
        pod_count=1,
        utilization_ratio=0.003,
        aggregation="Avg",
        window_start=SEEN,
        window_end=SEEN,
        low_utilization_threshold_ratio=0.01,
        underutilized_since=T0,
    )
    assert train_low.data == UnderutilizedV1(
        workload=TRAIN,
        vendor="amd",
        gpu_count=2,
        utilization_ratio=0.003,
        threshold_ratio=0.01,
        idle_since=T0,
        reason="GpuUtilizationLow",
        message="GPU utilization 0.30% of the 2 requested GPU(s) is below the threshold of 1.00%",
    )
    assert chat_use.data == UtilizationV1(
        workload=CHAT,
        vendor="amd",
        gpu_count=1,
        pod_count=1,
        utilization_ratio=0.5,
        aggregation="Avg",
        window_start=SEEN,
        window_end=SEEN,
        low_utilization_threshold_ratio=0.01,
    )
    assert [(e.source, e.time, e.correlationid, e.subject) for _, e in events] == [
        ("/kaiwo/monitor", T0, UID_TRAIN, "team-a/train"),
        ("/kaiwo/monitor", T0, UID_TRAIN, "team-a/train"),
        ("/kaiwo/monitor", T0, UID_CHAT, "team-b/chat"),
    ]
    assert await kit.kv.get(UID_TRAIN) == (
        b'{"belowSince": "2026-03-01T12:00:00+00:00", "belowThreshold": 0.01, '
        b'"idleAggregation": null, "idleSince": null, "idleThreshold": null}'
    )
    assert await kit.kv.get(UID_CHAT) is None


async def test_metrics_of_a_tick(kit: Kit) -> None:
    kit.scraper.samples = [*IDLE_TRAIN, *BUSY_CHAT]
    service = kit.service()
    await service.tick()

    metrics = service.metrics
    gauge = "kaiwo_monitor_gpu_utilization_ratio"
    assert sample_value(
        metrics, gauge, {"namespace": "team-a", "workload_kind": "KaiwoJob"}
    ) == pytest.approx(0.003)
    assert sample_value(
        metrics, gauge, {"namespace": "team-b", "workload_kind": "KaiwoService"}
    ) == pytest.approx(0.5)
    assert sample_value(metrics, "kaiwo_monitor_scrapes_total", {"outcome": "success"}) == 1
    assert (
        sample_value(metrics, "kaiwo_monitor_events_published_total", {"topic": "utilization"}) == 2
    )
    assert (
        sample_value(metrics, "kaiwo_monitor_events_published_total", {"topic": "underutilized"})
        == 1
    )


async def test_the_utilization_gauge_is_emptied_while_scrapes_fail(kit: Kit) -> None:
    """``kaiwo_monitor_gpu_utilization_ratio`` is the use at the last scrape: a scrape that
    fails measured nothing, and the series kept showing the tick before it, as if measured
    now, for as long as the endpoint stayed down (decision 0228)."""
    kit.scraper.samples = [*IDLE_TRAIN, *BUSY_CHAT]
    service = kit.service()
    await service.tick()
    gauge = "kaiwo_monitor_gpu_utilization_ratio"
    chat = {"namespace": "team-b", "workload_kind": "KaiwoService"}
    assert sample_value(service.metrics, gauge, chat) == 0.5

    kit.scraper.failure = "http://prometheus.example:9090/api/v1/query is unreachable"
    assert await service.tick() is None

    assert sample_value(service.metrics, gauge, chat) is None
    train = {"namespace": "team-a", "workload_kind": "KaiwoJob"}
    assert sample_value(service.metrics, gauge, train) is None

    kit.scraper.failure = None
    await service.tick()
    assert sample_value(service.metrics, gauge, chat) == 0.5


async def test_a_frozen_reading_is_no_reading_and_is_counted(kit: Kit) -> None:
    """Decision 0177: an idle reading taken three minutes before the tick (an exporter that
    stamps its own samples and stopped) neither opens a stretch nor counts as a reading."""
    frozen = T0 - timedelta(minutes=3)
    kit.scraper.samples = [*(replace(s, at=frozen) for s in IDLE_TRAIN), *BUSY_CHAT]
    service = kit.service()

    assessment = await service.tick()

    assert assessment is not None
    assert topics_of(kit.jetstream) == [("utilization", UID_TRAIN), ("utilization", UID_CHAT)]
    train = next(u for u in assessment.utilizations if u.workload == TRAIN)
    assert (train.percent, train.window_start) == (None, T0)
    assert service.states == {}
    assert sample_value(service.metrics, "kaiwo_monitor_stale_samples") == 2
    assert sample_value(service.metrics, "kaiwo_monitor_pods_without_readings") == 1


async def test_a_reading_within_the_tolerance_is_judged(kit: Kit) -> None:
    kit.scraper.samples = [replace(s, at=T0 - timedelta(seconds=120)) for s in IDLE_TRAIN]
    service = kit.service()
    assert service.settings.monitor_sample_tolerance_seconds == 120

    await service.tick()

    assert service.states == {
        UID_TRAIN: UtilizationState(
            workload_uid=UID_TRAIN, below_since=T0, below_threshold=0.01, read_at=T0
        )
    }
    assert sample_value(service.metrics, "kaiwo_monitor_stale_samples") == 0


async def test_a_second_tick_continues_the_stretch_without_reporting_it_again(kit: Kit) -> None:
    kit.scraper.samples = [*IDLE_TRAIN]
    # Ticks a minute apart, consecutive (a gap of 3 x 60 s + 5 s would break the stretch).
    service = kit.service(settings=settings(monitor_polling_interval_seconds=60))
    await service.tick()
    kit.clock.now = T0 + timedelta(minutes=1)

    await service.tick()

    assert topics_of(kit.jetstream) == [
        ("utilization", UID_TRAIN),
        ("underutilized", UID_TRAIN),
        ("utilization", UID_CHAT),
        ("utilization", UID_TRAIN),
        ("utilization", UID_CHAT),
    ]
    assert service.states == {
        UID_TRAIN: UtilizationState(
            workload_uid=UID_TRAIN,
            below_since=T0,
            below_threshold=0.01,
            read_at=T0 + timedelta(minutes=1),
        )
    }


async def test_a_stretch_starts_anew_after_ticks_without_readings(kit: Kit) -> None:
    """Decision 0173: the exporter gone for 10 minutes is no part of an idle stretch."""
    kit.scraper.samples = [*IDLE_TRAIN]
    kit.scraper.clock = kit.clock
    service = kit.service(settings=settings(monitor_polling_interval_seconds=30))
    assert service.gap == timedelta(seconds=95)  # 3 x 30 s + the 5 s scrape timeout
    await service.tick()
    kit.scraper.samples = []
    for minutes in range(1, 10):
        kit.clock.now = T0 + timedelta(minutes=minutes)
        await service.tick()
    assert service.states[UID_TRAIN].below_since == T0  # kept while nobody reads it
    kit.scraper.samples = [*IDLE_TRAIN]
    kit.clock.now = T0 + timedelta(minutes=10)

    await service.tick()

    again = T0 + timedelta(minutes=10)
    assert service.states == {
        UID_TRAIN: UtilizationState(
            workload_uid=UID_TRAIN, below_since=again, below_threshold=0.01, read_at=again
        )
    }
    found = [e.data for s, e in published(kit.jetstream) if s.endswith(UID_TRAIN)]
    assert [type(e).__name__ for e in found][-2:] == ["UtilizationV1", "UnderutilizedV1"]
    assert isinstance(found[-2], UtilizationV1)
    assert found[-2].underutilized_since == again
    # The bucket keeps the stretch, not when it was last read.
    assert await StateStore(kit.kv).load() == {
        UID_TRAIN: UtilizationState(workload_uid=UID_TRAIN, below_since=again, below_threshold=0.01)
    }


async def test_the_monitor_decides_nothing_a_long_stretch_is_restated_each_tick(kit: Kit) -> None:
    kit.cluster.put(
        resources.KAIWO_CONFIG,
        kaiwo_config({"terminateUnderutilized": True, "terminateUnderutilizedAfter": "1h"}),
    )
    kit.scraper.samples = [*IDLE_TRAIN]
    # Ticks an hour apart are consecutive at a polling interval of an hour.
    service = kit.service(settings=settings(monitor_polling_interval_seconds=3600))
    for minutes in (0, 59, 60, 61):
        kit.clock.now = T0 + timedelta(minutes=minutes)
        await service.tick()

    topics = [topic for topic, uid in topics_of(kit.jetstream) if uid == UID_TRAIN]
    assert topics == ["utilization", "underutilized", "utilization", "utilization", "utilization"]
    last = [e for s, e in published(kit.jetstream) if s.endswith(UID_TRAIN)][-1].data
    assert isinstance(last, UtilizationV1)
    assert last.underutilized_since == T0


class CountedWrites(MemoryKeyValue):
    """The monitor's bucket, counting what is written to it."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    async def put(self, key: str, value: bytes) -> None:
        self.writes += 1
        await super().put(key, value)

    async def delete(self, key: str) -> None:
        self.writes += 1
        await super().delete(key)


def train_at(percent: float) -> list[GpuSample]:
    """The train job's two GPUs, both at ``percent``."""
    return [
        GpuSample(namespace="team-a", pod="train-0", gpu=gpu, percent=percent, at=SEEN)
        for gpu in ("0", "1")
    ]


@pytest.mark.parametrize("new_leader_each_tick", [False, True], ids=["one leader", "new leaders"])
async def test_a_stretch_follows_threshold_changes_alike_for_one_leader_and_new_ones(
    kit: Kit, new_leader_each_tick: bool
) -> None:
    """Decision 0213: a raised threshold keeps the stretch, a lowered one starts it anew at
    the first reading below it; a new leader, which knows only the bucket, judges every tick
    as the one leader does. The bucket is written when the stretch or its threshold
    changes, not while it is settled."""
    kit.scraper.clock = kit.clock
    bucket = CountedWrites()
    every_minute = settings(monitor_polling_interval_seconds=60)
    service = kit.service(kv=bucket, settings=every_minute)
    subject = f"kaiwo.mon.utilization.team-a.{UID_TRAIN}"

    async def tick(minute: int, threshold: float, percent: float) -> tuple[object, object]:
        nonlocal service
        kit.clock.now = T0 + timedelta(minutes=minute)
        kit.cluster.put(
            resources.KAIWO_CONFIG, kaiwo_config({"lowUtilizationThreshold": threshold})
        )
        kit.scraper.samples = train_at(percent)
        if new_leader_each_tick:
            service = kit.service(kv=bucket, settings=every_minute)
            await service.load_states()
        await service.tick()
        last = [e.data for s, e in published(kit.jetstream) if s == subject][-1]
        assert isinstance(last, UtilizationV1)
        return last.underutilized_since, last.low_utilization_threshold_ratio

    t3 = T0 + timedelta(minutes=3)
    assert await tick(0, 20, 5.0) == (T0, 0.2)  # below 20 % since T0
    assert await tick(1, 20, 5.0) == (T0, 0.2)
    assert await tick(2, 50, 40.0) == (T0, 0.5)  # raised: below 50 % since T0 too
    assert await tick(3, 20, 10.0) == (t3, 0.2)  # lowered: 40 % was not below 20 %
    assert await tick(4, 20, 10.0) == (t3, 0.2)
    assert await tick(5, 10, 10.0) == (None, 0.1)  # lowered under the reading: ended

    announced = [e.data for s, e in published(kit.jetstream) if "underutilized" in s]
    assert [e.idle_since for e in announced if isinstance(e, UnderutilizedV1)] == [T0, t3]
    assert bucket.writes == 4  # opened, raised, started anew, ended
    assert await bucket.get(UID_TRAIN) is None


@pytest.mark.parametrize("new_leader_each_tick", [False, True], ids=["one leader", "new leaders"])
async def test_an_idle_stretch_starts_anew_under_a_lowered_idle_threshold_for_any_leader(
    kit: Kit, new_leader_each_tick: bool
) -> None:
    """Decision 0213, GPU idle preemption: the namespace's idle threshold lowered from 50 %
    to 20 % starts the idle stretch anew at the first reading below 20 %, under a new
    leader as under the one that saw the stretch begin."""
    job = kit.cluster.put(
        resources.KAIWO_JOB,
        {
            "apiVersion": "kaiwo.silogen.ai/v1alpha1",
            "kind": "KaiwoJob",
            "metadata": {"name": "train", "namespace": "team-a"},
            "spec": {"image": "busybox"},
        },
    )
    uid = job["metadata"]["uid"]
    kit.cluster.put(
        resources.POD,
        workload_pod("train-0", TRAIN.model_copy(update={"uid": uid}), gpus=2, workload_type="job"),
    )
    kit.scraper.clock = kit.clock
    every_minute = settings(monitor_polling_interval_seconds=60)
    service = kit.service(settings=every_minute)

    async def tick(minute: int, threshold: str, percent: float) -> tuple[object, object]:
        nonlocal service
        kit.clock.now = T0 + timedelta(minutes=minute)
        annotation = {"kaiwo.silogen.ai/gpu-preemption.threshold": threshold}
        kit.cluster.put(
            resources.NAMESPACE, {"metadata": {"name": "team-a", "annotations": annotation}}
        )
        kit.scraper.samples = train_at(percent)
        if new_leader_each_tick:
            service = kit.service(settings=every_minute)
            await service.load_states()
        await service.tick()
        last = [e.data for s, e in published(kit.jetstream) if s.endswith(uid)][-1]
        assert isinstance(last, UtilizationV1)
        return last.idle_since, last.idle_threshold_ratio

    t2 = T0 + timedelta(minutes=2)
    assert await tick(0, "50", 30.0) == (T0, 0.5)
    assert await tick(1, "50", 10.0) == (T0, 0.5)
    assert await tick(2, "20", 10.0) == (t2, 0.2)  # not since T0: 30 % is not below 20 %
    assert await tick(3, "20", 10.0) == (t2, 0.2)


async def test_an_opted_in_workload_carries_its_resolved_idle_settings(kit: Kit) -> None:
    kit.cluster.put(
        resources.NAMESPACE,
        {
            "metadata": {
                "name": "team-a",
                "annotations": {"kaiwo.silogen.ai/gpu-preemption.grace-period": "2m"},
            }
        },
    )
    job = kit.cluster.put(
        resources.KAIWO_JOB,
        {
            "apiVersion": "kaiwo.silogen.ai/v1alpha1",
            "kind": "KaiwoJob",
            "metadata": {"name": "train", "namespace": "team-a"},
            "spec": {"image": "busybox"},
        },
    )
    ref = TRAIN.model_copy(update={"uid": job["metadata"]["uid"]})
    kit.cluster.put(resources.POD, workload_pod("train-0", ref, gpus=2, workload_type="job"))
    kit.scraper.samples = [*IDLE_TRAIN]
    service = kit.service()
    await service.tick()
    (train_use,) = [
        e.data
        for s, e in published(kit.jetstream)
        if s == f"kaiwo.mon.utilization.team-a.{ref.uid}"
    ]
    assert isinstance(train_use, UtilizationV1)
    assert (
        train_use.idle_threshold_ratio,
        train_use.idle_aggregation,
        train_use.idle_policy,
        train_use.idle_grace_seconds,
        train_use.idle_since,
    ) == (0.05, "Max", "OnPressure", 120.0, T0)


async def test_the_kaiwoconfig_threshold_and_namespaces_apply(kit: Kit) -> None:
    kit.cluster.put(
        resources.KAIWO_CONFIG,
        kaiwo_config({"lowUtilizationThreshold": 60, "targetNamespaces": ["team-b"]}),
    )
    kit.scraper.samples = [*IDLE_TRAIN, *BUSY_CHAT]
    service = kit.service()

    await service.tick()

    assert [subject for subject, _ in published(kit.jetstream)] == [
        f"kaiwo.mon.utilization.team-b.{UID_CHAT}",
        f"kaiwo.mon.underutilized.team-b.{UID_CHAT}",
    ]


async def test_an_invalid_kaiwoconfig_is_not_judged_by_until_fixed(kit: Kit) -> None:
    """Decision 0206: the planner takes the defaults for an invalid KaiwoConfig, and the
    monitor judges no GPU use meanwhile (the KaiwoConfig's Event says both): settings nobody
    chose must not preempt anyone."""
    kit.cluster.put(
        resources.KAIWO_CONFIG,
        kaiwo_config({"lowUtilizationThreshold": 60, "terminateUnderutilizedAfter": "soon"}),
    )
    kit.scraper.samples = [*IDLE_TRAIN, *BUSY_CHAT]
    service = kit.service()

    await service.tick()

    assert published(kit.jetstream) == []
    assert (
        sample_value(service.metrics, "kaiwo_monitor_tick_failures_total", {"stage": "config"}) == 1
    )
    kit.cluster.put(resources.KAIWO_CONFIG, kaiwo_config({"lowUtilizationThreshold": 60}))
    kit.clock.now = T0 + timedelta(minutes=1)
    await service.tick()
    assert published(kit.jetstream) != []


async def test_a_failed_scrape_ends_the_tick_and_marks_the_leader_unhealthy(
    kit: Kit, wait_for: Callable[..., Awaitable[None]]
) -> None:
    kit.scraper.failure = "http://prometheus.example:9090/api/v1/query is unreachable"
    service = kit.service()

    assert await service.tick() is None
    assert published(kit.jetstream) == []
    assert sample_value(service.metrics, "kaiwo_monitor_scrapes_total", {"outcome": "garbage"}) == 1
    assert service.healthy  # a standby's failed scrape is nobody's concern

    async with running(service):
        await wait_for(lambda: service.leading and kit.scraper.calls >= 2)
        assert not service.healthy
        kit.scraper.failure = None
        calls = kit.scraper.calls
        await wait_for(lambda: kit.scraper.calls > calls + 1)
        assert service.healthy


class FailingBus(MemoryBus):
    """Refuses to publish while ``failing``."""

    failing = True

    async def publish(self, envelope: Envelope[Any], subject: str) -> Any:
        if self.failing:
            raise ConnectionError("NATS connection lost")
        return await super().publish(envelope, subject)


async def test_a_failed_publish_keeps_the_old_state_and_the_next_tick_repeats(kit: Kit) -> None:
    bus = FailingBus(server=kit.jetstream, topology=bus_topology())
    kit.scraper.samples = [*IDLE_TRAIN]
    service = kit.service(bus=bus)

    await service.tick()

    assert service.states == {}
    assert await kit.kv.get(UID_TRAIN) is None
    assert (
        sample_value(service.metrics, "kaiwo_monitor_tick_failures_total", {"stage": "publish"})
        == 1
    )

    bus.failing = False
    kit.clock.now = T0 + timedelta(minutes=1)
    await service.tick()
    assert topics_of(kit.jetstream) == [
        ("utilization", UID_TRAIN),
        ("underutilized", UID_TRAIN),
        ("utilization", UID_CHAT),
    ]
    assert service.states[UID_TRAIN].below_since == T0 + timedelta(minutes=1)


async def test_a_standby_neither_scrapes_nor_publishes(kit: Kit) -> None:
    kit.scraper.samples = [*IDLE_TRAIN]
    assert await kit.leases.claim(LEASE_ROLE, "monitor-elsewhere") is not None
    standby = kit.service(holder="monitor-here")

    async with running(standby):
        await asyncio.sleep(0.3)  # two claim attempts
        assert not standby.leading

    assert kit.scraper.calls == 0
    assert published(kit.jetstream) == []
    assert sample_value(standby.metrics, "kaiwo_monitor_leader") == 0
    assert await kit.leases.holder(LEASE_ROLE) == "monitor-elsewhere"


async def test_a_new_leader_continues_the_stretch_from_the_bucket(kit: Kit) -> None:
    await StateStore(kit.kv).save(
        UID_TRAIN,
        before={},
        after={
            UID_TRAIN: UtilizationState(workload_uid=UID_TRAIN, below_since=T0 - timedelta(hours=5))
        },
    )
    kit.scraper.samples = [*IDLE_TRAIN]
    service = kit.service()
    await service.load_states()

    await service.tick()

    assert topics_of(kit.jetstream) == [("utilization", UID_TRAIN), ("utilization", UID_CHAT)]
    assert service.states[UID_TRAIN].below_since == T0 - timedelta(hours=5)


async def test_a_leader_whose_bucket_is_out_of_reach_at_first_continues_the_stretch(
    kit: Kit, wait_for: Callable[..., Awaitable[None]]
) -> None:
    below_since = T0 - timedelta(hours=5)
    await StateStore(kit.kv).save(
        UID_TRAIN,
        before={},
        after={UID_TRAIN: UtilizationState(workload_uid=UID_TRAIN, below_since=below_since)},
    )
    kit.scraper.samples = [*IDLE_TRAIN]
    bucket = UnansweredReads(kit.kv, failed_listings=2)
    service = kit.service(kv=bucket)
    async with running(service):
        await wait_for(lambda: kit.scraper.calls >= 1)
    assert bucket.listings == 3
    assert service.states[UID_TRAIN].below_since == below_since


async def test_a_finished_workload_s_state_is_removed(kit: Kit) -> None:
    kit.scraper.samples = [*IDLE_TRAIN]
    service = kit.service()
    await service.tick()
    assert await kit.kv.get(UID_TRAIN) is not None
    kit.cluster.server.store.delete(
        kit.cluster.server.store.kinds.lookup(group="", version="v1", plural="pods"),  # type: ignore[arg-type]
        namespace="team-a",
        name="train-0",
    )

    await service.tick()

    assert await kit.kv.get(UID_TRAIN) is None
    assert service.states == {}


# ------------------------------------------------------------------ running


@contextlib.asynccontextmanager
async def running(
    service: MonitorService,
) -> AsyncIterator[tuple[asyncio.Event, asyncio.Task[None]]]:
    stop = asyncio.Event()
    task = asyncio.create_task(service.run(stop))
    try:
        yield stop, task
    finally:
        stop.set()
        await asyncio.wait_for(task, 5)


async def test_two_monitors_one_acts_and_the_other_takes_over_when_it_stops(
    kit: Kit, wait_for: Callable[..., Awaitable[None]]
) -> None:
    fake_scraper = type(kit.scraper)
    real_clock = lambda: datetime.now(UTC)  # noqa: E731 - the lease needs time to pass
    first_scraper = fake_scraper(samples=list(IDLE_TRAIN), clock=real_clock)
    second_scraper = fake_scraper(samples=list(IDLE_TRAIN), clock=real_clock)
    first = kit.service(scraper=first_scraper, clock=real_clock, holder="first")
    second = kit.service(scraper=second_scraper, clock=real_clock, holder="second")

    async with running(first) as (stop_first, task_first):
        await wait_for(lambda: first_scraper.calls >= 2)
        assert sample_value(first.metrics, "kaiwo_monitor_leader") == 1
        async with running(second):
            await asyncio.sleep(0.3)
            assert second_scraper.calls == 0
            assert not second.leading
            assert await kit.leases.holder(LEASE_ROLE) == "first"

            stop_first.set()
            await asyncio.wait_for(task_first, 5)
            await wait_for(lambda: second_scraper.calls >= 2)
            assert await kit.leases.holder(LEASE_ROLE) == "second"
            assert sample_value(second.metrics, "kaiwo_monitor_leader") == 1

    underutilized = [
        event for _, event in published(kit.jetstream) if isinstance(event.data, UnderutilizedV1)
    ]
    assert len(underutilized) == 1  # the second leader continued the first one's stretch
    assert sample_value(first.metrics, "kaiwo_monitor_leader") == 0
    assert sample_value(second.metrics, "kaiwo_monitor_leader") == 0
    assert await kit.leases.holder(LEASE_ROLE) is None  # released on stop


class LeaseClock:
    """The lease store's clock, moved by hand: a lease runs out when the test says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_a_leader_whose_lease_was_taken_stops_ticking_and_exits(
    kit: Kit, wait_for: Callable[..., Awaitable[None]]
) -> None:
    lease_clock = LeaseClock()
    kit.leases = MemoryLeaseStore(duration_seconds=LEASE_SECONDS, clock=lease_clock)
    kit.scraper.samples = [*IDLE_TRAIN]
    leader = kit.service(holder="paused")
    stop = asyncio.Event()
    task = asyncio.create_task(leader.run(stop))
    await wait_for(lambda: kit.scraper.calls >= 1)

    # The leader's renewals stall past the lease (a frozen node): another replica claims it.
    lease_clock.now += LEASE_SECONDS * 2
    assert await kit.leases.claim(LEASE_ROLE, "successor") is not None

    with pytest.raises(LeaseLostError, match="'monitor'"):
        await asyncio.wait_for(task, 5)
    calls = kit.scraper.calls
    await asyncio.sleep(0.2)
    assert kit.scraper.calls == calls  # it ticks no more
    assert not leader.leading
    assert sample_value(leader.metrics, "kaiwo_monitor_leader") == 0
    assert await kit.leases.holder(LEASE_ROLE) == "successor"


async def test_a_disabled_monitor_idles_until_stopped(kit: Kit) -> None:
    service = kit.service(settings=settings(monitor_enabled=False))
    async with running(service):
        await asyncio.sleep(0.2)
    assert kit.scraper.calls == 0
    assert sample_value(service.metrics, "kaiwo_monitor_leader") == 0
    assert await kit.leases.holder(LEASE_ROLE) is None


# ------------------------------------------------------------------ state, settings, start-up


def test_states_round_trip_through_json() -> None:
    state = UtilizationState(
        workload_uid=UID_TRAIN,
        below_since=T0,
        below_threshold=0.2,
        idle_since=T0,
        idle_threshold=0.05,
        idle_aggregation="Avg",
    )
    encoded = encode_state(state)
    assert encoded == (
        b'{"belowSince": "2026-03-01T12:00:00+00:00", "belowThreshold": 0.2, '
        b'"idleAggregation": "Avg", "idleSince": "2026-03-01T12:00:00+00:00", '
        b'"idleThreshold": 0.05}'
    )
    assert decode_state(UID_TRAIN, encoded) == state


def test_a_state_an_older_monitor_wrote_has_no_thresholds() -> None:
    """Decision 0213: its stretches are taken as judged against the thresholds in force."""
    older = b'{"belowSince": "2026-03-01T12:00:00+00:00", "idleSince": null}'
    assert decode_state(UID_TRAIN, older) == UtilizationState(
        workload_uid=UID_TRAIN, below_since=T0
    )


async def test_unreadable_states_are_skipped() -> None:
    kv = MemoryKeyValue()
    await kv.put("broken", b"not json")
    await kv.put("naive", b'{"belowSince": "2026-03-01T12:00:00"}')
    await kv.put("wordy", b'{"belowSince": "2026-03-01T12:00:00Z", "belowThreshold": "low"}')
    await kv.put("flipped", b'{"idleSince": "2026-03-01T12:00:00Z", "idleThreshold": true}')
    await kv.put("median", b'{"idleSince": "2026-03-01T12:00:00Z", "idleAggregation": "P50"}')
    await kv.put(UID_TRAIN, encode_state(UtilizationState(workload_uid=UID_TRAIN, below_since=T0)))
    assert await StateStore(kv).load() == {
        UID_TRAIN: UtilizationState(workload_uid=UID_TRAIN, below_since=T0)
    }


def test_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "KAIWO_MONITOR_METRICS_ENDPOINT", "http://prometheus-operated.monitoring:9090"
    )
    monkeypatch.setenv("KAIWO_MONITOR_POLLING_INTERVAL_SECONDS", "15")
    monkeypatch.setenv("KAIWO_LEASE_SECONDS", "20")
    monkeypatch.setenv("KAIWO_LEASE_BUCKET", "ops-leases")
    monkeypatch.setenv("KAIWO_MONITOR_ENABLED", "false")
    monkeypatch.setenv("KAIWO_MONITOR_SAMPLE_TIME_QUERY", "")
    monkeypatch.setenv("KAIWO_MONITOR_SAMPLE_TOLERANCE_SECONDS", "45")
    loaded = MonitorSettings()
    assert (loaded.monitor_sample_time_query, loaded.monitor_sample_tolerance_seconds) == ("", 45)
    assert loaded.monitor_metrics_endpoint == "http://prometheus-operated.monitoring:9090"
    assert loaded.monitor_polling_interval_seconds == 15.0
    assert (loaded.lease_bucket, loaded.lease_seconds) == ("ops-leases", 20.0)
    assert loaded.monitor_enabled is False


def test_the_monitor_asks_for_sample_times_by_default() -> None:
    assert settings().monitor_sample_time_query == (
        "timestamp(gpu_gfx_activity) or timestamp(DCGM_FI_DEV_GPU_UTIL)"
    )


def test_the_monitor_leases_like_the_planner_by_default() -> None:
    assert (settings().lease_bucket, settings().lease_seconds) == ("kaiwo-leases", 15.0)
    assert LEASE_ROLE == "monitor"


async def test_start_up_without_an_endpoint_is_one_clear_error() -> None:
    with pytest.raises(
        StartupError,
        match=r"KAIWO_MONITOR_METRICS_ENDPOINT \(or RESOURCE_MONITORING_METRICS_ENDPOINT\) "
        r"is not set",
    ):
        await serve(settings(monitor_metrics_endpoint=""), asyncio.Event())


async def test_a_standby_whose_first_probe_failed_probes_again_for_readiness(kit: Kit) -> None:
    kit.scraper.failure = "http://prometheus.example:9090/api/v1/query is unreachable"
    service = kit.service()

    assert await service.probe_endpoint() == kit.scraper.failure
    assert not await service.endpoint_ready()

    kit.scraper.failure = None
    assert await service.endpoint_ready()
    assert service.endpoint_unreached is None


async def test_a_pod_of_another_namespace_labelled_with_a_workloads_uid_is_not_counted(
    kit: Kit,
) -> None:
    """Decision 0252: whoever may create pods in team-b may label three idle GPU pods with
    the uid of team-a's KaiwoJob. Counted with its busy pod, they took its reading from 2 %
    of 1 GPU to 0.5 % of 4, below the 1 % threshold: an underutilized finding, by which the
    planner terminates it, and a lower reading for GPU idle preemption."""
    job = kit.cluster.put(
        resources.KAIWO_JOB,
        {
            "apiVersion": "kaiwo.silogen.ai/v1alpha1",
            "kind": "KaiwoJob",
            "metadata": {"name": "train", "namespace": "team-a"},
            "spec": {"image": "busybox"},
        },
    )
    ref = TRAIN.model_copy(update={"uid": job["metadata"]["uid"]})
    kit.cluster.put(resources.POD, workload_pod("train-1", ref, gpus=1, workload_type="job"))
    decoy = ref.model_copy(update={"namespace": "team-b"})
    kit.cluster.put(resources.POD, workload_pod("decoy", decoy, gpus=3, workload_type="job"))
    kit.scraper.samples = [
        GpuSample(namespace="team-a", pod="train-1", gpu="0", percent=2.0, at=SEEN),
        *(
            GpuSample(namespace="team-b", pod="decoy", gpu=str(gpu), percent=0.0, at=SEEN)
            for gpu in range(3)
        ),
    ]

    await kit.service().tick()

    train_events = [
        (subject.split(".")[2], event.data)
        for subject, event in published(kit.jetstream)
        if subject.endswith(ref.uid or "")
    ]
    assert [topic for topic, _ in train_events] == ["utilization"]
    [(_, train_use)] = train_events
    assert isinstance(train_use, UtilizationV1)
    assert (train_use.workload, train_use.gpu_count, train_use.pod_count) == (ref, 1, 1)
    assert train_use.utilization_ratio == 0.02
    assert train_use.underutilized_since is None
