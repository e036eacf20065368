"""The plan of a Model being deleted: its Pods deleted, its files evicted from the cache,
then its finalizer dropped.

Only a Model with a cache has the operator's finalizer, so only such a Model is seen being
deleted. Its files go by an evict Job; should that fail, the condition says how to delete the
Model without evicting them. The evict Job is made only once the load Job is gone (deleted
in the foreground, so with its Pods: a loader still writing would leave files after the
eviction), and only with a valid configuration's loader image (decision 0255). A load Job
observed is waited for before the volume is judged: the planner's view of the volume may lag
the Job's, and "no volume" would let the Model go with its loader still writing (0275).
A load Job the last plan made and the planner has not observed yet is waited for too, as long
as the executor may still be making it (decision 0290), whatever is seen of the volume, unless
it or its Namespace is being deleted (decision 0292).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Final

from kaiwo_contracts.confinement import CACHE_EVICTION_FINALIZER
from kaiwo_contracts.crds.kubeai_v1.model import Model
from kaiwo_contracts.events.consumers import DEFAULT_BACKOFF_SECONDS
from kaiwo_contracts.models_config import ModelsConfig
from kaiwo_contracts.plans import ObjectRef

from kaiwo_planner.domain.children.job_changes import existing_job_update
from kaiwo_planner.domain.models.cache import (
    JobState,
    evict_job_manifest,
    job_outcome,
    never_bound,
    observed_cache_volume,
)
from kaiwo_planner.domain.models.cache_jobs import job_settings
from kaiwo_planner.domain.models.model_parts import (
    ModelParts,
    ObservedModel,
    kept_cache,
    pod_ref,
)
from kaiwo_planner.domain.models.names import cache_volume, evict_job, load_job
from kaiwo_planner.domain.models.status import (
    CACHE_EVICTED,
    CACHE_LOADED,
    LOAD_JOB_PLANNED,
    READY,
)
from kaiwo_planner.domain.settings.cluster_settings import namespace_being_deleted
from kaiwo_planner.domain.settings.namespace_config import NamespaceSettings
from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.status.conditions import ConditionSpec, condition_of

LOAD_JOB_ON_ITS_WAY: Final = timedelta(seconds=sum(DEFAULT_BACKOFF_SECONDS) + 60)
"""How long after a Model's deletion a load Job its last plan made may still be created: the
executor retries a plan through its consumer's backoff (260 s), and the plan may wait a
minute to reach it. A deleted Model waits that long at most for a load Job not observed."""

WAITING_FOR_LOAD: Final = "WaitingForLoad"
"""``CacheEvicted`` while the load Job seen is deleted: a plan of the deletion has seen it."""


def deleting_parts(
    model: Model,
    observed: ObservedModel,
    *,
    config: ModelsConfig | None,
    config_problem: str = "",
    namespace: NamespaceSettings,
    cluster: ClusterState,
    now: datetime,
) -> ModelParts:
    """Delete the Pods; evict the files while the cache volume stays; then no finalizer.
    ``config``: the configuration in force, None while it is invalid (``config_problem``
    says why); ``namespace``: the settings of the Model's namespace (the evict Job's pull
    secrets)."""
    identity = observed.identity
    parts = ModelParts(
        delete=[pod_ref(identity, p) for p in observed.pods if not p.terminating],
        conditions=[ConditionSpec(READY, "False", "Deleting", "The Model is being deleted")],
        cache=kept_cache(model.spec.cache_profile, observed),
    )
    if CACHE_EVICTION_FINALIZER not in (model.metadata.finalizers or ()):
        return parts
    evicting = cluster.child_of(identity.uid or "", kind="Job", name=evict_job(identity.name))
    loading = cluster.child_of(identity.uid or "", kind="Job", name=load_job(identity.name))
    if evicting is None and loading is not None:
        # Before the volume is judged: the planner may not have observed it yet (another
        # watch), but a load Job observed means it was there and may be written to.
        parts.conditions.append(_wait_for_load(identity, loading))
        parts.delete.extend(_load_job_deletion(identity, loading))
        return parts
    profile = model.spec.cache_profile
    if profile is None:
        parts.finalizers = ()
        return parts
    namespace_name = identity.namespace or ""
    volume = observed_cache_volume(cluster, namespace=namespace_name, profile=profile)
    going = _volume_goes(volume, cluster, namespace=namespace_name)
    # A volume not observed may be the one the plan that made the load Job applied with it,
    # not seen yet (another watch); one not bound yet may wait for that Job's pod to bind it
    # (a storage class that waits for the first consumer). Either keeps a late loader's files.
    if evicting is None and not going and (until := _load_job_on_its_way(model, observed, now=now)):
        parts.conditions.append(_wait_for_planned_load(identity))
        parts.replan_at = until
        return parts
    nothing = _nothing_to_evict(profile, volume, going=going)
    if nothing is not None:
        parts.finalizers = ()
        parts.conditions.extend(nothing)
        return parts
    _evict(
        parts,
        identity,
        profile,
        evicting,
        config=config,
        config_problem=config_problem,
        namespace=namespace,
    )
    return parts


def _volume_goes(
    volume: Mapping[str, Any] | None, cluster: ClusterState, *, namespace: str
) -> bool:
    """Whether the volume takes the Model's files with it: it is being deleted, or its
    Namespace is (the namespace controller deletes it, and no Job can be made there)."""
    if namespace_being_deleted(cluster, namespace):
        return True
    return volume is not None and bool((volume.get("metadata") or {}).get("deletionTimestamp"))


def _nothing_to_evict(
    profile: str, volume: Mapping[str, Any] | None, *, going: bool
) -> tuple[ConditionSpec, ...] | None:
    """What to say when the Model's files cannot be on a volume (none, ``going``, never
    bound); None when they may be."""
    if volume is None or going:
        return ()
    if never_bound(volume):
        # Upstream's issue 286: a volume that never bound (no such storage class) held the
        # Model on its finalizer for good, the evict Job's pod Pending beside it. Nothing was
        # ever written to it: there is nothing to evict.
        message = (
            f"PersistentVolumeClaim {cache_volume(profile)} was never bound: no files to remove"
        )
        return (ConditionSpec(CACHE_EVICTED, "True", "NothingCached", message),)
    return None


def _evict(
    parts: ModelParts,
    identity: ObjectRef,
    profile: str,
    evicting: Mapping[str, Any] | None,
    *,
    config: ModelsConfig | None,
    config_problem: str,
    namespace: NamespaceSettings,
) -> None:
    """The evict Job and what it says; no finalizer once it has removed the files."""
    job = evict_job(identity.name)
    outcome = job_outcome(evicting)
    if outcome.state is JobState.COMPLETE:
        parts.finalizers = ()
        parts.conditions.append(
            ConditionSpec(CACHE_EVICTED, "True", "Evicted", f"Job {job} removed the files")
        )
        return
    if evicting is None and config is None:
        # The chart's default loader image may be one the cluster cannot pull (a mirror
        # only) or may not run; the platform's image is known again once it is valid.
        message = (
            f"waiting for a valid system configuration to make Job {job} with its loader "
            f"image: {config_problem}"
        )
        parts.conditions.append(
            ConditionSpec(CACHE_EVICTED, "False", "InvalidConfiguration", message)
        )
        return
    # An evict Job that exists keeps its pod template whatever is wanted (below): the
    # default configuration only names it while the configuration is invalid.
    settings = job_settings(config or ModelsConfig.default(), namespace)
    wanted = evict_job_manifest(identity, profile=profile, settings=settings)
    # An eviction under way goes on as it was made (the configuration's image or security
    # settings edited meanwhile cannot reach a Job's pod template): applied as the
    # configuration now is, it was refused on every plan until the finalizer went.
    parts.desired.append(existing_job_update(wanted, evicting).manifest)
    if outcome.state is JobState.FAILED:
        message = (
            f"Job {job} failed ({outcome.message}); see its logs. To delete the Model without "
            f"evicting its files, remove its finalizer {CACHE_EVICTION_FINALIZER}"
        )
        parts.conditions.append(ConditionSpec(CACHE_EVICTED, "False", "EvictionFailed", message))
    else:
        parts.conditions.append(
            ConditionSpec(CACHE_EVICTED, "False", "Evicting", f"Job {job} removes the files")
        )


def _load_job_on_its_way(
    model: Model, observed: ObservedModel, *, now: datetime
) -> datetime | None:
    """Until when a load Job not observed may still be created, if the Model's last plan made
    one (its status says the files load) and no plan of its deletion has seen a load Job yet
    (it would say ``WaitingForLoad``, and that Job's going is observed): the executor may be
    carrying out that plan while the Model is deleted, and a loader that starts after the
    eviction leaves its files on the shared volume. None: nothing to wait for."""
    deleted = model.metadata.deletion_timestamp
    loaded = condition_of(observed.previous, CACHE_LOADED) or {}
    evicted = condition_of(observed.previous, CACHE_EVICTED) or {}
    if (
        deleted is None
        or loaded.get("status") != "False"
        or loaded.get("reason") not in LOAD_JOB_PLANNED
        or evicted.get("reason") == WAITING_FOR_LOAD
    ):
        return None
    until = deleted + LOAD_JOB_ON_ITS_WAY
    return until if now < until else None


def _wait_for_planned_load(identity: ObjectRef) -> ConditionSpec:
    return ConditionSpec(
        CACHE_EVICTED,
        "False",
        "WaitingForLoadJob",
        f"Job {load_job(identity.name)} was made for the files and is not seen yet; it is "
        "deleted once seen, and the files are evicted once it and its Pods are gone",
    )


def _wait_for_load(identity: ObjectRef, loading: Mapping[str, Any]) -> ConditionSpec:
    name = (loading.get("metadata") or {}).get("name", load_job(identity.name))
    return ConditionSpec(
        CACHE_EVICTED,
        "False",
        WAITING_FOR_LOAD,
        f"Job {name} is being deleted; the files are evicted once it and its Pods are gone",
    )


def _load_job_deletion(identity: ObjectRef, job: Mapping[str, Any]) -> tuple[ObjectRef, ...]:
    """The load Job, by uid, unless it is being deleted already: the executor deletes a Job
    a plan names in the foreground, so it is observed until its Pods are gone (decision
    0255)."""
    metadata = job.get("metadata") or {}
    if metadata.get("deletionTimestamp"):
        return ()
    return (
        ObjectRef(
            api_version="batch/v1",
            kind="Job",
            name=str(metadata.get("name", "")),
            namespace=identity.namespace or "",
            uid=metadata.get("uid") or None,
        ),
    )
