"""NATS subjects: builders, the parser, the token escaper and subscriber filters.

Families (most general token first, the object's uid last)::

    kaiwo.obs.<kind>.<scope>.<uid>             facts observed in the cluster
    kaiwo.plan.<kind>.<scope>.<uid>            plan decisions
    kaiwo.res.<outcome>.<kind>.<scope>.<uid>   what the executor did (applied | failed |
                                               refused)
    kaiwo.mon.<topic>.<scope>.<uid>            monitor findings (utilization, ...)
    kaiwo.gateway.load._cluster.<replica>      a gateway replica's active requests per Model
    kaiwo.gateway.scale.<namespace>.<uid>      the autoscaler's decision for one Model
    kaiwo.dlq.<stream>.<consumer>              dead letters of one consumer
    kaiwo.public.workload.<namespace>.<kind>.<uid>   public workload events (subscribers)

``<scope>`` is the namespace, or ``_cluster`` for cluster-scoped objects; ``<kind>`` is the
lowercase kind (``kaiwojob``, ``node``). Object *names* never appear: they may contain dots
(node names are FQDNs). Any other value is passed through :func:`escape_token`, which maps
everything outside ``[A-Za-z0-9-]`` (``_`` included) to ``_XX`` per UTF-8 byte, so an
escaped token is never ``_cluster`` and never contains ``.``, ``*``, ``>`` or whitespace.

When the bus runs with partitions (see :mod:`kaiwo_contracts.events.streams`), JetStream
stores these subjects with one more token at the end, the partition number ``0..n-1``
computed from the uid; :func:`parse_subject` accepts both forms.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

ROOT = "kaiwo"
CLUSTER_SCOPE = "_cluster"
ANY_TOKEN = "*"  # noqa: S105 - a subject wildcard, not a secret
ANY_TAIL = ">"

ResultOutcomeToken = Literal["applied", "failed", "refused"]
"""``applied`` / ``failed``: a plan carried out (``ApplyResultV1``); ``refused``: a plan the
executor refused (``PlanRefusedV1``), which the watcher reads to observe its sources again."""
MonitorTopic = Literal["utilization", "underutilized", "preemption"]
GatewayTopic = Literal["load", "scale"]
"""The gateway family's topics: load reports (``load``), autoscaling decisions (``scale``)."""
PUBLIC_WORKLOAD = "workload"
"""The public family's only topic so far (``kaiwo.public.workload.…``)."""

_SAFE_CHARS = re.compile(r"[A-Za-z0-9-]")
_ESCAPED = re.compile(r"_([0-9A-F]{2})")
_KIND_TOKEN = re.compile(r"^[a-z0-9]+$")
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_NAME_TOKEN = re.compile(r"^[A-Za-z0-9_-]+$")


class Family(StrEnum):
    OBSERVED = "obs"
    PLAN = "plan"
    RESULT = "res"
    MONITOR = "mon"
    GATEWAY = "gateway"
    DEAD_LETTER = "dlq"
    PUBLIC = "public"


class SubjectError(ValueError):
    """A value cannot become a subject token, or a subject is not one of ours."""


# --------------------------------------------------------------------------- tokens


def escape_token(value: str) -> str:
    """A single safe subject token for any non-empty string; reversible (:func:`unescape_token`).

    >>> escape_token("node-1.example.com")
    'node-1_2Eexample_2Ecom'
    """
    if not value:
        raise SubjectError("an empty string cannot be a subject token")
    return "".join(
        char if _SAFE_CHARS.fullmatch(char) else "".join(f"_{b:02X}" for b in char.encode())
        for char in value
    )


def unescape_token(token: str) -> str:
    """The string :func:`escape_token` was given."""
    if not token or not _NAME_TOKEN.fullmatch(token):
        raise SubjectError(f"{token!r} is not an escaped token")
    if "_" not in token:
        return token  # nothing escaped (every uid): the characters are themselves
    raw = bytearray()
    position = 0
    while position < len(token):
        match = _ESCAPED.match(token, position)
        if match:
            raw.append(int(match.group(1), 16))
            position = match.end()
        elif token[position] == "_":
            raise SubjectError(f"{token!r} has a bare '_' at {position}")
        else:
            raw.extend(token[position].encode())
            position += 1
    try:
        return raw.decode()
    except UnicodeDecodeError as error:
        raise SubjectError(f"{token!r} does not decode to UTF-8") from error


def kind_token(kind: str) -> str:
    """``KaiwoJob`` -> ``kaiwojob``."""
    token = kind.lower()
    if not _KIND_TOKEN.fullmatch(token):
        raise SubjectError(f"kind {kind!r} is not alphanumeric")
    return token


