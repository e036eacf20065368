"""``kaiwo events`` against a SQLite store filled the way production fills it: observations
published on an in-memory JetStream, plans made by the real planner service, a result and a
preemption, everything recorded by the recorder."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import re
import shutil
import sqlite3
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from click.testing import CliRunner
from kaiwo_cli.main import app
from kaiwo_cli.replay import processes as replay_processes
from kaiwo_cli.replay import store as replay_store
from kaiwo_cli.replay.processes import ReplayProcessError, replay_in_processes
from kaiwo_cli.replay.recorded import (
    NATS_SEQUENCE_KEY,
    NATS_STREAM_KEY,
    StreamsRecreatedError,
)
from kaiwo_cli.replay.replanning import replay_recorded
from kaiwo_cli.replay.store import replay_from_store
from kaiwo_cli.tail_lines import (
    TailFilter,
    change_and_phase,
    display_kind,
    kind_of,
    tail_line,
)
from kaiwo_contracts.events import (
    ActionOutcome,
    ApplyResultV1,
    Envelope,
    ObservedObjectV1,
    PlanDecidedV1,
    PlanRefusedV1,
    PreemptionDecidedV1,
    RawPayload,
    ScaleDecidedV1,
)
from kaiwo_contracts.events.monitor import UtilizationV1
from kaiwo_contracts.events.streams import PLAN_STREAM, bus_topology
from kaiwo_contracts.events.subjects import (
    monitor_subject,
    observed_subject,
    result_subject,
    scale_subject,
)
from kaiwo_contracts.plans import ObjectRef
from kaiwo_eventstore import InMemoryEventStore, NewEvent, StoredEvent, open_event_store
from kaiwo_eventstore.explain import WORKLOAD_STREAM_PREFIX, CausalNode, describe, tree_lines
from kaiwo_eventstore.sql.migrate import migrate_to
from kaiwo_planner.domain.planning import plan_object
from kaiwo_planner.service import PlannerService
from kaiwo_planner.settings import PlannerSettings
from kaiwo_recorder import records, stream_ids
from kaiwo_recorder.service import RecorderService
from kaiwo_runtime.kv import MemoryKeyValue
from kaiwo_runtime.memory_bus import MemoryBus
from kaiwo_runtime.memory_jetstream import MemoryJetStream
from kaiwo_runtime.nats_server import free_port

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
JOB_UID = "0b7c0a5e-1111-4c1e-9d0a-3f2e8a9c7d01"
POD_UID = "5d1e6f70-2222-4a3b-8c9d-0e1f2a3b4c5d"
NODE_UID = "7f3e9c2a-3333-4b7d-8c55-0e1d2f3a4b5c"
QUEUE_UID = "9a8b7c6d-4444-4e5f-8a9b-0c1d2e3f4a5b"
NAMESPACE_UID = "1a2b3c4d-5555-4f6a-9b8c-7d6e5f4a3b2c"
KAIWO = "kaiwo.silogen.ai/v1alpha1"
JOB_REF = ObjectRef(
    api_version=KAIWO, kind="KaiwoJob", name="train", namespace="team-a", uid=JOB_UID
)
MODEL_UID = "3c4d5e6f-6666-4a7b-8c9d-0e1f2a3b4c5d"
MODEL_REF = ObjectRef(
    api_version="kubeai.org/v1", kind="Model", name="llm", namespace="team-a", uid=MODEL_UID
)
WIDE = {"COLUMNS": "240", "NO_COLOR": "1"}


def observed(obj: dict[str, Any], *, seconds: int, correlation: str | None = None) -> Any:
    meta = obj["metadata"]
    payload = ObservedObjectV1(
        kind=obj["kind"],
        api_version=obj["apiVersion"],
        namespace=meta.get("namespace"),
        name=meta["name"],
        uid=meta["uid"],
        resource_version=meta["resourceVersion"],
        event_type="ADDED",
        object=obj,
    )
    namespace = meta.get("namespace")
    envelope = Envelope.new(
        data=payload,
        source="/kaiwo/watcher",
        time=T0 + timedelta(seconds=seconds),
        id=f"{meta['uid']}:{meta['resourceVersion']}",
        subject=f"{namespace}/{meta['name']}" if namespace else meta["name"],
        correlationid=correlation or meta["uid"],
    )
    return envelope, observed_subject(kind=obj["kind"], namespace=namespace, uid=meta["uid"])


def cluster_objects() -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "team-a", "uid": NAMESPACE_UID, "resourceVersion": "1"},
        },
        {
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
        },
        {
            "apiVersion": KAIWO,
            "kind": "KaiwoQueueConfig",
            "metadata": {
                "name": "kaiwo",
                "uid": QUEUE_UID,
                "resourceVersion": "3",
                "generation": 1,
            },
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
                                                {"name": "amd.com/gpu", "nominalQuota": 8},
                                            ],
                                        }
                                    ],
                                }
                            ],
                        },
                    }
                ],
            },
        },
    ]


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


def pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "train-0",
            "namespace": "team-a",
            "uid": POD_UID,
            "resourceVersion": "104",
            "labels": {"kaiwo.silogen.ai/run-id": JOB_UID},
        },
        "status": {"phase": "Pending"},
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


def scale_from_zero() -> ScaleDecidedV1:
    return ScaleDecidedV1(
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


@dataclass
class Recorded:
    url: str
    path: Path


async def record_a_history(path: Path) -> None:
    server = MemoryJetStream()
    bus = MemoryBus(server=server, topology=bus_topology())
    await bus.ensure_streams()
    planner = PlannerService(
        bus,
        MemoryKeyValue(),
        clock=lambda: T0 + timedelta(minutes=1),
        settings=PlannerSettings(resync_on_start=False),
    )
    await planner.start()

    async def plan_everything() -> None:
        while await planner.step(wait_seconds=0):
            pass

    for index, obj in enumerate(cluster_objects()):
        await bus.publish(*observed(obj, seconds=index))
    await plan_everything()
    await bus.publish(*observed(job(), seconds=10))
    await plan_everything()
    job_plan = next(
        envelope
        for envelope in (
            Envelope[PlanDecidedV1].from_nats(m.headers, m.body)
            for m in server.stream_messages(PLAN_STREAM)
        )
        if envelope.data.plan.owner.kind == "KaiwoJob"
    )
    result = ApplyResultV1.summarise(
        plan_id=job_plan.id,
        plan_fingerprint=job_plan.data.fingerprint,
        owner=JOB_REF,
        actions=(
            ActionOutcome(
                operation="apply",
                target=ObjectRef(
                    api_version="batch/v1", kind="Job", name="train", namespace="team-a"
                ),
                outcome="applied",
            ),
            ActionOutcome(operation="status", target=JOB_REF, outcome="applied"),
        ),
    )
    await bus.publish(
        job_plan.caused(data=result, source="/kaiwo/executor", time=T0 + timedelta(seconds=61)),
        result_subject(outcome="applied", kind="KaiwoJob", namespace="team-a", uid=JOB_UID),
    )
    await bus.publish(*observed(pod(), seconds=20, correlation=JOB_UID))
    await plan_everything()
    preemption = PreemptionDecidedV1(
        workload=JOB_REF,
        vendor="amd",
        gpu_count=1,
        utilization_ratio=0.02,
        threshold_ratio=0.2,
        policy="OnPressure",
        reason="GpuUnderutilized",
    )
    await bus.publish(
        Envelope.new(
            data=preemption,
            source="/kaiwo/monitor",
            time=T0 + timedelta(minutes=30),
            subject="team-a/train",
            correlationid=JOB_UID,
        ),
        monitor_subject(topic="preemption", namespace="team-a", uid=JOB_UID),
    )
    # A finding the planner acts on: the job's GPU idles below the threshold.
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
    await bus.publish(
        Envelope.new(
            data=reading,
            source="/kaiwo/monitor",
            time=T0 + timedelta(minutes=31),
            subject="team-a/train",
            correlationid=JOB_UID,
        ),
        monitor_subject(topic="utilization", namespace="team-a", uid=JOB_UID),
    )
    await plan_everything()
    # A Model at zero replicas, and the autoscaler's decision to scale it from zero.
    await bus.publish(*observed(model(), seconds=40 * 60))
    await plan_everything()
    await bus.publish(
        Envelope.new(
            data=scale_from_zero(),
            source="/kaiwo/gateway",
            time=T0 + timedelta(minutes=41),
            subject="team-a/llm",
            correlationid=MODEL_UID,
        ),
        scale_subject(namespace="team-a", uid=MODEL_UID),
    )
    await plan_everything()

    await record_everything(bus, path)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    path = tmp_path_factory.mktemp("events") / "events.db"
    asyncio.run(record_a_history(path))
    return Recorded(url=f"sqlite:///{path}", path=path)


def run(*args: str) -> Any:
    return CliRunner().invoke(app, ["events", *args], env=WIDE)


# --------------------------------------------------------------------------- explain


def test_explain_tells_the_workload_story_in_causal_order(recorded: Recorded) -> None:
    result = run("explain", "team-a/train", "--store", recorded.url)

    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert f"KaiwoJob team-a/train (uid {JOB_UID})" in lines[0]

    def line_with(text: str) -> int:
        matches = [index for index, line in enumerate(lines) if text in line]
        assert matches, f"no line contains {text!r} in:\n{result.output}"
        return matches[0]

    observation = line_with("2026-03-01 12:00:10  observed KaiwoJob team-a/train ADDED (rv 100)")
    plan = line_with(
        "(observation): status PENDING; 1 object: Job team-a/train; "
        "event Normal WorkloadPending: Workload is pending admission; "
        "to create: Job team-a/train"
    )
    applied = line_with(
        "applied: apply Job team-a/train applied; status KaiwoJob team-a/train applied"
    )
    pod_line = line_with("observed Pod team-a/train-0 ADDED (rv 104)")
    preempted = line_with(
        "preemption decided: KaiwoJob team-a/train preempted (OnPressure, GpuUnderutilized, "
        "utilization 2%)"
    )
    assert observation < plan < applied < pod_line < preempted
    # the plan hangs under the observation, the result under the plan
    indent = [len(lines[i]) - len(lines[i].lstrip("│├└─ ")) for i in (observation, plan, applied)]
    assert indent[0] < indent[1] < indent[2]


def test_explain_takes_a_child_and_explains_its_workload(recorded: Recorded) -> None:
    result = run("explain", "Pod/team-a/train-0", "--store", recorded.url)

    assert result.exit_code == 0, result.output
    assert result.output.startswith(
        f"Pod team-a/train-0 belongs to KaiwoJob team-a/train (uid {JOB_UID})"
    )
    assert "observed KaiwoJob team-a/train ADDED (rv 100)" in result.output


def test_explain_names_plans_as_replay_does(recorded: Recorded) -> None:
    replayed = run("replay", "--workload", "team-a/train", "--store", recorded.url)
    explained = run("explain", "team-a/train", "--store", recorded.url)

    plan_ids = re.findall(r"plan ([0-9a-f]{8}) \(", replayed.output)
    assert plan_ids, replayed.output
    triggers = re.findall(r"plan ([0-9a-f]{8}) \((observation|finding)\)", explained.output)
    assert [plan_id for plan_id, _ in triggers] == plan_ids
    assert {trigger for _, trigger in triggers} == {"observation", "finding"}
    # each result names the plan it carried out
    assert f"(plan {plan_ids[0]})" in explained.output


def test_explain_wraps_long_lines_in_a_pipe_instead_of_cutting_them(recorded: Recorded) -> None:
    result = CliRunner().invoke(
        app, ["events", "explain", "team-a/train", "--store", recorded.url], env={"COLUMNS": "60"}
    )

    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert max(len(line) for line in lines) <= 60
    words = " ".join(line.lstrip("│├└─ ") for line in lines)
    assert (
        "event Normal WorkloadPending: Workload is pending admission; to create: Job team-a/train"
        in words
    )


def test_a_tree_keeps_wrapped_lines_under_their_branch() -> None:
    leaf = CausalNode(SimpleNamespace(text="applied: apply Job team-a/train applied"))  # type: ignore[arg-type]
    plan = CausalNode(
        SimpleNamespace(
            text="plan 3f2a1b9c (observation): status PENDING; 1 object: Job team-a/train"
        ),  # type: ignore[arg-type]
        effects=[leaf],
    )
    second = CausalNode(SimpleNamespace(text="observed Pod team-a/train-0 ADDED"))  # type: ignore[arg-type]
    first = CausalNode(SimpleNamespace(text="observed KaiwoJob team-a/train ADDED"), effects=[plan])  # type: ignore[arg-type]

    lines = tree_lines("KaiwoJob team-a/train", [first, second], label=lambda e: e.text, width=40)

    assert lines == [
        "KaiwoJob team-a/train",
        "├── observed KaiwoJob team-a/train ADDED",
        "│   └── plan 3f2a1b9c (observation):",
        "│       │   status PENDING; 1 object:",
        "│       │   Job team-a/train",
        "│       └── applied: apply Job",
        "│               team-a/train applied",
        "└── observed Pod team-a/train-0 ADDED",
    ]


def test_explain_of_an_unknown_workload_says_so_with_nothing_to_show(recorded: Recorded) -> None:
    # Nothing to show is exit 1, as `kaiwo status` of a workload the cluster lacks; it was 2,
    # which the docs keep for a store that cannot be read (decision 0141).
    result = run("explain", "team-a/nope", "--store", recorded.url)

    assert result.exit_code == 1
    assert result.stderr == "kaiwo events: no recorded observation of a workload team-a/nope\n"


def test_export_of_an_unknown_workload_has_nothing_to_show(recorded: Recorded) -> None:
    result = run("export", "--workload", "team-a/nope", "--store", recorded.url)

    assert result.exit_code == 1
    assert result.stderr == "kaiwo events: no recorded observation of a workload team-a/nope\n"


def test_replay_of_an_unknown_workload_is_not_a_plan_that_differs(recorded: Recorded) -> None:
    # replay's exit 1 says a recorded plan was not reproduced; a mistyped --workload keeps 2.
    result = run("replay", "--workload", "team-a/nope", "--store", recorded.url)

    assert result.exit_code == 2
    assert result.stderr == "kaiwo events: no recorded observation of a workload team-a/nope\n"


def test_a_store_given_by_url_is_named_by_the_cluster_it_records(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'bound.db'}"

    async def bound() -> None:
        store = await open_event_store(url)
        await store.bind_cluster("3f1c0e52-9d4b-4a51-8d7e-2b6a1c9e0f11")
        await store.close()

    asyncio.run(bound())

    result = run("explain", "team-a/nope", "--store", url)

    assert result.exit_code == 1  # the empty store records no such workload: nothing to show
    assert result.stderr.splitlines()[0] == (
        "kaiwo events: cluster 3f1c0e52-9d4b-4a51-8d7e-2b6a1c9e0f11 (uid of its kube-system "
        "namespace)"
    )


def test_a_missing_store_is_one_clear_line(tmp_path: Path) -> None:
    result = run("explain", "team-a/train", "--store", f"sqlite:///{tmp_path / 'none.db'}")

    assert result.exit_code == 2
    assert "no event store at" in result.output
    assert not (tmp_path / "none.db").exists()


# --------------------------------------------------------------------------- export


def test_export_writes_cloudevents_lines_that_parse_back(recorded: Recorded) -> None:
    result = run("export", "--store", recorded.url)

    assert result.exit_code == 0, result.output
    documents = [json.loads(line) for line in result.output.splitlines()]
    positions = [document["kaiwoposition"] for document in documents]
    assert positions == sorted(positions)
    assert len(positions) == len(set(positions))
    ids = set()
    for document in documents:
        attributes = {k: v for k, v in document.items() if not k.startswith("kaiwo")}
        envelope = Envelope[RawPayload].from_structured(attributes)
        ids.add(envelope.id)
        assert document["specversion"] == "1.0"
    job_line = next(d for d in documents if d["id"] == f"{JOB_UID}:100")
    assert job_line["kaiwostreamid"] == f"workload/{JOB_UID}"
    assert job_line["type"] == "ai.silogen.kaiwo.obs.observed.v1"
    assert job_line["data"]["object"]["spec"]["entrypoint"] == "echo hi"
    assert {f"{NODE_UID}:2", f"{POD_UID}:104", f"{QUEUE_UID}:3"} <= ids


def test_export_selects_a_workload_and_a_type(recorded: Recorded) -> None:
    result = run(
        "export",
        "--workload",
        "team-a/train",
        "--type",
        "ai.silogen.kaiwo.res.applied.v1",
        "--store",
        recorded.url,
    )

    assert result.exit_code == 0, result.output
    (line,) = result.output.splitlines()
    document = json.loads(line)
    assert document["data"]["outcome"] == "applied"
    assert document["correlationid"] == JOB_UID


def test_export_selects_by_time(recorded: Recorded) -> None:
    result = run(
        "export",
        "--since",
        "2026-03-01T12:15:00Z",
        "--until",
        "2026-03-01T12:30:30",
        "--store",
        recorded.url,
    )

    assert result.exit_code == 0, result.output
    types = [json.loads(line)["type"] for line in result.output.splitlines()]
    assert types == ["ai.silogen.kaiwo.mon.preemption-decided.v1"]


# --------------------------------------------------------------------------- replay


def test_replay_reproduces_every_recorded_plan(recorded: Recorded) -> None:
    result = run("replay", "--store", recorded.url)

    assert result.exit_code == 0, result.output
    summary = result.output.strip().splitlines()[-1]
    plans = int(summary.split(" plans")[0])
    assert plans >= 2  # the queue configuration's and the job's, at least
    assert summary.startswith(f"{plans} plans, {plans} reproduced, 0 differ, 0 skipped")


def test_replay_in_processes_prints_what_one_process_prints(recorded: Recorded) -> None:
    alone = run("replay", "--processes", "1", "--store", recorded.url)
    several = run("replay", "--processes", "2", "--store", recorded.url)

    assert alone.exit_code == several.exit_code == 0, several.output
    assert several.output == alone.output
    assert len(several.output.splitlines()) > 3


def test_replay_of_one_workload_checks_only_its_plans(recorded: Recorded) -> None:
    result = run("replay", "--workload", "team-a/train", "--store", recorded.url)

    assert result.exit_code == 0, result.output
    assert "KaiwoJob/team-a/train" in result.output
    assert "KaiwoQueueConfig" not in result.output
    assert "0 differ" in result.output


def test_replay_of_one_workload_leaves_the_other_workloads_plans_undecoded(
    recorded: Recorded, tmp_path: Path
) -> None:
    """Only the workload's own plans are decoded (found by their correlation id): another
    owner's plan whose stored bytes no longer read does not stop it, and the replay says
    what it says on the intact store."""
    copy = tmp_path / "damaged.db"
    copy.write_bytes(recorded.path.read_bytes())
    with contextlib.closing(sqlite3.connect(copy)) as database, database:
        damaged = database.execute(
            "UPDATE events SET data = ? WHERE event_type = ? AND correlation_id != ?",
            (b"\x7fnot a document", "ai.silogen.kaiwo.plan.decided.v1", JOB_UID),
        ).rowcount
    assert damaged > 0

    intact = run("replay", "--workload", "team-a/train", "--store", recorded.url)
    result = run("replay", "--workload", "team-a/train", "--store", f"sqlite:///{copy}")

    assert result.exit_code == 0, result.output
    assert result.output == intact.output
    assert "KaiwoJob/team-a/train" in result.output
    whole = run("replay", "--processes", "1", "--store", f"sqlite:///{copy}")
    assert whole.exit_code != 0  # the damage is there for a replay of every plan


async def forge_a_plan(url: str) -> None:
    """Append a plan the planner never made: the job's, claiming RUNNING."""
    store = await open_event_store(url)
    try:
        plans = await store.read_by_type(["ai.silogen.kaiwo.plan.decided.v1"])
        genuine = next(e for e in plans if e.data["plan"]["owner"]["kind"] == "KaiwoJob")
        decided = PlanDecidedV1.model_validate(genuine.data)
        status = {**(decided.plan.status or {}), "status": "RUNNING"}
        forged = PlanDecidedV1.of(
            decided.plan.model_copy(update={"status": status}),
            planned_at=decided.planned_at,
            trigger=decided.trigger,
            obs_sequence=decided.obs_sequence,
            absent=decided.absent,
        )
        await store.append_next(
            [
                NewEvent(
                    event_id="forged-plan-1",
                    stream_id=genuine.stream_id,
                    type=genuine.type,
                    subject=genuine.subject,
                    time=genuine.time,
                    source=genuine.source,
                    correlation_id=genuine.correlation_id,
                    data=forged.model_dump(mode="json", by_alias=True),
                    metadata=genuine.metadata,
                )
            ]
        )
    finally:
        await store.close()


