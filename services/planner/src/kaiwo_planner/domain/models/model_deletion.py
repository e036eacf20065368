"""The plan of a Model being deleted: its Pods deleted, its files evicted from the cache,
then its finalizer dropped.

Only a Model with a cache has the operator's finalizer, so only such a Model is seen being
deleted. Its files go by an evict Job; should that fail, the condition says how to delete the
Model without evicting them.
"""

from __future__ import annotations

from kaiwo_contracts.confinement import CACHE_EVICTION_FINALIZER
from kaiwo_contracts.crds.kubeai_v1.model import Model
from kaiwo_contracts.models_config import ModelsConfig

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
from kaiwo_planner.domain.models.names import cache_volume, evict_job
from kaiwo_planner.domain.models.status import CACHE_EVICTED, READY
from kaiwo_planner.domain.settings.namespace_config import NamespaceSettings
from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.status.conditions import ConditionSpec


def deleting_parts(
    model: Model,
    observed: ObservedModel,
    *,
    config: ModelsConfig,
    namespace: NamespaceSettings,
    cluster: ClusterState,
) -> ModelParts:
    """Delete the Pods; evict the files while the cache volume stays; then no finalizer.
    ``namespace``: the settings of the Model's namespace (the evict Job's pull secrets)."""
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
    wanted = evict_job_manifest(identity, profile=profile, settings=job_settings(config, namespace))
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
