"""Hand-written hostile bus messages, each with the outcome expected of the real consumers.

Every message goes onto a real nats-server (``test_hostile_bus.py``), where the planner
(``kaiwo.obs.*``), the executor (``kaiwo.plan.*``), the dead-letter relay (advisories) and
the recorder (everything) meet it. Outcomes, as the test observes them:

``publish``
    ``stored`` or ``refused at publish`` (the bus refuses it before sending anything).
``consumer``
    ``dead letter: <failure>`` (dead-lettered on its first delivery; ``<failure>`` is the
    decoder's class), ``handled`` (taken in and acknowledged), ``no dead letter`` (the relay
    read it and made no dead letter), ``dead letter: max deliveries`` (the relay made one),
    or ``-`` (no service reads it but the recorder).
``recorder``
    ``event``, ``poison: <failure>`` (recorded raw with the decoder's class), ``dead letter
    record``, ``advisory record``, or ``nothing``.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kaiwo_contracts.events import Envelope, ObservedObjectV1, PlanDecidedV1
from kaiwo_contracts.events.envelope import MAX_MESSAGE_BYTES
from kaiwo_contracts.events.observed import OversizedObject, reduced_object
from kaiwo_contracts.events.subjects import observed_subject, plan_subject
from kaiwo_contracts.plans import ObjectRef, Plan, PruneRule

WHEN = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
KAIWO = "kaiwo.silogen.ai/v1alpha1"
ADVISORY = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES"
OWNER_LABEL = "kaiwo.silogen.ai/owner-uid"
DEEP = 5000


@dataclass(frozen=True, slots=True)
class Expected:
    publish: str
    consumer: str
    recorder: str


@dataclass(frozen=True, slots=True)
class HostileMessage:
    name: str
    what: str
    subject: str
    headers: dict[str, str]
    body: bytes
    expected: Expected

    @property
    def reader(self) -> str:
        """Which service reads it besides the recorder."""
        if self.subject.startswith("kaiwo.obs."):
            return "planner"
        if self.subject.startswith("kaiwo.plan."):
            return "executor"
        if self.subject.startswith(ADVISORY):
            return "relay"
        return "-"


def uid_of(name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"hostile/{name}"))


def kaiwo_job(uid: str, name: str, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": KAIWO,
        "kind": "KaiwoJob",
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "uid": uid,
            "resourceVersion": "10",
            "generation": 1,
        },
        "spec": {"image": "busybox", "entrypoint": "echo hello"},
        **extra,
    }


def observation(obj: dict[str, Any], **changes: Any) -> tuple[str, dict[str, str], bytes]:
    """Subject, headers and body of the watcher's observation of ``obj``."""
    meta = obj["metadata"]
    fields: dict[str, Any] = {
        "kind": obj["kind"],
        "api_version": obj["apiVersion"],
        "namespace": meta.get("namespace"),
        "name": meta["name"],
        "uid": meta["uid"],
        "resource_version": meta["resourceVersion"],
        "event_type": "ADDED",
        "object": obj,
        **changes,
    }
    envelope = Envelope.new(
        data=ObservedObjectV1(**fields),
        source="/kaiwo/watcher",
        time=WHEN,
        correlationid=meta["uid"],
        subject=f"{meta.get('namespace')}/{meta['name']}",
        id=f"{meta['uid']}:{meta['resourceVersion']}",
    )
    headers, body = envelope.to_nats()
    subject = observed_subject(kind=obj["kind"], namespace=meta.get("namespace"), uid=meta["uid"])
    return subject, headers, body


def observed(name: str) -> tuple[str, dict[str, str], bytes]:
    return observation(kaiwo_job(uid_of(name), name))


