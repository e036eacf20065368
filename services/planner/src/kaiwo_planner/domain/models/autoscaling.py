"""The autoscaler's decisions as planning inputs: a Model's replicas set through its scale
subresource.

The gateway replica that leads the autoscaler publishes a ``ScaleDecidedV1`` when a Model's
replicas should change; the planner keeps the latest per Model (:class:`ScaleRequest`, in the
projection, replayed from the recorded ``KAIWO_GATEWAY`` stream by ``scaleSequence`` like the
monitor's findings) and plans the Model with it. The plan then carries a
:class:`~kaiwo_contracts.plans.ScaleIntent` (:func:`scale_intent`) while all of these hold:

* the decision names this Model (its uid, namespace and name: a decision that borrows a
  Model's uid under another namespace or name is not this Model's);
* autoscaling is enabled and the Model is not being deleted;
* the Model is still the generation the decision was made from: any change of its spec, the
  replicas included (by the executor carrying the decision out, or by someone's
  ``kubectl scale``), voids the decision, so a late decision never undoes a newer change;
* its ``spec.replicas`` (none: 0) are still those the decision started from, and the replicas
  wanted, first cut to the cluster's ceiling (the Models' system configuration,
  ``modelAutoscaling.maxReplicas``), then clamped into ``[minReplicas, maxReplicas]``, differ
  from them.

A decision is a claim of whoever holds the gateway's key, not an order (decision 0038): the
ceiling, set by the platform team, bounds a Model without ``maxReplicas`` as well, and a
decision for a Model the planner does not hold is refused by the service (counted).

The Pods keep following ``spec.replicas``: they change once the new replicas come back
through the watcher (decision 0027).

The ceiling is reported on the Model (:func:`ceiling_condition`, decision 0115): a user whose
Model's ``maxReplicas`` is above it, or unset ("no limit", says the API reference) while the
autoscaler wants more than it, is told by the condition ``LimitedByClusterCeiling`` and a
Warning Event when it turns True.

The Model's own ``maxReplicas`` holding the load back is told too
(:func:`max_replicas_condition`, decision 0172): the condition ``LimitedByMaxReplicas`` and a
Normal Event when it turns True.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from kaiwo_contracts.crds.kubeai_v1.model import Model
from kaiwo_contracts.plans import ObjectRef, ScaleIntent

from kaiwo_planner.domain.models.status import (
    LIMITED_BY_CLUSTER_CEILING,
    LIMITED_BY_MAX_REPLICAS,
)
from kaiwo_planner.domain.state.scale_request import ScaleRequest
from kaiwo_planner.domain.status.conditions import ConditionSpec, condition_of

REASON_MAX_ABOVE_CEILING: Final = "MaxReplicasAboveClusterCeiling"
REASON_SCALE_CUT: Final = "ScaleCutToClusterCeiling"
REASON_WITHIN_CEILING: Final = "WithinClusterCeiling"
REASON_AUTOSCALING_DISABLED: Final = "AutoscalingDisabled"
REASON_LOAD_ABOVE_MAX: Final = "LoadAboveMaxReplicas"
REASON_LOAD_WITHIN_MAX: Final = "LoadWithinMaxReplicas"


@dataclass(frozen=True, slots=True)
class ClusterCeiling:
    """The most replicas the autoscaler may set on any Model, and where that number comes
    from (the ConfigMap that sets it, or the default), as a message names it."""

    replicas: int
    origin: str


def scale_intent(
    model: Model, ref: ObjectRef, request: ScaleRequest | None, *, ceiling: int
) -> ScaleIntent | None:
    """The scale the Model's plan carries (see the module docstring); None: none.
    ``ceiling``: the most replicas the autoscaler may set on any Model."""
    spec, metadata = model.spec, model.metadata
    if (
        request is None
        or (request.namespace, request.name) != (ref.namespace, ref.name)
        or spec.autoscaling_disabled
        or metadata.deletion_timestamp is not None
        or metadata.generation != request.generation
    ):
        return None
    current = spec.replicas or 0
    if current != request.from_replicas:
        return None
    wanted = max(min(request.replicas, ceiling), spec.min_replicas)
    if spec.max_replicas is not None:
        wanted = min(wanted, spec.max_replicas)
    if wanted == current:
        return None
    return ScaleIntent(target=ref, replicas=wanted, from_replicas=current)


def ceiling_condition(
    model: Model,
    ref: ObjectRef,
    request: ScaleRequest | None,
    *,
    ceiling: ClusterCeiling,
    previous: Mapping[str, Any],
) -> ConditionSpec | None:
    """``LimitedByClusterCeiling``: whether the cluster's ceiling holds the autoscaler below
    what the Model's own bounds allow (None: leave the status without it).

    True when autoscaling is enabled and either

    * ``spec.maxReplicas`` is above the most the autoscaler sets (the ceiling, or
      ``minReplicas`` when that is higher: it still holds): what the user wrote is not what
      the autoscaler honours, whatever the load (reason ``MaxReplicasAboveClusterCeiling``);
    * ``spec.maxReplicas`` is unset and the autoscaler's latest decision for the Model asked
      for more than that (reason ``ScaleCutToClusterCeiling``). An unset ``maxReplicas`` is
      not reported by itself: it is most Models, and a Warning on each would say nothing;
      it matters once the load asks for more.

    Otherwise False, but only once the condition was written (a Model never limited carries
    no such condition, so turning this on changes no other Model's status). The decision
    counts whatever generation it was made from: the scale it led to moves the generation,
    and the condition must not flip until the gateway restates it.

    Level-triggered: a function of the spec, the ceiling and the latest decision, so a
    settled Model's status stays the same and its Event (told on the change of status or
    reason, :func:`~kaiwo_planner.domain.models.status.condition_events`) is not repeated.
    """
    spec = model.spec
    highest = max(ceiling.replicas, spec.min_replicas)
    floor = (
        f" (spec.minReplicas, {spec.min_replicas}, still holds)"
        if spec.min_replicas > ceiling.replicas
        else ""
    )
    bound = (
        f"the autoscaler sets at most {ceiling.replicas} replicas on any Model, "
        f"the cluster's ceiling: {ceiling.origin}{floor}"
    )
    if not spec.autoscaling_disabled:
        if spec.max_replicas is not None and spec.max_replicas > highest:
            return ConditionSpec(
                LIMITED_BY_CLUSTER_CEILING,
                "True",
                REASON_MAX_ABOVE_CEILING,
                f"spec.maxReplicas is {spec.max_replicas}, but {bound}",
            )
        if (
            spec.max_replicas is None
            and request is not None
            and (request.namespace, request.name) == (ref.namespace, ref.name)
            and request.replicas > highest
        ):
            return ConditionSpec(
                LIMITED_BY_CLUSTER_CEILING,
                "True",
                REASON_SCALE_CUT,
                f"The autoscaler asked for {request.replicas} replicas and spec.maxReplicas "
                f"is not set, but {bound}",
            )
    if condition_of(previous, LIMITED_BY_CLUSTER_CEILING) is None:
        return None
    if spec.autoscaling_disabled:
        return ConditionSpec(
            LIMITED_BY_CLUSTER_CEILING,
            "False",
            REASON_AUTOSCALING_DISABLED,
            "spec.autoscalingDisabled: the autoscaler does not scale this Model",
        )
    return ConditionSpec(
        LIMITED_BY_CLUSTER_CEILING,
        "False",
        REASON_WITHIN_CEILING,
        f"The cluster's ceiling of {ceiling.replicas} replicas ({ceiling.origin}) does not "
        "limit this Model",
    )


def max_replicas_condition(
    model: Model,
    ref: ObjectRef,
    request: ScaleRequest | None,
    *,
    ceiling: int,
    previous: Mapping[str, Any],
) -> ConditionSpec | None:
    """``LimitedByMaxReplicas``: whether the Model's own ``spec.maxReplicas`` holds back the
    load the autoscaler last decided on (None: leave the status without it).

    True, reason ``LoadAboveMaxReplicas``, when autoscaling is enabled, ``spec.maxReplicas``
    is the bound in force (not above the cluster's ceiling, which
    :func:`ceiling_condition` tells) and the latest decision for this Model found the load
    asking for more replicas than it (:attr:`ScaleRequest.demand`). The message names the
    demand, the field and its value, and the target per replica. The decision counts
    whatever generation it was made from (as the ceiling's): the scale to ``maxReplicas``
    moves the generation, and the gateway publishes nothing new while the load stays above.

    Otherwise False, but only once it was written (``LoadWithinMaxReplicas``, or
    ``AutoscalingDisabled``); a Model never held back carries no such condition. A function
    of the spec and the latest decision, so a settled Model writes nothing again.
    """
    spec = model.spec
    if (
        not spec.autoscaling_disabled
        and spec.max_replicas is not None
        and spec.max_replicas <= max(ceiling, spec.min_replicas)
        and request is not None
        and (request.namespace, request.name) == (ref.namespace, ref.name)
        and request.demand is not None
        and request.demand > spec.max_replicas
    ):
        return ConditionSpec(
            LIMITED_BY_MAX_REPLICAS,
            "True",
            REASON_LOAD_ABOVE_MAX,
            f"The load asks for {request.demand} replicas at spec.targetRequests "
            f"{spec.target_requests} per replica, but spec.maxReplicas is {spec.max_replicas}: "
            f"{_serving_over_target(spec.max_replicas)}; raise spec.maxReplicas to scale further",
        )
    if condition_of(previous, LIMITED_BY_MAX_REPLICAS) is None:
        return None
    if spec.autoscaling_disabled:
        return ConditionSpec(
            LIMITED_BY_MAX_REPLICAS,
            "False",
            REASON_AUTOSCALING_DISABLED,
            "spec.autoscalingDisabled: the autoscaler does not scale this Model",
        )
    bound = (
        f"spec.maxReplicas ({spec.max_replicas})"
        if spec.max_replicas is not None
        else "spec.maxReplicas (not set)"
    )
    return ConditionSpec(
        LIMITED_BY_MAX_REPLICAS,
        "False",
        REASON_LOAD_WITHIN_MAX,
        f"The load the autoscaler last decided on is within {bound}",
    )


def _serving_over_target(replicas: int) -> str:
    if replicas == 1:
        return "1 replica serves more than its target"
    return f"{replicas} replicas serve more than their target each"
