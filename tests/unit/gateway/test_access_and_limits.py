"""Who calls and how much they hold: the gateway's pure access decisions (decision 0040)."""

from __future__ import annotations

import json
import time

import pytest
from kaiwo_gateway.domain.access import (
    Answers,
    CacheSettings,
    Caller,
    CallerLimits,
    ExpiringCache,
    Limits,
)
from kaiwo_gateway.domain.bodies import (
    BodyLimits,
    JsonShape,
    body_problem,
    depth_problem,
    document_depth,
    json_shape,
)
from kaiwo_gateway.domain.headers import (
    request_headers_for_backend,
    response_headers_for_caller,
)
from kaiwo_gateway.domain.routing import Ambiguous, Route, Unknown, find_route
from kaiwo_gateway.domain.selectors import LabelSelector

from tests.unit.gateway.model_objects import model_object
from tests.unit.gateway.test_catalog_and_routing import catalog_with

ALICE = Caller(name="alice", uid="u1", groups=("team-a",))


def test_a_token_review_user_becomes_the_caller_a_subject_access_review_asks_about() -> None:
    user = {
        "username": "system:serviceaccount:team-a:alice",
        "uid": "0b7e",
        "groups": ["system:serviceaccounts", "system:authenticated"],
        "extra": {"authentication.kubernetes.io/pod-name": ["p"], "ignored": "not a list"},
    }

    assert Caller.of_review(user) == Caller(
        name="system:serviceaccount:team-a:alice",
        uid="0b7e",
        groups=("system:serviceaccounts", "system:authenticated"),
        extra=(("authentication.kubernetes.io/pod-name", ("p",)),),
    )
    assert Caller.of_review({"username": ""}) is None
    assert Caller.of_review({}) is None


def test_answers_expire_and_refusals_expire_sooner() -> None:
    answers: Answers[str, Caller] = Answers(
        CacheSettings(allowed_seconds=30, denied_seconds=5, entries=10)
    )
    answers.remember("good", ALICE, now=100.0)
    answers.remember("bad", None, now=100.0)

    assert answers.known("good", now=129.9) is not None
    assert answers.known("good", now=129.9).value == ALICE  # type: ignore[union-attr]
    assert answers.known("bad", now=104.9) is not None
    assert answers.known("bad", now=104.9).value is None  # type: ignore[union-attr]
    assert answers.known("bad", now=105.0) is None
    assert answers.known("good", now=130.0) is None
    assert answers.known("never", now=100.0) is None


def test_a_flood_of_refused_tokens_evicts_only_other_refusals() -> None:
    answers: Answers[str, Caller] = Answers(
        CacheSettings(allowed_seconds=30, denied_seconds=5, entries=3)
    )
    answers.remember("alice", ALICE, now=0.0)
    for number in range(1000):
        answers.remember(f"random-{number}", None, now=0.0)

    assert answers.sizes == (1, 3)
    known = answers.known("alice", now=1.0)
    assert known is not None and known.value == ALICE


def test_the_cache_drops_the_least_recently_used_when_full() -> None:
    cache: ExpiringCache[str, int] = ExpiringCache(capacity=2)
    cache.put("a", value=1, now=0, seconds=60)
    cache.put("b", value=2, now=0, seconds=60)
    assert cache.get("a", now=1) == 1  # a is now the most recent
    cache.put("c", value=3, now=2, seconds=60)

    assert (cache.get("a", now=3), cache.get("b", now=3), cache.get("c", now=3)) == (1, None, 3)


def test_each_caller_has_its_own_requests_and_bytes_in_flight() -> None:
    limits = CallerLimits(limits=Limits(requests=2, body_bytes=100))

    assert limits.enter("alice") and limits.enter("alice")
    assert not limits.enter("alice")
    assert limits.enter("bob")
    assert limits.hold("alice", 60) and not limits.hold("alice", 41) and limits.hold("alice", 40)
    assert limits.hold("bob", 100)
    limits.leave("alice", held=60)
    assert limits.in_flight("alice") == (1, 40)
    assert limits.enter("alice")
    limits.leave("alice", held=40)
    limits.leave("alice", held=0)
    assert limits.in_flight("alice") == (0, 0)


def test_every_anonymous_caller_on_loopback_shares_one_limit() -> None:
    assert Caller.anonymous_on_loopback("127.0.0.1").limit_key == "anonymous"
    assert Caller.anonymous_on_loopback("::1").limit_key == "anonymous"
    assert ALICE.limit_key == "alice"


# ------------------------------------------------------------------ bodies


def test_the_nesting_of_a_body_is_measured_outside_its_strings() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": '[[[[{{{{ \\" ]]'}]}

    assert json_shape(json.dumps(body).encode()) == JsonShape(depth=3, containers=3)
    assert json_shape(b'"[[[["') == JsonShape(depth=0, containers=0)
    assert json_shape(b"[" * 200_000 + b"]" * 200_000) == JsonShape(200_000, 200_000)
    assert json_shape(b'{"a": "\\"[", "b": [[]]}') == JsonShape(depth=3, containers=3)
    assert json_shape(b"") == JsonShape(depth=0, containers=0)