def plan_message(owner_uid: str, name: str) -> tuple[str, dict[str, str], bytes]:
    """A plan the executor can carry out: one ConfigMap in ``default``."""
    owner = ObjectRef(
        api_version=KAIWO, kind="KaiwoJob", name=name, namespace="default", uid=owner_uid
    )
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": f"{name}-cm",
            "namespace": "default",
            "labels": {OWNER_LABEL: owner_uid},
            "ownerReferences": [
                {
                    "apiVersion": KAIWO,
                    "kind": "KaiwoJob",
                    "name": name,
                    "uid": owner_uid,
                    "controller": True,
                }
            ],
        },
        "data": {"entrypoint.sh": "echo hello"},
    }
    plan = Plan(
        owner=owner,
        desired=(config_map,),
        prune=(PruneRule(api_version="v1", kind="ConfigMap"),),
        prune_selector={OWNER_LABEL: owner_uid},
    )
    envelope = Envelope.new(
        data=PlanDecidedV1.of(plan, planned_at=WHEN),
        source="/kaiwo/planner",
        time=WHEN,
        correlationid=owner_uid,
        subject=f"default/{name}",
        causationid=f"{owner_uid}:1",
    )
    headers, body = envelope.to_nats()
    return plan_subject(kind="KaiwoJob", namespace="default", uid=owner_uid), headers, body


def with_body(
    base: tuple[str, dict[str, str], bytes], body: bytes
) -> tuple[str, dict[str, str], bytes]:
    subject, headers, _ = base
    return subject, headers, body


def with_headers(
    base: tuple[str, dict[str, str], bytes], *, drop: tuple[str, ...] = (), **set_: str
) -> tuple[str, dict[str, str], bytes]:
    subject, headers, body = base
    changed = {k: v for k, v in headers.items() if k not in drop}
    changed.update({k.replace("_", "-"): v for k, v in set_.items()})
    return subject, changed, body


def edited_json(
    base: tuple[str, dict[str, str], bytes], edit: Any
) -> tuple[str, dict[str, str], bytes]:
    subject, headers, body = base
    document = json.loads(body)
    edit(document)
    return subject, headers, json.dumps(document).encode()


def case(
    name: str, what: str, message: tuple[str, dict[str, str], bytes], expected: Expected
) -> HostileMessage:
    subject, headers, body = message
    return HostileMessage(
        name=name, what=what, subject=subject, headers=headers, body=body, expected=expected
    )


def dead(failure: str) -> Expected:
    """Dead-lettered by its reader on the first delivery, recorded as poison, same class."""
    return Expected(
        publish="stored", consumer=f"dead letter: {failure}", recorder=f"poison: {failure}"
    )


HANDLED = Expected(publish="stored", consumer="handled", recorder="event")


def _nested_object(depth: int) -> dict[str, Any]:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return value  # type: ignore[no-any-return]


def _forged_marker(document: dict[str, Any]) -> None:
    document["object"]["kaiwoOversized"] = {"sizeBytes": 5, "limitBytes": 1}


def _extra_field(document: dict[str, Any]) -> None:
    document["evil"] = True


def _number_for_string(document: dict[str, Any]) -> None:
    document["resourceVersion"] = 10


def _uid_mismatch(document: dict[str, Any]) -> None:
    document["object"]["metadata"]["uid"] = "someone-else"


def _tampered_fingerprint(document: dict[str, Any]) -> None:
    document["fingerprint"] = "0" * 64


def _reduced(name: str) -> tuple[str, dict[str, str], bytes]:
    uid = uid_of(name)
    whole = kaiwo_job(uid, name)
    whole["spec"]["entrypoint"] = "echo " + "x" * 1_200_000
    marker = OversizedObject(size_bytes=1_200_270, limit_bytes=MAX_MESSAGE_BYTES)
    return observation(
        whole,
        object=reduced_object(whole, oversized=marker),
        oversized=marker,
    )


def _advisory(stream: str, consumer: str, sequence: int) -> tuple[str, dict[str, str], bytes]:
    body = {
        "type": "io.nats.jetstream.advisory.v1.max_deliver",
        "id": f"forged-{stream}-{sequence}",
        "timestamp": "2026-03-01T12:00:00Z",
        "stream": stream,
        "consumer": consumer,
        "stream_seq": sequence,
        "deliveries": 5,
    }
    return f"{ADVISORY}.{stream}.{consumer}", {}, json.dumps(body).encode()


