"""Who calls the gateway, what they may use, and how much they may hold: the pure parts.

Decision 0040. A caller is who the API server's TokenReview says a bearer token belongs to
(:class:`Caller`: name, uid, groups, extra), or, only where anonymous access is switched on,
an anonymous caller on loopback. Whether a caller may use the Models of a namespace is the
API server's SubjectAccessReview of ``get`` on ``models.kubeai.org`` there
(:data:`MODELS_ACCESS`): whoever may read a namespace's Models may call them.

Both answers are remembered for a short time (:class:`Answers`): allowed ones for
``allowed_seconds``, refused ones for ``denied_seconds``, each kind in its own bounded
least-recently-used store, so a flood of random tokens evicts only other refusals and never
a caller that was let in. Time is passed in (``now``, seconds on a monotonic clock).

:class:`CallerLimits` counts each caller's requests in flight and the request bodies they
hold: past either limit a request is refused (429) instead of queued.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Who a caller is and the remembered answers are shared with the console (decision 0051).
from kaiwo_contracts.access import (
    MODELS_ACCESS,
    Answers,
    CacheSettings,
    Caller,
    ExpiringCache,
    Known,
    ResourceAccess,
)

__all__ = [
    "MODELS_ACCESS",
    "Answers",
    "CacheSettings",
    "Caller",
    "CallerLimits",
    "ExpiringCache",
    "Known",
    "Limits",
    "ResourceAccess",
]


@dataclass(frozen=True, slots=True)
class Limits:
    requests: int = 64
    """Requests one caller may have in flight (waiting for an endpoint included)."""
    body_bytes: int = 64 * 1024 * 1024
    """Request bytes one caller's requests in flight may hold together."""


@dataclass
class CallerLimits:
    """Each caller's requests in flight and the request bytes they hold."""

    limits: Limits = field(default_factory=Limits)
    _requests: dict[str, int] = field(default_factory=dict)
    _bytes: dict[str, int] = field(default_factory=dict)

    def enter(self, key: str) -> bool:
        """Count a request in; False (and nothing counted) when the caller is at its limit."""
        count = self._requests.get(key, 0)
        if count >= self.limits.requests:
            return False
        self._requests[key] = count + 1
        return True

    def leave(self, key: str, *, held: int) -> None:
        """Count a request out, with the ``held`` bytes it had taken."""
        _take(self._requests, key, 1)
        _take(self._bytes, key, held)

    def hold(self, key: str, size: int) -> bool:
        """Take ``size`` more bytes for the caller; False (nothing taken) past its limit."""
        holding = self._bytes.get(key, 0) + size
        if holding > self.limits.body_bytes:
            return False
        self._bytes[key] = holding
        return True

    def in_flight(self, key: str) -> tuple[int, int]:
        """(requests, bytes) the caller has in flight."""
        return self._requests.get(key, 0), self._bytes.get(key, 0)


def _take(counts: dict[str, int], key: str, amount: int) -> None:
    left = counts.get(key, 0) - amount
    if left > 0:
        counts[key] = left
    else:
        counts.pop(key, None)
