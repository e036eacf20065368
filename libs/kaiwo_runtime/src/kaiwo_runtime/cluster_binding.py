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
WATCHER_BUCKET = "kaiwo-watcher"
"""The watcher's bucket (its default): the services that do not talk to the API server (the
planner, the recorder) take the cluster's identity from what the watcher recorded in it."""


async def recorded_cluster(kv: KeyValue) -> str | None:
    """The identity recorded in a bucket, None when it records none yet."""
    raw = await kv.get(CLUSTER_KEY)
    return raw.decode() if raw is not None else None


def foreign_state_problem(recorded: str | None, current: str | None, *, state: str) -> str | None:
    """One line saying why ``state`` (what holds it, named for the administrator) must not be
    used with cluster ``current``, or None (either is unknown, or they agree)."""
    if recorded is None or current is None or recorded == current:
        return None
    return (
        f"{state} holds the state of another cluster (kube-system uid {recorded}), not of "
        f"this one ({current})"
    )


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
    recorded = await recorded_cluster(kv)
    problem = other_cluster_problem(recorded, current, bucket=bucket)
    if problem is None and recorded is None:
        await kv.put(CLUSTER_KEY, current.encode())
    return problem
