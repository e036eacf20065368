"""Fuzzing what the API server answers, from the bytes on the wire to the watcher's observed
events: answer bodies, list pages, watch lines, Status errors, CRD conditions
(:mod:`kaiwo_kube.responses`, :func:`kaiwo_kube.errors.error_from_status`), and the
watcher's observation building (:mod:`kaiwo_watcher.observation`).

Objects start real-looking: manifests of the served kinds drawn from their CRD schemas
(:mod:`tests.fuzz.schema_strategies`) and the children the operator watches, as the API
server returns them; then they are often damaged (values of the wrong type anywhere, fields
removed), and the JSON around them too (:mod:`tests.fuzz.damage`). Properties:

* decoding a body, a list page or a watch line raises nothing but :class:`KubeError`
  (an ERROR event's own typed error, or :class:`MalformedResponse`);
* a Status error always becomes a :class:`KubeError` whose ``retry_after`` is None or a
  finite number of seconds, never negative;
* the watcher's :func:`observe` raises nothing but ``ValueError`` (what the service counts
  as a rejected object); whatever it returns can also be reduced for an oversized object, and
  its log identity and child-owner lookups raise nothing, whatever the object holds.

Cases: 1,000 per target in CI, 100,000 with ``make fuzz`` (:mod:`tests.fuzz.profiles`).
"""

from __future__ import annotations

import contextlib
import json
import math
from datetime import UTC, datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from kaiwo_contracts.crds.registry import SERVED_KINDS
from kaiwo_kube import KubeError, resources
from kaiwo_kube.errors import Retryable, error_from_status
from kaiwo_kube.responses import crd_established, decode_body, list_page_of, watch_event_of
from kaiwo_watcher.observation import (
    child_owner,
    known_from,
    log_identity,
    observe,
    oversized_observations,
)
from kaiwo_watcher.watch_list import DEFAULT_WATCH_LIST, WatchTarget

from tests.fuzz.damage import damage_body
from tests.fuzz.profiles import PROFILE
from tests.fuzz.schema_strategies import (
    dns_labels,
    hostile,
    hostile_values,
    json_values,
    manifests,
    metadata,
    words,
)

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
TARGETS: tuple[WatchTarget, ...] = (
    *DEFAULT_WATCH_LIST,
    WatchTarget(resource=resources.CUSTOM_RESOURCE_DEFINITION),
)
SERVED = [manifests(model) for model in SERVED_KINDS]

# -------------------------------------------------------------------- objects


@st.composite
def children(draw: st.DrawFn) -> dict[str, Any]:
    """A child the operator watches, as the API server returns it."""
    target = draw(st.sampled_from(TARGETS))
    meta = draw(metadata(namespaced=target.resource.namespaced))
    if draw(st.booleans()):
        meta["labels"] = {
            **meta.get("labels", {}),
            "kaiwo.silogen.ai/owner-uid": draw(st.uuids().map(str)),
        }
    if draw(st.booleans()):
        meta["ownerReferences"] = [
            {
                "apiVersion": "kaiwo.silogen.ai/v1alpha1",
                "kind": "KaiwoJob",
                "name": draw(dns_labels),
                "uid": draw(st.uuids().map(str)),
                "controller": draw(st.booleans()),
            }
        ]
    if draw(st.integers(0, 5)) == 0:
        meta["ownerReferences"] = draw(hostile_values)
    obj = {
        "apiVersion": target.resource.api_version,
        "kind": target.kind,
        "metadata": meta,
        "spec": draw(st.dictionaries(words, json_values, max_size=3)),
        "status": draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "conditions": st.lists(
                        st.fixed_dictionaries(
                            {
                                "type": st.sampled_from(["Established", "Ready", "Complete"]),
                                "status": st.sampled_from(["True", "False", "Unknown"]),
                            }
                        ),
                        max_size=2,
                    ),
                    "phase": st.sampled_from(["Running", "Pending"]),
                },
            )
        ),
    }
    if draw(st.booleans()):  # list items from a real server carry no type meta
        obj.pop("apiVersion")
        obj.pop("kind")
    return obj


@st.composite
def objects(draw: st.DrawFn) -> Any:
    """A real-looking object, damaged half of the time."""
    # Half children, half served kinds (a plain one_of would pick the six kinds far more).
    obj = draw(st.one_of(children(), st.one_of(*SERVED)))
    return draw(hostile(obj)) if draw(st.booleans()) else obj


# -------------------------------------------------------------------- wire bytes