def build_corpus() -> tuple[HostileMessage, ...]:
    """The corpus; built on demand (the forged advisory needs no stream state)."""
    deep_array = b"[" * DEEP + b"]" * DEEP
    deep_object = b'{"a":' * DEEP + b"1" + b"}" * DEEP
    at_the_limit = kaiwo_job(uid_of("nesting-at-the-limit"), "nesting-at-the-limit")
    at_the_limit["kind"] = "ConfigMap"
    at_the_limit["apiVersion"] = "v1"
    at_the_limit.pop("spec")
    # 3 objects, 197 arrays and a string: the deepest body the parser takes (one more fails).
    at_the_limit["data"] = {"deep": _nested_object(197)}
    return (
        case(
            "bad-json",
            "a body that is not JSON",
            with_body(observed("bad-json"), b"{not json"),
            dead("not-json"),
        ),
        case(
            "empty-body", "an empty body", with_body(observed("empty-body"), b""), dead("not-json")
        ),
        case(
            "array-body",
            "a JSON array instead of an object",
            with_body(observed("array-body"), b"[1,2]"),
            dead("not-an-object"),
        ),
        case(
            "deep-arrays",
            f"arrays nested {DEEP} deep (RecursionError in json.loads)",
            with_body(observed("deep-arrays"), deep_array),
            dead("too-deep"),
        ),
        case(
            "deep-objects",
            f"objects nested {DEEP} deep",
            with_body(observed("deep-objects"), deep_object),
            dead("too-deep"),
        ),
        case(
            "nesting-at-the-limit",
            "a valid observation (a ConfigMap) nested 201 levels, the parser's limit",
            observation(at_the_limit),
            HANDLED,
        ),
        case(
            "huge-integer",
            "an integer of 5,000 digits",
            with_body(observed("huge-integer"), b'{"n":' + b"9" * 5000 + b"}"),
            dead("number-out-of-range"),
        ),
        case(
            "beyond-int64",
            "an integer of 2^64",
            with_body(observed("beyond-int64"), b'{"n":18446744073709551616}'),
            dead("number-out-of-range"),
        ),
        case(
            "float-overflow",
            "1e400 (infinity once parsed)",
            with_body(observed("float-overflow"), b'{"n":1e400}'),
            dead("number-out-of-range"),
        ),
        case("nan", "a NaN literal", with_body(observed("nan"), b'{"n":NaN}'), dead("not-json")),
        case(
            "invalid-utf8",
            "invalid UTF-8 in a string",
            with_body(observed("invalid-utf8"), b'{"s":"\xff\xfe"}'),
            dead("not-json"),
        ),
        case(
            "lone-surrogate",
            "a lone UTF-16 surrogate escape",
            with_body(observed("lone-surrogate"), b'{"s":"\\ud800"}'),
            dead("not-json"),
        ),
        case(
            "no-ce-id",
            "the ce-id header missing",
            with_headers(observed("no-ce-id"), drop=("ce-id",)),
            dead("invalid-envelope"),
        ),
        case(
            "no-headers",
            "no headers at all",
            (observed("no-headers")[0], {}, observed("no-headers")[2]),
            dead("invalid-envelope"),
        ),
        case(
            "no-nats-msg-id",
            "a valid observation without Nats-Msg-Id (no deduplication; ce-id is the id)",
            with_headers(observed("no-nats-msg-id"), drop=("Nats-Msg-Id",)),
            HANDLED,
        ),
        case(
            "naive-time",
            "ce-time without a zone",
            with_headers(observed("naive-time"), ce_time="2026-03-01T12:00:00"),
            dead("invalid-envelope"),
        ),
        case(
            "bad-source",
            "ce-source not /kaiwo/<service>",
            with_headers(observed("bad-source"), ce_source="watcher"),
            dead("invalid-envelope"),
        ),
        case(
            "long-correlation",
            "a ce-correlationid of 300 characters",
            with_headers(observed("long-correlation"), ce_correlationid="c" * 300),
            dead("invalid-envelope"),
        ),
        case(
            "crlf-in-header",
            "CR LF in ce-subject (nats-py turns them into spaces: no injected header)",
            with_headers(observed("crlf-in-header"), ce_subject="team-a/x\r\nce-type: forged"),
            HANDLED,
        ),
        case(
            "unknown-type",
            "a well-formed type of the obs family that no one knows",
            with_headers(observed("unknown-type"), ce_type="ai.silogen.kaiwo.obs.forecast.v1"),
            Expected(publish="stored", consumer="dead letter: wrong-type", recorder="event"),
        ),
        case(
            "forged-type",
            "a type outside ai.silogen.kaiwo",
            with_headers(observed("forged-type"), ce_type="com.example.pwn"),
            Expected(
                publish="stored",
                consumer="dead letter: wrong-type",
                recorder="poison: invalid-envelope",
            ),
        ),
        case(
            "number-for-string",
            "resourceVersion as a number",
            edited_json(observed("number-for-string"), _number_for_string),
            dead("invalid-payload"),
        ),
        case(
            "extra-field",
            "an unknown payload field",
            edited_json(observed("extra-field"), _extra_field),
            dead("invalid-payload"),
        ),
        case(
            "uid-mismatch",
            "the payload uid differs from the object's",
            edited_json(observed("uid-mismatch"), _uid_mismatch),
            dead("invalid-payload"),
        ),
        case(
            "forged-oversized",
            "a whole object carrying the oversized marker",
            edited_json(observed("forged-oversized"), _forged_marker),
            dead("invalid-payload"),
        ),
        case(
            "wrong-subject-uid",
            "a valid observation on another object's subject",
            (
                observed_subject(kind="KaiwoJob", namespace="team-a", uid=uid_of("elsewhere")),
                *observed("wrong-subject-uid")[1:],
            ),
            dead("wrong-subject"),
        ),
        case(
            "plan-on-obs-subject",
            "a valid plan published on an observation subject",
            (
                observed("plan-on-obs-subject")[0],
                *plan_message(uid_of("plan-on-obs-subject"), "plan-on-obs-subject")[1:],
            ),
            Expected(
                publish="stored",
                consumer="dead letter: wrong-type",
                recorder="poison: wrong-subject",
            ),
        ),
        case(
            "oversized-reduced",
            "a genuine reduced observation of a 1.2 MB KaiwoJob "
            "(planner: Valid=False ObjectTooLarge)",
            _reduced("oversized-reduced"),
            HANDLED,
        ),
        case(
            "body-over-limit",
            "a body of 1 MiB + 1 byte",
            with_body(observed("body-over-limit"), b"x" * (MAX_MESSAGE_BYTES + 1)),
            Expected(publish="refused at publish", consumer="-", recorder="nothing"),
        ),
        case(
            "body-near-limit",
            "1 MiB - 1 KiB of non-JSON (its dead letter must be cut to fit)",
            with_body(observed("body-near-limit"), b"x" * (MAX_MESSAGE_BYTES - 1024)),
            dead("not-json"),
        ),
        case(
            "plan-fingerprint",
            "a plan whose fingerprint is not its plan's",
            edited_json(
                plan_message(uid_of("plan-fingerprint"), "plan-fingerprint"), _tampered_fingerprint
            ),
            dead("invalid-payload"),
        ),
        case(
            "plan-wrong-owner",
            "a valid plan on the subject of another owner (would escape its owner's lane)",
            (
                plan_subject(kind="KaiwoJob", namespace="default", uid=uid_of("other-owner")),
                *plan_message(uid_of("plan-wrong-owner"), "plan-wrong-owner")[1:],
            ),
            dead("wrong-subject"),
        ),
        case(
            "plan-deep",
            f"a plan body nested {DEEP} deep",
            with_body(plan_message(uid_of("plan-deep"), "plan-deep"), deep_array),
            dead("too-deep"),
        ),
        case(
            "advisory-deep",
            f"a max-deliveries advisory nested {DEEP} deep",
            (f"{ADVISORY}.KAIWO_OBS.planner-obs", {}, deep_array),
            Expected(publish="stored", consumer="no dead letter", recorder="advisory record"),
        ),
        case(
            "advisory-about-dlq",
            "an advisory about a consumer of KAIWO_DLQ",
            _advisory("KAIWO_DLQ", "recorder-dlq", 1),
            Expected(publish="stored", consumer="no dead letter", recorder="advisory record"),
        ),
        case(
            "advisory-forged",
            "a forged advisory naming a stored, handled observation",
            _advisory("KAIWO_OBS", "planner-obs", 1),
            Expected(
                publish="stored", consumer="dead letter: max deliveries", recorder="advisory record"
            ),
        ),
        case(
            "dead-letter-deep",
            f"a dead letter whose body is nested {DEEP} deep, no headers",
            ("kaiwo.dlq.KAIWO_OBS.planner-obs", {}, deep_array),
            Expected(publish="stored", consumer="-", recorder="dead letter record"),
        ),
    )
