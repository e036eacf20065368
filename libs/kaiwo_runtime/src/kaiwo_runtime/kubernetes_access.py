"""Who a bearer token belongs to and what they may do, asked of the API server: shared by
the gateway and the console (decisions 0040 and 0051).

* **TokenReview** (``authentication.k8s.io/v1``): the token, and the audiences the service
  accepts when ``audiences`` is set (a token minted for it alone, ``kubectl create token SA
  --audience kaiwo-gateway``, is then required, and the API server would refuse it for
  anything else). Authenticated -> the :class:`~kaiwo_contracts.access.Caller`.
* **SubjectAccessReview** (``authorization.k8s.io/v1``) of that user, uid, groups and extra:
  the settings' :class:`~kaiwo_contracts.access.ResourceAccess` in the namespace (the
  gateway: ``get`` on ``models.kubeai.org``; the console: ``list`` on
  ``kaiwojobs.kaiwo.silogen.ai``); RBAC, or any authorizer the cluster runs, decides.

Answers are remembered for a short time (:class:`~kaiwo_contracts.access.Answers`), tokens by
their SHA-256 (the token itself is kept by nobody). Concurrent requests needing the same
answer share one review. At most ``reviews_in_flight`` TokenReviews run at once; past that a
request with an unknown token is refused at once (:class:`AccessBusyError`, 429) instead of
queued. SubjectAccessReviews (callers already authenticated) wait for one of as many slots.
Any failure to ask (the API server down, a 403 because the service lacks its role) refuses
the request (:class:`AccessUnavailableError`, 503) and is not remembered.

A service needs ``create`` on ``tokenreviews`` and ``subjectaccessreviews``, nothing else
(deploy/k8s/base/rbac.yaml, the chart's rbac.yaml).
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import structlog
from kaiwo_contracts.access import (
    MODELS_ACCESS,
    Answers,
    CacheSettings,
    Caller,
    ResourceAccess,
)
from kaiwo_kube.errors import KubeError
from prometheus_client import Counter


class AccessUnavailableError(Exception):
    """The API server could not be asked (down, slow, or the service may not ask): the
    request is refused (503), never let through."""


class AccessBusyError(Exception):
    """Too many tokens are being reviewed at once: the request is refused (429) rather than
    queued, so a flood of unknown tokens cannot hold the service or the API server."""


class Access(Protocol):
    async def authenticate(self, token: str) -> Caller | None:
        """The caller a bearer token belongs to; None when it belongs to nobody (401)."""
        ...

    async def may_use(self, caller: Caller, namespace: str) -> bool:
        """Whether ``caller`` may do what the settings' resource names in ``namespace``."""
        ...


class _LoopbackOnly:
    """The access of a service serving loopback callers only, all of them anonymous: it
    knows no token (never asked: every request comes from loopback)."""

    async def authenticate(self, token: str) -> Caller | None:  # noqa: ARG002
        return None

    async def may_use(self, caller: Caller, namespace: str) -> bool:  # noqa: ARG002
        return False


LOOPBACK_ONLY: Access = _LoopbackOnly()


class AccessMetrics(Protocol):
    """Where the checks are counted: ``access_checks`` labelled check, answer, source."""

    @property
    def access_checks(self) -> Counter: ...


log = structlog.get_logger("kaiwo.access")

T = TypeVar("T")
AUTHENTICATION_API = "authentication.k8s.io/v1"
AUTHORIZATION_API = "authorization.k8s.io/v1"


class ReviewApi(Protocol):
    """What a service asks of the API server: to create a review (``KubernetesPort``'s
    ``create``)."""

    async def create(
        self, obj: dict[str, Any], *, field_manager: str | None = None
    ) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class AccessSettings:
    audiences: tuple[str, ...] = ()
    """Audiences a token must be valid for; empty: the API server's own."""
    cache: CacheSettings = field(default_factory=CacheSettings)
    reviews_in_flight: int = 32
    resource: ResourceAccess = MODELS_ACCESS