def test_a_tampered_plan_is_reported_with_a_diff_and_exit_1(
    recorded: Recorded, tmp_path: Path
) -> None:
    copy = tmp_path / "tampered.db"
    copy.write_bytes(recorded.path.read_bytes())
    url = f"sqlite:///{copy}"
    asyncio.run(forge_a_plan(url))

    result = run("replay", "--workload", "team-a/train", "--store", url)

    assert result.exit_code == 1, result.output
    assert "differs  KaiwoJob/team-a/train  plan forged-p" in result.output
    assert "--- recorded" in result.output
    assert "+++ replayed" in result.output
    assert "-    status: RUNNING" in result.output
    assert "+    status: PENDING" in result.output
    assert ", 1 differ," in result.output

    several = run("replay", "--processes", "2", "--store", url)

    assert several.exit_code == 1, several.output
    assert "differs  KaiwoJob/team-a/train  plan forged-p" in several.output
    assert "-    status: RUNNING" in several.output
    assert ", 1 differ," in several.output


async def read_recorded(url: str) -> tuple[list[Any], list[Any]]:
    """(observations, plans) as recorded."""
    store = await open_event_store(url)
    try:
        return (
            await store.read_by_type(["ai.silogen.kaiwo.obs.observed.v1"]),
            await store.read_by_type(["ai.silogen.kaiwo.plan.decided.v1"]),
        )
    finally:
        await store.close()


