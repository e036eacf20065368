"""Exponential backoff with full jitter, so replicas that failed together do not retry together."""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass(slots=True)
class Backoff:
    """Delays ``uniform(0, min(maximum, initial * 2**n))`` for the n-th failure in a row."""

    initial: float = 0.5
    maximum: float = 30.0
    rng: random.Random = field(default_factory=random.Random)
    failures: int = 0

    def next_delay(self) -> float:
        ceiling = min(self.maximum, self.initial * 2.0 ** min(self.failures, 32))
        self.failures += 1
        # Never quite zero: a tight loop against a failing server helps nobody.
        return max(ceiling * self.rng.random(), self.initial / 10)

    def reset(self) -> None:
        self.failures = 0


def retry_delay(backoff: Backoff, error: BaseException) -> float:
    """The backoff's next delay, or longer when the server said when to come back."""
    delay = backoff.next_delay()
    retry_after = getattr(error, "retry_after", None)
    return max(delay, float(retry_after)) if retry_after else delay
