"""A plan's fingerprint: what makes two plans the same decision."""

from __future__ import annotations

import dataclasses
import enum
import math
import uuid
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from kaiwo_contracts.events import PlanDecidedV1
from kaiwo_contracts.events.message_body import body_json
from kaiwo_contracts.plans import (
    ObjectRef,
    Plan,
    PlanSource,
    document_fingerprint,
    fingerprint_bytes_of_wire,
    fingerprint_of,
)
from pydantic_core import from_json

OWNER = ObjectRef(
    api_version="kaiwo.silogen.ai/v1alpha1", kind="KaiwoJob", name="t", namespace="a", uid="u"
)


def test_the_fingerprint_ignores_the_observed_resource_version_only() -> None:
    base = Plan(owner=OWNER, status={"status": "RUNNING"})

    assert (
        base.fingerprint()
        == base.model_copy(update={"observed_resource_version": "9"}).fingerprint()
    )
    assert base.fingerprint() != base.model_copy(update={"observed_generation": 2}).fingerprint()
    assert base.fingerprint() != base.model_copy(update={"delete_owner": True}).fingerprint()


def test_fields_added_later_stay_out_of_the_json_while_unused() -> None:
    # Plans recorded before delete, shared and finalizers existed keep their bytes.
    plain = Plan(owner=OWNER).model_dump(mode="json")
    assert not {"createOnly", "delete", "shared", "finalizers"} & set(plain)
    pod = ObjectRef(api_version="v1", kind="Pod", name="p", namespace="a", uid="p-1")
    used = Plan(owner=OWNER, delete=(pod,), shared=({"kind": "X"},), finalizers=())
    dumped = used.model_dump(mode="json")
    assert dumped["delete"] == [pod.model_dump(mode="json")]
    assert dumped["shared"] == [{"kind": "X"}]
    assert dumped["finalizers"] == []
    assert Plan.model_validate(dumped) == used
    assert used.fingerprint() != used.model_copy(update={"finalizers": None}).fingerprint()


class _Text(str):
    pass


class _Size(enum.IntEnum):
    SMALL = 1


class _Colour(enum.StrEnum):
    RED = "red"


@dataclasses.dataclass(frozen=True)
class _Point:
    x: int


_BEYOND_JSON = st.sampled_from(
    [
        math.nan,
        math.inf,
        -math.inf,
        1e-05,
        2.5e-09,
        2**70,
        _Text("sub"),
        _Size.SMALL,
        _Colour.RED,
        uuid.UUID(int=7),
        datetime(2026, 1, 1, tzinfo=UTC),
        Decimal("1.5"),
        frozenset({"a"}),
        b"bytes",
        _Point(1),
        {1: "integer key"},
        (1, "tuple"),
    ]
)
_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats()
    | st.text()
    | _BEYOND_JSON,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=12,
)
_DOCUMENTS = st.dictionaries(st.text(max_size=5), _VALUES, max_size=4)


@settings(max_examples=300)
@given(desired=st.lists(_DOCUMENTS, max_size=2), shared=st.lists(_DOCUMENTS, max_size=1),
       status=st.none() | _DOCUMENTS)  # fmt: skip
def test_the_fingerprint_is_the_hash_of_the_json_mode_dump_whatever_the_documents_hold(
    desired: list[dict[str, Any]], shared: list[dict[str, Any]], status: dict[str, Any] | None
) -> None:
    # The fingerprint is mostly written from the plan's own documents, not from a dump of
    # them; recorded fingerprints must still be the dump's.
    plan = Plan(owner=OWNER, desired=tuple(desired), shared=tuple(shared), status=status)

    assert plan.fingerprint() == document_fingerprint(plan.fingerprint_document())


def test_documents_the_dump_changes_hash_as_dumped() -> None:
    # Written by hand: NaN is null either way, a datetime is the dump's text.
    at = datetime(2026, 1, 1, tzinfo=UTC)
    plan = Plan(owner=OWNER, desired=({"a": math.nan, "t": (1,)},), status={"at": at})
    same = Plan(
        owner=OWNER, desired=({"a": None, "t": [1]},), status={"at": "2026-01-01T00:00:00Z"}
    )

    assert plan.fingerprint() == same.fingerprint()