async def read_findings(url: str) -> list[Any]:
    store = await open_event_store(url)
    try:
        return await store.read_by_type([UtilizationV1.EVENT_TYPE])
    finally:
        await store.close()


async def read_scale_decisions(url: str) -> list[Any]:
    store = await open_event_store(url)
    try:
        return await store.read_by_type([ScaleDecidedV1.EVENT_TYPE])
    finally:
        await store.close()


def test_replay_is_a_function_of_recorded_events(recorded: Recorded) -> None:
    observations, plans = asyncio.run(read_recorded(recorded.url))
    findings = asyncio.run(read_findings(recorded.url))
    decisions = asyncio.run(read_scale_decisions(recorded.url))
    ticks: list[tuple[int, int]] = []

    report = replay_recorded(
        observations=reversed(observations),
        plans=plans,
        findings=findings,
        scale_decisions=decisions,
        progress=lambda d, t: ticks.append((d, t)),
    )

    assert report.differ == 0 and report.skipped == 0
    assert report.reproduced == len(plans)
    assert ticks[-1] == (len(plans), len(plans))
    # observations 1..n are applied, n being the last plan's recorded obs_sequence
    assert report.observations == max(plan.data["obsSequence"] for plan in plans)
    assert report.observations >= 4  # namespace, node, queue config, job


