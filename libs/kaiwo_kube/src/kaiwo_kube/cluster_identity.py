"""Which cluster an API server serves: the uid of its ``kube-system`` namespace.

Kept state (watcher checkpoints, the planner's snapshot, the executor's memo, the event store,
``kaiwo up``'s directory) is only valid for the cluster it came from. A name or a server URL
does not tell clusters apart (every kind cluster is ``https://127.0.0.1:6443``), and a
resourceVersion is not comparable across etcds. ``kube-system`` exists in every cluster from
its first start, is never deleted, and gets a fresh uid in every new cluster: a restored etcd
brings back its own, a new cluster has another (decision 0042).
"""

from __future__ import annotations

from kaiwo_kube import resources
from kaiwo_kube.errors import MalformedResponse
from kaiwo_kube.port import ObjectReader

IDENTITY_NAMESPACE = "kube-system"


async def cluster_identity(kube: ObjectReader) -> str:
    """The uid of the cluster's ``kube-system`` namespace."""
    namespace = await kube.get(resources.NAMESPACE, IDENTITY_NAMESPACE)
    metadata = namespace.get("metadata")
    uid = metadata.get("uid") if isinstance(metadata, dict) else None
    if not isinstance(uid, str) or not uid:
        raise MalformedResponse(f"namespace {IDENTITY_NAMESPACE} has no metadata.uid")
    return uid
