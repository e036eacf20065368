"""The bus identities and their permission sets, derived from the topology."""

from __future__ import annotations

import pytest
from kaiwo_contracts.events.messenger import messenger_streams
from kaiwo_contracts.events.permissions import (
    EVENT_STREAMS,
    LEASE_BUCKET,
    SERVICE_BUCKETS,
    SERVICES,
    admin_identity,
    cli_identity,
    gateway_identity,
    inbox_prefix,
    issued_together,
    namespace_subscriber_identity,
    operator_identities,
    reader_identity,
    service_identity,
    subscriber_identity,
    tenant_identity,
)
from kaiwo_contracts.events.streams import bus_topology

PLANNER_PUBLISH = (
    "kaiwo.plan.>",
    "kaiwo.public.>",
    "$JS.API.STREAM.INFO.KAIWO_OBS",
    "$JS.API.STREAM.INFO.KAIWO_PLAN",
    "$JS.API.STREAM.INFO.KAIWO_MON",
    "$JS.API.STREAM.INFO.KAIWO_GATEWAY",
    "$JS.API.STREAM.INFO.KAIWO_PUBLIC",
    "$JS.API.CONSUMER.INFO.KAIWO_OBS.planner-obs",
    "$JS.API.CONSUMER.MSG.NEXT.KAIWO_OBS.planner-obs",
    "$JS.ACK.KAIWO_OBS.planner-obs.>",
    "kaiwo.dlq.KAIWO_OBS.planner-obs",
    "$JS.API.CONSUMER.INFO.KAIWO_MON.planner-mon",
    "$JS.API.CONSUMER.MSG.NEXT.KAIWO_MON.planner-mon",
    "$JS.ACK.KAIWO_MON.planner-mon.>",
    "kaiwo.dlq.KAIWO_MON.planner-mon",
    "$JS.API.CONSUMER.INFO.KAIWO_GATEWAY.planner-scale",
    "$JS.API.CONSUMER.MSG.NEXT.KAIWO_GATEWAY.planner-scale",
    "$JS.ACK.KAIWO_GATEWAY.planner-scale.>",
    "kaiwo.dlq.KAIWO_GATEWAY.planner-scale",
    "$JS.API.STREAM.MSG.GET.KAIWO_OBS",
    "$JS.API.DIRECT.GET.KAIWO_OBS",
    "$JS.API.DIRECT.GET.KAIWO_OBS.>",
    "$JS.API.STREAM.INFO.KV_kaiwo-planner",
    "$JS.API.STREAM.CREATE.KV_kaiwo-planner",
    "$JS.API.STREAM.MSG.GET.KV_kaiwo-planner",
    "$JS.API.DIRECT.GET.KV_kaiwo-planner",
    "$JS.API.DIRECT.GET.KV_kaiwo-planner.>",
    "$KV.kaiwo-planner.>",
    "$JS.API.STREAM.INFO.KV_kaiwo-leases",
    "$JS.API.STREAM.CREATE.KV_kaiwo-leases",
    "$JS.API.STREAM.MSG.GET.KV_kaiwo-leases",
    "$JS.API.DIRECT.GET.KV_kaiwo-leases",
    "$JS.API.DIRECT.GET.KV_kaiwo-leases.>",
    "$KV.kaiwo-leases.planner",
    # The watcher's bucket, read only: the cluster it records (decision 0042).
    "$JS.API.STREAM.INFO.KV_kaiwo-watcher",
    "$JS.API.STREAM.MSG.GET.KV_kaiwo-watcher",
    "$JS.API.DIRECT.GET.KV_kaiwo-watcher",
    "$JS.API.DIRECT.GET.KV_kaiwo-watcher.>",
)


def event_subjects(subjects: tuple[str, ...]) -> set[str]:
    """The subjects of ``kaiwo.>`` among ``subjects`` (the events one may publish)."""
    return {subject for subject in subjects if subject.startswith("kaiwo.")}


