"""The pure rules of the Lease: who may claim it, what a claim and a release write."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from kaiwo_monitor.domain.leases import (
    LeaseObservation,
    LeaseRecord,
    claimed,
    lease_manifest,
    may_claim,
    micro_time,
    observe,
    released,
)

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
HELD_BY_B = LeaseRecord(holder="b", duration_seconds=15, acquire_time=T0, renew_time=T0)


def test_a_free_or_own_lease_may_be_claimed_at_once() -> None:
    free = LeaseObservation(record=LeaseRecord(), since=T0)
    own = LeaseObservation(record=HELD_BY_B, since=T0)
    assert may_claim(free, identity="a", now=T0)
    assert may_claim(own, identity="b", now=T0)


def test_another_holder_s_lease_only_after_a_whole_unchanged_duration() -> None:
    seen = LeaseObservation(record=HELD_BY_B, since=T0)
    assert not may_claim(seen, identity="a", now=T0 + timedelta(seconds=14.9))
    assert may_claim(seen, identity="a", now=T0 + timedelta(seconds=15))


def test_the_holder_s_renew_time_is_never_compared_with_our_clock() -> None:
    # The holder's clock is an hour behind ours: its renewTime looks ancient, yet we only
    # count from when we saw the record.
    skewed = LeaseRecord(holder="b", duration_seconds=15, renew_time=T0 - timedelta(hours=1))
    seen = observe(None, skewed, T0)
    assert not may_claim(seen, identity="a", now=T0 + timedelta(seconds=5))


def test_observing_the_same_record_keeps_the_time_it_was_first_seen() -> None:
    first = observe(None, HELD_BY_B, T0)
    again = observe(first, HELD_BY_B, T0 + timedelta(seconds=10))
    renewed = LeaseRecord(
        holder="b", duration_seconds=15, acquire_time=T0, renew_time=T0 + timedelta(seconds=9)
    )
    moved = observe(again, renewed, T0 + timedelta(seconds=10))
    assert again.since == T0
    assert moved.since == T0 + timedelta(seconds=10)


def test_taking_over_counts_a_transition_and_renewing_does_not() -> None:
    later = T0 + timedelta(seconds=20)
    taken = claimed(HELD_BY_B, identity="a", now=later, duration_seconds=10)
    assert taken == LeaseRecord(
        holder="a", duration_seconds=10, acquire_time=later, renew_time=later, transitions=1
    )
    renewed = claimed(taken, identity="a", now=later + timedelta(seconds=2), duration_seconds=10)
    assert renewed == LeaseRecord(
        holder="a",
        duration_seconds=10,
        acquire_time=later,
        renew_time=later + timedelta(seconds=2),
        transitions=1,
    )


def test_the_first_claim_of_a_new_lease_is_no_transition() -> None:
    assert claimed(LeaseRecord(), identity="a", now=T0, duration_seconds=15).transitions == 0


def test_a_release_clears_the_holder() -> None:
    gone = released(HELD_BY_B, now=T0 + timedelta(seconds=3))
    assert (gone.holder, gone.duration_seconds, gone.renew_time) == (
        "",
        1,
        T0 + timedelta(seconds=3),
    )
    assert may_claim(LeaseObservation(record=gone, since=T0), identity="a", now=T0)


def test_the_manifest_and_its_round_trip() -> None:
    record = LeaseRecord(
        holder="a",
        duration_seconds=15,
        acquire_time=T0,
        renew_time=T0 + timedelta(microseconds=250),
        transitions=2,
    )
    manifest = lease_manifest(name="kaiwo-monitor", namespace="kaiwo-system", record=record)
    assert manifest == {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "kaiwo-monitor", "namespace": "kaiwo-system"},
        "spec": {
            "holderIdentity": "a",
            "leaseDurationSeconds": 15,
            "leaseTransitions": 2,
            "acquireTime": "2026-03-01T12:00:00.000000Z",
            "renewTime": "2026-03-01T12:00:00.000250Z",
        },
    }
    assert LeaseRecord.from_lease(manifest) == record


def test_micro_time_is_utc() -> None:
    plus_two = datetime(2026, 3, 1, 14, 0, tzinfo=timezone(timedelta(hours=2)))
    assert micro_time(plus_two) == "2026-03-01T12:00:00.000000Z"
