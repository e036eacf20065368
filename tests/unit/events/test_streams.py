"""Stream and consumer definitions: names, limits, partitions."""

from __future__ import annotations

import pytest
from kaiwo_contracts.events.streams import (
    ConsumerSpec,
    Republish,
    bus_topology,
    uid_partition,
)
from kaiwo_contracts.events.subjects import SubjectError, live_subject, stored_subject


def test_the_default_topology_has_one_stream_per_family_with_explicit_limits() -> None:
    topology = bus_topology()

    assert [(s.name, s.subjects) for s in topology.streams] == [
        ("KAIWO_OBS", ("kaiwo.obs.>",)),
        ("KAIWO_PLAN", ("kaiwo.plan.>",)),
        ("KAIWO_RES", ("kaiwo.res.>",)),
        ("KAIWO_MON", ("kaiwo.mon.>",)),
        ("KAIWO_GATEWAY", ("kaiwo.gateway.>",)),
        ("KAIWO_DLQ", ("kaiwo.dlq.>", "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.>")),
        ("KAIWO_PUBLIC", ("kaiwo.public.>",)),
    ]
    for stream in topology.streams:
        expected_window = 3600.0 if stream.name == "KAIWO_PUBLIC" else 120.0
        assert stream.duplicate_window_seconds == expected_window
        assert stream.storage == "file"
        assert stream.retention == "limits"
        assert stream.subject_transform is None
    assert topology.stream("KAIWO_OBS").max_age_seconds == 7 * 24 * 3600
    assert topology.stream("KAIWO_DLQ").max_age_seconds == 30 * 24 * 3600
    assert topology.stream("KAIWO_PUBLIC").max_age_seconds == 30 * 24 * 3600


def test_every_stream_republishes_what_it_stores_where_no_stream_stores() -> None:
    """Decision 0287: the live subjects (``kaiwo.live.>``) are where the keys handed out
    subscribe; none of them is a subject any stream captures."""
    topology = bus_topology(partitions=4)

    assert [(s.name, s.republish) for s in topology.streams] == [
        ("KAIWO_OBS", Republish("kaiwo.obs.>", "kaiwo.live.obs.>")),
        ("KAIWO_PLAN", Republish("kaiwo.plan.>", "kaiwo.live.plan.>")),
        ("KAIWO_RES", Republish("kaiwo.res.>", "kaiwo.live.res.>")),
        ("KAIWO_MON", Republish("kaiwo.mon.>", "kaiwo.live.mon.>")),
        ("KAIWO_GATEWAY", Republish("kaiwo.gateway.>", "kaiwo.live.gateway.>")),
        ("KAIWO_DLQ", Republish("kaiwo.dlq.>", "kaiwo.live.dlq.>")),
        ("KAIWO_PUBLIC", Republish("kaiwo.public.>", "kaiwo.live.public.>")),
    ]
    captured = {subject.split(".")[1] for s in topology.streams for subject in s.subjects}
    assert "live" not in captured


def test_a_live_subject_is_the_stored_one_after_kaiwo_live() -> None:
    assert live_subject("kaiwo.public.workload.team-a.>") == "kaiwo.live.public.workload.team-a.>"
    assert stored_subject("kaiwo.live.obs.kaiwojob.team-a.u1.3") == "kaiwo.obs.kaiwojob.team-a.u1.3"
    assert stored_subject("kaiwo.obs.kaiwojob.team-a.u1") == "kaiwo.obs.kaiwojob.team-a.u1"
    for not_stored in ("kaiwo.live.obs.>", "other.obs.>", "kaiwo"):
        with pytest.raises(SubjectError):
            live_subject(not_stored)


def test_consumers_are_named_service_purpose_and_bounded() -> None:
    topology = bus_topology()

    assert [c.durable_name for c in topology.consumers] == [
        "planner-obs",
        "executor-plan",
        "planner-mon",
        "planner-scale",
        "recorder-obs",
        "recorder-plan",
        "recorder-res",
        "recorder-mon",
        "recorder-gateway",
        "recorder-dlq",
        "bus-deadletter-relay",
    ]
    for consumer in topology.consumers:
        assert 1 <= consumer.max_deliver < 100
        assert consumer.max_deliver > len(consumer.backoff_seconds)
    assert topology.consumer("planner-obs").max_ack_pending == 1
    assert topology.consumer("planner-obs").ordered_by_uid is False
    assert topology.consumer("planner-mon").filter_subjects == ("kaiwo.mon.utilization.>",)
    assert topology.consumer("planner-mon").stream == "KAIWO_MON"
    assert topology.consumer("planner-scale").filter_subjects == ("kaiwo.gateway.scale.>",)
    assert topology.consumer("planner-scale").stream == "KAIWO_GATEWAY"
    assert topology.consumer("executor-plan").handled_at_once == 16
    # Room for the plans of 1024 failing owners waiting for their retry (decision 0234).
    assert topology.consumer("executor-plan").max_ack_pending == 16 + 1024
    assert topology.consumer("executor-plan").ordered_by_uid is True
    assert (
        topology.consumer("executor-plan").dead_letter_subject
        == "kaiwo.dlq.KAIWO_PLAN.executor-plan"
    )


