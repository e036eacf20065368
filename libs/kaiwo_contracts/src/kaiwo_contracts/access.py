"""Who calls a service of the operator, and the answers about them worth remembering: the
pure parts shared by the gateway and the console (decisions 0040 and 0051).

A caller is who the API server's TokenReview says a bearer token belongs to
(:class:`Caller`: name, uid, groups, extra), or, only where anonymous access is switched on,
an anonymous caller on loopback. What a caller may do in a namespace is the API server's
SubjectAccessReview of one :class:`ResourceAccess`: the gateway asks ``get`` on
``models.kubeai.org`` (:data:`MODELS_ACCESS`), the console ``list`` on
``kaiwojobs.kaiwo.silogen.ai`` (:data:`WORKLOADS_ACCESS`).

Both answers are remembered for a short time (:class:`Answers`): allowed ones for
``allowed_seconds``, refused ones for ``denied_seconds``, each kind in its own bounded
least-recently-used store, so a flood of random tokens evicts only other refusals and never
a caller that was let in. Time is passed in (``now``, seconds on a monotonic clock).
"""

from __future__ import annotations

import ipaddress
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
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
"""The gateway's: whoever may read a namespace's Models may call them."""
WORKLOADS_ACCESS: Final = ResourceAccess(
    verb="list", group="kaiwo.silogen.ai", resource="kaiwojobs"
)
"""The console's: whoever may list a namespace's KaiwoJobs sees its workloads."""
NODES_ACCESS: Final = ResourceAccess(verb="list", group="", resource="nodes")
"""The console's GPU nodes page (cluster-scoped: asked without a namespace)."""


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


LOOPBACK_NAMES: Final = frozenset({"localhost"})


def is_loopback_host(host: str) -> bool:
    """Whether a service listening on ``host`` is reachable from this machine only: the one
    place anonymous callers may be let in."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_loopback_address(address: str | None) -> bool:
    """Whether a caller's peer address is this machine's (an anonymous caller must be)."""
    try:
        return address is not None and ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False