def test_a_plan_a_finding_drove_is_replayed_from_the_recorded_finding(recorded: Recorded) -> None:
    observations, plans = asyncio.run(read_recorded(recorded.url))
    findings = asyncio.run(read_findings(recorded.url))
    driven = [p for p in plans if p.data["trigger"] == "finding"]
    assert len(driven) == 1 and driven[0].data["monSequence"] == 2  # after the preemption event
    status = driven[0].data["plan"]["status"]
    assert [
        c["reason"] for c in status["conditions"] if c["type"] == "ResourceUnderutilization"
    ] == ["GpuUtilizationLow"]

    with_findings = replay_recorded(observations=observations, plans=driven, findings=findings)
    without = replay_recorded(observations=observations, plans=driven)

    assert (with_findings.reproduced, without.differ) == (1, 1)
    assert "ResourceUnderutilization" in without.plans[0].diff


def test_a_plan_is_replayed_with_the_preemptions_it_counted_under_way(recorded: Recorded) -> None:
    """``preempting`` is an input the cluster state does not hold (decision 0076): replay
    hands the recorded set to the planner, as the planner service had it."""
    observations, plans = asyncio.run(read_recorded(recorded.url))
    job_plan = next(p for p in plans if p.data["plan"]["owner"]["kind"] == "KaiwoJob")
    marked = job_plan._replace(data={**job_plan.data, "preempting": ["uid-victim"]})
    given: list[frozenset[str]] = []

    def planner(**arguments: Any) -> Any:
        given.append(arguments["context"].preempting)
        return plan_object(**arguments)

    report = replay_recorded(
        observations=observations,
        plans=[marked],
        plan_fn=planner,
        findings=asyncio.run(read_findings(recorded.url)),
        scale_decisions=asyncio.run(read_scale_decisions(recorded.url)),
    )

    assert report.reproduced == 1
    assert given == [frozenset({"uid-victim"})]


def test_a_plan_the_autoscaler_drove_is_replayed_from_the_recorded_decision(
    recorded: Recorded,
) -> None:
    observations, plans = asyncio.run(read_recorded(recorded.url))
    decisions = asyncio.run(read_scale_decisions(recorded.url))
    driven = [p for p in plans if p.data["trigger"] == "scale"]
    assert len(driven) == 1 and driven[0].data["scaleSequence"] == 1
    assert driven[0].data["plan"]["scale"] == {
        "target": MODEL_REF.model_dump(mode="json", by_alias=True),
        "replicas": 1,
        "fromReplicas": 0,
    }

    with_decisions = replay_recorded(
        observations=observations, plans=driven, scale_decisions=decisions
    )
    without = replay_recorded(observations=observations, plans=driven)

    assert (with_decisions.reproduced, without.differ) == (1, 1)
    assert "-  scale:" in without.plans[0].diff


def test_explain_says_why_a_model_scaled(recorded: Recorded) -> None:
    result = run("explain", "Model/team-a/llm", "--store", recorded.url)

    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    decided = next(i for i, line in enumerate(lines) if "scale decided" in line)
    assert lines[decided].endswith(
        "scale decided: 0 -> 1 replicas (scale from zero: 1 request waits for a ready "
        "endpoint); window 600s of 60 samples, average 0, 1 active requests now, target 100 "
        "per replica, scale-down delay 30s; Model generation 1"
    )
    plan = lines[decided + 1]
    assert "(scale): status written;" in plan
    assert plan.endswith("scale 0 -> 1 replicas")


def test_replay_runs_with_the_cyclic_collector_paused(recorded: Recorded) -> None:
    observations, plans = asyncio.run(read_recorded(recorded.url))
    findings = asyncio.run(read_findings(recorded.url))
    collector_enabled: list[bool] = []

    def plan(**arguments: Any) -> Any:
        collector_enabled.append(gc.isenabled())
        return plan_object(**arguments)

    report = replay_recorded(
        observations=observations,
        plans=plans,
        findings=findings,
        scale_decisions=asyncio.run(read_scale_decisions(recorded.url)),
        plan_fn=plan,
    )

    assert report.reproduced == len(plans)
    # Every plan but those creating the default singletons goes through the plan function.
    planned = [p for p in plans if not p.data["plan"].get("createOnly")]
    assert collector_enabled == [False] * len(planned)
    assert gc.isenabled()


# --------------------------------------------------------------------------- tail parts


def test_the_cli_reads_the_metadata_and_streams_the_recorder_writes() -> None:
    assert NATS_STREAM_KEY == records.NATS_STREAM
    assert NATS_SEQUENCE_KEY == records.NATS_SEQUENCE
    assert WORKLOAD_STREAM_PREFIX == stream_ids.WORKLOAD_PREFIX


def test_tail_filters_by_namespace_name_kind_and_type() -> None:
    wanted = TailFilter(namespace="team-a", kind="KaiwoJob", type="plan.decided")

    assert wanted.matches(
        event_type="ai.silogen.kaiwo.plan.decided.v1", subject="team-a/train", kind="kaiwojob"
    )
    assert not wanted.matches(
        event_type="ai.silogen.kaiwo.obs.observed.v1", subject="team-a/train", kind="kaiwojob"
    )
    assert not wanted.matches(
        event_type="ai.silogen.kaiwo.plan.decided.v1", subject="team-b/train", kind="kaiwojob"
    )
    assert TailFilter(name="gpu-1").matches(event_type="x", subject="gpu-1", kind="node")


