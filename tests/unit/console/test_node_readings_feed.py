"""The console folds the monitor's readings with the workload's namespace (decision 0252): a
reading of team-a's KaiwoJob is no reading of a team-b Pod that carries its uid."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from kaiwo_console.domain.history import QueueRecords
from kaiwo_console.feeds import HistoryFeed
from kaiwo_console.metrics import ConsoleMetrics
from kaiwo_contracts.events.monitor import UtilizationV1
from kaiwo_contracts.plans import ObjectRef
from kaiwo_eventstore import InMemoryEventStore, NewEvent

from tests.unit.console.objects import gpu_pod

AT = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
TRAIN = "uid-team-a-train"


def reading_of_team_as_train() -> NewEvent:
    payload = UtilizationV1(
        workload=ObjectRef(
            api_version="kaiwo.silogen.ai/v1alpha1",
            kind="KaiwoJob",
            name="train",
            namespace="team-a",
            uid=TRAIN,
        ),
        vendor="amd",
        gpu_count=4,
        pod_count=1,
        utilization_ratio=0.5,
        window_start=AT - timedelta(minutes=1),
        window_end=AT,
    )
    return NewEvent(
        event_id=f"{TRAIN}:utilization:{AT.isoformat()}",
        stream_id=f"workload/{TRAIN}",
        type=UtilizationV1.EVENT_TYPE,
        time=AT,
        source="/kaiwo/monitor",
        correlation_id=TRAIN,
        data=payload.model_dump(mode="json", by_alias=True),
        subject="team-a/train",
    )


async def test_a_reading_counts_for_the_pods_of_its_workloads_namespace_only() -> None:
    store = InMemoryEventStore()
    await store.append([reading_of_team_as_train()])
    feed = HistoryFeed(
        store=store, records=QueueRecords(), metrics=ConsoleMetrics(), on_change=lambda: None
    )
    decoy = gpu_pod("decoy", "team-b", "n1", gpus=2, workload="train")
    decoy["metadata"]["labels"]["kaiwo.silogen.ai/run-id"] = TRAIN
    feed.nodes.pod(event="ADDED", obj=decoy, recorded=AT - timedelta(minutes=2))
    feed.nodes.pod(
        event="ADDED",
        obj=gpu_pod("train-0", "team-a", "n2", gpus=4, workload="train"),
        recorded=AT - timedelta(minutes=2),
    )

    await feed.catch_up()

    # n2: team-a's 4 GPUs at 50 %; n1: the team-b Pod's 2 GPUs have no reading of theirs.
    assert feed.nodes.samples["n2"][-1].used == 2.0
    assert feed.nodes.samples["n1"][-1].used is None