class KubernetesAccess:
    """:class:`Access` through TokenReview and SubjectAccessReview."""

    def __init__(
        self,
        api: ReviewApi,
        settings: AccessSettings,
        *,
        metrics: AccessMetrics,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.api = api
        self.settings = settings
        self.metrics = metrics
        self.clock = clock
        self._tokens: Answers[str, Caller] = Answers(settings.cache)
        self._namespaces: Answers[tuple[Caller, str], bool] = Answers(settings.cache)
        self._pending: dict[Hashable, asyncio.Task[Any]] = {}
        self._token_reviews = 0
        self._access_reviews = asyncio.Semaphore(settings.reviews_in_flight)

    async def authenticate(self, token: str) -> Caller | None:
        key = hashlib.sha256(token.encode()).hexdigest()
        known = self._tokens.known(key, now=self.clock())
        if known is not None:
            self._count("token", known.value is not None, "cache")
            return known.value
        return await self._once(("token", key), lambda: self._review_token(token, key))

    async def may_use(self, caller: Caller, namespace: str) -> bool:
        key = (caller, namespace)
        known = self._namespaces.known(key, now=self.clock())
        if known is not None:
            self._count("namespace", known.value is not None, "cache")
            return known.value is not None
        return await self._once(("namespace", key), lambda: self._review_access(key))

    async def _review_token(self, token: str, key: str) -> Caller | None:
        if self._token_reviews >= self.settings.reviews_in_flight:
            self.metrics.access_checks.labels(check="token", answer="busy", source="").inc()
            raise AccessBusyError(
                f"{self._token_reviews} tokens are being checked; try again in a moment"
            )
        self._token_reviews += 1
        try:
            spec: dict[str, Any] = {"token": token}
            if self.settings.audiences:
                spec["audiences"] = list(self.settings.audiences)
            status = await self._create(
                {"apiVersion": AUTHENTICATION_API, "kind": "TokenReview", "spec": spec}, "token"
            )
        finally:
            self._token_reviews -= 1
        caller = self._authenticated(status)
        self._tokens.remember(key, caller, now=self.clock())
        self._count("token", caller is not None, "api_server")
        return caller

    def _authenticated(self, status: dict[str, Any]) -> Caller | None:
        if status.get("authenticated") is not True:
            return None
        wanted = set(self.settings.audiences)
        if wanted and not wanted.intersection(status.get("audiences") or ()):
            return None
        user = status.get("user")
        return Caller.of_review(user) if isinstance(user, dict) else None

    async def _review_access(self, key: tuple[Caller, str]) -> bool:
        caller, namespace = key
        resource = self.settings.resource
        spec: dict[str, Any] = {
            "user": caller.name,
            "groups": list(caller.groups),
            "resourceAttributes": {
                "namespace": namespace,
                "verb": resource.verb,
                "group": resource.group,
                "resource": resource.resource,
            },
        }
        if caller.uid:
            spec["uid"] = caller.uid
        if caller.extra:
            spec["extra"] = {name: list(values) for name, values in caller.extra}
        async with self._access_reviews:
            status = await self._create(
                {"apiVersion": AUTHORIZATION_API, "kind": "SubjectAccessReview", "spec": spec},
                "namespace",
            )
        allowed = status.get("allowed") is True
        self._namespaces.remember(key, True if allowed else None, now=self.clock())
        self._count("namespace", allowed, "api_server")
        return allowed

    async def _create(self, review: dict[str, Any], check: str) -> dict[str, Any]:
        try:
            answer = await self.api.create(review)
        except KubeError as error:
            self.metrics.access_checks.labels(check=check, answer="error", source="").inc()
            log.warning("a review was not answered", kind=review["kind"], error=str(error))
            # The API server's words stay in the log: they name the service's account and
            # the cluster's addresses, and the caller may not even be known (decision 0219).
            raise AccessUnavailableError(
                f"access cannot be checked now: the Kubernetes API server did not answer the "
                f"{review['kind']}; try again in a moment"
            ) from error
        status = answer.get("status")
        return status if isinstance(status, dict) else {}

    async def _once(self, key: Hashable, ask: Callable[[], Awaitable[T]]) -> T:
        """``ask()``, shared by every request that needs the same answer meanwhile; a request
        that goes away (the client hung up) does not cancel it for the others."""
        task = self._pending.get(key)
        if task is None:
            task = asyncio.ensure_future(ask())
            self._pending[key] = task
            task.add_done_callback(lambda done: self._settled(key, done))
        result: T = await asyncio.shield(task)
        return result

    def _settled(self, key: Hashable, task: asyncio.Task[Any]) -> None:
        self._pending.pop(key, None)
        if not task.cancelled():
            task.exception()  # retrieved: every waiter may have gone

    def _count(self, check: str, allowed: bool, source: str) -> None:
        answer = "allowed" if allowed else "refused"
        self.metrics.access_checks.labels(check=check, answer=answer, source=source).inc()