def test_tail_finds_the_kind_in_the_subject_or_the_payload() -> None:
    assert kind_of(f"kaiwo.obs.pod.team-a.{POD_UID}", {}) == "pod"
    assert kind_of(
        f"kaiwo.mon.preemption.team-a.{JOB_UID}", {"workload": {"kind": "KaiwoJob"}}
    ) == ("KaiwoJob")
    assert kind_of(None, {"plan": {"owner": {"kind": "KaiwoService"}}}) == "KaiwoService"


def test_a_tail_line_shows_time_type_kind_subject_change_phase_and_short_ids() -> None:
    line = tail_line(
        time=T0,
        event_type="ai.silogen.kaiwo.plan.decided.v1",
        kind="KaiwoJob",
        subject="team-a/train",
        change="plan/observation",
        phase="PENDING",
        event_id="3f2a1b9c-aaaa",
        correlation_id=JOB_UID,
        causation_id=None,
    )

    assert line.split() == [
        "12:00:00.000",
        "plan.decided.v1",
        "KaiwoJob",
        "team-a/train",
        "plan/observation",
        "PENDING",
        "id=3f2a1b9c",
        "corr=0b7c0a5e",
        "cause=-",
    ]


def test_tail_says_what_changed_and_the_phase_it_shows() -> None:
    observed_job = {
        "kind": "KaiwoJob",
        "eventType": "MODIFIED",
        "object": {"kind": "KaiwoJob", "status": {"status": "RUNNING"}},
    }
    finished_job = {
        "kind": "Job",
        "eventType": "MODIFIED",
        "object": {
            "kind": "Job",
            "status": {"conditions": [{"type": "Complete", "status": "True"}]},
        },
    }
    pod = {
        "kind": "Pod",
        "eventType": "ADDED",
        "object": {"kind": "Pod", "status": {"phase": "Pending"}},
    }
    plan = {
        "trigger": "observation",
        "plan": {"owner": {"kind": "KaiwoJob"}, "status": {"status": "PENDING"}},
    }

    assert change_and_phase("ai.silogen.kaiwo.obs.observed.v1", observed_job) == (
        "MODIFIED",
        "RUNNING",
    )
    assert change_and_phase("ai.silogen.kaiwo.obs.observed.v1", finished_job) == (
        "MODIFIED",
        "Complete",
    )
    assert change_and_phase("ai.silogen.kaiwo.obs.observed.v1", pod) == ("ADDED", "Pending")
    assert change_and_phase("ai.silogen.kaiwo.plan.decided.v1", plan) == (
        "plan/observation",
        "PENDING",
    )
    assert change_and_phase("ai.silogen.kaiwo.res.applied.v1", {"outcome": "failed"}) == (
        "failed",
        "-",
    )
    assert display_kind(f"kaiwo.plan.kaiwojob.team-a.{JOB_UID}", plan) == "KaiwoJob"
    assert display_kind(f"kaiwo.obs.pod.team-a.{POD_UID}", {}) == "pod"


# --------------------------------------------------------------------------- streamed replay


def _as_new(event: Any) -> NewEvent:
    return NewEvent(
        event_id=event.event_id,
        stream_id=event.stream_id,
        type=event.type,
        time=event.time,
        source=event.source,
        correlation_id=event.correlation_id,
        data=event.data,
        subject=event.subject,
        causation_id=event.causation_id,
        metadata=event.metadata,
    )


def _pairs_swapped(events: list[Any]) -> list[Any]:
    """1 0 3 2 5 4 ...: recorded out of order, but never by more than one place."""
    swapped = list(events)
    for index in range(0, len(swapped) - 1, 2):
        swapped[index], swapped[index + 1] = swapped[index + 1], swapped[index]
    return swapped


def _verdicts(report: Any) -> list[tuple[str, str, int]]:
    return sorted((p.event_id, p.outcome, p.obs_sequence) for p in report.plans)


def test_the_streamed_replay_of_a_store_gives_the_verdicts_of_the_pure_replay(
    recorded: Recorded, monkeypatch: pytest.MonkeyPatch
) -> None:
    observations, plans = asyncio.run(read_recorded(recorded.url))
    findings = asyncio.run(read_findings(recorded.url))
    decisions = asyncio.run(read_scale_decisions(recorded.url))
    pure = replay_recorded(
        observations=observations, plans=plans, findings=findings, scale_decisions=decisions
    )

    async def streamed_from_sqlite() -> Any:
        store = await open_event_store(recorded.url)
        try:
            return await replay_from_store(store)
        finally:
            await store.close()

    async def streamed_out_of_order(batch_size: int = 2000) -> Any:
        # Recorded slightly out of order (a redelivered batch): the plans' window and the
        # inputs' ordering put them back, and the verdicts stay the same.
        store = InMemoryEventStore()
        shuffled = [*_pairs_swapped(observations), *findings, *decisions, *_pairs_swapped(plans)]
        await store.append([_as_new(event) for event in shuffled])
        seen: list[str] = []
        report = await replay_from_store(
            store,
            plan_window=2,
            batch_size=batch_size,
            on_verdict=lambda v: seen.append(v.event_id),
        )
        assert sorted(seen) == sorted(p.event_id for p in plans)
        return report

    from_sqlite = asyncio.run(streamed_from_sqlite())
    out_of_order = asyncio.run(streamed_out_of_order())
    # Observations fast-forwarded one chunk per batch of two read: still none taken early.
    monkeypatch.setattr(replay_store, "FAST_FORWARD_CHUNK", 1)
    in_chunks = asyncio.run(streamed_out_of_order(batch_size=2))

    assert pure.reproduced == len(plans) and pure.differ == 0
    assert _verdicts(from_sqlite) == _verdicts(pure)
    assert _verdicts(out_of_order) == _verdicts(pure)
    assert _verdicts(in_chunks) == _verdicts(pure)
    assert from_sqlite.observations == pure.observations == in_chunks.observations
    assert (from_sqlite.late_observations, out_of_order.late_observations) == (0, 0)
    assert in_chunks.late_observations == 0


def test_replay_in_processes_gives_the_verdicts_of_one_process_in_the_same_order(
    recorded: Recorded,
) -> None:
    observations, plans = asyncio.run(read_recorded(recorded.url))
    # Every span starts at a plan; the later ones fast-forward through observations.
    assert min(p.global_position for p in plans) > min(o.global_position for o in observations)
    one: list[Any] = []

    async def in_one_process() -> Any:
        store = await open_event_store(recorded.url)
        try:
            return await replay_from_store(store, on_verdict=one.append)
        finally:
            await store.close()

    alone = asyncio.run(in_one_process())
    for processes in (2, 3):
        several: list[Any] = []
        report = replay_in_processes(recorded.url, processes=processes, on_verdict=several.append)

        assert several == one
        assert (report.reproduced, report.differ, report.skipped) == (len(plans), 0, 0)
        assert report.observations == alone.observations
        assert report.plans == ()


