"""Autoscaling Models: the gateway replicas' load reports and the autoscaler's decisions.

Every gateway replica publishes an :class:`ActiveRequestsV1` at a fixed interval (and at once
when a request arrives for a Model with no ready endpoint): its requests in flight per Model.
The replica that holds the autoscaler lease sums the latest report of every replica, keeps a
moving average per Model and publishes a :class:`ScaleDecidedV1` when a Model's replicas
should change. The planner takes the decision in like a monitor finding (consumer
``planner-scale``, ``scaleSequence`` on every plan) and plans the Model with it; the executor
sets the replicas through the scale subresource. Decision 0027.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field

from kaiwo_contracts.events.envelope import EventPayload, WireModel, event_type
from kaiwo_contracts.plans import ObjectRef

ScaleCause = Literal["load", "request"]
"""``load``: the moving average of active requests; ``request``: a request arrived for a
Model at zero replicas (scale from zero)."""


class ModelLoad(WireModel):
    """One Model's requests at one gateway replica when it reported."""

    model: ObjectRef
    active_requests: int = Field(ge=0)
    """Requests being proxied or waiting for an endpoint (as upstream counts them)."""
    waiting_requests: int = Field(default=0, ge=0)
    """Of those, requests waiting for a ready endpoint."""
    messages: int = Field(default=0, ge=0)
    """Of those, messenger requests (decision 0057): the autoscaler attributes each tenant's
    backlog in the request stream to its Models in proportion to these."""


class ActiveRequestsV1(EventPayload):
    """A gateway replica's load: the Models it has requests in flight for.

    A Model left out has none at this replica. Published every ``interval_seconds``, so a
    report older than a few intervals is from a replica that stopped and counts no more.
    """

    EVENT_TYPE: ClassVar[str] = event_type("gateway", "active-requests")

    gateway: str = Field(min_length=1, max_length=253)
    """The reporting replica (its pod name and process id)."""
    interval_seconds: float = Field(gt=0)
    models: tuple[ModelLoad, ...] = Field(default=(), max_length=10_000)


class ScaleDecidedV1(EventPayload):
    """The autoscaler wants ``model`` at ``replicas``, decided from ``from_replicas``.

    ``generation`` is the Model's ``metadata.generation`` the decision was made from: the
    planner acts on a decision only while the Model it holds is still that generation (a
    change of the spec, the replicas included, voids it; the autoscaler's next tick decides
    again from the new spec), so a late decision never undoes a newer change.
    """

    EVENT_TYPE: ClassVar[str] = event_type("gateway", "scale-decided")

    model: ObjectRef
    generation: int = Field(ge=0)
    from_replicas: int = Field(ge=0)
    replicas: int = Field(ge=0)
    cause: ScaleCause = "load"
    active_requests: float = Field(ge=0)
    """Active requests summed over the gateway replicas at this tick."""
    average_active_requests: float = Field(ge=0)
    """The moving average the decision was made from."""
    window_seconds: float = Field(gt=0)
    samples: int = Field(ge=1)
    """Samples in the window (``ceil(window / interval)``)."""
    target_requests: int = Field(ge=1)
    scale_down_delay_seconds: int = Field(ge=0)
    reason: str = Field(min_length=1, max_length=1024)
    """The decision in a sentence (``kaiwo events explain`` shows it)."""


__all__ = ["ActiveRequestsV1", "ModelLoad", "ScaleCause", "ScaleDecidedV1"]
