"""Retrying one Kubernetes call on 409, 429, 5xx and lost connections, with backoff and jitter.

The adapter never retries (``kaiwo_kube`` raises :class:`~kaiwo_kube.Retryable` and
:class:`~kaiwo_kube.Conflict`); the executor decides here. Delays grow exponentially, each
drawn from the upper half of its ceiling ("equal jitter") so replicas that failed together do
not retry together, yet a retry never comes immediately. A server's ``Retry-After`` is
honoured up to the policy's ``max_delay``. Attempts are bounded: when they run out the last
error is raised as :class:`RetriesExhausted`, and the caller lets JetStream redeliver the plan.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from kaiwo_kube import AlreadyExists, Conflict, KubeError, Retryable
from kaiwo_kube.port import ObjectGetter
from kaiwo_kube.resources import ResourceType

T = TypeVar("T")

Sleep = Callable[[float], Awaitable[None]]
Jitter = Callable[[], float]
"""A number in [0, 1); ``random.random`` in production, fixed in tests."""
RetryObserver = Callable[[int], None]
"""Told the HTTP code (0: no answer) of every failure that will be retried."""


class RetriesExhausted(Exception):  # noqa: N818 - names the situation, like TimeoutError
    """Every attempt failed with a retryable error; ``error`` is the last one."""

    def __init__(self, error: KubeError, *, attempts: int) -> None:
        super().__init__(f"{attempts} attempts failed; last: {error.message}")
        self.error = error
        self.attempts = attempts


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently one API call is retried."""

    attempts: int = 5
    initial_delay: float = 0.2
    max_delay: float = 10.0
    multiplier: float = 2.0

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("a retry policy needs at least one attempt")
        if not 0 <= self.initial_delay <= self.max_delay:
            raise ValueError("delays must satisfy 0 <= initial_delay <= max_delay")

    def delay(self, failures: int, *, jitter: float, retry_after: float | None = None) -> float:
        """Seconds to wait after the ``failures``-th failure in a row (counting from 1)."""
        ceiling = min(self.max_delay, self.initial_delay * self.multiplier ** (failures - 1))
        drawn = ceiling / 2 + ceiling / 2 * jitter
        if retry_after is not None:
            drawn = max(drawn, min(retry_after, self.max_delay))
        return drawn


def is_retryable(error: KubeError) -> bool:
    """429, 5xx and no answer (:class:`Retryable`) and 409 Conflict, but not AlreadyExists."""
    return isinstance(error, Retryable) or (
        isinstance(error, Conflict) and not isinstance(error, AlreadyExists)
    )


@dataclass(frozen=True, slots=True)
class Attempted(Generic[T]):
    """A call's value and how many attempts it took."""

    value: T
    attempts: int


async def call_with_retries(
    call: Callable[[], Awaitable[T]],
    *,
    policy: RetryPolicy,
    sleep: Sleep = asyncio.sleep,
    jitter: Jitter = random.random,
    on_retry: RetryObserver | None = None,
) -> Attempted[T]:
    """Run ``call`` until it succeeds, fails for good, or the attempts run out.

    Non-retryable errors (422, 400, 404, 403, AlreadyExists...) are raised at once, unchanged.
    ``call`` must be safe to repeat: it is re-invoked from scratch (a read-modify-write
    re-reads).
    """
    failures = 0
    while True:
        try:
            return Attempted(await call(), failures + 1)
        except KubeError as error:
            if not is_retryable(error):
                raise
            failures += 1
            if failures >= policy.attempts:
                raise RetriesExhausted(error, attempts=failures) from error
            if on_retry is not None:
                on_retry(error.code)
            retry_after = error.retry_after if isinstance(error, Retryable) else None
            await sleep(policy.delay(failures, jitter=jitter(), retry_after=retry_after))


class RetriedReads:
    """An object reader whose reads are retried as the executor's writes are: a plan's
    admission reads its owner before anything is written, and one 429 there sent the plan
    back to JetStream for 5 s, then 15, 60, 180 s (decision 0234). NotFound is an answer,
    raised at once; :class:`RetriesExhausted` when the attempts run out."""

    def __init__(
        self,
        reader: ObjectGetter,
        *,
        policy: RetryPolicy,
        sleep: Sleep = asyncio.sleep,
        jitter: Jitter = random.random,
        on_retry: RetryObserver | None = None,
    ) -> None:
        self._reader = reader
        self._policy = policy
        self._sleep = sleep
        self._jitter = jitter
        self._on_retry = on_retry

    async def get(
        self, resource: ResourceType, name: str, *, namespace: str | None = None
    ) -> dict[str, Any]:
        attempted = await call_with_retries(
            lambda: self._reader.get(resource, name, namespace=namespace),
            policy=self._policy,
            sleep=self._sleep,
            jitter=self._jitter,
            on_retry=self._on_retry,
        )
        return attempted.value
