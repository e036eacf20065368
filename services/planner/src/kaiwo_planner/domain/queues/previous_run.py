"""When to hand a KaiwoQueueConfig's plan to the executor again while it waits for the Kueue
objects of a previous KaiwoQueueConfig to go (decision 0200).

A KaiwoQueueConfig deleted and made again finds its Kueue objects' names held by the ones
the garbage collector is removing; the executor waits for them (``PreviousRunRemoving``,
decision 0165), and their deletion plans the new one again. But each goes only once Kueue
drops its finalizer, and Kueue 0.17 can miss the moment it should (a Topology reconciled
while its cache still holds the flavor that named it, and never looked at again): the new
KaiwoQueueConfig would wait for good. So while a previous run's object is terminating, the
plan is handed to the executor again every :data:`PREVIOUS_RUN_RECHECK`, and the executor
touches the object, which makes Kueue look at it again.

Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any, Final

from kaiwo_contracts.gpu_workloads import controller_reference

from kaiwo_planner.domain.settings.cluster_settings import QUEUE_CONFIG_KIND, parse_time
from kaiwo_planner.domain.state.cluster import ClusterState, api_group_of

PREVIOUS_RUN_RECHECK: Final = timedelta(seconds=30)
"""How often a previous run's terminating object is looked at again: Kueue acts on a
Topology a second after a flavor naming it goes, so a miss is one that lasted."""


def previous_run_recheck_at(
    desired: Iterable[Mapping[str, Any]],
    *,
    cluster: ClusterState,
    owner_uid: str | None,
    now: datetime,
) -> datetime | None:
    """The next moment after ``now`` to hand the plan over again, or None when no desired
    object's name is held by a terminating object of an earlier KaiwoQueueConfig.

    Counted in whole periods from the earliest such deletion, so that a plan made again
    for another reason meanwhile does not push the moment back."""
    deletions = [
        deleted
        for manifest in desired
        if (deleted := _previous_run_deleted_at(manifest, cluster, owner_uid)) is not None
    ]
    if not deletions:
        return None
    since = min(deletions)
    periods = max(0, (now - since) // PREVIOUS_RUN_RECHECK) + 1
    return since + periods * PREVIOUS_RUN_RECHECK


def _previous_run_deleted_at(
    manifest: Mapping[str, Any], cluster: ClusterState, owner_uid: str | None
) -> datetime | None:
    meta = manifest.get("metadata") or {}
    held = cluster.find_object(
        group=api_group_of(str(manifest.get("apiVersion") or "")),
        kind=str(manifest.get("kind") or ""),
        name=str(meta.get("name") or ""),
        namespace=meta.get("namespace"),
    )
    if held is None:
        return None
    controller = controller_reference(held)
    if (
        controller is None
        or controller.get("kind") != QUEUE_CONFIG_KIND[1]
        or controller.get("uid") == owner_uid
    ):
        return None
    return parse_time((held.get("metadata") or {}).get("deletionTimestamp"))


def timer_rechecks_gaps(owner: Mapping[str, Any]) -> bool:
    """Whether ``owner``'s timer hands its gaps (desired objects absent or held) to the
    executor again: a KaiwoQueueConfig's, whose only timer is :func:`previous_run_recheck_at`'s.
    Another owner's timer marks a moment its decision changes, and a gap it still has is
    handed over by the periodic resync, as ever."""
    return (api_group_of(str(owner.get("apiVersion") or "")), owner.get("kind")) == (
        QUEUE_CONFIG_KIND
    )