def test_partitions_add_a_transform_and_one_ordered_consumer_per_partition() -> None:
    topology = bus_topology(partitions=3)

    assert topology.stream("KAIWO_OBS").subject_transform is not None
    transform = topology.stream("KAIWO_RES").subject_transform
    assert transform is not None
    assert transform.source == "kaiwo.res.*.*.*.*"
    assert transform.destination == (
        "kaiwo.res.{{wildcard(1)}}.{{wildcard(2)}}.{{wildcard(3)}}.{{wildcard(4)}}"
        ".{{partition(3,4)}}"
    )
    assert topology.stream("KAIWO_DLQ").subject_transform is None
    executors = [c for c in topology.consumers if c.durable_name.startswith("executor-plan")]
    assert [(c.durable_name, c.filter_subjects) for c in executors] == [
        ("executor-plan-p0", ("kaiwo.plan.*.*.*.0",)),
        ("executor-plan-p1", ("kaiwo.plan.*.*.*.1",)),
        ("executor-plan-p2", ("kaiwo.plan.*.*.*.2",)),
    ]


def test_partitioned_planners_have_no_consumer_they_would_have_to_share() -> None:
    # Every active planner reads the whole streams by sequence (decision 0030).
    partitioned = {c.durable_name for c in bus_topology(partitions=4).consumers}
    alone = {c.durable_name for c in bus_topology().consumers}

    assert {"planner-obs", "planner-mon", "planner-scale"} <= alone
    assert not any(name.startswith("planner-") for name in partitioned)


def test_uid_partition_matches_the_server() -> None:
    # Values observed on nats-server 2.15 (tests/contract: partitioned streams test).
    assert uid_partition("0b8f0a52-2a4c-4c38-9a43-1f7d52a1c001", 4) == 3
    assert uid_partition("5d2e9c1e-77a1-4f0e-8f0a-0c1b2d3e4f02", 4) == 1


def test_retry_delay_walks_the_backoff_list_and_stays_on_its_last_entry() -> None:
    consumer = ConsumerSpec(
        durable_name="x-y",
        stream="S",
        filter_subjects=("a.>",),
        description="",
        max_deliver=5,
        backoff_seconds=(1.0, 10.0),
    )

    assert [consumer.retry_delay(attempt) for attempt in (1, 2, 3, 4)] == [1.0, 10.0, 10.0, 10.0]


@pytest.mark.parametrize(
    ("max_deliver", "backoff", "name"),
    [(0, (), "a-b"), (2, (1.0, 2.0), "a-b"), (3, (1.0,), "a.b")],
)
def test_consumer_definitions_the_server_would_refuse_are_rejected(
    max_deliver: int, backoff: tuple[float, ...], name: str
) -> None:
    with pytest.raises(ValueError):
        ConsumerSpec(
            durable_name=name,
            stream="S",
            filter_subjects=("a.>",),
            description="",
            max_deliver=max_deliver,
            backoff_seconds=backoff,
        )


def test_an_always_failing_message_waits_260_seconds_with_the_default_consumer() -> None:
    planner = bus_topology().consumer("planner-obs")

    # Deliveries 1-4 fail and wait 5, 15, 60 and 180 s; delivery 5 is dead-lettered.
    assert planner.max_deliver == 5
    assert [planner.retry_delay(attempt) for attempt in (1, 2, 3, 4)] == [5, 15, 60, 180]
    assert planner.poison_bound_seconds == 260


def test_every_stream_has_a_byte_limit_and_each_can_be_changed() -> None:
    default = bus_topology()
    changed = bus_topology(max_bytes={"KAIWO_OBS": 8 * 1024**3, "KAIWO_DLQ": -1})

    assert {s.name: s.max_bytes for s in default.streams} == {
        "KAIWO_OBS": 2 * 1024**3,
        "KAIWO_PLAN": 1024**3,
        "KAIWO_RES": 512 * 1024**2,
        "KAIWO_MON": 256 * 1024**2,
        "KAIWO_GATEWAY": 256 * 1024**2,
        "KAIWO_DLQ": 256 * 1024**2,
        "KAIWO_PUBLIC": 256 * 1024**2,
    }
    assert {s.name: s.max_bytes for s in changed.streams} == {
        "KAIWO_OBS": 8 * 1024**3,
        "KAIWO_PLAN": 1024**3,
        "KAIWO_RES": 512 * 1024**2,
        "KAIWO_MON": 256 * 1024**2,
        "KAIWO_GATEWAY": 256 * 1024**2,
        "KAIWO_DLQ": -1,
        "KAIWO_PUBLIC": 256 * 1024**2,
    }


@pytest.mark.parametrize(
    ("limits", "complaint"),
    [
        ({"KAIWO_OBJ": 1024**3}, "no stream 'KAIWO_OBJ' to limit"),
        ({"KAIWO_OBS": 1000}, "KAIWO_OBS: max_bytes must be -1 or at least 1048576"),
    ],
)
def test_byte_limits_for_unknown_streams_or_below_one_message_are_refused(
    limits: dict[str, int], complaint: str
) -> None:
    with pytest.raises(ValueError, match=complaint):
        bus_topology(max_bytes=limits)