def test_the_planner_may_publish_plans_its_dead_letters_and_use_its_consumer_and_buckets() -> None:
    planner = service_identity("planner", bus_topology())

    assert planner.permissions.publish == PLANNER_PUBLISH
    assert planner.permissions.subscribe == ("_INBOX.planner.>",)
    assert planner.streams == (
        "KAIWO_OBS",
        "KAIWO_PLAN",
        "KAIWO_MON",
        "KAIWO_GATEWAY",
        "KAIWO_PUBLIC",
    )
    assert planner.consumers == ("planner-obs", "planner-mon", "planner-scale")


def test_each_family_has_exactly_one_publisher() -> None:
    topology = bus_topology()
    publishes = {
        name: event_subjects(service_identity(name, topology).permissions.publish)
        for name in SERVICES
    }

    assert publishes == {
        "watcher": {"kaiwo.obs.>"},
        "planner": {
            "kaiwo.plan.>",
            "kaiwo.public.>",
            "kaiwo.dlq.KAIWO_OBS.planner-obs",
            "kaiwo.dlq.KAIWO_MON.planner-mon",
            "kaiwo.dlq.KAIWO_GATEWAY.planner-scale",
        },
        "executor": {"kaiwo.res.>", "kaiwo.dlq.KAIWO_PLAN.executor-plan"},
        "monitor": {"kaiwo.mon.>"},
        "recorder": {"kaiwo.dlq.>"},
    }
    assert event_subjects(gateway_identity().permissions.publish) == {"kaiwo.gateway.>"}


def test_no_service_may_declare_streams_or_touch_the_operator_s_consumers_wholesale() -> None:
    topology = bus_topology()
    for name in SERVICES:
        publish = service_identity(name, topology).permissions.publish
        assert "$JS.API.>" not in publish
        assert not any(subject.startswith("$JS.API.STREAM.CREATE.KAIWO_") for subject in publish)
        assert not any(subject.startswith("$JS.API.STREAM.UPDATE.") for subject in publish)
        assert not any(subject.startswith("$JS.API.CONSUMER.CREATE.KAIWO_") for subject in publish)
        assert not any(subject.startswith("$JS.API.CONSUMER.DELETE.KAIWO_") for subject in publish)


def test_the_recorder_reads_every_stream_through_its_consumers_and_the_relay() -> None:
    recorder = service_identity("recorder", bus_topology())

    assert recorder.streams == EVENT_STREAMS
    assert recorder.consumers == (
        "recorder-obs",
        "recorder-plan",
        "recorder-res",
        "recorder-mon",
        "recorder-gateway",
        "recorder-dlq",
        "bus-deadletter-relay",
    )
    assert "$JS.API.CONSUMER.MSG.NEXT.KAIWO_DLQ.bus-deadletter-relay" in (
        recorder.permissions.publish
    )
    assert "$JS.API.STREAM.MSG.GET.KAIWO_RES" in recorder.permissions.publish


def test_the_planner_and_the_recorder_may_read_the_watchers_bucket_and_not_write_it() -> None:
    for name in ("planner", "recorder"):
        publish = service_identity(name, bus_topology()).permissions.publish
        watchers = [subject for subject in publish if "kaiwo-watcher" in subject]
        assert watchers == [
            "$JS.API.STREAM.INFO.KV_kaiwo-watcher",
            "$JS.API.STREAM.MSG.GET.KV_kaiwo-watcher",
            "$JS.API.DIRECT.GET.KV_kaiwo-watcher",
            "$JS.API.DIRECT.GET.KV_kaiwo-watcher.>",
        ], name


def test_partitions_give_the_executor_one_consumer_and_one_lease_per_partition() -> None:
    executor = service_identity("executor", bus_topology(partitions=3))

    assert executor.consumers == ("executor-plan-p0", "executor-plan-p1", "executor-plan-p2")
    leases = [s for s in executor.permissions.publish if s.startswith(f"$KV.{LEASE_BUCKET}.")]
    assert leases == ["$KV.kaiwo-leases.executor", "$KV.kaiwo-leases.executor.>"]
    assert "kaiwo.dlq.KAIWO_PLAN.executor-plan-p1" in executor.permissions.publish


