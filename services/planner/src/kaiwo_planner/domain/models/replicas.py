"""How many server Pods a Model runs, and the write-back of ``spec.replicas`` into bounds.

With autoscaling (the default) ``spec.replicas`` is clamped into ``[minReplicas,
maxReplicas]``, ``minReplicas`` when it is not set; with ``autoscalingDisabled`` it is taken
as it is (none: 0). A Model runs at most :data:`MAX_SERVER_PODS` Pods.
"""

from __future__ import annotations

from typing import Final

from kaiwo_contracts.crds.kubeai_v1.model import Model
from kaiwo_contracts.plans import ObjectRef, ScaleIntent

MAX_SERVER_PODS: Final = 400
"""The most server Pods a Model runs: the plan lists every wanted Pod's manifest, and with a
few kilobytes each this many stay within one bus message (``MAX_MESSAGE_BYTES``). More is
reported on the Ready condition, not attempted (decision 0032)."""


def effective_replicas(model: Model) -> int:
    """The replicas the Pods follow (see the module docstring)."""
    spec = model.spec
    if spec.autoscaling_disabled:
        return max(spec.replicas or 0, 0)
    replicas = spec.replicas
    if replicas is None or replicas < spec.min_replicas:
        return spec.min_replicas
    if spec.max_replicas is not None and replicas > spec.max_replicas:
        return spec.max_replicas
    return replicas


def replica_bounds_intent(model: Model, ref: ObjectRef) -> ScaleIntent | None:
    """``spec.replicas`` brought within ``minReplicas``..``maxReplicas`` (written back, as
    KubeAI does, so that the Model shows the replicas its Pods follow); None when it is
    within them, when autoscaling is disabled (the user's number is the number), or while the
    Model is deleted.

    An unset ``spec.replicas`` is written as ``minReplicas``, 0 included (decision 0223): the
    scale subresource of a custom object without the field answers 500, so an HPA or
    ``kubectl get --subresource scale`` could not read a Model that nothing had scaled yet.
    That intent says ``from_replicas == replicas == 0``: the executor writes the field only
    while it is still absent, so a number anyone set meanwhile stands."""
    spec = model.spec
    if spec.autoscaling_disabled or model.metadata.deletion_timestamp is not None:
        return None
    wanted = effective_replicas(model)
    current = spec.replicas
    if current == wanted:
        return None
    # A negative count (one the CRD's minimum would refuse, but a message may carry) reads as 0.
    return ScaleIntent(target=ref, replicas=wanted, from_replicas=max(current or 0, 0))