def test_a_replay_process_that_fails_is_reported_without_the_stores_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url = f"postgresql://kaiwo:s3cret-pw@127.0.0.1:{free_port()}/events"

    with pytest.raises(ReplayProcessError) as not_started:
        replay_in_processes(url, processes=2, on_verdict=lambda _verdict: None)
    # The store answered the parent, and then not the processes.
    monkeypatch.setattr(replay_processes, "_span_starts", partial(_answered, [3]))
    with pytest.raises(ReplayProcessError) as failed:
        replay_in_processes(url, processes=2, on_verdict=lambda _verdict: None)

    assert str(not_started.value).startswith("replay processes not started, the store not read")
    assert str(failed.value).startswith("replay process ")
    for error in (not_started, failed):
        assert "s3cret-pw" not in str(error.value)
        assert "Connect call failed" in str(error.value) or "refused" in str(error.value)


async def _answered(starts: list[int], _url: str, _shares: list[float]) -> list[int]:
    return starts


def test_a_streamed_replay_keeps_only_the_verdicts_asked_for_and_counts_them_all(
    recorded: Recorded,
) -> None:
    async def replay() -> Any:
        store = await open_event_store(recorded.url)
        try:
            return await replay_from_store(
                store, keep=lambda verdict: verdict.outcome != "reproduced"
            )
        finally:
            await store.close()

    report = asyncio.run(replay())

    _, plans = asyncio.run(read_recorded(recorded.url))
    assert report.plans == ()
    assert (report.reproduced, report.differ, report.skipped) == (len(plans), 0, 0)


def test_an_observation_recorded_after_replay_passed_it_is_counted_late_and_a_plan_skipped(
    recorded: Recorded,
) -> None:
    observations, plans = asyncio.run(read_recorded(recorded.url))
    job_plan = next(p for p in plans if p.data["plan"]["owner"]["kind"] == "KaiwoJob")
    needed = job_plan.data["obsSequence"]
    # The job's own observation is recorded after every plan and after later observations.
    held_back = next(o for o in observations if o.metadata[NATS_SEQUENCE_KEY] == needed)

    async def replay() -> Any:
        store = InMemoryEventStore()
        rest = [o for o in observations if o is not held_back]
        await store.append([_as_new(e) for e in [*rest, *plans]])
        await store.append([_as_new(held_back)])
        # One event per read: the replay has passed the job's sequence before it reads it.
        return await replay_from_store(store, plan_window=1, batch_size=1)

    report = asyncio.run(replay())

    verdict = next(p for p in report.plans if p.event_id == job_plan.event_id)
    assert verdict.outcome == "skipped"
    assert "is not among the recorded observations" in verdict.reason
    assert report.late_observations == 1


def test_a_plan_that_differs_with_the_carried_context_is_judged_again_from_a_fresh_one(
    recorded: Recorded,
) -> None:
    observations, plans = asyncio.run(read_recorded(recorded.url))
    inputs = {
        "findings": asyncio.run(read_findings(recorded.url)),
        "scale_decisions": asyncio.run(read_scale_decisions(recorded.url)),
    }
    contexts: list[Any] = []

    def planner_with_a_stale_first_answer(**arguments: Any) -> Any:
        """Plans as the planner does, except that the first answer for the KaiwoJob is
        wrong, as a value a carried context kept when it should not have would make it."""
        result = plan_object(**arguments)
        if arguments["owner"]["kind"] != "KaiwoJob" or contexts:
            return result
        contexts.append(arguments["context"])
        assert result.plan is not None
        stale = result.plan.model_copy(update={"status": {"status": "RUNNING"}})
        return SimpleNamespace(plan=stale)

    carried = replay_recorded(
        observations=observations, plans=plans, plan_fn=planner_with_a_stale_first_answer, **inputs
    )
    assert carried.differ == 0 and carried.reproduced == len(plans)

    contexts.clear()
    fresh = replay_recorded(
        observations=observations,
        plans=plans,
        plan_fn=planner_with_a_stale_first_answer,
        fresh_contexts=True,
        **inputs,
    )
    assert fresh.differ == 1
    assert "RUNNING" in next(p.diff for p in fresh.plans if p.outcome == "differs")


def test_tail_names_an_unreachable_nats_in_one_line_and_exits_2(tmp_path: Path) -> None:
    # Nothing listens there: connecting fails inside nats-py, which the CLI does not import
    # (kaiwo_runtime.nats_connection.CONNECT_ERRORS names what connecting may raise).
    url = f"nats://127.0.0.1:{free_port()}"
    result = run("tail", "--nats", url, "--store", f"sqlite:///{tmp_path / 'events.db'}")

    assert result.exit_code == 2, result.output
    assert f"NATS at {url} is unreachable" in result.output


def _first_integer_made_float(document: Any) -> bool:
    """Turn the first integer found in ``document`` into the equal float, in place."""
    items = document.items() if isinstance(document, dict) else enumerate(document)
    for key, value in items:
        if type(value) is int:
            document[key] = float(value)
            return True
        if isinstance(value, dict | list) and _first_integer_made_float(value):
            return True
    return False


def test_a_recorded_plan_changed_after_hashing_is_skipped_even_where_it_looks_equal(
    recorded: Recorded,
) -> None:
    # A recorded plan must hash to its fingerprint, types included: 1.0 for 1 is equal to
    # ==, not to the hash, so a comparison by == alone would take the retyped plan.
    observations, plans = asyncio.run(read_recorded(recorded.url))
    index = next(
        i
        for i, plan in enumerate(plans)
        if plan.data["plan"]["owner"]["kind"] == "KaiwoJob" and plan.data["plan"]["desired"]
    )
    data = json.loads(json.dumps(plans[index].data))
    assert _first_integer_made_float(data["plan"]["desired"])
    retyped = plans[index]._replace(data=data)
    data = json.loads(json.dumps(plans[index].data))
    data["plan"]["status"] = {**(data["plan"]["status"] or {}), "status": "FORGED"}
    restated = plans[index]._replace(data=data, event_id="restated")

    report = replay_recorded(
        observations=observations,
        plans=[*plans[:index], retyped, restated, *plans[index + 1 :]],
        findings=asyncio.run(read_findings(recorded.url)),
        scale_decisions=asyncio.run(read_scale_decisions(recorded.url)),
    )

    skipped = {plan.event_id: plan.reason for plan in report.plans if plan.outcome == "skipped"}
    assert skipped == {
        plans[index].event_id: "the recorded plan does not parse as PlanDecidedV1",
        "restated": "the recorded plan does not parse as PlanDecidedV1",
    }
    assert report.reproduced == len(plans) - 1


async def record_everything(bus: MemoryBus, path: Path) -> None:
    """Everything on ``bus``, stored by the recorder into the SQLite store at ``path``."""
    store = await open_event_store(f"sqlite:///{path}")
    try:
        recorder = RecorderService(bus=bus, store=store, clock=lambda: T0 + timedelta(hours=1))
        while sum([(await recorder.pump(c, wait_seconds=0)).messages for c in recorder.consumers]):
            pass
    finally:
        await store.close()


# --------------------------------------------------------------- a name given again (0164)

AGAIN_UID = "0b7c0a5e-2222-4c1e-9d0a-3f2e8a9c7d02"


