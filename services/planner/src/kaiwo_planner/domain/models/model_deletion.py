"""The plan of a Model being deleted: its Pods deleted, its files evicted from the cache,
then its finalizer dropped.

Only a Model with a cache has the operator's finalizer, so only such a Model is seen being
deleted. Its files go by an evict Job; should that fail, the condition says how to delete the
Model without evicting them. The evict Job is made only once the load Job is gone (deleted
in the foreground, so with its Pods: a loader still writing would leave files after the
eviction), and only with a valid configuration's loader image (decision 0255).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kaiwo_contracts.confinement import CACHE_EVICTION_FINALIZER
from kaiwo_contracts.crds.kubeai_v1.model import Model
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
from kaiwo_planner.domain.models.status import CACHE_EVICTED, READY
from kaiwo_planner.domain.settings.namespace_config import NamespaceSettings
from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.status.conditions import ConditionSpec


def deleting_parts(
    model: Model,
    observed: ObservedModel,
    *,
    config: ModelsConfig | None,
    config_problem: str = "",
    namespace: NamespaceSettings,
    cluster: ClusterState,
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
    profile = model.spec.cache_profile
    volume = (
        observed_cache_volume(cluster, namespace=identity.namespace or "", profile=profile)
        if profile
        else None
    )
    if profile is None or volume is None or (volume.get("metadata") or {}).get("deletionTimestamp"):
        parts.finalizers = ()
        return parts
    if never_bound(volume):
        # Upstream's issue 286: a volume that never bound (no such storage class) held the
        # Model on its finalizer for good, the evict Job's pod Pending beside it. Nothing was
        # ever written to it: there is nothing to evict.
        parts.finalizers = ()
        parts.conditions.append(
            ConditionSpec(
                CACHE_EVICTED,
                "True",
                "NothingCached",
                f"PersistentVolumeClaim {cache_volume(profile)} was never bound: no files to "
                "remove",
            )
        )
        return parts
    job = evict_job(identity.name)
    observed_job = cluster.child_of(identity.uid or "", kind="Job", name=job)
    outcome = job_outcome(observed_job)
    if outcome.state is JobState.COMPLETE:
        parts.finalizers = ()
        parts.conditions.append(
            ConditionSpec(CACHE_EVICTED, "True", "Evicted", f"Job {job} removed the files")
        )
        return parts
    if observed_job is None:
        waiting = _waiting(identity, cluster, config=config, config_problem=config_problem)
        if waiting is not None:
            condition, deletion = waiting
            parts.conditions.append(condition)
            parts.delete.extend(deletion)
            return parts
    # An evict Job that exists keeps its pod template whatever is wanted (below): the
    # default configuration only names it while the configuration is invalid.
    settings = job_settings(config or ModelsConfig.default(), namespace)
    wanted = evict_job_manifest(identity, profile=profile, settings=settings)
    # An eviction under way goes on as it was made (the configuration's image or security
    # settings edited meanwhile cannot reach a Job's pod template): applied as the
    # configuration now is, it was refused on every plan until the finalizer went.
    parts.desired.append(existing_job_update(wanted, observed_job).manifest)
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
    return parts


def _waiting(
    identity: ObjectRef, cluster: ClusterState, *, config: ModelsConfig | None, config_problem: str
) -> tuple[ConditionSpec, tuple[ObjectRef, ...]] | None:
    """What the evict Job waits for before it is made, and what to delete meanwhile; None
    when it can be made now."""
    loading = cluster.child_of(identity.uid or "", kind="Job", name=load_job(identity.name))
    if loading is not None:
        # A loader still writing would leave files after the eviction, named by nothing.
        going = bool((loading.get("metadata") or {}).get("deletionTimestamp"))
        return _wait_for_load(identity, loading), (() if going else (_job_ref(identity, loading),))
    if config is None:
        # The chart's default loader image may be one the cluster cannot pull (a mirror
        # only) or may not run; the platform's image is known again once it is valid.
        message = (
            f"waiting for a valid system configuration to make Job {evict_job(identity.name)} "
            f"with its loader image: {config_problem}"
        )
        return ConditionSpec(CACHE_EVICTED, "False", "InvalidConfiguration", message), ()
    return None


def _wait_for_load(identity: ObjectRef, loading: Mapping[str, Any]) -> ConditionSpec:
    name = (loading.get("metadata") or {}).get("name", load_job(identity.name))
    return ConditionSpec(
        CACHE_EVICTED,
        "False",
        "WaitingForLoad",
        f"Job {name} is being deleted; the files are evicted once it and its Pods are gone",
    )


def _job_ref(identity: ObjectRef, job: Mapping[str, Any]) -> ObjectRef:
    """The load Job, by uid: the executor deletes a Job a plan names in the foreground, so
    it is observed until its Pods are gone (decision 0255)."""
    metadata = job.get("metadata") or {}
    return ObjectRef(
        api_version="batch/v1",
        kind="Job",
        name=str(metadata.get("name", "")),
        namespace=identity.namespace or "",
        uid=metadata.get("uid") or None,
    )