def test_partitioned_planners_read_three_streams_by_sequence_and_hold_planner_leases() -> None:
    planner = service_identity("planner", bus_topology(partitions=3))
    alone = service_identity("planner", bus_topology())

    assert planner.consumers == ()
    publish = planner.permissions.publish
    for stream in ("KAIWO_OBS", "KAIWO_MON", "KAIWO_GATEWAY"):
        assert f"$JS.API.DIRECT.GET.{stream}" in publish
    assert "$JS.API.DIRECT.GET.KAIWO_MON" not in alone.permissions.publish
    leases = [s for s in publish if s.startswith(f"$KV.{LEASE_BUCKET}.")]
    assert leases == ["$KV.kaiwo-leases.planner", "$KV.kaiwo-leases.planner.>"]


def test_the_monitor_may_hold_the_monitor_lease_and_no_other() -> None:
    monitor = service_identity("monitor", bus_topology())

    leases = [s for s in monitor.permissions.publish if s.startswith(f"$KV.{LEASE_BUCKET}.")]
    assert leases == ["$KV.kaiwo-leases.monitor"]
    assert "$JS.API.STREAM.INFO.KV_kaiwo-leases" in monitor.permissions.publish


def test_the_cli_publishes_nothing_and_reads_only_events_without_objects() -> None:
    cli = cli_identity()

    assert cli.permissions.publish == ()
    # Not observations, plans or dead letters: whole objects of every namespace.
    # Live only, where the streams republish (decision 0287): no subject a stream stores.
    assert cli.permissions.subscribe == (
        "kaiwo.live.public.>",
        "kaiwo.live.res.>",
        "kaiwo.live.mon.>",
        "kaiwo.live.gateway.>",
        "_INBOX.cli.>",
    )


def test_the_watcher_listens_to_the_executors_refusals_and_to_nothing_else() -> None:
    watcher = service_identity("watcher", bus_topology())

    assert watcher.permissions.subscribe == ("_INBOX.watcher.>", "kaiwo.res.refused.>")


def test_the_administrator_declares_and_may_publish_events() -> None:
    admin = admin_identity()

    assert admin.permissions.publish == (
        "$JS.API.>",
        "$JS.ACK.>",
        "$JS.FC.>",
        "$KV.>",
        "kaiwo.>",
    )
    assert admin.permissions.subscribe == ("_INBOX.admin.>", "kaiwo.>")


def test_a_reader_gets_durable_consumers_named_after_itself_and_publishes_no_event() -> None:
    reader = reader_identity("audit", streams=("KAIWO_RES",))

    assert reader.permissions.publish == (
        "$JS.API.INFO",
        "$JS.API.STREAM.INFO.KAIWO_RES",
        "$JS.API.CONSUMER.CREATE.KAIWO_RES.audit",
        "$JS.API.CONSUMER.CREATE.KAIWO_RES.audit.>",
        "$JS.API.CONSUMER.DURABLE.CREATE.KAIWO_RES.audit",
        "$JS.API.CONSUMER.INFO.KAIWO_RES.audit",
        "$JS.API.CONSUMER.DELETE.KAIWO_RES.audit",
        "$JS.API.CONSUMER.MSG.NEXT.KAIWO_RES.audit",
        "$JS.ACK.KAIWO_RES.audit.>",
        "$JS.API.STREAM.MSG.GET.KAIWO_RES",
        "$JS.API.DIRECT.GET.KAIWO_RES",
        "$JS.API.DIRECT.GET.KAIWO_RES.>",
    )
    assert reader.permissions.subscribe == ("kaiwo.live.>", "_INBOX.audit.>")


