"""What the gateway asks the API server, and when it asks again: KubernetesAccess over a
recording ReviewApi (what the real API server answers is tested in
tests/integration/gateway/test_gateway_access_real_cluster.py)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest
from kaiwo_gateway.access import AccessBusyError, AccessUnavailableError
from kaiwo_gateway.domain.access import CacheSettings, Caller
from kaiwo_gateway.kubernetes_access import AccessSettings, KubernetesAccess
from kaiwo_gateway.metrics import GatewayMetrics
from kaiwo_kube import Retryable
from kaiwo_kube.errors import KubeError

ALICE_USER = {
    "username": "system:serviceaccount:team-a:alice",
    "uid": "0b7e",
    "groups": ["system:serviceaccounts", "system:serviceaccounts:team-a"],
    "extra": {"authentication.kubernetes.io/credential-id": ["JTI=1"]},
}
ALICE = Caller(
    name="system:serviceaccount:team-a:alice",
    uid="0b7e",
    groups=("system:serviceaccounts", "system:serviceaccounts:team-a"),
    extra=(("authentication.kubernetes.io/credential-id", ("JTI=1",)),),
)


@dataclass
class Clock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


@dataclass
class RecordingApi:
    """Answers reviews as an API server would for ``tokens`` (token -> status) and
    ``allowed`` ((user, namespace) pairs); records every review; may fail or stall."""

    tokens: dict[str, dict[str, Any]] = field(default_factory=dict)
    allowed: set[tuple[str, str]] = field(default_factory=set)
    reviews: list[dict[str, Any]] = field(default_factory=list)
    failure: KubeError | None = None
    gate: asyncio.Event | None = None

    async def create(
        self, obj: dict[str, Any], *, field_manager: str | None = None
    ) -> dict[str, Any]:
        self.reviews.append(obj)
        if self.gate is not None:
            await self.gate.wait()
        if self.failure is not None:
            raise self.failure
        spec = obj["spec"]
        if obj["kind"] == "TokenReview":
            return {**obj, "status": self.tokens.get(spec["token"], {"authenticated": False})}
        namespace = spec["resourceAttributes"]["namespace"]
        return {**obj, "status": {"allowed": (spec["user"], namespace) in self.allowed}}


def access(api: RecordingApi, clock: Clock, **settings: Any) -> KubernetesAccess:
    return KubernetesAccess(
        api,
        AccessSettings(
            cache=CacheSettings(allowed_seconds=30, denied_seconds=5, entries=100), **settings
        ),
        metrics=GatewayMetrics(),
        clock=clock,
    )


async def test_a_token_review_names_the_caller_and_the_access_review_asks_about_them() -> None:
    api = RecordingApi(
        tokens={"t-alice": {"authenticated": True, "user": ALICE_USER}},
        allowed={(ALICE.name, "team-a")},
    )
    checks = access(api, Clock())

    caller = await checks.authenticate("t-alice")

    assert caller == ALICE
    assert await checks.may_use(ALICE, "team-a")
    assert not await checks.may_use(ALICE, "team-b")
    assert api.reviews[0] == {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenReview",
        "spec": {"token": "t-alice"},
    }
    assert api.reviews[1] == {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": "system:serviceaccount:team-a:alice",
            "uid": "0b7e",
            "groups": ["system:serviceaccounts", "system:serviceaccounts:team-a"],
            "extra": {"authentication.kubernetes.io/credential-id": ["JTI=1"]},
            "resourceAttributes": {
                "namespace": "team-a",
                "verb": "get",
                "group": "kubeai.org",
                "resource": "models",
            },
        },
    }


async def test_answers_are_remembered_for_their_time_then_asked_again() -> None:
    api = RecordingApi(
        tokens={"t-alice": {"authenticated": True, "user": ALICE_USER}},
        allowed={(ALICE.name, "team-a")},
    )
    clock = Clock()
    checks = access(api, clock)
    for _ in range(3):
        assert await checks.authenticate("t-alice") == ALICE
        assert await checks.authenticate("t-forged") is None
        assert await checks.may_use(ALICE, "team-a")
        assert not await checks.may_use(ALICE, "team-b")
    assert len(api.reviews) == 4

    clock.now += 5  # refusals expire first: a new token or a new grant counts within 5 s
    api.allowed.add((ALICE.name, "team-b"))
    assert await checks.may_use(ALICE, "team-b")
    assert await checks.authenticate("t-forged") is None
    assert len(api.reviews) == 6

    clock.now += 25  # 30 s after the first answers: a revoked token or grant ends here
    api.tokens.clear()
    api.allowed.clear()
    assert await checks.authenticate("t-alice") is None
    assert not await checks.may_use(ALICE, "team-a")
    assert len(api.reviews) == 8


async def test_concurrent_requests_with_one_token_share_one_review() -> None:
    api = RecordingApi(
        tokens={"t-alice": {"authenticated": True, "user": ALICE_USER}}, gate=asyncio.Event()
    )
    checks = access(api, Clock())

    waiting = [asyncio.create_task(checks.authenticate("t-alice")) for _ in range(30)]
    await asyncio.sleep(0)
    assert api.gate is not None
    api.gate.set()

    assert await asyncio.gather(*waiting) == [ALICE] * 30
    assert len(api.reviews) == 1


async def test_past_the_reviews_in_flight_an_unknown_token_is_refused_at_once() -> None:
    api = RecordingApi(gate=asyncio.Event())
    checks = access(api, Clock(), reviews_in_flight=2)
    first = [asyncio.create_task(checks.authenticate(f"random-{n}")) for n in range(2)]
    await asyncio.sleep(0)

    with pytest.raises(AccessBusyError, match="2 tokens are being checked"):
        await checks.authenticate("random-3")
    assert api.gate is not None
    api.gate.set()
    assert await asyncio.gather(*first) == [None, None]
    assert len(api.reviews) == 2


async def test_an_api_server_that_does_not_answer_refuses_and_is_not_remembered() -> None:
    api = RecordingApi(
        tokens={"t-alice": {"authenticated": True, "user": ALICE_USER}},
        failure=Retryable("POST /apis/authentication.k8s.io/v1/tokenreviews: refused", code=0),
    )
    checks = access(api, Clock())

    with pytest.raises(AccessUnavailableError) as refused:
        await checks.authenticate("t-alice")
    # The API server's words (its addresses, the service's account) are not the caller's
    # to read: the console shows this message as it is (decision 0219).
    assert str(refused.value) == (
        "access cannot be checked now: the Kubernetes API server did not answer the "
        "TokenReview; try again in a moment"
    )
    api.failure = KubeError("forbidden", code=403)
    with pytest.raises(AccessUnavailableError, match="SubjectAccessReview") as refused:
        await checks.may_use(ALICE, "team-a")
    assert "forbidden" not in str(refused.value)
    api.failure = None
    assert await checks.authenticate("t-alice") == ALICE  # asked again: nothing remembered


async def test_with_audiences_a_token_must_be_valid_for_one_of_them() -> None:
    api = RecordingApi(
        tokens={
            "t-for-gateway": {
                "authenticated": True,
                "user": ALICE_USER,
                "audiences": ["kaiwo-gateway"],
            },
            "t-for-api-server": {
                "authenticated": True,
                "user": ALICE_USER,
                "audiences": ["https://kubernetes.default.svc"],
            },
        }
    )
    checks = access(api, Clock(), audiences=("kaiwo-gateway",))

    assert await checks.authenticate("t-for-gateway") == ALICE
    assert await checks.authenticate("t-for-api-server") is None
    assert api.reviews[0]["spec"] == {"token": "t-for-gateway", "audiences": ["kaiwo-gateway"]}