def scope_token(namespace: str | None) -> str:
    """The namespace (a DNS-1123 label, safe as is) or ``_cluster``."""
    if namespace is None:
        return CLUSTER_SCOPE
    if not _NAMESPACE.fullmatch(namespace):
        raise SubjectError(f"namespace {namespace!r} is not a DNS-1123 label")
    return namespace


def uid_token(uid: str) -> str:
    """Kubernetes uids are UUIDs and pass unchanged; anything else is escaped."""
    return escape_token(uid)


# --------------------------------------------------------------------------- builders


def observed_subject(*, kind: str, namespace: str | None, uid: str) -> str:
    return _join(Family.OBSERVED, kind_token(kind), scope_token(namespace), uid_token(uid))


def plan_subject(*, kind: str, namespace: str | None, uid: str) -> str:
    return _join(Family.PLAN, kind_token(kind), scope_token(namespace), uid_token(uid))


def result_subject(
    *, outcome: ResultOutcomeToken, kind: str, namespace: str | None, uid: str
) -> str:
    return _join(Family.RESULT, outcome, kind_token(kind), scope_token(namespace), uid_token(uid))


def monitor_subject(*, topic: MonitorTopic, namespace: str | None, uid: str) -> str:
    return _join(Family.MONITOR, topic, scope_token(namespace), uid_token(uid))


def gateway_subject(*, topic: GatewayTopic, namespace: str | None, uid: str) -> str:
    """``kaiwo.gateway.<topic>.<scope>.<uid>``: a load report is cluster-scoped, its "uid" the
    reporting replica (``load_report_subject``); a scale decision is its Model's."""
    return _join(Family.GATEWAY, topic, scope_token(namespace), uid_token(uid))


def load_report_subject(replica: str) -> str:
    """``kaiwo.gateway.load._cluster.<replica>``: where one gateway replica reports its load."""
    return gateway_subject(topic="load", namespace=None, uid=replica)


def scale_subject(*, namespace: str, uid: str) -> str:
    """``kaiwo.gateway.scale.<namespace>.<uid>``: the autoscaler's decision for one Model."""
    return gateway_subject(topic="scale", namespace=namespace, uid=uid)


def public_workload_subject(*, namespace: str, kind: str, uid: str) -> str:
    """``kaiwo.public.workload.<namespace>.<kind>.<uid>``: the public events of one workload.

    The namespace comes first (unlike the internal families) so a subscriber filters by
    namespace, the usual unit of access, with one wildcard-free prefix."""
    return _join(
        Family.PUBLIC, PUBLIC_WORKLOAD, scope_token(namespace), kind_token(kind), uid_token(uid)
    )


def public_namespace_filter(namespace: str) -> str:
    """``kaiwo.public.workload.<namespace>.>``: the public events of one namespace's
    workloads (what a namespace's subscriber key may read, decision 0164)."""
    return _join(Family.PUBLIC, PUBLIC_WORKLOAD, scope_token(namespace), ANY_TAIL)


def dead_letter_subject(*, stream: str, consumer: str) -> str:
    """``kaiwo.dlq.<stream>.<consumer>``; both are JetStream names, used as they are."""
    return _join(Family.DEAD_LETTER, _jetstream_name(stream), _jetstream_name(consumer))


def _jetstream_name(name: str) -> str:
    if not _NAME_TOKEN.fullmatch(name):
        raise SubjectError(f"{name!r} is not a stream or consumer name ([A-Za-z0-9_-]+)")
    return name


def _join(family: Family, *tokens: str) -> str:
    return ".".join((ROOT, family.value, *tokens))


# --------------------------------------------------------------------------- parsing

# Token positions (after "kaiwo.<family>") of each family's fields.
_LAYOUT: dict[Family, tuple[str, ...]] = {
    Family.OBSERVED: ("kind", "scope", "uid"),
    Family.PLAN: ("kind", "scope", "uid"),
    Family.RESULT: ("qualifier", "kind", "scope", "uid"),
    Family.MONITOR: ("qualifier", "scope", "uid"),
    Family.GATEWAY: ("qualifier", "scope", "uid"),
    Family.DEAD_LETTER: ("stream", "consumer"),
    Family.PUBLIC: ("qualifier", "scope", "kind", "uid"),
}