def test_the_subscriber_reads_the_public_stream_only_and_publishes_no_event() -> None:
    subscriber = subscriber_identity()

    assert subscriber.permissions.publish == (
        "$JS.API.INFO",
        "$JS.API.STREAM.INFO.KAIWO_PUBLIC",
        "$JS.API.CONSUMER.CREATE.KAIWO_PUBLIC",
        "$JS.API.CONSUMER.CREATE.KAIWO_PUBLIC.>",
        "$JS.API.CONSUMER.DURABLE.CREATE.KAIWO_PUBLIC.>",
        "$JS.API.CONSUMER.INFO.KAIWO_PUBLIC.>",
        "$JS.API.CONSUMER.DELETE.KAIWO_PUBLIC.>",
        "$JS.API.CONSUMER.MSG.NEXT.KAIWO_PUBLIC.>",
        "$JS.ACK.KAIWO_PUBLIC.>",
        "$JS.FC.KAIWO_PUBLIC.>",
        "$JS.API.STREAM.MSG.GET.KAIWO_PUBLIC",
        "$JS.API.DIRECT.GET.KAIWO_PUBLIC",
        "$JS.API.DIRECT.GET.KAIWO_PUBLIC.>",
    )
    assert subscriber.permissions.subscribe == ("kaiwo.live.public.>", "_INBOX.subscriber.>")
    assert subscriber.streams == ("KAIWO_PUBLIC",)


def test_a_namespaces_subscriber_reads_that_namespace_through_its_own_consumer_only() -> None:
    """Decision 0164: nothing that reaches another namespace's events (no stored read, no
    stream info, no consumer but its own, created only with its namespace's filter)."""
    team_a = namespace_subscriber_identity("team-a")

    assert team_a.name == "subscriber-team-a"
    assert team_a.permissions.publish == (
        "$JS.API.INFO",
        "$JS.API.CONSUMER.CREATE.KAIWO_PUBLIC.subscriber-team-a.kaiwo.public.workload.team-a.>",
        "$JS.API.CONSUMER.INFO.KAIWO_PUBLIC.subscriber-team-a",
        "$JS.API.CONSUMER.DELETE.KAIWO_PUBLIC.subscriber-team-a",
        "$JS.API.CONSUMER.MSG.NEXT.KAIWO_PUBLIC.subscriber-team-a",
        "$JS.ACK.KAIWO_PUBLIC.subscriber-team-a.>",
    )
    assert team_a.permissions.subscribe == (
        "kaiwo.live.public.workload.team-a.>",
        "_INBOX.subscriber-team-a.>",
    )
    assert team_a.streams == ("KAIWO_PUBLIC",)
    assert team_a.consumers == ("subscriber-team-a",)


def test_the_subscriber_key_is_denied_every_namespace_keys_consumer_it_is_issued_with() -> None:
    """Decision 0259: the wildcard that lets ``subscriber`` name any consumer on
    KAIWO_PUBLIC cannot leave ``subscriber-team-a`` out (a name is one subject token); a
    ``deny`` of each subject that names it does, and the create subject that names none is
    not granted. The operator's consumers, on other streams, are no business of this key;
    without a namespace key nothing changes."""
    topology = bus_topology()
    issued = issued_together(
        (*operator_identities(topology), namespace_subscriber_identity("team-a"))
    )
    [subscriber] = [identity for identity in issued if identity.name == "subscriber"]

    # The create subject that names no consumer takes the name from the body: withheld.
    assert subscriber.permissions.publish == tuple(
        subject
        for subject in subscriber_identity().permissions.publish
        if subject != "$JS.API.CONSUMER.CREATE.KAIWO_PUBLIC"
    )
    assert "$JS.API.CONSUMER.CREATE.KAIWO_PUBLIC.>" in subscriber.permissions.publish
    assert subscriber.permissions.publish_denied == (
        "$JS.API.CONSUMER.CREATE.KAIWO_PUBLIC.subscriber-team-a",
        "$JS.API.CONSUMER.CREATE.KAIWO_PUBLIC.subscriber-team-a.>",
        "$JS.API.CONSUMER.DURABLE.CREATE.KAIWO_PUBLIC.subscriber-team-a",
        "$JS.API.CONSUMER.INFO.KAIWO_PUBLIC.subscriber-team-a",
        "$JS.API.CONSUMER.DELETE.KAIWO_PUBLIC.subscriber-team-a",
        "$JS.API.CONSUMER.MSG.NEXT.KAIWO_PUBLIC.subscriber-team-a",
        "$JS.ACK.KAIWO_PUBLIC.subscriber-team-a.>",
        "$JS.FC.KAIWO_PUBLIC.subscriber-team-a.>",
    )
    assert [identity.name for identity in issued][-1] == "subscriber-team-a"
    assert issued_together(operator_identities(topology)) == operator_identities(topology)


