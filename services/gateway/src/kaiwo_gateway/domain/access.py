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

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final, Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class ResourceAccess:
    """The SubjectAccessReview that decides whether a caller may use a namespace's Models."""

    verb: str
    group: str
    resource: str


MODELS_ACCESS: Final = ResourceAccess(verb="get", group="kubeai.org", resource="models")


@dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated identity, as TokenReview returns it (what a SubjectAccessReview
    needs to ask about the same user), or the anonymous caller of a loopback address."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()
    anonymous: bool = False

    @classmethod
    def of_review(cls, user: Mapping[str, object]) -> Caller | None:
        """The caller of a TokenReview's ``status.user`` (None when it names nobody)."""
        name = user.get("username")
        if not isinstance(name, str) or not name:
            return None
        groups = user.get("groups")
        extra = user.get("extra")
        return cls(
            name=name,
            uid=str(user.get("uid") or ""),
            groups=tuple(str(g) for g in groups) if isinstance(groups, list) else (),
            extra=tuple(
                sorted(
                    (str(key), tuple(str(v) for v in values))
                    for key, values in extra.items()
                    if isinstance(values, list)
                )
            )
            if isinstance(extra, Mapping)
            else (),
        )

    @classmethod
    def anonymous_on_loopback(cls, address: str) -> Caller:
        return cls(name=f"anonymous@{address}", anonymous=True)

    @property
    def limit_key(self) -> str:
        """Whose limits a request counts against: the user (every loopback caller is one
        anonymous caller)."""
        return "anonymous" if self.anonymous else self.name


@dataclass(frozen=True, slots=True)
class CacheSettings:
    allowed_seconds: float = 30.0
    denied_seconds: float = 5.0
    entries: int = 4096
    """Per kind of answer (allowed, refused) and per cache (tokens, namespaces)."""


@dataclass(frozen=True, slots=True)
class Known(Generic[V]):
    """A remembered answer; ``value`` None is a refusal."""

    value: V | None


class ExpiringCache(Generic[K, V]):
    """At most ``capacity`` entries, each until its expiry; the least recently used goes
    first when full."""

    def __init__(self, *, capacity: int) -> None:
        self.capacity = max(capacity, 1)
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def get(self, key: K, *, now: float) -> V | None:
        entry = self._entries.get(key)
        if entry is None:
            return None
        expires, value = entry
        if now >= expires:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return value

    def put(self, key: K, *, value: V, now: float, seconds: float) -> None:
        self._entries[key] = (now + seconds, value)
        self._entries.move_to_end(key)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


class Answers(Generic[K, V]):
    """The API server's answers by key: allowed ones and refusals in separate stores."""

    def __init__(self, settings: CacheSettings) -> None:
        self.settings = settings
        self._allowed: ExpiringCache[K, V] = ExpiringCache(capacity=settings.entries)
        self._denied: ExpiringCache[K, bool] = ExpiringCache(capacity=settings.entries)

    def known(self, key: K, *, now: float) -> Known[V] | None:
        allowed = self._allowed.get(key, now=now)
        if allowed is not None:
            return Known(allowed)
        if self._denied.get(key, now=now) is not None:
            return Known(None)
        return None

    def remember(self, key: K, value: V | None, *, now: float) -> None:
        if value is None:
            self._denied.put(key, value=True, now=now, seconds=self.settings.denied_seconds)
        else:
            self._allowed.put(key, value=value, now=now, seconds=self.settings.allowed_seconds)

    @property
    def sizes(self) -> tuple[int, int]:
        """(allowed, refused) entries held."""
        return len(self._allowed), len(self._denied)


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
