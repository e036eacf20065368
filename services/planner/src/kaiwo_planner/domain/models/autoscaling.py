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
"""

from __future__ import annotations

from kaiwo_contracts.crds.kubeai_v1.model import Model
from kaiwo_contracts.plans import ObjectRef, ScaleIntent

from kaiwo_planner.domain.state.scale_request import ScaleRequest


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