EVENT_TYPES = ["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR", "SYNC", "", "added"]
statuses = st.fixed_dictionaries(
    {"kind": st.just("Status"), "apiVersion": st.just("v1")},
    optional={
        "status": st.just("Failure"),
        "code": st.sampled_from([410, 500, 429, 404, 0, -1, "410", "x", 1e400, None, [1], 2**70]),
        "reason": st.sampled_from(["Expired", "Gone", "TooManyRequests", ""]) | hostile_values,
        "message": words | hostile_values,
        "details": st.fixed_dictionaries(
            {},
            optional={
                "retryAfterSeconds": st.sampled_from(
                    [1, 0, -5, 1.5, 1e308, "3", "x", None, [2], {"a": 1}, 10**30]
                ),
                "causes": hostile_values,
            },
        )
        | hostile_values,
    },
)


def _dumped(value: Any) -> bytes:
    try:
        return json.dumps(value).encode("utf-8", errors="surrogatepass")
    except (TypeError, ValueError, RecursionError):  # not JSON (a date, a set, a byte string)
        return json.dumps(value, default=repr).encode("utf-8", errors="surrogatepass")


@st.composite
def watch_lines(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(EVENT_TYPES))
    body: Any
    if kind == "ERROR":
        body = {"type": "ERROR", "object": draw(statuses | hostile_values)}
    elif kind == "BOOKMARK":
        body = {"type": kind, "object": {"metadata": {"resourceVersion": draw(words)}}}
    else:
        body = {"type": kind, "object": draw(objects())}
    if draw(st.integers(0, 3)) == 0:
        body = draw(hostile(body, rounds=1))
    line = _dumped(body)
    return damage_body(draw(st.data()), line) if draw(st.integers(0, 2)) == 0 else line


@st.composite
def list_bodies(draw: st.DrawFn) -> bytes:
    page: Any = {
        "apiVersion": "v1",
        "kind": "List",
        "metadata": draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "resourceVersion": st.integers(1, 10**9).map(str),
                    "continue": st.sampled_from(["", "token"]),
                },
            )
        ),
        "items": draw(st.lists(objects(), max_size=2)),
    }
    if draw(st.integers(0, 3)) == 0:
        page = draw(hostile(page, rounds=1))
    body = _dumped(page)
    return damage_body(draw(st.data()), body) if draw(st.integers(0, 2)) == 0 else body


# -------------------------------------------------------------------- properties


def _observe_all_ways(obj: Any, *, target: WatchTarget, event_type: Any) -> None:
    """What the watcher does with one object of a list or a watch event."""
    log_identity(obj)
    try:
        observation = observe(obj, target=target, event_type=event_type, time=NOW)
    except ValueError:
        return
    child_owner(observation.envelope.data.object)
    known_from(observation)
    for reduced in oversized_observations(observation, limit_bytes=1024):
        assert reduced.envelope.data.oversized is not None
        child_owner(reduced.envelope.data.object)


@PROFILE
@given(watch_lines(), st.sampled_from(TARGETS))
def test_a_watch_line_gives_an_event_or_a_kube_error(line: bytes, target: WatchTarget) -> None:
    try:
        event = watch_event_of(line)
    except KubeError as error:
        _check_error(error)
        return
    assert event.type in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK")
    assert isinstance(event.object, dict)
    assert isinstance(event.resource_version, str)
    crd_established(event.object)
    if event.type != "BOOKMARK":
        _observe_all_ways(event.object, target=target, event_type=event.type)


@PROFILE
@given(list_bodies(), st.sampled_from(TARGETS))
def test_a_list_answer_gives_a_page_or_a_kube_error(body: bytes, target: WatchTarget) -> None:
    decoded = decode_body(body)
    try:
        page = list_page_of(decoded if isinstance(decoded, dict) else {})
    except KubeError as error:
        _check_error(error)
        return
    assert isinstance(page.continue_token, str)
    assert page.resource_version or page.continue_token
    for item in page.items:
        assert isinstance(item, dict)
        crd_established(item)
        _observe_all_ways(item, target=target, event_type="SYNC")


@PROFILE
@given(
    st.integers(min_value=0, max_value=999),
    statuses | hostile_values,
    st.none() | st.sampled_from(["3", "-1", "nan", "inf", "1e400", "x", ""]) | words,
)
def test_a_status_answer_becomes_a_typed_error(code: int, status: Any, header: str | None) -> None:
    with contextlib.suppress(UnicodeEncodeError):
        _check_error(error_from_status(code=code, status=status, retry_after_header=header))


def _check_error(error: KubeError) -> None:
    assert isinstance(error.message, str)
    assert isinstance(error.status, dict)
    if isinstance(error, Retryable) and error.retry_after is not None:
        assert math.isfinite(error.retry_after)
        assert error.retry_after >= 0
