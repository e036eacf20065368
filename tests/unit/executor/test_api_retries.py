"""Backoff with jitter, Retry-After, and which API errors are worth another attempt."""

from __future__ import annotations

import pytest
from kaiwo_executor.api_retries import (
    RetriesExhausted,
    RetryPolicy,
    call_with_retries,
    is_retryable,
)
from kaiwo_executor.execution_memo import OwnerMemo
from kaiwo_kube import AlreadyExists, Conflict, Invalid, NotFound, Retryable


def test_delays_double_up_to_the_maximum_and_jitter_spans_the_upper_half() -> None:
    policy = RetryPolicy(attempts=6, initial_delay=1.0, max_delay=5.0)

    assert [policy.delay(n, jitter=0.0) for n in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 2.5]
    assert [policy.delay(n, jitter=0.999) for n in (1, 4)] == pytest.approx([0.9995, 4.9975])


def test_retry_after_is_honoured_up_to_the_maximum() -> None:
    policy = RetryPolicy(initial_delay=1.0, max_delay=5.0)

    assert policy.delay(1, jitter=0.0, retry_after=3.0) == 3.0
    assert policy.delay(1, jitter=0.0, retry_after=120.0) == 5.0


def test_which_errors_are_retried() -> None:
    assert is_retryable(Retryable("busy", code=429))
    assert is_retryable(Retryable("no answer", code=0))
    assert is_retryable(Conflict("modified", code=409, reason="Conflict"))
    assert not is_retryable(AlreadyExists("exists", code=409, reason="AlreadyExists"))
    assert not is_retryable(Invalid("bad", code=422))
    assert not is_retryable(NotFound("gone", code=404))


async def test_a_final_error_is_raised_at_once_and_exhaustion_names_the_last_error() -> None:
    calls: list[int] = []
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    async def invalid() -> None:
        calls.append(1)
        raise Invalid("spec.replicas: must be >= 0", code=422)

    with pytest.raises(Invalid):
        await call_with_retries(invalid, policy=RetryPolicy(attempts=3), sleep=sleep)
    assert calls == [1]

    async def busy() -> None:
        raise Retryable("slow down", code=429)

    with pytest.raises(RetriesExhausted) as raised:
        await call_with_retries(
            busy, policy=RetryPolicy(attempts=3, initial_delay=0.1), sleep=sleep, jitter=lambda: 1.0
        )
    assert raised.value.attempts == 3
    assert raised.value.error.code == 429
    assert slept == pytest.approx([0.1, 0.2])


def test_the_memo_survives_a_round_trip_and_an_unreadable_one_starts_afresh() -> None:
    memo = OwnerMemo(objects={"batch/Job/team-a/train": "abc"}, status="def")
    memo.remember_plan("plan-1")
    memo.remember_event(fingerprint="f1", name="train.0123456789abcdef")

    again = OwnerMemo.from_json(memo.to_json())

    assert again == memo
    assert again.executed("plan-1")
    assert again.event_done(fingerprint="f1", name="train.0123456789abcdef")
    assert not again.event_done(fingerprint="f2", name="train.0123456789abcdef")
    assert OwnerMemo.from_json(b"{not json") == OwnerMemo()


def test_the_memo_keeps_only_the_latest_plan_ids() -> None:
    memo = OwnerMemo()
    for number in range(20):
        memo.remember_plan(f"plan-{number}")

    assert memo.plan_ids == [f"plan-{number}" for number in range(4, 20)]
