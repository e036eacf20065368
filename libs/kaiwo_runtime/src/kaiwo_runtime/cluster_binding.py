"""Kept state belongs to one cluster: a service's key-value bucket records the identity of
the cluster it was filled from (the uid of ``kube-system``, :mod:`kaiwo_kube.cluster_identity`)
and a service started against another cluster refuses to use it (decision 0042).

Without this, a watcher resumed from another cluster's resourceVersion, a planner reloaded
another cluster's objects and planned for them, and an executor skipped writes its memo said
were done, all silently.
"""

from __future__ import annotations

from kaiwo_runtime.kv import KeyValue

CLUSTER_KEY = "cluster-identity"
"""The bucket key holding the identity; no service's own keys look like it."""


def other_cluster_problem(recorded: str | None, current: str, *, bucket: str) -> str | None:
    """One line saying why ``bucket`` must not be used with cluster ``current``, or None."""
    if recorded is None or recorded == current:
        return None
    return (
        f"the key-value bucket {bucket} holds the state of another cluster (kube-system uid "
        f"{recorded}), not of this one ({current}); give this cluster its own NATS (or "
        f"buckets), or delete {bucket} to start it afresh"
    )


async def bind_bucket_to_cluster(kv: KeyValue, current: str, *, bucket: str) -> str | None:
    """Record ``current`` in an unbound bucket; the problem (one line) when it is bound to
    another cluster, else None."""
    raw = await kv.get(CLUSTER_KEY)
    recorded = raw.decode() if raw is not None else None
    problem = other_cluster_problem(recorded, current, bucket=bucket)
    if problem is None and recorded is None:
        await kv.put(CLUSTER_KEY, current.encode())
    return problem
