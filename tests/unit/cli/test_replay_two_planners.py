"""Replay of a store two active planners wrote (decision 0220): each replica reads ``KAIWO_OBS``,
``KAIWO_MON`` and ``KAIWO_GATEWAY`` on its own (decision 0030), so a plan of one may have the
lower ``obsSequence`` and the higher ``monSequence`` and ``scaleSequence``. Each plan is
judged with the findings and scale decisions its own planner had read, and no later ones.

The store is filled the way production fills it: the watcher's observations, the monitor's
finding and the autoscaler's decision published on an in-memory JetStream with two
partitions, plans made by two real planner services (one per partition), everything stored
by the recorder. The job and the Model are in partition 0 (replica A, with the default
KaiwoConfig's stand-in uid), the queue configuration in partition 1 (replica B).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from kaiwo_cli.main import app
from kaiwo_cli.replay import processes as replay_processes
from kaiwo_cli.replay.processes import replay_in_processes
from kaiwo_cli.replay.readings_as_of import ReadingsAsOf
from kaiwo_cli.replay.recorded import (
    decided_plan,
    findings_in_stream_order,
    observations_in_stream_order,
)
from kaiwo_cli.replay.replanning import Replayer, replay_recorded
from kaiwo_cli.replay.store import replay_from_store
from kaiwo_contracts.events import Envelope, ObservedObjectV1, PlanDecidedV1, ScaleDecidedV1
from kaiwo_contracts.events.monitor import UtilizationV1
from kaiwo_contracts.events.partitions import uid_partition
from kaiwo_contracts.events.streams import bus_topology
from kaiwo_contracts.events.subjects import monitor_subject, observed_subject, scale_subject
from kaiwo_contracts.plans import ObjectRef
from kaiwo_eventstore import open_event_store
from kaiwo_planner.domain.planning import plan_object
from kaiwo_planner.domain.state.latest_readings import LatestReadings
from kaiwo_planner.service import PlannerService
from kaiwo_planner.settings import PlannerSettings
from kaiwo_recorder.service import RecorderService
from kaiwo_runtime.bus import StoredMessage
from kaiwo_runtime.kv import MemoryKeyValue
from kaiwo_runtime.memory_bus import MemoryBus
from kaiwo_runtime.memory_jetstream import MemoryJetStream

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
PARTITIONS = 2
JOB_UID = "0b7c0a5e-1111-4c1e-9d0a-3f2e8a9c7d01"  # partition 0: replica A
QUEUE_UID = "9a8b7c6d-4444-4e5f-8a9b-0c1d2e3f4a5b"  # partition 1: replica B
MODEL_UID = "3c4d5e6f-6666-4a7b-8c9d-0e1f2a3b4c51"  # partition 0: replica A
NODE_UID = "7f3e9c2a-3333-4b7d-8c55-0e1d2f3a4b5c"
NAMESPACE_UID = "1a2b3c4d-5555-4f6a-9b8c-7d6e5f4a3b2c"
KAIWO = "kaiwo.silogen.ai/v1alpha1"
JOB_REF = ObjectRef(
    api_version=KAIWO, kind="KaiwoJob", name="train", namespace="team-a", uid=JOB_UID
)
MODEL_REF = ObjectRef(
    api_version="kubeai.org/v1", kind="Model", name="llm", namespace="team-a", uid=MODEL_UID
)
PLAN_TYPE = PlanDecidedV1.EVENT_TYPE


def namespace() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "team-a", "uid": NAMESPACE_UID, "resourceVersion": "1"},
    }


def node() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": "gpu-1",
            "uid": NODE_UID,
            "resourceVersion": "2",
            "labels": {"amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM"},
        },
        "status": {
            "capacity": {"amd.com/gpu": "8", "cpu": "64", "memory": "512Gi"},
            "allocatable": {"amd.com/gpu": "8", "cpu": "64", "memory": "512Gi"},
        },
    }


def queue_config() -> dict[str, Any]:
    gpus = {"name": "amd.com/gpu", "nominalQuota": 8}
    return {
        "apiVersion": KAIWO,
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": "kaiwo", "uid": QUEUE_UID, "resourceVersion": "3", "generation": 1},
        "spec": {
            "resourceFlavors": [{"name": "mi300x", "nodeLabels": {"kaiwo/nodepool": "mi300x"}}],
            "clusterQueues": [
                {
                    "name": "kaiwo",
                    "namespaces": ["team-a"],
                    "spec": {
                        "namespaceSelector": {},
                        "resourceGroups": [
                            {
                                "coveredResources": ["cpu", "memory", "amd.com/gpu"],
                                "flavors": [
                                    {
                                        "name": "mi300x",
                                        "resources": [
                                            {"name": "cpu", "nominalQuota": "64"},
                                            {"name": "memory", "nominalQuota": "512Gi"},
                                            gpus,
                                        ],
                                    }
                                ],
                            }
                        ],
                    },
                }
            ],
        },
    }


def job() -> dict[str, Any]:
    return {
        "apiVersion": KAIWO,
        "kind": "KaiwoJob",
        "metadata": {
            "name": "train",
            "namespace": "team-a",
            "uid": JOB_UID,
            "resourceVersion": "100",
            "generation": 1,
        },
        "spec": {"image": "busybox", "entrypoint": "echo hi", "gpus": 1},
    }


def model() -> dict[str, Any]:
    return {
        "apiVersion": "kubeai.org/v1",
        "kind": "Model",
        "metadata": {
            "name": "llm",
            "namespace": "team-a",
            "uid": MODEL_UID,
            "resourceVersion": "200",
            "generation": 1,
        },
        "spec": {
            "url": "hf://org/llm",
            "engine": "VLLM",
            "resourceProfile": "cpu:1",
            "replicas": 0,
        },
    }


def observed(obj: dict[str, Any], *, seconds: int) -> tuple[Envelope[Any], str]:
    meta = obj["metadata"]
    namespace = meta.get("namespace")
    payload = ObservedObjectV1(
        kind=obj["kind"],
        api_version=obj["apiVersion"],
        namespace=namespace,
        name=meta["name"],
        uid=meta["uid"],
        resource_version=meta["resourceVersion"],
        event_type="ADDED",
        object=obj,
    )
    envelope = Envelope.new(
        data=payload,
        source="/kaiwo/watcher",
        time=T0 + timedelta(seconds=seconds),
        id=f"{meta['uid']}:{meta['resourceVersion']}",
        subject=f"{namespace}/{meta['name']}" if namespace else meta["name"],
        correlationid=meta["uid"],
    )
    return envelope, observed_subject(kind=obj["kind"], namespace=namespace, uid=meta["uid"])


def idle_finding() -> tuple[Envelope[Any], str]:
    """The monitor's finding that the job's GPU idles below the threshold since 12:25."""
    reading = UtilizationV1(
        workload=JOB_REF,
        vendor="amd",
        gpu_count=1,
        pod_count=1,
        utilization_ratio=0.0,
        aggregation="Avg",
        window_start=T0 + timedelta(minutes=31),
        window_end=T0 + timedelta(minutes=31),
        low_utilization_threshold_ratio=0.01,
        underutilized_since=T0 + timedelta(minutes=25),
    )
    envelope = Envelope.new(
        data=reading,
        source="/kaiwo/monitor",
        time=T0 + timedelta(minutes=31),
        subject="team-a/train",
        correlationid=JOB_UID,
    )
    return envelope, monitor_subject(topic="utilization", namespace="team-a", uid=JOB_UID)


def scale_from_zero() -> tuple[Envelope[Any], str]:
    """The autoscaler's decision to scale the Model from zero to one replica."""
    decision = ScaleDecidedV1(
        model=MODEL_REF,
        generation=1,
        from_replicas=0,
        replicas=1,
        cause="request",
        active_requests=1,
        average_active_requests=0,
        window_seconds=600,
        samples=60,
        target_requests=100,
        scale_down_delay_seconds=30,
        reason="scale from zero: 1 request waits for a ready endpoint",
    )
    envelope = Envelope.new(
        data=decision,
        source="/kaiwo/gateway",
        time=T0 + timedelta(minutes=32),
        subject="team-a/llm",
        correlationid=MODEL_UID,
    )
    return envelope, scale_subject(namespace="team-a", uid=MODEL_UID)


