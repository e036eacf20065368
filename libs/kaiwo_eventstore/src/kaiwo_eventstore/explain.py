"""Explain a workload: the causal chain from each observation to plans, results, preemptions.

The recorder writes everything about a workload to its stream ``workload/<uid>`` (the
workload's observations and its children's, plans, results, monitor findings, the
autoscaler's decisions for a Model); dead letters
correlate with it too. :func:`workload_events` reads both, :func:`causal_forest` links every
event to the event that caused it (``causationid``), and :func:`describe` says in one line
what an event means for a person. ``kaiwo events explain`` prints the forest as a tree:

    observed KaiwoJob team-a/train ADDED (rv 100)
    └── plan 3f2a1b9c0d12 (observation): status PENDING; 1 object: Job team-a/train
        └── applied: apply Job team-a/train applied; status KaiwoJob team-a/train applied

Everything here but the reads is pure.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from kaiwo_contracts.events import (
    ApplyResultV1,
    ObservedObjectV1,
    PlanDecidedV1,
    PlanRefusedV1,
    PreemptionDecidedV1,
    ScaleDecidedV1,
    UnderutilizedV1,
    UtilizationV1,
)
from kaiwo_contracts.plans import ObjectRef

from kaiwo_eventstore.events import StoredEvent
from kaiwo_eventstore.port import EventStore

WORKLOAD_STREAM_PREFIX: Final = "workload/"
"""The recorder's stream of one workload (``kaiwo_recorder.stream_ids``; a test keeps it)."""
WORKLOAD_KINDS: Final = ("KaiwoJob", "KaiwoService", "Model")
DEAD_LETTER_TYPE: Final = "ai.silogen.kaiwo.dlq.dead-lettered.v1"
MALFORMED_TYPE: Final = "ai.silogen.kaiwo.recorder.malformed.v1"


class WorkloadReferenceError(LookupError):
    """The reference names no one recorded workload: the user's words, not the store, are
    at fault."""


class WorkloadNotFoundError(WorkloadReferenceError):
    """No recorded observation names the workload."""


class AmbiguousWorkloadError(WorkloadReferenceError):
    """``NS/NAME`` was recorded as workloads of more than one kind (a KaiwoJob and a
    KaiwoService may share a name): which one is the user's to say (decision 0198)."""


@dataclass(frozen=True, slots=True)
class WorkloadIdentity:
    namespace: str
    name: str
    uid: str
    kind: str
    via: str | None = None
    """The child the workload was asked for by (``Job ml-team/train-download``), if any."""
    earlier: tuple[str, ...] = ()
    """The uids of earlier workloads the name was given to (deleted, then made again under
    the same name), oldest first: each is reached by its uid (decision 0164)."""


def parse_workload(text: str) -> tuple[str, str]:
    """``NS/NAME`` -> (namespace, name); raises ValueError otherwise."""
    namespace, separator, name = text.partition("/")
    if not separator or not namespace or not name or "/" in name:
        raise ValueError(f"expected NAMESPACE/NAME, got {text!r}")
    return namespace, name


def parse_reference(text: str) -> tuple[str | None, str, str]:
    """``NS/NAME`` or ``KIND/NS/NAME`` -> (kind or None, namespace, name)."""
    parts = text.split("/")
    if len(parts) == 3 and all(parts):
        return parts[0], parts[1], parts[2]
    namespace, name = parse_workload(text)
    return None, namespace, name


_UID: Final = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