@pytest.mark.parametrize("namespace", ["Team_A", "team.a", "team-a.>", "", "a" * 60])
def test_a_namespaces_subscriber_needs_a_namespace_name(namespace: str) -> None:
    with pytest.raises(ValueError, match="namespace"):
        namespace_subscriber_identity(namespace)


def test_only_the_planner_publishes_public_events() -> None:
    topology = bus_topology()
    publishers = [
        identity.name
        for identity in operator_identities(topology)
        if any(subject in ("kaiwo.public.>", "kaiwo.>") for subject in identity.permissions.publish)
    ]

    assert publishers == ["admin", "planner"]


@pytest.mark.parametrize(
    "name",
    [
        "planner",
        "admin",
        "cli",
        "gateway",
        "gateway-1",
        "subscriber",
        "executor-plan",
        "recorder-x",
        "bus-relay",
        "subscriber-team-a",
        "Not_A_Label",
    ],
)
def test_a_reader_cannot_take_an_operator_name(name: str) -> None:
    with pytest.raises(ValueError, match=name):
        reader_identity(name)


def test_no_reader_takes_the_name_of_an_identity_of_the_operator() -> None:
    # The console's was missing: a reader "console" replaced the console's key.
    for identity in operator_identities(bus_topology()):
        with pytest.raises(ValueError, match="taken by the operator"):
            reader_identity(identity.name)


def test_the_operator_identities_are_admin_services_gateway_console_cli_and_subscriber() -> None:
    names = [identity.name for identity in operator_identities(bus_topology())]

    assert names == [
        "admin",
        "watcher",
        "planner",
        "executor",
        "monitor",
        "recorder",
        "gateway",
        "console",
        "cli",
        "subscriber",
    ]
    assert inbox_prefix("watcher") == "_INBOX.watcher"


def test_the_buckets_are_the_services_defaults() -> None:
    from kaiwo_executor.settings import ExecutorSettings
    from kaiwo_monitor.settings import MonitorSettings
    from kaiwo_planner.settings import PlannerSettings
    from kaiwo_watcher.settings import WatcherSettings

    assert {
        "watcher": WatcherSettings().watcher_bucket,
        "planner": PlannerSettings().snapshot_bucket,
        "executor": ExecutorSettings().executor_bucket,
        "monitor": MonitorSettings().monitor_state_bucket,
    } == SERVICE_BUCKETS
    assert PlannerSettings().lease_bucket == LEASE_BUCKET
    assert MonitorSettings().lease_bucket == LEASE_BUCKET


def test_the_console_reads_stored_observations_and_publishes_nothing() -> None:
    console = service_identity("console", bus_topology())

    assert console.permissions.publish == (
        "$JS.API.STREAM.INFO.KAIWO_OBS",
        "$JS.API.STREAM.MSG.GET.KAIWO_OBS",
    )
    assert console.permissions.subscribe == ("_INBOX.console.>", "kaiwo.obs.>")
    assert console.streams == ("KAIWO_OBS",)
    assert console.consumers == ()


