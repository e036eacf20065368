"""The plan of a Model that is served: its files, cache, Pods, adapters and conditions.

The cache comes first: no Pods until its files are loaded. Then the rollout decides which
Pods to create and delete (:mod:`~kaiwo_planner.domain.models.rollout`), the adapters'
ConfigMap and loader RBAC follow the Pods, and the Ready condition says how far it got.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kaiwo_contracts.confinement import CACHE_EVICTION_FINALIZER
from kaiwo_contracts.crds.kubeai_v1.model import Model

from kaiwo_planner.domain.children.job_changes import existing_job_update
from kaiwo_planner.domain.models.adapters import loaded_everywhere, loader_rbac, service_account
from kaiwo_planner.domain.models.cache import (
    JobOutcome,
    JobState,
    cache_volume_manifest,
    job_outcome,
    never_bound,
    observed_cache_volume,
)
from kaiwo_planner.domain.models.model_parts import BuiltModel, ModelParts, ObservedModel, pod_ref
from kaiwo_planner.domain.models.names import cache_volume, load_job
from kaiwo_planner.domain.models.replicas import MAX_SERVER_PODS, effective_replicas
from kaiwo_planner.domain.models.rollout import PodDecision, decide_pods
from kaiwo_planner.domain.models.server_pod import ServerPod, identity_of
from kaiwo_planner.domain.models.setup import ModelSetup
from kaiwo_planner.domain.models.status import (
    ADAPTERS_LOADED,
    CACHE_LOADED,
    CONFIGURED,
    LOADING,
    LOADING_AS_CREATED,
    READY,
    RELOADING,
    VOLUME_NOT_BOUND,
    CacheStatus,
)
from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.state.first_few import first_few
from kaiwo_planner.domain.status.conditions import ConditionSpec


def serving_parts(
    model: Model, built: BuiltModel, observed: ObservedModel, *, cluster: ClusterState
) -> ModelParts:
    """``model`` as observed now; ``built`` from its spec version (whose ``setup.model`` may
    be an earlier observation of the same spec)."""
    setup, pod = built.setup, built.pod
    identity = identity_of(setup)
    parts = ModelParts(
        conditions=[ConditionSpec(CONFIGURED, "True", "Configured", _configured_message(setup))]
    )
    if built.files_map is not None:
        parts.desired.append(built.files_map)
    finalized = CACHE_EVICTION_FINALIZER in (model.metadata.finalizers or ())
    pods_allowed = _cache(built, observed, parts, cluster=cluster, finalized=finalized)
    asked = effective_replicas(model)
    replicas = min(asked, MAX_SERVER_PODS)
    decision = None
    if pods_allowed:
        decision = decide_pods(
            observed.pods,
            current_hash=pod.pod_hash,
            replicas=replicas,
            surge=min(setup.config.model_rollouts.surge, MAX_SERVER_PODS - replicas),
            name_for=lambda slot: pod.name(identity, slot),
        )
        parts.desired += [pod.manifest(identity, name) for name in decision.wanted]
        parts.delete += [pod_ref(identity, p) for p in decision.delete]
    if built.adapters_map is not None:
        parts.desired.append(built.adapters_map)
        parts.desired += loader_rbac(
            identity, pods=_loader_pods(observed, decision), account=service_account(setup)
        )
        parts.conditions += _adapter_conditions(setup, observed, pod)
    if not setup.model.spec.adapters:
        parts.retired = (ADAPTERS_LOADED,)
    ready = _ready(observed, decision, pod, replicas=replicas, allowed=pods_allowed)
    parts.conditions.append(_capped(ready, asked=asked) if asked > replicas else ready)
    parts.finalizers = _finalizers(finalized, wanted=setup.cache is not None)
    return parts


def _configured_message(setup: ModelSetup) -> str:
    profile = setup.model.spec.resource_profile or "no resource profile"
    return f"Served by {setup.image} with {profile}"


def _cache(
    built: BuiltModel,
    observed: ObservedModel,
    parts: ModelParts,
    *,
    cluster: ClusterState,
    finalized: bool,
) -> bool:
    """Add the cache's objects and condition; whether the Pods may run (files loaded).
    ``finalized``: the Model as observed now carries the eviction finalizer."""
    setup = built.setup
    cache = setup.cache
    if cache is None or built.load_job is None:
        return True
    identity = identity_of(setup)
    namespace = identity.namespace or ""
    parts.shared.append(cache_volume_manifest(namespace, cache.profile, cache.filesystem))
    volume = observed_cache_volume(cluster, namespace=namespace, profile=cache.profile)
    volume_uid = _live_volume_uid(volume)
    before = CacheStatus.of(observed.previous)
    loaded_before = (
        before is not None
        and before.loaded
        and (not before.volume_uid or before.volume_uid == volume_uid)
    )
    observed_job = cluster.child_of(identity.uid or "", kind="Job", name=load_job(identity.name))
    outcome = job_outcome(observed_job)
    if loaded_before or outcome.state is JobState.COMPLETE:
        recorded = before.volume_uid if loaded_before and before is not None else ""
        parts.cache = CacheStatus(loaded=True, volume_uid=recorded or volume_uid)
        parts.conditions.append(
            ConditionSpec(
                CACHE_LOADED, "True", "Loaded", f"The files are in {cache_volume(cache.profile)}"
            )
        )
        return True
    parts.cache = CacheStatus(loaded=False)
    job = load_job(identity.name)
    if observed_job is None and not finalized:
        # The finalizer first (this plan adds it), as upstream does: a Model deleted before
        # it is on would go at once, and the garbage collector delete its load Job in the
        # background, the loader still writing files that no eviction removes (0278).
        parts.conditions.append(_waiting_for_finalizer(job=job))
        return False
    update = existing_job_update(built.load_job, observed_job)
    if not update.not_applied:
        parts.desired.append(built.load_job)
        unbound = cache_volume(cache.profile) if never_bound(volume) else None
        parts.conditions.append(_loading(outcome, job=job, unbound=unbound))
    elif outcome.state is JobState.FAILED:
        # Not desired: pruned, and the next plan makes it again from the edited spec. The
        # edit is most often the fix of what made it fail (a token, an endpoint).
        parts.conditions.append(_replacing(outcome, job=job, edited=update.not_applied))
    else:
        parts.desired.append(update.manifest)
        parts.conditions.append(_loading_as_created(job=job, edited=update.not_applied))
    return False


def _live_volume_uid(volume: Mapping[str, Any] | None) -> str:
    """The uid of the profile's shared volume, "" while it is not there or being deleted
    (its files going with it)."""
    metadata = (volume or {}).get("metadata") or {}
    if metadata.get("deletionTimestamp"):
        return ""
    return str(metadata.get("uid") or "")


def _loading(outcome: JobOutcome, *, job: str, unbound: str | None) -> ConditionSpec:
    if outcome.state is JobState.FAILED:
        return ConditionSpec(
            CACHE_LOADED,
            "False",
            "LoadFailed",
            f"Job {job} failed ({outcome.message}); see its logs, and delete it to try again",
        )
    if unbound is not None:
        # Upstream's issue 286: with a storage class that does not exist the claim stays
        # Pending, and the Model said it was loading for good.
        return ConditionSpec(
            CACHE_LOADED,
            "False",
            VOLUME_NOT_BOUND,
            f"Job {job} loads the files once PersistentVolumeClaim {unbound} is bound; it is "
            "Pending (if it stays so, see its Events: a storage class that does not exist?)",
        )
    return ConditionSpec(CACHE_LOADED, "False", LOADING, f"Job {job} loads the files")


def _waiting_for_finalizer(*, job: str) -> ConditionSpec:
    return ConditionSpec(
        CACHE_LOADED,
        "False",
        "AddingFinalizer",
        f"Job {job} loads the files once the Model carries the finalizer "
        f"{CACHE_EVICTION_FINALIZER}, which evicts them when the Model is deleted",
    )


def _loading_as_created(*, job: str, edited: tuple[str, ...]) -> ConditionSpec:
    """A load Job made from an earlier spec, still running: a Job's pod template cannot
    change, so it goes on as it was made (applied as the spec now is, it was refused on
    every plan)."""
    return ConditionSpec(
        CACHE_LOADED,
        "False",
        LOADING_AS_CREATED,
        f"Job {job} loads the files with the settings it was created with: a Job's pod "
        f"template cannot change ({_listed_paths(edited)}); delete the Job to load with the edited "
        "spec",
    )


def _replacing(outcome: JobOutcome, *, job: str, edited: tuple[str, ...]) -> ConditionSpec:
    return ConditionSpec(
        CACHE_LOADED,
        "False",
        RELOADING,
        f"Job {job} failed ({outcome.message}) with settings the spec has changed since "
        f"({_listed_paths(edited)}): it is replaced by one made from the edited spec",
    )


def _listed_paths(paths: tuple[str, ...]) -> str:
    """The first few changed paths (a changed image alone names every container's)."""
    return first_few(paths, shown=3)


def _loader_pods(observed: ObservedModel, decision: PodDecision | None) -> list[str]:
    """Every Pod whose adapter loader may report: the live ones and those being created."""
    live = [p.name for p in observed.pods if not p.terminating]
    return sorted({*live, *(decision.create if decision else ())})


def _adapter_conditions(
    setup: ModelSetup, observed: ObservedModel, pod: ServerPod
) -> list[ConditionSpec]:
    adapters = setup.model.spec.adapters or []
    if not adapters:
        return []
    serving = [
        p for p in observed.pods if p.ready and not p.terminating and p.pod_hash == pod.pod_hash
    ]
    done = loaded_everywhere([dict(p.adapters) for p in serving], adapters)
    total = len(serving)
    if total and done == total:
        message = f"{len(adapters)} adapters loaded in {total} Pods"
        return [ConditionSpec(ADAPTERS_LOADED, "True", "Loaded", message)]
    return [
        ConditionSpec(
            ADAPTERS_LOADED,
            "False",
            "Loading",
            f"{done} of {total} Ready Pods have loaded all {len(adapters)} adapters",
        )
    ]


def _ready(
    observed: ObservedModel,
    decision: PodDecision | None,
    pod: ServerPod,
    *,
    replicas: int,
    allowed: bool,
) -> ConditionSpec:
    if not allowed or decision is None:
        return _waiting_for_cache(observed)
    current_ready = sum(
        p.ready for p in observed.pods if not p.terminating and p.pod_hash == pod.pod_hash
    )
    shown = f"{min(current_ready, replicas)} of {replicas} replicas Ready"
    if decision.out_of_date:
        return ConditionSpec(
            READY,
            "False",
            "RollingOut",
            f"Replacing {decision.out_of_date} Pods of an earlier spec; {shown}",
        )
    if replicas == 0:
        return ConditionSpec(READY, "True", "ScaledToZero", "No replicas wanted")
    if current_ready >= replicas:
        return ConditionSpec(READY, "True", "ReplicasReady", shown)
    troubles = [
        p.trouble
        for p in sorted(observed.pods, key=lambda p: p.name)
        if p.trouble and not p.terminating and p.pod_hash == pod.pod_hash
    ]
    if troubles:
        # What keeps them from serving, not only how many serve (decision 0134).
        told = first_few(troubles, shown=2, separator="; ")
        return ConditionSpec(READY, "False", "ReplicasFailing", f"{shown}; {told}")
    return ConditionSpec(READY, "False", "ReplicasNotReady", shown)


def _waiting_for_cache(observed: ObservedModel) -> ConditionSpec:
    """No new Pod until the files are loaded. A cache profile added to a Model that serves
    leaves its Pods serving meanwhile: said so, rather than "no Pods"."""
    serving = sum(p.ready for p in observed.pods if not p.terminating)
    if not serving:
        return ConditionSpec(READY, "False", "WaitingForCache", "No Pods until the cache is loaded")
    return ConditionSpec(
        READY,
        "False",
        "WaitingForCache",
        f"{serving} Ready Pods of an earlier spec serve until the cache is loaded; then they "
        "are replaced by Pods that read it",
    )


def _capped(ready: ConditionSpec, *, asked: int) -> ConditionSpec:
    """The Ready condition of a Model asking for more Pods than one plan can carry."""
    return ConditionSpec(
        READY,
        ready.status,
        "ReplicasCapped",
        f"spec.replicas: {asked} asked, but a Model runs at most {MAX_SERVER_PODS} server Pods"
        f" (their manifests travel in one bus message); {ready.message}",
    )


def _finalizers(present: bool, *, wanted: bool) -> tuple[str, ...] | None:
    """The operator's finalizers when they must change, else None (no write)."""
    if present == wanted:
        return None
    return (CACHE_EVICTION_FINALIZER,) if wanted else ()