async def find_workload(store: EventStore, reference: str) -> WorkloadIdentity:
    """The workload ``NS/NAME`` (or ``KaiwoJob/NS/NAME``) names, or the workload that owns
    the child ``KIND/NS/NAME`` (e.g. ``Job/ml-team/train-download``), from the recorded
    observations (the newest if the name was used by several objects of its kind over time:
    the others' uids are its ``earlier``), or the workload of that uid. ``NS/NAME`` recorded
    as workloads of two kinds is refused (:class:`AmbiguousWorkloadError`), never guessed.

    Reads the observations of that name (:meth:`~kaiwo_eventstore.EventStore.read_by_subject`)
    and, for a child, its workload's stream: never the whole store, so finding a workload
    takes the same time and memory however much else the store holds."""
    if _UID.fullmatch(reference):
        return await _by_uid(store, reference)
    kind, namespace, name = parse_reference(reference)
    subject = f"{namespace}/{name}"
    observed = await store.read_by_subject(subject, [ObservedObjectV1.EVENT_TYPE])
    workload_kinds = {k.lower(): k for k in WORKLOAD_KINDS}
    if kind is None or kind.lower() in workload_kinds:
        wanted = (workload_kinds[kind.lower()],) if kind else WORKLOAD_KINDS
        if kind is None:
            _refuse_two_kinds(observed, subject)
        found = _newest(observed, lambda e: e.data.get("kind") in wanted)
        if found is None:
            raise WorkloadNotFoundError(f"no recorded observation of a workload {subject}")
        return found
    child = [
        event
        for event in observed
        if str(event.data.get("kind", "")).lower() == kind.lower()
        and event.stream_id.startswith(WORKLOAD_STREAM_PREFIX)
    ]
    if not child:
        raise WorkloadNotFoundError(
            f"no recorded observation of a {kind} {subject} that belongs to a workload"
        )
    stream = child[-1].stream_id
    owner_uid = stream.removeprefix(WORKLOAD_STREAM_PREFIX)
    owner = _newest(
        [e for e in await store.read_stream(stream) if e.type == ObservedObjectV1.EVENT_TYPE],
        lambda e: e.data.get("uid") == owner_uid and e.data.get("kind") in WORKLOAD_KINDS,
    )
    if owner is None:
        raise WorkloadNotFoundError(f"{kind} {subject} belongs to no recorded workload")
    return WorkloadIdentity(
        owner.namespace,
        owner.name,
        owner.uid,
        owner.kind,
        via=f"{child[-1].data.get('kind')} {subject}",
    )


async def _by_uid(store: EventStore, uid: str) -> WorkloadIdentity:
    stream = f"{WORKLOAD_STREAM_PREFIX}{uid}"
    found = _newest(
        [e for e in await store.read_stream(stream) if e.type == ObservedObjectV1.EVENT_TYPE],
        lambda e: e.data.get("uid") == uid and e.data.get("kind") in WORKLOAD_KINDS,
    )
    if found is None:
        raise WorkloadNotFoundError(f"no recorded observation of a workload of uid {uid}")
    return found


def _refuse_two_kinds(observed: Sequence[StoredEvent], subject: str) -> None:
    """Raise :class:`AmbiguousWorkloadError` naming each way to say it when ``subject`` was
    recorded as workloads of more than one kind."""
    recorded = {
        event.data.get("kind") for event in observed if isinstance(event.data.get("uid"), str)
    }
    kinds = [kind for kind in WORKLOAD_KINDS if kind in recorded]
    if len(kinds) < 2:
        return
    held = ", ".join(f"a {kind}" for kind in kinds[:-1]) + f" and a {kinds[-1]}"
    ways = ", ".join(f"{kind}/{subject}" for kind in kinds[:-1]) + f" or {kinds[-1]}/{subject}"
    raise AmbiguousWorkloadError(
        f"{subject} was recorded as {held}: say which, as {ways} (or give its uid)"
    )


def _newest(
    observed: Sequence[StoredEvent], wanted: Callable[[StoredEvent], bool]
) -> WorkloadIdentity | None:
    """The newest workload ``wanted`` picks, the uids its name had before it, oldest first,
    as ``earlier``: only those of its kind (another kind's workload of that name was not it
    made again)."""
    found: WorkloadIdentity | None = None
    uids_of_kind: dict[str, list[str]] = {}
    for event in observed:
        uid = event.data.get("uid")
        if wanted(event) and isinstance(uid, str) and uid:
            namespace, _, name = (event.subject or "").partition("/")
            found = WorkloadIdentity(namespace, name, uid, str(event.data["kind"]))
            uids = uids_of_kind.setdefault(found.kind, [])
            if uid in uids:
                uids.remove(uid)
            uids.append(uid)
    if found is None:
        return None
    return replace(found, earlier=tuple(uids_of_kind[found.kind][:-1]))


def earlier_note(identity: WorkloadIdentity) -> str | None:
    """What a person reading one workload's story must know when its name was given to
    other workloads before: their uids, and how to read each."""
    if not identity.earlier:
        return None
    where = f"{identity.namespace}/{identity.name}"
    return (
        f"{where} was also the name of {len(identity.earlier)} earlier workload(s), "
        f"deleted and made again under it: uid {', '.join(identity.earlier)} "
        f"(give a uid instead of {where} to read one)"
    )


async def workload_events(store: EventStore, uid: str) -> list[StoredEvent]:
    """Every recorded event of the workload: its stream and everything correlated with it."""
    by_id = {e.event_id: e for e in await store.read_stream(f"{WORKLOAD_STREAM_PREFIX}{uid}")}
    for event in await store.read_by_correlation(uid):
        by_id.setdefault(event.event_id, event)
    return sorted(by_id.values(), key=lambda event: event.global_position)


