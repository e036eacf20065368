"""From an object the API server reported to the observed event the watcher publishes (pure).

Ids: ``<uid>:<resourceVersion>`` (:func:`observed_event_id`), so two replicas, or a relist,
observing the same object version publish the same ``Nats-Msg-Id`` and JetStream keeps one.
A DELETED watch event carries the object's final resourceVersion, so it has its own id.

An object too large for the bus (its JSON alone may exceed the 1 MiB a message may be:
the API server stores up to 1.5 MiB) is published reduced: :func:`oversized_observations`
gives the same event (same id, subject, correlation) with the object cut down to its
identifying metadata and status and marked ``oversized``; and, should even that be too large,
with its identity alone.

A deletion the watcher *infers* (an object it knew is absent from a relist, because the
DELETED event fell into a 410 gap) has no resourceVersion of its own: its id is
``<uid>:deleted`` (a uid is deleted once, so every replica infers the same id), its payload's
``resourceVersion`` is the relist's (newer than anything seen of the object, so consumers that
drop stale versions keep it), and its object is the identity the watcher remembered.

What is published of an object is what the API server returned but the field sets of its
``managedFields`` (:func:`published_form`, decision 0097): who wrote it, how and when stays.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from kaiwo_contracts.events.envelope import (
    Envelope,
    object_subject,
    observed_event_id,
    service_source,
)
from kaiwo_contracts.events.observed import (
    ObservedObjectV1,
    OversizedObject,
    WatchEventType,
    reduced_object,
)
from kaiwo_contracts.events.subjects import observed_subject
from kaiwo_contracts.plans import canonical_json

from kaiwo_watcher.watch_list import LABEL_OWNER_UID, LABEL_RUN_ID, WatchTarget

SOURCE = service_source("watcher")
INFERRED_DELETION_VERSION = "deleted"


@dataclass(frozen=True, slots=True)
class Observation:
    """An envelope ready to publish and the NATS subject to publish it on."""

    envelope: Envelope[ObservedObjectV1]
    subject: str

    @property
    def uid(self) -> str:
        return self.envelope.data.uid


@dataclass(frozen=True, slots=True)
class KnownObject:
    """What the watcher remembers of an object it published, to infer its deletion later."""

    namespace: str | None
    name: str
    correlation: str


def _metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    metadata = obj.get("metadata")
    return metadata if isinstance(metadata, Mapping) else {}


def controller_uid(obj: Mapping[str, Any]) -> str | None:
    """The uid of the object's controller owner reference, if any."""
    references = _metadata(obj).get("ownerReferences")
    for reference in references if isinstance(references, list) else ():
        if not isinstance(reference, Mapping) or not reference.get("controller"):
            continue
        uid = reference.get("uid")
        if isinstance(uid, str) and uid:
            return uid
    return None


def correlation_id(
    obj: Mapping[str, Any], *, workload: bool, owners: Mapping[str, str] | None = None
) -> str:
    """The uid of the workload ``obj`` belongs to; the object's own uid when none is known.

    In order: a workload correlates with itself; else the ``owner-uid`` label (children), the
    ``run-id`` label (pods: their template carries the workload's uid); else the controller
    owner reference, resolved through ``owners`` (child uid -> workload uid, learned from
    children seen earlier) so a Kueue Workload owned by a Job correlates with the KaiwoJob
    when its Job has been seen; else the object's own uid.
    """
    metadata = _metadata(obj)
    own = str(metadata.get("uid") or "")
    if workload:
        return own
    labels = metadata.get("labels") or {}
    for key in (LABEL_OWNER_UID, LABEL_RUN_ID):
        value = labels.get(key) if isinstance(labels, Mapping) else None
        if value:
            return str(value)
    controller = controller_uid(obj)
    if controller:
        return (owners or {}).get(controller, controller)
    return own


