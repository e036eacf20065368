"""The autoscaler's latest decision for one Model, as the projection keeps it: a fact.

Whether a Model's plan follows it is decided above the ground, in
:func:`kaiwo_planner.domain.models.autoscaling.scale_intent`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from kaiwo_contracts.events.autoscaling import ScaleDecidedV1

SCALE_REQUEST_RETENTION: Final = timedelta(hours=1)
"""A Model's decision not followed by a newer one for this long (by the decisions' own times)
is forgotten."""


@dataclass(frozen=True, slots=True)
class ScaleRequest:
    """The latest ``ScaleDecidedV1`` of one Model, reduced to what planning reads."""

    uid: str
    at: datetime
    generation: int
    from_replicas: int
    replicas: int
    namespace: str | None = None
    name: str | None = None
    """The Model the decision names besides its uid: a decision applies only to the Model
    with that uid, namespace and name."""

    @classmethod
    def of(cls, event: ScaleDecidedV1, *, at: datetime) -> ScaleRequest:
        return cls(
            uid=event.model.uid or "",
            at=at,
            generation=event.generation,
            from_replicas=event.from_replicas,
            replicas=event.replicas,
            namespace=event.model.namespace,
            name=event.model.name,
        )

    def decides_differently_from(self, other: ScaleRequest | None) -> bool:
        """Whether planning may come out differently than with ``other`` (the same decision
        restated, by a new leader or a later tick, changes nothing)."""
        if other is None:
            return True
        return (self.generation, self.from_replicas, self.replicas) != (
            other.generation,
            other.from_replicas,
            other.replicas,
        )

    def to_document(self) -> dict[str, Any]:
        return {
            "uid": self.uid,
            "at": self.at.isoformat(),
            "generation": self.generation,
            "fromReplicas": self.from_replicas,
            "replicas": self.replicas,
            "namespace": self.namespace,
            "name": self.name,
        }

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> ScaleRequest:
        return cls(
            uid=str(document["uid"]),
            at=datetime.fromisoformat(str(document["at"])),
            generation=int(document["generation"]),
            from_replicas=int(document["fromReplicas"]),
            replicas=int(document["replicas"]),
            namespace=document.get("namespace"),
            name=document.get("name"),
        )