async def record_a_name_given_twice(path: Path) -> None:
    """``team-a/train`` made, deleted, and made again (a new uid), as the recorder stores it."""
    bus = MemoryBus(server=MemoryJetStream(), topology=bus_topology())
    await bus.ensure_streams()
    again = job()
    again["metadata"] = {**again["metadata"], "uid": AGAIN_UID, "resourceVersion": "300"}
    await bus.publish(*observed(job(), seconds=0))
    await bus.publish(*observed(again, seconds=60))
    await record_everything(bus, path)


def test_explain_of_a_name_given_again_names_the_earlier_workload_and_reads_it_by_uid(
    tmp_path: Path,
) -> None:
    """A user who submitted ``train`` again after it failed and asks why the first failed:
    ``explain team-a/train`` tells the newest and says the name had an earlier workload,
    with its uid; ``explain <uid>`` and ``replay --workload <uid>`` read that one."""
    path = tmp_path / "events.db"
    asyncio.run(record_a_name_given_twice(path))
    url = f"sqlite:///{path}"
    note = (
        f"team-a/train was also the name of 1 earlier workload(s), deleted and made again "
        f"under it: uid {JOB_UID} (give a uid instead of team-a/train to read one)"
    )

    newest = run("explain", "team-a/train", "--store", url)
    earlier = run("explain", JOB_UID, "--store", url)
    replayed = run("replay", "--workload", "team-a/train", "--store", url)
    by_uid = run("replay", "--workload", JOB_UID, "--store", url)

    assert newest.exit_code == 0, newest.output
    assert newest.stdout.splitlines() == [
        f"KaiwoJob team-a/train (uid {AGAIN_UID}) — 1 recorded events",
        "└── 2026-03-01 12:01:00  observed KaiwoJob team-a/train ADDED (rv 300)",
        note,
    ]
    assert earlier.exit_code == 0, earlier.output
    assert earlier.stdout.splitlines() == [
        f"KaiwoJob team-a/train (uid {JOB_UID}) — 1 recorded events",
        "└── 2026-03-01 12:00:00  observed KaiwoJob team-a/train ADDED (rv 100)",
    ]
    assert replayed.exit_code == 0, replayed.output
    assert f"kaiwo events: {note}\n" in replayed.stderr
    assert by_uid.exit_code == 0, by_uid.output
    assert "earlier" not in by_uid.stderr


# ------------------------------------------------- NATS lost its streams, the store kept (0231)


async def record_a_lifetime(path: Path, objects: list[dict[str, Any]], *, minute: int) -> None:
    """One lifetime of the streams (a NATS server that starts empty) planned and recorded
    into the store at ``path``, which keeps what earlier lifetimes recorded."""
    bus = MemoryBus(server=MemoryJetStream(), topology=bus_topology())
    await bus.ensure_streams()
    planner = PlannerService(
        bus,
        MemoryKeyValue(),
        clock=lambda: T0 + timedelta(minutes=minute),
        settings=PlannerSettings(resync_on_start=False),
    )
    await planner.start()
    for index, obj in enumerate(objects):
        await bus.publish(*observed(obj, seconds=minute * 60 + index))
        while await planner.step(wait_seconds=0):
            pass
    await record_everything(bus, path)


def _job_at(resource_version: int, gpus: int) -> dict[str, Any]:
    edited = job()
    edited["metadata"] = {**edited["metadata"], "resourceVersion": str(resource_version)}
    edited["spec"] = {**edited["spec"], "gpus": gpus}
    return edited