# --------------------------------------------------------------------------- causality


@dataclass(slots=True)
class CausalNode:
    event: StoredEvent
    effects: list[CausalNode] = field(default_factory=list)


def causal_forest(events: Sequence[StoredEvent]) -> list[CausalNode]:
    """Events linked to their causes; roots (no cause among ``events``) in time order."""
    nodes = {event.event_id: CausalNode(event) for event in events}
    roots: list[CausalNode] = []
    for event in events:
        cause = nodes.get(event.causation_id or "")
        if cause is not None and cause.event.event_id != event.event_id:
            cause.effects.append(nodes[event.event_id])
        else:
            roots.append(nodes[event.event_id])
    order = _chronological
    for node in nodes.values():
        node.effects.sort(key=order)
    return sorted(roots, key=order)


def _chronological(node: CausalNode) -> tuple[Any, int]:
    return (node.event.time, node.event.global_position)


BRANCH: Final = "├── "
LAST_BRANCH: Final = "└── "
GUIDE: Final = "│   "
NO_GUIDE: Final = "    "
NARROWEST: Final = 24
"""Below this many columns of room a label is not wrapped further (it would be one word a
line)."""


def tree_lines(
    title: str, forest: Sequence[CausalNode], *, label: Callable[[StoredEvent], str], width: int
) -> list[str]:
    """The forest as a text tree under ``title``, each label wrapped to ``width`` columns with
    its continuation lines kept under the branch (never cut: in a pipe every word survives)."""
    lines = textwrap.wrap(title, width=max(width, NARROWEST)) or [title]
    _branches(lines, forest, prefix="", label=label, width=width)
    return lines


def _branches(
    lines: list[str],
    nodes: Sequence[CausalNode],
    *,
    prefix: str,
    label: Callable[[StoredEvent], str],
    width: int,
) -> None:
    for index, node in enumerate(nodes):
        last = index == len(nodes) - 1
        below = prefix + (NO_GUIDE if last else GUIDE)
        continuation = below + (GUIDE if node.effects else NO_GUIDE)
        head = prefix + (LAST_BRANCH if last else BRANCH)
        text = label(node.event)
        lines.extend(
            textwrap.wrap(
                text,
                width=max(width, len(continuation) + NARROWEST),
                initial_indent=head,
                subsequent_indent=continuation,
                break_on_hyphens=False,
            )
            or [head + text]
        )
        _branches(lines, node.effects, prefix=below, label=label, width=width)


# --------------------------------------------------------------------------- one line each


PLAN_ID_LENGTH: Final = 8
"""Plans are named by the first characters of their event id, in ``explain`` as in
``replay`` (and in the executor's results, whose ``planId`` is that id)."""


def short_plan_id(event_id: str) -> str:
    return event_id[:PLAN_ID_LENGTH]


def describe(event: StoredEvent) -> str:
    """What ``event`` means, in one line, for a person."""
    describer = _DESCRIBERS.get(event.type)
    if describer is not None:
        try:
            if event.type == PlanDecidedV1.EVENT_TYPE:
                return _plan(event.data, plan_id=event.event_id)
            return describer(event.data)
        except ValueError as error:  # pydantic's ValidationError is a ValueError
            return f"{event.type} (unreadable: {' '.join(str(error).split())[:120]})"
    if event.type == DEAD_LETTER_TYPE:
        return f"dead-lettered by {event.data.get('consumer')}: {event.data.get('reason')}"
    if event.type == MALFORMED_TYPE:
        return f"malformed message recorded raw: {event.data.get('reason')}"
    return event.type


def _observed(data: Mapping[str, Any]) -> str:
    observed = ObservedObjectV1.model_validate(data)
    where = f"{observed.namespace}/" if observed.namespace else ""
    return (
        f"observed {observed.kind} {where}{observed.name} {observed.event_type} "
        f"(rv {observed.resource_version})"
    )