def test_the_gateway_reports_load_decides_scale_and_holds_only_the_autoscaler_lease() -> None:
    gateway = service_identity("gateway", bus_topology())

    assert gateway.permissions.publish == (
        "kaiwo.gateway.>",
        "$JS.API.STREAM.INFO.KAIWO_OBS",
        "$JS.API.STREAM.INFO.KAIWO_GATEWAY",
        "$JS.API.STREAM.MSG.GET.KAIWO_OBS",
        "$JS.API.STREAM.INFO.KV_kaiwo-autoscaler",
        "$JS.API.STREAM.CREATE.KV_kaiwo-autoscaler",
        "$JS.API.STREAM.MSG.GET.KV_kaiwo-autoscaler",
        "$JS.API.DIRECT.GET.KV_kaiwo-autoscaler",
        "$JS.API.DIRECT.GET.KV_kaiwo-autoscaler.>",
        "$KV.kaiwo-autoscaler.>",
        "$JS.API.STREAM.INFO.KV_kaiwo-leases",
        "$JS.API.STREAM.CREATE.KV_kaiwo-leases",
        "$JS.API.STREAM.MSG.GET.KV_kaiwo-leases",
        "$JS.API.DIRECT.GET.KV_kaiwo-leases",
        "$JS.API.DIRECT.GET.KV_kaiwo-leases.>",
        "$KV.kaiwo-leases.autoscaler",
        # The messenger (decision 0049): its consumer, every tenant's answers.
        "$JS.API.STREAM.INFO.KAIWO_MSG_REQ",
        "$JS.API.STREAM.INFO.KAIWO_MSG_RES",
        "$JS.API.CONSUMER.INFO.KAIWO_MSG_REQ.gateway-messenger",
        "$JS.API.CONSUMER.MSG.NEXT.KAIWO_MSG_REQ.gateway-messenger",
        "$JS.ACK.KAIWO_MSG_REQ.gateway-messenger.>",
        "kaiwo-messenger.*.responses",
        "kaiwo-messenger.*.dead",
    )
    assert gateway.permissions.subscribe == (
        "_INBOX.gateway.>",
        "kaiwo.obs.model.>",
        "kaiwo.obs.pod.>",
        "kaiwo.gateway.load.>",
    )
    assert gateway.streams == ("KAIWO_OBS", "KAIWO_GATEWAY")
    assert gateway.consumers == ()


def _may_meet(pattern: str, subject: str) -> bool:
    """Whether some subject matches both NATS patterns (``*`` one token, ``>`` the rest)."""
    left, right = pattern.split("."), subject.split(".")
    for mine, theirs in zip(left, right, strict=False):
        if ">" in (mine, theirs):
            return True
        if mine != theirs and "*" not in (mine, theirs):
            return False
    return len(left) == len(right)


def test_no_key_handed_out_may_subscribe_where_a_stream_stores() -> None:
    """Decision 0287: a push consumer delivers to any subject someone subscribes to exactly,
    so a key that could subscribe where a stream stores would let a consumer of its own (or
    another key's) store copies of one stream's messages in another. The keys handed out
    follow the streams' republished (live) subjects, which no stream stores."""
    streams = (*bus_topology(partitions=4).streams, *messenger_streams())
    stored = [subject for stream in streams for subject in stream.subjects]
    live = [stream.republish.destination for stream in streams if stream.republish]
    handed_out = (
        cli_identity(),
        subscriber_identity(others_consumers=("subscriber-team-a",)),
        namespace_subscriber_identity("team-a"),
        reader_identity("audit"),
        tenant_identity("team-a"),
    )
    assert not [
        (destination, subject)
        for destination in live
        for subject in stored
        if _may_meet(destination.replace("{{wildcard(1)}}", "*"), subject)
    ]
    for identity in handed_out:
        events = [p for p in identity.permissions.subscribe if not p.startswith("_INBOX.")]
        assert events, identity.name
        for pattern in events:
            assert not [s for s in stored if _may_meet(pattern, s)], (identity.name, pattern)
            assert any(
                _may_meet(pattern, destination.replace("{{wildcard(1)}}", "*"))
                for destination in live
            ), (identity.name, pattern)