class BehindOnObservations(MemoryBus):
    """A replica's bus on which ``KAIWO_OBS`` ends at ``obs_through`` (None: at its end): the
    replica reads the stream slower than the others (a burst, a slow round)."""

    obs_through: int | None = None

    async def read_next_stored(
        self, stream: str, sequence: int, *, subjects: str
    ) -> StoredMessage | None:
        found = await super().read_next_stored(stream, sequence, subjects=subjects)
        through = self.obs_through
        if found is not None and stream == "KAIWO_OBS" and through is not None:
            return found if found.sequence <= through else None
        return found


async def record_two_planners(path: Path) -> None:
    """Replica A plans the job and the Model from observations 1-5 before the finding and
    the scale decision come; replica B, behind on observations, takes its partition on after
    reading observations 1-3, the finding and the scale decision: its plan of the queue
    configuration is at obs 3, mon 1 and scale 1, A's of the job and of the Model at obs 5,
    mon 0 and scale 0. Then B reads on, and A reads the finding and the decision and plans
    the job and the Model with them."""
    partitions = [uid_partition(uid, PARTITIONS) for uid in (JOB_UID, MODEL_UID, QUEUE_UID)]
    assert partitions == [0, 0, 1]
    server = MemoryJetStream()
    topology = bus_topology(partitions=PARTITIONS)
    watcher = MemoryBus(server=server, topology=topology)
    await watcher.ensure_streams()
    leases = MemoryKeyValue()
    b_bus = BehindOnObservations(server=server, topology=topology)

    def replica(bus: MemoryBus) -> PlannerService:
        return PlannerService(
            bus,
            leases,
            clock=lambda: T0 + timedelta(minutes=1),
            settings=PlannerSettings(resync_on_start=False),
        )

    a, b = replica(MemoryBus(server=server, topology=topology)), replica(b_bus)

    async def drain(service: PlannerService) -> None:
        while await service.step(wait_seconds=0):
            pass

    for seconds, obj in enumerate((namespace(), node(), queue_config(), job(), model())):
        await watcher.publish(*observed(obj, seconds=seconds))
    await a.start()
    await a.gained(0)
    await drain(a)
    await watcher.publish(*idle_finding())
    await watcher.publish(*scale_from_zero())
    b_bus.obs_through = 3
    await b.start()
    await b.gained(1)
    await drain(b)
    b_bus.obs_through = None
    await drain(b)
    await drain(a)

    store = await open_event_store(f"sqlite:///{path}")
    try:
        recorder = RecorderService(bus=watcher, store=store, clock=lambda: T0 + timedelta(hours=1))
        while sum([(await recorder.pump(c, wait_seconds=0)).messages for c in recorder.consumers]):
            pass
    finally:
        await store.close()