def _plan(data: Mapping[str, Any], *, plan_id: str = "") -> str:
    decided = PlanDecidedV1.model_validate(data)
    plan = decided.plan
    parts = []
    if plan.status is not None:
        phase = plan.status.get("status") or plan.status.get("phase")
        parts.append(f"status {phase}" if phase else "status written")
    objects = [_manifest_name(manifest) for manifest in plan.desired]
    noun = "object" if len(objects) == 1 else "objects"
    parts.append(f"{len(objects)} {noun}" + (f": {', '.join(objects)}" if objects else ""))
    parts.extend(f"event {e.type} {e.reason}: {e.message}" for e in plan.events)
    if decided.absent:
        parts.append("to create: " + ", ".join(_ref(ref) for ref in decided.absent))
    if decided.drifted:
        parts.append("to restore: " + ", ".join(_ref(ref) for ref in decided.drifted))
    if plan.scale is not None:
        parts.append(f"scale {plan.scale.from_replicas} -> {plan.scale.replicas} replicas")
    if plan.delete_owner:
        parts.append("deletes the owner")
    return f"plan {short_plan_id(plan_id)} ({decided.trigger}): " + "; ".join(parts)


def _result(data: Mapping[str, Any]) -> str:
    result = ApplyResultV1.model_validate(data)
    actions = [
        f"{action.operation} {_ref(action.target)} {action.outcome}"
        + (f" ({action.reason})" if action.reason else "")
        for action in result.actions
    ]
    done = "; ".join(actions) if actions else "nothing to do"
    return f"{result.outcome}: {done} (plan {short_plan_id(result.plan_id)})"


def _refused(data: Mapping[str, Any]) -> str:
    """Why the executor refused a plan (nothing of it was carried out) and what it asked to
    be observed again: the reasons are its words, objects are named, never shown."""
    refusal = PlanRefusedV1.model_validate(data)
    reobserve = (
        "; reobserve " + ", ".join(_ref(ref) for ref in refusal.reobserve)
        if refusal.reobserve
        else ""
    )
    return (
        f"refused (plan {short_plan_id(refusal.plan_id)}): {'; '.join(refusal.reasons)}{reobserve}"
    )


def _preemption(data: Mapping[str, Any]) -> str:
    decided = PreemptionDecidedV1.model_validate(data)
    target = f" for {_ref(decided.preempted_for)}" if decided.preempted_for else ""
    utilization = (
        f", utilization {_percent(decided.utilization_ratio)}"
        if decided.utilization_ratio is not None
        else ""
    )
    return (
        f"preemption decided: {_ref(decided.workload)} preempted{target} "
        f"({decided.policy}, {decided.reason}{utilization})"
    )


def _utilization(data: Mapping[str, Any]) -> str:
    found = UtilizationV1.model_validate(data)
    ratio = _percent(found.utilization_ratio) if found.utilization_ratio is not None else "n/a"
    return f"utilization {ratio} of {found.gpu_count} {found.vendor} GPUs on {found.pod_count} pods"


def _underutilized(data: Mapping[str, Any]) -> str:
    found = UnderutilizedV1.model_validate(data)
    return (
        f"underutilized since {found.idle_since.isoformat()}: "
        f"{_percent(found.utilization_ratio)} < {_percent(found.threshold_ratio)} ({found.reason})"
    )


def _scale_decided(data: Mapping[str, Any]) -> str:
    decided = ScaleDecidedV1.model_validate(data)
    return (
        f"scale decided: {decided.from_replicas} -> {decided.replicas} replicas "
        f"({decided.reason}); window {decided.window_seconds:g}s of {decided.samples} samples, "
        f"average {decided.average_active_requests:g}, {decided.active_requests:g} active "
        f"requests now, target {decided.target_requests} per replica, scale-down delay "
        f"{decided.scale_down_delay_seconds}s; Model generation {decided.generation}"
    )


_DESCRIBERS = {
    ObservedObjectV1.EVENT_TYPE: _observed,
    PlanDecidedV1.EVENT_TYPE: _plan,
    ApplyResultV1.EVENT_TYPE: _result,
    PlanRefusedV1.EVENT_TYPE: _refused,
    PreemptionDecidedV1.EVENT_TYPE: _preemption,
    UtilizationV1.EVENT_TYPE: _utilization,
    UnderutilizedV1.EVENT_TYPE: _underutilized,
    ScaleDecidedV1.EVENT_TYPE: _scale_decided,
}


def _manifest_name(manifest: Mapping[str, Any]) -> str:
    meta = manifest.get("metadata") or {}
    where = f"{meta.get('namespace')}/" if meta.get("namespace") else ""
    return f"{manifest.get('kind')} {where}{meta.get('name')}"


def _ref(ref: ObjectRef) -> str:
    where = f"{ref.namespace}/" if ref.namespace else ""
    return f"{ref.kind} {where}{ref.name}"


def _percent(ratio: float) -> str:
    return f"{ratio * 100:.0f}%"