def test_an_unterminated_string_or_unbalanced_brackets_cost_linear_time() -> None:
    hostile = b'"' + b'\\"' * 2_000_000  # every quote escaped: one string to the end
    started = time.process_time()
    shapes = [json_shape(hostile), json_shape(b"]" * 4_000_000), json_shape(b"{}" * 2_000_000)]
    elapsed = time.process_time() - started

    assert shapes == [JsonShape(0, 0), JsonShape(0, 0), JsonShape(1, 2_000_000)]
    assert elapsed < 20  # a quadratic scan of 4 MB would take hours, not seconds


def test_too_many_containers_or_too_deep_are_refused_before_parsing() -> None:
    limits = BodyLimits(json_depth=64, json_containers=100_000)
    brackets_in_text = json.dumps({"model": "m", "prompt": "[" * 200_000}).encode()

    assert body_problem(b"[" * 200_000 + b"]" * 200_000, limits) == (
        "bad request: the body has 200,000 arrays and objects; at most 100,000 are read"
    )
    assert body_problem(b"[" * 80_000 + b"]" * 80_000, limits) is None  # left to the parser
    deep_among_text = b'{"p": "' + b"[" * 100_000 + b'", "q": ' + b"[" * 70 + b"]" * 70 + b"}"
    assert body_problem(deep_among_text, limits) == (
        "bad request: the body nests arrays and objects more than 64 levels deep"
    )
    assert body_problem(brackets_in_text, limits) is None  # counted exactly: only one object
    assert limits.bytes_for("audio/transcriptions") == 32 * 1024 * 1024
    assert limits.bytes_for("chat/completions") == 8 * 1024 * 1024


def test_a_parsed_document_is_measured_up_to_just_past_the_limit() -> None:
    nested: object = "leaf"
    for _ in range(500):
        nested = [nested]

    assert document_depth({"a": [1, {"b": []}], "c": "x"}, beyond=64) == 4
    assert document_depth("text", beyond=64) == 0
    assert document_depth(nested, beyond=64) == 65
    assert depth_problem(64, BodyLimits()) is None
    assert depth_problem(65, BodyLimits()) == (
        "bad request: the body nests arrays and objects more than 64 levels deep"
    )


# ------------------------------------------------------------------ headers


def test_credentials_hop_by_hop_and_forwarding_headers_stay_behind() -> None:
    sent = [
        ("Authorization", "Bearer secret"),
        ("Proxy-Authorization", "Basic x"),
        ("Cookie", "session=1"),
        ("X-Api-Key", "k"),
        ("Api-Key", "k"),
        ("X-Goog-Api-Key", "k"),
        ("Openai_Api_Key", "k"),
        ("X-Forwarded-For", "10.9.9.9"),
        ("Forwarded", "for=10.9.9.9"),
        ("X-Real-IP", "10.9.9.9"),
        ("Connection", "keep-alive, X-Secret-Hop"),
        ("X-Secret-Hop", "1"),
        ("Keep-Alive", "timeout=5"),
        ("Transfer-Encoding", "chunked"),
        ("Upgrade", "h2c"),
        ("TE", "trailers"),
        ("Expect", "100-continue"),
        ("Host", "gateway"),
        ("Content-Length", "10"),
        ("X-Label-Selector", "tenant=a"),
        ("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        ("tracestate", "k=v"),
        ("Accept", "text/event-stream"),
        ("User-Agent", "OpenAI/Python 1.0"),
        ("OpenAI-Organization", "org"),
    ]

    assert request_headers_for_backend(sent) == [
        ("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
        ("tracestate", "k=v"),
        ("Accept", "text/event-stream"),
        ("User-Agent", "OpenAI/Python 1.0"),
        ("OpenAI-Organization", "org"),
    ]


def test_set_cookie_and_hop_by_hop_headers_do_not_come_back() -> None:
    answered = [
        ("Content-Type", "application/json"),
        ("Content-Length", "12"),
        ("Set-Cookie", "session=stolen; Path=/"),
        ("set-cookie2", "x=1"),
        ("Connection", "close, X-Hop"),
        ("X-Hop", "1"),
        ("Transfer-Encoding", "chunked"),
        ("X-Request-Id", "r1"),
    ]

    assert response_headers_for_caller(answered) == [
        ("Content-Type", "application/json"),
        ("Content-Length", "12"),
        ("X-Request-Id", "r1"),
    ]


# ------------------------------------------------------------------ routing


def test_a_model_in_a_namespace_the_caller_may_not_use_is_unknown_and_never_named() -> None:
    catalog = catalog_with(
        model_object("llama", namespace="team-a", uid="a"),
        model_object("llama", namespace="team-b", uid="b"),
        model_object("secret", namespace="team-b", uid="s"),
    )
    everything = LabelSelector()

    assert find_route(catalog, "llama", everything) == Ambiguous("llama", ("team-a", "team-b"))
    only_a = find_route(catalog, "llama", everything, namespaces={"team-a"})
    assert isinstance(only_a, Route) and only_a.model.uid == "a"
    assert find_route(catalog, "secret", everything, namespaces={"team-a"}) == Unknown("secret")
    assert find_route(catalog, "llama", everything, namespaces=set()) == Unknown("llama")


@pytest.mark.parametrize(
    ("address", "loopback"),
    [("127.0.0.1", True), ("127.8.9.1", True), ("::1", True), ("10.0.0.1", False),
     ("::ffff:10.0.0.1", False), (None, False), ("not-an-address", False)],
)  # fmt: skip
def test_only_loopback_addresses_count_as_loopback(address: str | None, loopback: bool) -> None:
    from kaiwo_contracts.access import is_loopback_address

    assert is_loopback_address(address) is loopback