@dataclass
class Recorded:
    url: str


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    path = tmp_path_factory.mktemp("two-planners") / "events.db"
    asyncio.run(record_two_planners(path))
    return Recorded(url=f"sqlite:///{path}")


async def read_types(url: str, *types: str) -> list[Any]:
    store = await open_event_store(url)
    try:
        return await store.read_by_type(list(types))
    finally:
        await store.close()


def replay(*args: str) -> Any:
    return CliRunner().invoke(
        app, ["events", "replay", *args], env={"COLUMNS": "240", "NO_COLOR": "1"}
    )


def without_plan_ids(output: str) -> list[str]:
    return [re.sub(r"plan [0-9a-f]{8} ", "plan ", line) for line in output.splitlines()]


def conditions(plan: Any) -> list[str]:
    status = plan.data["plan"].get("status") or {}
    return [condition["reason"] for condition in status.get("conditions") or ()]


def test_the_two_replicas_plans_interleave_as_described(recorded: Recorded) -> None:
    plans = asyncio.run(read_types(recorded.url, PLAN_TYPE))

    assert [
        (
            plan.data["plan"]["owner"]["kind"],
            plan.data["trigger"],
            plan.data["obsSequence"],
            plan.data["monSequence"],
            plan.data["scaleSequence"],
        )
        for plan in plans
    ] == [
        ("KaiwoJob", "resync", 5, 0, 0),  # A takes partition 0 on, before the finding
        ("Model", "resync", 5, 0, 0),  # and before the scale decision
        ("KaiwoConfig", "resync", 5, 0, 0),  # the default KaiwoConfig's stand-in uid
        ("KaiwoQueueConfig", "resync", 3, 1, 1),  # B: behind on observations, not the rest
        ("KaiwoJob", "finding", 5, 1, 0),  # A reads the finding
        ("Model", "scale", 5, 1, 1),  # and the scale decision
    ]
    # The finding and the decision decide the plans: the job underused and the Model scaled
    # with them, neither without.
    assert conditions(plans[0]) == ["Schedulable", "Pending", "Applied"]
    assert conditions(plans[4]) == ["Schedulable", "Pending", "Applied", "GpuUtilizationLow"]
    assert plans[1].data["plan"].get("scale") is None
    assert plans[5].data["plan"]["scale"]["replicas"] == 1


