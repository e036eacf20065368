"""The cluster queues in force and the namespaces each is limited to, for ``Schedulable``.

Worked out once per planning context from the KaiwoQueueConfig's effective spec (so with
``dynamicallyUpdateDefaultClusterQueue`` the default queue counts before it is written back),
the KaiwoConfig and the nodes.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import ValidationError

from kaiwo_planner.domain.queues.node_pools import discover_node_pools
from kaiwo_planner.domain.queues.queue_config import effective_spec
from kaiwo_planner.domain.scheduling.schedulable import queue_namespaces
from kaiwo_planner.domain.settings.cluster_settings import (
    KAIWO_CONFIG_KIND,
    NODE_KIND,
    QUEUE_CONFIG_KIND,
    kaiwo_config,
    kaiwo_config_object,
    queue_config,
    queue_config_object,
)
from kaiwo_planner.domain.state.planning_context import PlanningContext


def cluster_queue_namespaces(context: PlanningContext) -> Mapping[str, tuple[str, ...]]:
    """Each cluster queue in force and the namespaces it is limited to (for Schedulable).

    The queues in force are those of the KaiwoQueueConfig's effective spec: with
    ``dynamicallyUpdateDefaultClusterQueue`` the default queue counts before it is written back.
    """
    cluster = context.cluster
    return context.derived(
        ("queue-namespaces",),
        reads=(QUEUE_CONFIG_KIND, KAIWO_CONFIG_KIND, NODE_KIND),
        # From the queue config, the KaiwoConfig and the nodes only.
        inputs=lambda: (
            queue_config_object(cluster),
            kaiwo_config_object(cluster),
            cluster.nodes,
        ),
        compute=lambda: _queue_namespaces_of(context),
    )


def _queue_namespaces_of(context: PlanningContext) -> dict[str, tuple[str, ...]]:
    found = queue_config(context)
    if found is None:
        return {}
    config = kaiwo_config(context)
    pools = discover_node_pools(
        context.cluster.nodes,
        exclude_control_plane=config.spec.nodes.exclude_master_nodes_from_node_pools,
    )
    try:
        spec = effective_spec(found.spec, kaiwo_config=config, pools=pools)
    except (ValidationError, ValueError):
        spec = found.spec
    return queue_namespaces(spec)
