"""Facts observed in the cluster: one event per object version the watcher sees."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Final, Literal, Self

from pydantic import Field, model_validator

from kaiwo_contracts.events.envelope import EventPayload, WireModel, event_type

WatchEventType = Literal["ADDED", "MODIFIED", "DELETED", "SYNC"]
"""``SYNC`` marks an object re-read by a (re)list rather than announced by a watch."""

OVERSIZED_KEY: Final = "kaiwoOversized"
"""The top-level key a reduced object carries its :class:`OversizedObject` under (no
Kubernetes object has such a key), so that a consumer that keeps only ``object`` (the
planner's projection, replay) still knows it holds metadata alone."""

REDUCED_METADATA: Final = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "labels",
    "ownerReferences",
    "creationTimestamp",
    "deletionTimestamp",
)
"""What a reduced object keeps of ``metadata``: identity, version, and what routes it to its
owner. Annotations and managedFields go: they are the usual bulk (``kubectl apply`` keeps a
second copy of the object in an annotation)."""
_MINIMAL_METADATA: Final = (
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "deletionTimestamp",
)


class OversizedObject(WireModel):
    """Why an observation carries only part of its object: its JSON was larger than a
    message on the bus may be."""

    size_bytes: int = Field(ge=0)
    """The size of the object's JSON as the API server returned it."""
    limit_bytes: int = Field(ge=0)
    """The largest message the bus carries (headers included)."""


class ObservedObjectV1(EventPayload):
    """The whole object as the API server returned it, plus its identity for routing.

    Level-triggered: ``object`` is complete, so a consumer never needs an earlier event to
    understand this one. Nodes, Kueue Workloads and children are the same type with their
    own ``kind``. For ``DELETED`` the object is the last state the API server reported.

    Except when ``oversized`` is set: the object was too large for the bus, and ``object`` is
    :func:`reduced_object` of it (apiVersion, kind, identifying metadata, status when it fits,
    and the same marker under :data:`OVERSIZED_KEY`). Consumers must not plan from it: the
    planner reports such an owner as invalid. ``oversized`` is left out of the JSON when
    absent, so ordinary observations read as they always did.

    ``reobserved``: the watcher read the object again because the executor refused a plan
    made from the planner's copy of it (``PlanRefusedV1.reobserve``). Such an observation is
    what the API server holds now, so the planner takes it in over whatever version it held,
    a newer-looking (forged) one included (decision 0038). Left out of the JSON when false.
    """

    EVENT_TYPE: ClassVar[str] = event_type("obs", "observed")

    kind: str = Field(min_length=1)
    api_version: str = Field(min_length=1)
    namespace: str | None = None
    name: str = Field(min_length=1)
    uid: str = Field(min_length=1)
    resource_version: str = Field(min_length=1)
    event_type: WatchEventType
    object: dict[str, Any]
    # Left out of the JSON while absent (``exclude_if``: a wrap serializer cost a third of
    # every dump).
    oversized: OversizedObject | None = Field(default=None, exclude_if=lambda v: v is None)
    reobserved: bool = Field(default=False, exclude_if=lambda v: not v)

    @model_validator(mode="after")
    def _identity_matches_object(self) -> Self:
        metadata = self.object.get("metadata")
        if metadata is None:
            metadata = {}
        if not isinstance(metadata, dict):
            raise ValueError("object.metadata must be an object")
        for field, found in (("uid", metadata.get("uid")), ("name", metadata.get("name"))):
            if found is not None and found != getattr(self, field):
                msg = f"{field} {getattr(self, field)!r} differs from object metadata {found!r}"
                raise ValueError(msg)
        return self

    @model_validator(mode="after")
    def _marker_in_object_matches(self) -> Self:
        carried = self.object.get(OVERSIZED_KEY)
        expected = None if self.oversized is None else self.oversized.model_dump(by_alias=True)
        if carried != expected:
            msg = (
                f"object[{OVERSIZED_KEY!r}] must equal oversized "
                f"({'absent' if expected is None else expected})"
            )
            raise ValueError(msg)
        return self


def reduced_object(
    obj: Mapping[str, Any], *, oversized: OversizedObject, minimal: bool = False
) -> dict[str, Any]:
    """What an observation carries of an object too large for the bus.

    ``apiVersion``, ``kind``, the :data:`REDUCED_METADATA` fields, ``status`` (so a consumer
    reporting the problem keeps the phase and conditions), and the marker. ``minimal`` keeps
    only the identity and the marker, for an object whose labels or status alone are too
    large.
    """
    metadata = obj.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    kept = _MINIMAL_METADATA if minimal else REDUCED_METADATA
    reduced: dict[str, Any] = {key: obj[key] for key in ("apiVersion", "kind") if key in obj}
    reduced["metadata"] = {key: metadata[key] for key in kept if key in metadata}
    status = obj.get("status")
    if not minimal and isinstance(status, Mapping):
        reduced["status"] = dict(status)
    reduced[OVERSIZED_KEY] = oversized.model_dump(by_alias=True)
    return reduced


def oversized_marker(obj: Mapping[str, Any]) -> OversizedObject | None:
    """The marker of a reduced object, None for a whole one."""
    carried = obj.get(OVERSIZED_KEY)
    if not isinstance(carried, Mapping):
        return None
    try:
        return OversizedObject.model_validate(carried)
    except ValueError:  # not our marker; the payload's validator refuses such an object
        return None
