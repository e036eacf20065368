"""Facts observed in the cluster: one event per object version the watcher sees."""

from __future__ import annotations

from typing import Any, ClassVar, Literal, Self

from pydantic import Field, model_validator

from kaiwo_contracts.events.envelope import EventPayload, event_type

WatchEventType = Literal["ADDED", "MODIFIED", "DELETED", "SYNC"]
"""``SYNC`` marks an object re-read by a (re)list rather than announced by a watch."""


class ObservedObjectV1(EventPayload):
    """The whole object as the API server returned it, plus its identity for routing.

    Level-triggered: ``object`` is complete, so a consumer never needs an earlier event to
    understand this one. Nodes, Kueue Workloads and children are the same type with their
    own ``kind``. For ``DELETED`` the object is the last state the API server reported.
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

    @model_validator(mode="after")
    def _identity_matches_object(self) -> Self:
        metadata = self.object.get("metadata") or {}
        for field, found in (("uid", metadata.get("uid")), ("name", metadata.get("name"))):
            if found is not None and found != getattr(self, field):
                msg = f"{field} {getattr(self, field)!r} differs from object metadata {found!r}"
                raise ValueError(msg)
        return self

    @property
    def is_cluster_scoped(self) -> bool:
        return self.namespace is None