EXPECTED_LINES = [
    "reproduced  KaiwoQueueConfig/kaiwo  plan (resync, obs 3)",
    "reproduced  KaiwoJob/team-a/train  plan (resync, obs 5)",
    "reproduced  Model/team-a/llm  plan (resync, obs 5)",
    "reproduced  KaiwoConfig/kaiwo  plan (resync, obs 5)",
    "reproduced  KaiwoJob/team-a/train  plan (finding, obs 5)",
    "reproduced  Model/team-a/llm  plan (scale, obs 5)",
    "6 plans, 6 reproduced, 0 differ, 0 skipped (5 observations replayed)",
]
"""B's plan comes first (obs 3) and had read the finding and the scale decision; A's first
plans of the job and the Model, judged after it, had not, and are judged without them."""


def test_replay_of_two_planners_reproduces_every_plan_streamed(recorded: Recorded) -> None:
    result = replay("--processes", "1", "--store", recorded.url)

    assert result.exit_code == 0, result.output
    assert without_plan_ids(result.output) == EXPECTED_LINES


def test_replay_of_two_planners_reproduces_every_plan_in_processes(
    recorded: Recorded, monkeypatch: pytest.MonkeyPatch
) -> None:
    plans = asyncio.run(read_types(recorded.url, PLAN_TYPE))
    # Two spans, the second from the last plan: the first process judges B's plan and then
    # A's first of the job, as one process does.
    last = plans[-1].global_position
    monkeypatch.setattr(replay_processes, "_span_starts", partial(_answered, [last]))

    result = replay("--processes", "2", "--store", recorded.url)
    several: list[Any] = []
    report = replay_in_processes(recorded.url, processes=2, on_verdict=several.append)

    assert result.exit_code == 0, result.output
    assert without_plan_ids(result.output) == EXPECTED_LINES
    assert (report.reproduced, report.differ, report.skipped) == (6, 0, 0)
    assert [(v.owner, v.trigger, v.outcome) for v in several] == [
        ("KaiwoQueueConfig/kaiwo", "resync", "reproduced"),
        ("KaiwoJob/team-a/train", "resync", "reproduced"),
        ("Model/team-a/llm", "resync", "reproduced"),
        ("KaiwoConfig/kaiwo", "resync", "reproduced"),
        ("KaiwoJob/team-a/train", "finding", "reproduced"),
        ("Model/team-a/llm", "scale", "reproduced"),
    ]