def test_the_fingerprint_hashes_the_bytes_a_caller_can_compare_instead() -> None:
    # Replay hashes the recorded plan's bytes once and compares the replayed plan's bytes
    # with them: equal bytes must be equal fingerprints and the other way round, types
    # included (1 and 1.0 are equal to == and not here).
    plan = Plan(owner=OWNER, desired=({"kind": "Job", "replicas": 1},), status={"n": 1})
    same = Plan(
        owner=OWNER, desired=({"replicas": 1, "kind": "Job"},), status={"n": 1},
        observed_resource_version="9",
    )  # fmt: skip
    as_float = Plan(owner=OWNER, desired=({"kind": "Job", "replicas": 1.0},), status={"n": 1})

    assert plan.fingerprint() == fingerprint_of(plan.fingerprint_bytes())
    assert plan.fingerprint_bytes() == same.fingerprint_bytes()
    assert plan.fingerprint_bytes() != as_float.fingerprint_bytes()
    assert plan.fingerprint() != as_float.fingerprint()
    assert plan.fingerprint_bytes().startswith(b'{"deleteOwner":false,"desired":[{"kind"')


def _wire(decision: PlanDecidedV1) -> dict[str, Any]:
    """The decision as published (the envelope's data) and read back as the store reads it."""
    loaded: dict[str, Any] = from_json(body_json(decision.model_dump(mode="json", by_alias=True)))
    return loaded


@settings(max_examples=300)
@given(desired=st.lists(_DOCUMENTS, max_size=2), shared=st.lists(_DOCUMENTS, max_size=1),
       status=st.none() | _DOCUMENTS, version=st.none() | st.text(max_size=3),
       sourced=st.booleans())  # fmt: skip
def test_a_published_plan_gives_its_fingerprint_bytes_from_its_wire_form(
    desired: list[dict[str, Any]],
    shared: list[dict[str, Any]],
    status: dict[str, Any] | None,
    version: str | None,
    sourced: bool,
) -> None:
    # Replay writes a recorded plan's bytes from its JSON instead of dumping the validated
    # plan again: for every plan as published they must be the plan's own.
    sources = (PlanSource(ref=OWNER, generation=1, resource_version="7", digest="d"),)
    plan = Plan(
        owner=OWNER, desired=tuple(desired), shared=tuple(shared), status=status,
        observed_resource_version=version, sources=sources if sourced else (),
    )  # fmt: skip
    wire = _wire(PlanDecidedV1.of(plan))

    assert fingerprint_bytes_of_wire(wire["plan"]) == plan.fingerprint_bytes()
    assert PlanDecidedV1.checked_wire_fingerprint_bytes(wire) == plan.fingerprint_bytes()


def test_a_wire_form_that_is_not_the_hashed_dump_is_not_taken() -> None:
    source = PlanSource(ref=OWNER, generation=1, resource_version="7", digest="d")
    plan = Plan(
        owner=OWNER, desired=({"kind": "Job", "replicas": 1},), status={"n": 1},
        observed_resource_version="9", sources=(source,),
    )  # fmt: skip
    wire = _wire(PlanDecidedV1.of(plan))
    # Only the observed versions are left out: the owner's and each source's.
    moved = {**wire, "plan": {**wire["plan"], "observedResourceVersion": "10"}}
    moved["plan"]["sources"] = [{**wire["plan"]["sources"][0], "resourceVersion": "8"}]
    retyped = {**wire, "plan": {**wire["plan"], "desired": [{"kind": "Job", "replicas": 1.0}]}}
    extra = {**wire, "plan": {**wire["plan"], "extra": True}}
    source_digest = {**wire, "plan": {**wire["plan"], "sources": [{**source.model_dump(
        mode="json", by_alias=True), "digest": "e"}]}}  # fmt: skip

    assert PlanDecidedV1.checked_wire_fingerprint_bytes(moved) == plan.fingerprint_bytes()
    assert PlanDecidedV1.checked_wire_fingerprint_bytes(retyped) is None
    assert PlanDecidedV1.checked_wire_fingerprint_bytes(extra) is None
    assert PlanDecidedV1.checked_wire_fingerprint_bytes(source_digest) is None
    assert PlanDecidedV1.checked_wire_fingerprint_bytes({**wire, "plan": [1]}) is None
    assert PlanDecidedV1.checked_wire_fingerprint_bytes({**wire, "fingerprint": 1}) is None