@pytest.fixture(scope="module")
def two_lifetimes(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The job planned at 1 GPU; NATS restarted empty (the dev overlay's emptyDir), the
    watcher relisted and the job was edited to 2 and 3 GPUs: KAIWO_OBS sequences 5 to 7
    are used again by the second lifetime (1 to 4 are the same events, stored once)."""
    path = tmp_path_factory.mktemp("lifetimes") / "events.db"

    async def record() -> None:
        first = [*cluster_objects(), job(), _job_at(110, 1), _job_at(120, 1)]
        await record_a_lifetime(path, first, minute=1)
        second = [*cluster_objects(), _job_at(120, 1), _job_at(150, 2), _job_at(170, 3)]
        await record_a_lifetime(path, second, minute=10)

    asyncio.run(record())
    return f"sqlite:///{path}"


@pytest.mark.parametrize("workload", [None, JOB_UID])
def test_replay_of_a_store_of_two_stream_lifetimes_refuses_naming_the_sequence(
    two_lifetimes: str, workload: str | None
) -> None:
    async def replay() -> Any:
        store = await open_event_store(two_lifetimes, migrate=False)
        try:
            return await replay_from_store(store, workload_uid=workload)
        finally:
            await store.close()

    # Before, the second lifetime's plans were judged against the first's job at sequence
    # 5 to 7 (the first recording of a sequence counted): three "differ", exit 1.
    with pytest.raises(StreamsRecreatedError, match="KAIWO_OBS sequence 5 is recorded twice"):
        asyncio.run(replay())


def test_pure_replay_of_two_stream_lifetimes_refuses(two_lifetimes: str) -> None:
    observations, plans = asyncio.run(read_recorded(two_lifetimes))

    with pytest.raises(StreamsRecreatedError, match="KAIWO_OBS sequence 5 is recorded twice"):
        replay_recorded(observations=observations, plans=plans)


def test_replay_processes_of_two_stream_lifetimes_fail_saying_so(two_lifetimes: str) -> None:
    with pytest.raises(ReplayProcessError, match="the NATS stream KAIWO_OBS was made again"):
        replay_in_processes(two_lifetimes, processes=2, on_verdict=lambda verdict: None)


# ------------------------------------------- a store the commands cannot read (decision 0230)


def test_an_unreachable_store_is_one_line_naming_it_without_its_password_and_exit_2() -> None:
    """The SQL store connects at its first read: the refused connection escaped as a
    traceback and exit 1, which replay keeps for a plan not reproduced (decision 0141)."""
    port = free_port()
    url = f"postgresql://kaiwo:s3cret-pw@127.0.0.1:{port}/events"
    shown = f"postgresql://kaiwo:***@127.0.0.1:{port}/events"

    for command in (
        ["explain", "team-a/train"],
        ["export", "--workload", "team-a/train"],
        ["export"],
        ["replay", "--workload", "team-a/train"],
        ["replay", "-j", "2"],
    ):
        result = run(*command, "--store", url)

        assert result.exit_code == 2, (command, result.output)
        assert result.stdout == ""
        [line] = result.stderr.splitlines()
        assert line.startswith(f"kaiwo events: cannot read the event store {shown}: "), line
        assert "Connect call failed" in line
        assert "s3cret-pw" not in result.output


def test_a_damaged_sqlite_store_is_one_line_and_exit_2(recorded: Recorded, tmp_path: Path) -> None:
    """Its header and schema read, its events do not: sqlite3.DatabaseError at the first
    read was a traceback and exit 1."""
    damaged = tmp_path / "damaged.db"
    shutil.copy(recorded.path, damaged)
    with contextlib.closing(sqlite3.connect(damaged)) as database:
        page_size = database.execute("PRAGMA page_size").fetchone()[0]
        pages = database.execute("PRAGMA page_count").fetchone()[0]
        [(version_page,)] = database.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = 'eventstore_alembic_version'"
        ).fetchall()
    with damaged.open("r+b") as file:
        for page in range(2, pages + 1):
            if page != version_page:
                file.seek((page - 1) * page_size)
                file.write(b"\xff" * page_size)

    for command in (["explain", "team-a/train"], ["replay", "--workload", "team-a/train"]):
        result = run(*command, "--store", f"sqlite:///{damaged}")

        assert result.exit_code == 2, (command, result.output)
        assert result.stderr == (
            f"kaiwo events: cannot read the event store sqlite:///{damaged}: "
            "database disk image is malformed\n"
        )


def test_a_store_at_an_older_revision_says_so_and_how_to_upgrade_it(
    recorded: Recorded, tmp_path: Path
) -> None:
    """operations.md's "Upgrading" takes a store back to 0001 with migrate_to; every command
    then said "a newer kaiwo wrote it?" of the first document it decoded."""
    older = tmp_path / "older.db"
    shutil.copy(recorded.path, older)
    asyncio.run(migrate_to(f"sqlite:///{older}", "0001"))

    for command in (
        ["explain", "team-a/train"],
        ["replay", "--workload", "team-a/train"],
        ["export", "--workload", "team-a/train"],
    ):
        result = run(*command, "--store", f"sqlite:///{older}")

        assert result.exit_code == 2, (command, result.output)
        assert result.stderr == (
            f"kaiwo events: the event store sqlite:///{older} is at schema revision 0001, "
            "older than this kaiwo reads (0002 to 0003): upgrade it by starting this "
            "version's recorder (it migrates at start) or with "
            "`python -m kaiwo_eventstore.sql.migrate URL`, after a backup\n"
        )


def test_a_store_at_a_revision_this_kaiwo_does_not_know_says_a_newer_one_wrote_it(
    recorded: Recorded, tmp_path: Path
) -> None:
    newer = tmp_path / "newer.db"
    shutil.copy(recorded.path, newer)
    with contextlib.closing(sqlite3.connect(newer)) as database:
        database.execute("UPDATE eventstore_alembic_version SET version_num = '0004'")
        database.commit()

    result = run("explain", "team-a/train", "--store", f"sqlite:///{newer}")

    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"kaiwo events: the event store sqlite:///{newer} is at schema revision 0004, which "
        "this kaiwo does not know (it reads 0002 to 0003): a newer kaiwo wrote it; read it "
        "with that version\n"
    )


def test_export_names_the_flag_of_a_time_it_cannot_read(recorded: Recorded) -> None:
    since = run("export", "--since", "x", "--store", recorded.url)
    until = run("export", "--until", "2026-13-01", "--store", recorded.url)

    assert (since.exit_code, until.exit_code) == (2, 2)
    assert since.stderr == (
        "kaiwo events: --since: 'x' is not an ISO 8601 time (e.g. 2026-12-06T10:00:00Z)\n"
    )
    assert until.stderr == (
        "kaiwo events: --until: '2026-13-01' is not an ISO 8601 time (e.g. 2026-12-06T10:00:00Z)\n"
    )


# ------------------------------------------- a KaiwoJob and a KaiwoService of one name (0198)

SERVICE_UID = "0b7c0a5e-3333-4c1e-9d0a-3f2e8a9c7d03"


async def record_a_job_and_a_service_of_one_name(path: Path) -> None:
    """KaiwoJob ``team-a/train`` (training) and KaiwoService ``team-a/train`` (serving it),
    as the recorder stores them."""
    bus = MemoryBus(server=MemoryJetStream(), topology=bus_topology())
    await bus.ensure_streams()
    service = {
        "apiVersion": KAIWO,
        "kind": "KaiwoService",
        "metadata": {
            "name": "train",
            "namespace": "team-a",
            "uid": SERVICE_UID,
            "resourceVersion": "400",
            "generation": 1,
        },
        "spec": {"image": "busybox", "entrypoint": "serve", "gpus": 1},
    }
    await bus.publish(*observed(job(), seconds=0))
    await bus.publish(*observed(service, seconds=60))
    await record_everything(bus, path)


def test_a_name_a_job_and_a_service_share_is_refused_until_the_kind_is_said(
    tmp_path: Path,
) -> None:
    """explain and replay picked the newer of the two and called the other an earlier
    workload "deleted and made again under it"; now the name is refused with the two ways
    to say it (decision 0198), and each reads its own."""
    path = tmp_path / "events.db"
    asyncio.run(record_a_job_and_a_service_of_one_name(path))
    url = f"sqlite:///{path}"
    refusal = (
        "kaiwo events: team-a/train was recorded as a KaiwoJob and a KaiwoService: say "
        "which, as KaiwoJob/team-a/train or KaiwoService/team-a/train (or give its uid)\n"
    )

    explained = run("explain", "team-a/train", "--store", url)
    replayed = run("replay", "--workload", "team-a/train", "--store", url)
    service = run("explain", "KaiwoService/team-a/train", "--store", url)
    training = run("replay", "--workload", "KaiwoJob/team-a/train", "--store", url)

    assert explained.exit_code == 1  # the user's words name no one workload
    assert explained.stderr == refusal
    assert replayed.exit_code == 2  # replay's 1 says a plan was not reproduced
    assert replayed.stderr == refusal
    assert service.exit_code == 0, service.output
    assert service.stdout.splitlines() == [
        f"KaiwoService team-a/train (uid {SERVICE_UID}) — 1 recorded events",
        "└── 2026-03-01 12:01:00  observed KaiwoService team-a/train ADDED (rv 400)",
    ]
    assert training.exit_code == 0, training.output
    assert "earlier" not in training.stderr


# ------------------------------------------------------------------ a refused plan, explained


def test_explain_says_why_a_plan_was_refused_and_what_is_observed_again() -> None:
    """It showed the bare type, ai.silogen.kaiwo.res.refused.v1."""
    refusal = PlanRefusedV1(
        plan_id="53c98b33-fcb8-5630-ac6b-e1b1fa54ff24",
        plan_fingerprint="4f13232a32e5",
        owner=JOB_REF,
        reasons=(
            f"the owner KaiwoJob team-a/train does not exist with uid {JOB_UID}",
            "source Queue kaiwo differs from the live object",
        ),
        reobserve=(
            JOB_REF,
            ObjectRef(api_version="v1", kind="ConfigMap", name="kaiwo", namespace="kaiwo-system"),
        ),
    )
    event = StoredEvent(
        global_position=9,
        event_id="refused-1",
        stream_id=f"{WORKLOAD_STREAM_PREFIX}{JOB_UID}",
        stream_version=3,
        type=PlanRefusedV1.EVENT_TYPE,
        subject="team-a/train",
        source="/kaiwo/executor",
        time=T0,
        correlation_id=JOB_UID,
        causation_id="53c98b33-fcb8-5630-ac6b-e1b1fa54ff24",
        data=refusal.model_dump(mode="json", by_alias=True),
        metadata={},
        recorded_at=T0,
    )

    assert describe(event) == (
        f"refused (plan 53c98b33): the owner KaiwoJob team-a/train does not exist with uid "
        f"{JOB_UID}; source Queue kaiwo differs from the live object; reobserve KaiwoJob "
        "team-a/train, ConfigMap kaiwo-system/kaiwo"
    )