def log_identity(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The name and namespace of an object that cannot be published, for the log line."""
    metadata = _metadata(obj)
    return {"name": metadata.get("name"), "namespace": metadata.get("namespace")}


def child_owner(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    """(child uid, workload uid) from a child's ``owner-uid`` label, or None."""
    metadata = _metadata(obj)
    labels = metadata.get("labels")
    uid = metadata.get("uid")
    owner = labels.get(LABEL_OWNER_UID) if isinstance(labels, Mapping) else None
    if not uid or not owner:
        return None
    return str(uid), str(owner)


def with_type_meta(obj: Mapping[str, Any], target: WatchTarget) -> dict[str, Any]:
    """``obj`` with ``apiVersion`` and ``kind`` (list items from a real server lack them)."""
    return {
        **obj,
        "apiVersion": obj.get("apiVersion") or target.resource.api_version,
        "kind": obj.get("kind") or target.kind,
    }


FIELD_SET_KEYS: Final = frozenset({"fieldsType", "fieldsV1"})
"""What a ``managedFields`` entry says of the fields its manager owns: a third of an observed
Job's JSON, and read by nothing downstream (decision 0097)."""


def published_form(obj: Mapping[str, Any], target: WatchTarget) -> dict[str, Any]:
    """``obj`` as the watcher publishes it: with its type (:func:`with_type_meta`), and
    :func:`without_field_sets`."""
    return without_field_sets(with_type_meta(obj, target))


def without_field_sets(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with each ``managedFields`` entry without its field set (a copy where there
    is one to drop). The planner reads who wrote an object last (manager, subresource and
    time: ``written_last_by_operator``); no consumer reads which fields each manager owns,
    and server-side apply keeps that on the API server."""
    metadata = _metadata(obj)
    entries = metadata.get("managedFields")
    if not isinstance(entries, list) or not entries:
        return obj
    return {
        **obj,
        "metadata": {**metadata, "managedFields": [_without_field_set(e) for e in entries]},
    }


def _without_field_set(entry: Any) -> Any:
    if not isinstance(entry, Mapping):
        return entry
    return {key: value for key, value in entry.items() if key not in FIELD_SET_KEYS}


def observe(
    obj: Mapping[str, Any],
    *,
    target: WatchTarget,
    event_type: WatchEventType,
    time: datetime,
    owners: Mapping[str, str] | None = None,
) -> Observation:
    """The observed event for one object version (ADDED, MODIFIED, DELETED or SYNC).

    Raises ``ValueError`` (pydantic's ValidationError, SubjectError) for an object that
    cannot be an event (no uid, no resourceVersion).
    """
    complete = published_form(obj, target)
    metadata = _metadata(complete)
    uid = str(metadata.get("uid") or "")
    resource_version = str(metadata.get("resourceVersion") or "")
    namespace = metadata.get("namespace") or None
    name = str(metadata.get("name") or "")
    payload = ObservedObjectV1(
        kind=target.kind,
        api_version=str(complete["apiVersion"]),
        namespace=namespace,
        name=name,
        uid=uid,
        resource_version=resource_version,
        event_type=event_type,
        object=complete,
    )
    envelope = Envelope.new(
        data=payload,
        source=SOURCE,
        time=time,
        id=observed_event_id(uid=uid, resource_version=resource_version),
        subject=object_subject(namespace=namespace, name=name),
        correlationid=correlation_id(complete, workload=target.workload, owners=owners) or uid,
    )
    return Observation(
        envelope=envelope,
        subject=observed_subject(kind=target.kind, namespace=namespace, uid=uid),
    )


def oversized_observations(
    observation: Observation, *, limit_bytes: int
) -> tuple[Observation, Observation]:
    """The observation with its object reduced, then with its identity alone (see the
    module docstring), each marked with the object's size and the bus's limit."""
    envelope = observation.envelope
    data = envelope.data
    marker = OversizedObject(
        size_bytes=len(canonical_json(data.object).encode()), limit_bytes=limit_bytes
    )

    def reduced(*, minimal: bool) -> Observation:
        payload = ObservedObjectV1(
            kind=data.kind,
            api_version=data.api_version,
            namespace=data.namespace,
            name=data.name,
            uid=data.uid,
            resource_version=data.resource_version,
            event_type=data.event_type,
            object=reduced_object(data.object, oversized=marker, minimal=minimal),
            oversized=marker,
            reobserved=data.reobserved,
        )
        return Observation(
            envelope=envelope.model_copy(update={"data": payload}), subject=observation.subject
        )

    return reduced(minimal=False), reduced(minimal=True)


def infer_deletion(
    known: KnownObject,
    *,
    uid: str,
    target: WatchTarget,
    list_resource_version: str,
    time: datetime,
) -> Observation:
    """The DELETED event for an object the watcher knew and a relist no longer returns."""
    metadata: dict[str, Any] = {"name": known.name, "uid": uid}
    if known.namespace:
        metadata["namespace"] = known.namespace
    obj = {"apiVersion": target.resource.api_version, "kind": target.kind, "metadata": metadata}
    payload = ObservedObjectV1(
        kind=target.kind,
        api_version=target.resource.api_version,
        namespace=known.namespace,
        name=known.name,
        uid=uid,
        resource_version=list_resource_version,
        event_type="DELETED",
        object=obj,
    )
    envelope = Envelope.new(
        data=payload,
        source=SOURCE,
        time=time,
        id=observed_event_id(uid=uid, resource_version=INFERRED_DELETION_VERSION),
        subject=object_subject(namespace=known.namespace, name=known.name),
        correlationid=known.correlation or uid,
    )
    return Observation(
        envelope=envelope,
        subject=observed_subject(kind=target.kind, namespace=known.namespace, uid=uid),
    )


REOBSERVED_ID_PREFIX = "reobserved"


def reobserved(observation: Observation, *, refusal: str) -> Observation:
    """``observation`` read again on the executor's request (``refusal``: the id of its
    ``PlanRefusedV1``; a plan made from the planner's copy of the object was refused,
    decision 0038): marked ``reobserved``, so the planner takes it in over whatever it holds,
    caused by the refusal, under an id of its own
    (``reobserved:<uid>:<resourceVersion>:<refusal>``): the first observation of that version
    may have been published within JetStream's duplicate window, and one refusal handled
    twice (two watcher replicas, a redelivery) is one message."""
    envelope = observation.envelope
    data = envelope.data.model_copy(update={"reobserved": True})
    version = INFERRED_DELETION_VERSION if data.event_type == "DELETED" else data.resource_version
    event_id = f"{REOBSERVED_ID_PREFIX}:{data.uid}:{version}:{refusal}"[:256]
    return Observation(
        envelope=envelope.model_copy(update={"data": data, "id": event_id, "causationid": refusal}),
        subject=observation.subject,
    )


def known_from(observation: Observation) -> KnownObject:
    envelope = observation.envelope
    return KnownObject(
        namespace=envelope.data.namespace,
        name=envelope.data.name,
        correlation=envelope.correlationid,
    )


@dataclass(slots=True)
class ChildOwners:
    """Child uid -> workload uid, learned from children's owner-uid label (memory only)."""

    by_child: dict[str, str] = field(default_factory=dict)

    def learn(self, obj: dict[str, Any], *, deleted: bool) -> None:
        found = child_owner(obj)
        if found is None:
            return
        uid, owner = found
        if deleted:
            self.by_child.pop(uid, None)
        else:
            self.by_child[uid] = owner