async def _answered(starts: list[int], _url: str, _shares: list[float]) -> list[int]:
    return starts


def test_replay_of_one_workload_of_two_planners_reproduces_its_plans(recorded: Recorded) -> None:
    result = replay("--workload", "team-a/train", "--store", recorded.url)

    assert result.exit_code == 0, result.output
    assert without_plan_ids(result.output) == [
        "reproduced  KaiwoJob/team-a/train  plan (resync, obs 5)",
        "reproduced  KaiwoJob/team-a/train  plan (finding, obs 5)",
        "2 plans, 2 reproduced, 0 differ, 0 skipped (5 observations replayed)",
    ]


def recorded_inputs(url: str) -> dict[str, Any]:
    return {
        "observations": asyncio.run(read_types(url, ObservedObjectV1.EVENT_TYPE)),
        "plans": asyncio.run(read_types(url, PLAN_TYPE)),
        "findings": asyncio.run(read_types(url, UtilizationV1.EVENT_TYPE)),
        "scale_decisions": asyncio.run(read_types(url, ScaleDecidedV1.EVENT_TYPE)),
    }


def test_the_pure_and_the_streamed_replay_of_two_planners_reproduce_every_plan(
    recorded: Recorded,
) -> None:
    async def streamed(fresh_contexts: bool) -> Any:
        store = await open_event_store(recorded.url)
        try:
            return await replay_from_store(store, fresh_contexts=fresh_contexts)
        finally:
            await store.close()

    inputs = recorded_inputs(recorded.url)
    for fresh_contexts in (False, True):
        pure = replay_recorded(**inputs, fresh_contexts=fresh_contexts)
        from_store = asyncio.run(streamed(fresh_contexts))

        assert (pure.reproduced, pure.differ, pure.skipped) == (6, 0, 0)
        assert (from_store.reproduced, from_store.differ, from_store.skipped) == (6, 0, 0)


def test_the_first_plans_judged_with_what_the_other_replica_had_read_would_differ(
    recorded: Recorded,
) -> None:
    """What the replay must not do: judge A's first plans of the job and the Model with the
    finding and the scale decision B had read (as it did when it took them in only
    forward)."""
    inputs = recorded_inputs(recorded.url)
    job_plan, model_plan = inputs["plans"][0], inputs["plans"][1]
    claimed = [
        job_plan._replace(data={**job_plan.data, "monSequence": 1}),
        model_plan._replace(data={**model_plan.data, "scaleSequence": 1}),
    ]

    report = replay_recorded(**{**inputs, "plans": claimed})

    verdicts = {verdict.owner: verdict for verdict in report.plans}
    job_verdict, model_verdict = verdicts["KaiwoJob/team-a/train"], verdicts["Model/team-a/llm"]
    assert (job_verdict.outcome, model_verdict.outcome) == ("differs", "differs")
    assert "+    reason: GpuUtilizationLow\n" in job_verdict.diff
    assert "+  scale:\n+    fromReplicas: 0\n+    replicas: 1\n" in model_verdict.diff


