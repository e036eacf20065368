"""The autoscaler's latest decision for one Model, as the projection keeps it: a fact.

Whether a Model's plan follows it is decided above the ground, in
:func:`kaiwo_planner.domain.models.autoscaling.scale_intent`.
"""

from __future__ import annotations

import math
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
    demand: int | None = None
    """The replicas the load asked for before the Model's bounds applied,
    ``ceil(average active requests / targetRequests)`` (decision 0172): above
    ``spec.maxReplicas``, the Model's own bound holds the load back. None: a decision for a
    waiting request (scale from zero), or one kept before this was."""

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
            demand=(
                math.ceil(event.average_active_requests / event.target_requests)
                if event.cause == "load"
                else None
            ),
        )

    def decides_differently_from(self, other: ScaleRequest | None) -> bool:
        """Whether planning may come out differently than with ``other`` (the same decision
        restated, by a new leader or a later tick, changes nothing)."""
        if other is None:
            return True
        return (self.generation, self.from_replicas, self.replicas, self.demand) != (
            other.generation,
            other.from_replicas,
            other.replicas,
            other.demand,
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
            **({"demand": self.demand} if self.demand is not None else {}),
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
            demand=int(document["demand"]) if document.get("demand") is not None else None,
        )