@dataclass(frozen=True, slots=True)
class ParsedSubject:
    """The parts of one of our subjects (unescaped)."""

    family: Family
    kind: str | None = None
    namespace: str | None = None
    uid: str | None = None
    qualifier: str | None = None
    """The result outcome (``res``), monitor topic (``mon``), gateway topic (``gateway``) or
    public topic (``public``)."""
    stream: str | None = None
    consumer: str | None = None
    partition: int | None = None

    @property
    def cluster_scoped(self) -> bool:
        return self.uid is not None and self.namespace is None


def parse_subject(subject: str) -> ParsedSubject:
    """Split a subject built here (optionally with a trailing partition token)."""
    tokens = subject.split(".")
    if len(tokens) < 2 or tokens[0] != ROOT:
        raise SubjectError(f"{subject!r} is not a kaiwo subject")
    try:
        family = Family(tokens[1])
    except ValueError as error:
        raise SubjectError(f"{subject!r} has an unknown family {tokens[1]!r}") from error
    layout = _LAYOUT[family]
    rest = tokens[2:]
    partition: int | None = None
    if family is not Family.DEAD_LETTER and len(rest) == len(layout) + 1:
        if not rest[-1].isdigit():
            raise SubjectError(f"{subject!r} has a non-numeric partition token")
        partition = int(rest[-1])
        rest = rest[:-1]
    if len(rest) != len(layout):
        raise SubjectError(f"{subject!r} does not have the tokens {'.'.join(layout)}")
    fields = dict(zip(layout, rest, strict=True))
    scope = fields.pop("scope", None)
    namespace = None if scope in (None, CLUSTER_SCOPE) else scope
    uid = fields.pop("uid", None)
    return ParsedSubject(
        family=family,
        kind=fields.get("kind"),
        namespace=namespace,
        uid=unescape_token(uid) if uid is not None else None,
        qualifier=fields.get("qualifier"),
        stream=fields.get("stream"),
        consumer=fields.get("consumer"),
        partition=partition,
    )


# --------------------------------------------------------------------------- filters


def subscription_filter(
    family: Family,
    *,
    kind: str | None = None,
    namespace: str | None = None,
    cluster_scoped: bool = False,
    uid: str | None = None,
    qualifier: str | None = None,
    partition: int | None = None,
    partitioned: bool = False,
) -> str:
    """A filter subject for one family, narrowed by whichever parts are given.

    ``cluster_scoped=True`` selects the ``_cluster`` scope (``namespace`` must then be None).
    ``partition`` selects one partition of a partitioned stream; ``partitioned=True`` matches
    the stored (partitioned) form of the subjects in any partition.
    """
    if family is Family.DEAD_LETTER:
        raise SubjectError("filter dead letters with dead_letter_subject() or kaiwo.dlq.>")
    if cluster_scoped and namespace is not None:
        raise SubjectError("a filter is either cluster-scoped or for one namespace")
    given = {
        "kind": kind_token(kind) if kind else None,
        "scope": CLUSTER_SCOPE
        if cluster_scoped
        else (scope_token(namespace) if namespace else None),
        "uid": uid_token(uid) if uid else None,
        "qualifier": qualifier,
    }
    tokens = [given[part] or ANY_TOKEN for part in _LAYOUT[family]]
    if partition is not None:
        tokens.append(str(partition))
    elif partitioned:
        tokens.append(ANY_TOKEN)
    elif all(token == ANY_TOKEN for token in tokens):
        return _join(family, ANY_TAIL)
    return _join(family, *tokens)


def family_filter(family: Family) -> str:
    """Every subject of a family: ``kaiwo.<family>.>``."""
    return _join(family, ANY_TAIL)


LIVE = "live"
"""``kaiwo.live.<family>...``: where each stream republishes what it stored (decision 0287)."""


def live_subject(subject: str) -> str:
    """The live form of a stored subject or filter: ``kaiwo.obs.>`` → ``kaiwo.live.obs.>``.

    Each stream of ``kaiwo.>`` republishes every message it stores there, and no stream
    captures it. So a key handed out to read events live subscribes there and nowhere a
    stream stores: a push consumer it makes cannot deliver copies into a stream."""
    root, _, rest = subject.partition(".")
    if root != ROOT or not rest or rest.split(".", 1)[0] == LIVE:
        raise SubjectError(f"not a stored subject of ours: {subject!r}")
    return f"{ROOT}.{LIVE}.{rest}"


def stored_subject(subject: str) -> str:
    """The stored subject a live one was republished from (:func:`live_subject` undone);
    any other subject as it is."""
    prefix = f"{ROOT}.{LIVE}."
    return f"{ROOT}.{subject[len(prefix) :]}" if subject.startswith(prefix) else subject
