"""The cluster singletons the operator creates when they are missing, as upstream does.

Upstream Kaiwo creates, at start-up, the KaiwoConfig ``kaiwo`` with an empty spec (the CRD's
defaults fill it in) and, once it sees nodes, the KaiwoQueueConfig ``kaiwo``. Without the
latter a fresh cluster queues nothing: every workload names the queue ``kaiwo`` by default,
and no KaiwoQueueConfig means no such queue.

Both are made with an empty spec and only created, never applied (``Plan.create_only``): they
are the user's from then on, to edit or re-apply, and no field of theirs belongs to the
operator. The KaiwoQueueConfig's empty spec means "the default queue over the discovered
node pools" (:func:`kaiwo_planner.domain.queues.queue_config.effective_spec`), made once from
the nodes of the moment unless ``dynamicallyUpdateDefaultClusterQueue`` (decision 0110).

The installation's ``DEFAULT_CLUSTER_QUEUE_NAME`` (the API reference's setting, decision 0046)
is written into the KaiwoConfig created here as ``defaultClusterQueueName``: from then on the
KaiwoConfig in the cluster decides, as it does for every other setting, and a platform team
changing it there is obeyed.

A plan needs an owner; these name the object to create, without a uid. Pure.
"""

from __future__ import annotations

from typing import Any, Final

from kaiwo_contracts.plans import ObjectRef, Plan

from kaiwo_planner.domain.state.cluster import ClusterState

SINGLETON_NAME: Final = "kaiwo"
DEFAULT_OBJECTS: Final[tuple[tuple[str, str, str], ...]] = (
    ("config.kaiwo.silogen.ai", "v1alpha1", "KaiwoConfig"),
    ("kaiwo.silogen.ai", "v1alpha1", "KaiwoQueueConfig"),
)


def default_object_plans(
    cluster: ClusterState, *, default_cluster_queue: str = ""
) -> tuple[Plan, ...]:
    """A create-only plan for each singleton the cluster does not hold, in a fixed order;
    ``default_cluster_queue`` ("": the CRD's default) goes into a new KaiwoConfig.

    Only once the cluster state shows some Namespace: before that the watcher has listed
    nothing yet, and every singleton would look missing.
    """
    if not cluster.namespaces:
        return ()
    plans = []
    for group, version, kind in DEFAULT_OBJECTS:
        if cluster.find_object(group=group, kind=kind, name=SINGLETON_NAME) is not None:
            continue
        manifest = _empty(api_version=f"{group}/{version}", kind=kind)
        if kind == "KaiwoConfig" and default_cluster_queue:
            manifest["spec"]["defaultClusterQueueName"] = default_cluster_queue
        plans.append(
            Plan(
                owner=ObjectRef(api_version=manifest["apiVersion"], kind=kind, name=SINGLETON_NAME),
                desired=(manifest,),
                create_only=True,
            )
        )
    return tuple(plans)


def _empty(*, api_version: str, kind: str) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": SINGLETON_NAME},
        "spec": {},
    }