def test_a_plan_whose_planner_was_further_behind_than_replay_keeps_is_skipped_saying_so(
    recorded: Recorded,
) -> None:
    observations = asyncio.run(read_types(recorded.url, ObservedObjectV1.EVENT_TYPE))
    plans = asyncio.run(read_types(recorded.url, PLAN_TYPE))
    [(_, finding)] = findings_in_stream_order(
        asyncio.run(read_types(recorded.url, UtilizationV1.EVENT_TYPE))
    )
    # Findings of three other workloads after the job's (sequences 2 to 4).
    others = [(sequence, replace(finding, uid=f"other-{sequence}")) for sequence in (2, 3, 4)]
    replayer = Replayer(plan_object, changes_kept=1)
    replayer.apply_observations(
        [(o.sequence, o.payload) for o in observations_in_stream_order(observations)]
    )
    replayer.apply_findings([(1, finding), *others])

    first = replayer.judge(plans[0], decided_plan(plans[0]))
    queue = replayer.judge(plans[3], decided_plan(plans[3]))

    # Three changes kept, more than twice one: those up to 2 let go.
    assert replayer.findings.floor == 2
    assert (first.outcome, first.reason) == (
        "skipped",
        "its planner had read monitor findings up to 0, and the replay keeps them as of 2 on "
        "(too far behind to go back to)",
    )
    assert (queue.outcome, queue.reason) == (
        "skipped",
        "its planner had read monitor findings up to 1, and the replay keeps them as of 2 on "
        "(too far behind to go back to)",
    )


# --------------------------------------------------------------------------- ReadingsAsOf


@dataclass(frozen=True, slots=True)
class Reading:
    uid: str
    at: datetime
    value: int

    def decides_differently_from(self, other: Any) -> bool:
        return other is None or other.value != self.value

    def to_document(self) -> dict[str, Any]:
        return {"uid": self.uid, "value": self.value}


def minutes(value: int) -> datetime:
    return T0 + timedelta(minutes=value)


@dataclass(frozen=True, slots=True)
class Followed:
    """Readings taken in as the replay takes them in: through the LatestReadings the history
    follows."""

    latest: LatestReadings[Reading]
    history: ReadingsAsOf[Reading]

    def take(self, items: Iterable[tuple[int, Reading]]) -> None:
        for sequence, reading in items:
            before = self.history.latest
            self.latest.take(reading, sequence=sequence)
            self.history.took(sequence, reading.uid, before)


def followed(*, kept: int) -> Followed:
    latest = LatestReadings[Reading](retention=timedelta(hours=1))
    return Followed(latest, ReadingsAsOf(latest, kept=kept))


A1 = Reading("a", minutes(0), 1)
B1 = Reading("b", minutes(10), 1)
A2 = Reading("a", minutes(20), 2)
C1 = Reading("c", minutes(90), 1)  # more than an hour after a's and b's: they are forgotten
C0 = Reading("c", minutes(80), 0)  # older than the one held: not taken
D1 = Reading("d", minutes(91), 1)


def values(readings: Mapping[str, Reading] | None) -> dict[str, int] | None:
    return None if readings is None else {uid: r.value for uid, r in sorted(readings.items())}


def test_readings_as_of_each_sequence_are_those_taken_up_to_it() -> None:
    readings = followed(kept=100)
    readings.take([(1, A1), (2, B1), (4, A2), (5, C1), (6, C0)])
    history = readings.history

    assert [values(history.as_of(sequence)) for sequence in range(8)] == [
        {},
        {"a": 1},
        {"a": 1, "b": 1},
        {"a": 1, "b": 1},
        {"a": 2, "b": 1},
        {"c": 1},
        {"c": 1},
        {"c": 1},
    ]
    # The latest itself, and one mapping for the sequences between the same two changes.
    assert history.as_of(5) is history.as_of(99) is history.latest
    assert history.as_of(2) is history.as_of(3)
    assert history.floor == 0


def test_readings_as_of_a_sequence_before_the_changes_kept_are_not_told() -> None:
    readings = followed(kept=3)
    readings.take([(1, A1), (2, B1), (4, A2), (5, C1)])
    history = readings.history
    assert values(history.as_of(4)) == {"a": 2, "b": 1}  # six changes: none let go yet

    readings.take([(7, D1)])  # seven: those of 1 to 5 let go, so as of 5 on only

    assert history.floor == 5
    assert [values(history.as_of(sequence)) for sequence in (0, 4, 5, 6, 7)] == [
        None,
        None,
        {"c": 1},
        {"c": 1},
        {"c": 1, "d": 1},
    ]
