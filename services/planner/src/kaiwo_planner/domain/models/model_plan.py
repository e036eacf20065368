"""The whole plan for one KubeAI Model: its Pods, files, cache, adapters, status and Events.

Steps, each a pure function of the Model, the cluster state and ``now``:

1. the system configuration in force and the namespace's AIMNamespaceConfig
   (:mod:`~kaiwo_planner.domain.models.system_config`);
2. the Model resolved against them (:mod:`~kaiwo_planner.domain.models.setup`); a Model
   the configuration cannot serve gets ``Configured=False`` and nothing else: no object
   applied, deleted or pruned (a typo in the configuration must not take every Model down);
3. its cache: the shared volume, the load Job, and no Pods until the files are loaded
   (:mod:`~kaiwo_planner.domain.models.cache`);
4. its Pods: the server Pod of the current spec, and which Pods to create and delete
   (:mod:`~kaiwo_planner.domain.models.rollout`);
5. its files and adapters ConfigMaps, the adapter loaders' Role;
6. the status and Events (:mod:`~kaiwo_planner.domain.models.status`).

Replicas: with autoscaling (the default) ``spec.replicas`` clamped into
``[minReplicas, maxReplicas]``, ``minReplicas`` when it is not set; with
``autoscalingDisabled`` ``spec.replicas`` as it is (none: 0). Upstream writes the clamped
value back into ``spec.replicas``; here the spec stays the user's (and the autoscaler's,
through the scale subresource), and the plan uses the clamped value. The autoscaler's latest
decision for the Model, while it still applies, makes the plan set ``spec.replicas`` through
the scale subresource (``Plan.scale``, :mod:`~kaiwo_planner.domain.models.autoscaling`); the
Pods follow once the new replicas are observed. A Model runs at most
:data:`MAX_SERVER_PODS` Pods; asking for more is reported on its Ready condition.

A Model being deleted (only one with a cache has a finalizer, so only such a Model is seen
so): its Pods are deleted, its files evicted from the cache, and then its finalizer dropped.

What is pruned (children of the Model no longer wanted): ConfigMaps, Jobs, the Role and its
binding. Pods only ever go by explicit deletion (``Plan.delete``), one by one as the rollout
decides: a rollout keeps Pods of the old spec that no plan describes any more.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from kaiwo_contracts.confinement import CACHE_EVICTION_FINALIZER, MODEL_FEATURE_LABEL_PREFIX
from kaiwo_contracts.crds.config_v1alpha1 import AIMNamespaceConfig
from kaiwo_contracts.crds.kubeai_v1.model import Model
from kaiwo_contracts.models_config import ModelsConfig
from kaiwo_contracts.plans import (
    EventIntent,
    ObjectRef,
    Plan,
    PruneRule,
    ScaleIntent,
    sort_objects,
)

from kaiwo_planner.domain.children.labels import inventory_labels
from kaiwo_planner.domain.models.adapters import (
    adapters_config_map_manifest,
    loaded_everywhere,
    loader_rbac,
    service_account,
    uses_adapters,
)
from kaiwo_planner.domain.models.autoscaling import scale_intent
from kaiwo_planner.domain.models.cache import (
    JobOutcome,
    JobSettings,
    JobState,
    cache_volume_manifest,
    evict_job_manifest,
    job_outcome,
    load_job_manifest,
)
from kaiwo_planner.domain.models.credentials import source_additions
from kaiwo_planner.domain.models.files import files_config_map_manifest
from kaiwo_planner.domain.models.json_patch import JsonPatchError
from kaiwo_planner.domain.models.names import LABEL_MODEL, cache_volume, evict_job, load_job
from kaiwo_planner.domain.models.ownership import ModelIdentity
from kaiwo_planner.domain.models.rollout import ObservedPod, PodDecision, decide_pods
from kaiwo_planner.domain.models.server_pod import ServerPod, identity_of, server_pod
from kaiwo_planner.domain.models.setup import (
    REASON_INVALID_CONFIG,
    ModelSetup,
    SetupProblem,
    model_setup,
)
from kaiwo_planner.domain.models.status import (
    ADAPTERS_LOADED,
    CACHE_EVICTED,
    CACHE_LOADED,
    CONFIGURED,
    READY,
    condition_events,
    model_status,
)
from kaiwo_planner.domain.models.system_config import models_config
from kaiwo_planner.domain.settings.cluster_settings import namespace_config
from kaiwo_planner.domain.settings.namespace_config import namespace_settings
from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.state.planning_context import PlanningContext
from kaiwo_planner.domain.status.invalid_owner import REASON_VALID, VALID_CONDITION
from kaiwo_planner.domain.status.workload_status import ConditionSpec

REASON_INVALID_PATCH: Final = "InvalidJSONPatch"
MODEL_PRUNE: Final = (
    PruneRule(api_version="v1", kind="ConfigMap"),
    PruneRule(api_version="batch/v1", kind="Job"),
    PruneRule(api_version="rbac.authorization.k8s.io/v1", kind="Role"),
    PruneRule(api_version="rbac.authorization.k8s.io/v1", kind="RoleBinding"),
)


@dataclass(frozen=True, slots=True)
class _Observed:
    """What the plan reads about the Model from the cluster state."""

    identity: ModelIdentity
    ref: ObjectRef
    previous: Mapping[str, Any]
    generation: int
    pods: tuple[ObservedPod, ...]


MAX_SERVER_PODS: Final = 400
"""The most server Pods a Model runs: the plan lists every wanted Pod's manifest, and with a
few kilobytes each this many stay within one bus message (``MAX_MESSAGE_BYTES``). More is
reported on the Ready condition, not attempted (decision 0032)."""


@dataclass(slots=True)
class _Parts:
    """The plan being put together."""

    desired: list[dict[str, Any]] = field(default_factory=list)
    shared: list[dict[str, Any]] = field(default_factory=list)
    delete: list[ObjectRef] = field(default_factory=list)
    conditions: list[ConditionSpec] = field(default_factory=list)
    cache_loaded: bool | None = None
    finalizers: tuple[str, ...] | None = None
    prune: tuple[PruneRule, ...] = MODEL_PRUNE


def effective_replicas(model: Model) -> int:
    """The replicas the Pods follow (see the module docstring)."""
    spec = model.spec
    if spec.autoscaling_disabled:
        return max(spec.replicas or 0, 0)
    replicas = spec.replicas
    if replicas is None or replicas < spec.min_replicas:
        return spec.min_replicas
    if spec.max_replicas is not None and replicas > spec.max_replicas:
        return spec.max_replicas
    return replicas


def replica_bounds_intent(model: Model, ref: ObjectRef) -> ScaleIntent | None:
    """``spec.replicas`` brought within ``minReplicas``..``maxReplicas`` (written back, as
    KubeAI does, so that the Model shows the replicas its Pods follow); None when it is
    within them, when autoscaling is disabled (the user's number is the number), or while the
    Model is deleted. An unset ``spec.replicas`` is written only when the bounds ask for more
    than none."""
    spec = model.spec
    if spec.autoscaling_disabled or model.metadata.deletion_timestamp is not None:
        return None
    wanted = effective_replicas(model)
    current = spec.replicas
    if current == wanted or (current is None and wanted == 0):
        return None
    # A negative count (one the CRD's minimum would refuse, but a message may carry) reads as 0.
    return ScaleIntent(target=ref, replicas=wanted, from_replicas=max(current or 0, 0))


def plan_model(*, model: Model, context: PlanningContext, now: datetime) -> Plan:
    """Everything that must be true for one valid Model (module docstring)."""
    cluster = context.cluster
    observed = _observe(model, cluster)
    lookup = models_config(context)
    if model.metadata.deletion_timestamp is not None:
        config = lookup.config or ModelsConfig.default()
        parts = _deleting(model, observed, config=config, cluster=cluster)
    elif lookup.config is None:
        message = f"the system configuration {lookup.source} is invalid: {lookup.problem}"
        parts = _not_configured(SetupProblem(REASON_INVALID_CONFIG, message))
    else:
        namespace = namespace_config(context, observed.identity.namespace)
        built = _built(model, lookup.config, namespace, context=context)
        if isinstance(built, SetupProblem):
            parts = _not_configured(built)
        else:
            parts = _serving(model, built, observed, cluster=cluster)
    request = cluster.scale_requests.get(observed.identity.uid)
    ceiling = (lookup.config or ModelsConfig.default()).model_autoscaling.max_replicas
    scale = None
    if observed.identity.uid:
        scale = scale_intent(
            model, observed.ref, request, ceiling=ceiling
        ) or replica_bounds_intent(model, observed.ref)
    return _plan(model, observed, parts, now=now, scale=scale)


@dataclass(frozen=True, slots=True)
class _Built:
    """What the Model's spec and the configuration make, whatever the cluster holds."""

    setup: ModelSetup
    pod: ServerPod
    files_map: dict[str, Any] | None
    adapters_map: dict[str, Any] | None
    load_job: dict[str, Any] | None


def _built(
    model: Model,
    config: ModelsConfig,
    namespace: AIMNamespaceConfig | None,
    *,
    context: PlanningContext,
) -> _Built | SetupProblem:
    """The built parts, kept per spec version: most plans of a Model are made because a Pod
    or its own status moved while its spec and the configuration stayed as they were.

    The API server bumps ``generation`` on every spec change of a kind with a status
    subresource, so for one uid it names the spec; without both (a manifest planned
    offline) the Model object itself is the key's input.
    """
    meta = model.metadata
    versioned = bool(meta.uid and meta.generation)
    key = ("model-parts", meta.uid, meta.generation) if versioned else ("model-parts", meta.uid)
    inputs = (config, namespace) if versioned else (model, config, namespace)
    return context.owner_value(key, inputs, lambda: _build(model, config, namespace))


def _build(
    model: Model, config: ModelsConfig, namespace: AIMNamespaceConfig | None
) -> _Built | SetupProblem:
    meta = model.metadata
    settings = namespace_settings(namespace, meta.namespace or "")
    setup = model_setup(model, config=config, namespace=settings)
    if isinstance(setup, SetupProblem):
        return setup
    identity = identity_of(setup)
    try:
        pod = server_pod(setup)
    except JsonPatchError as error:
        return SetupProblem(REASON_INVALID_PATCH, str(error))
    files = {file.path: file.content for file in model.spec.files or ()}
    adapters = adapters_config_map_manifest(identity, model) if uses_adapters(model) else None
    return _Built(
        setup=setup,
        pod=pod,
        files_map=files_config_map_manifest(identity, files),
        adapters_map=adapters,
        load_job=_load_job(setup, identity) if setup.cache is not None else None,
    )


def _observe(model: Model, cluster: ClusterState) -> _Observed:
    meta = model.metadata
    identity = ModelIdentity(
        name=meta.name or "", namespace=meta.namespace or "", uid=meta.uid or ""
    )
    pods = tuple(
        ObservedPod.from_wire(child)
        for child in cluster.children_of(identity.uid)
        if child.get("kind") == "Pod"
        and ((child.get("metadata") or {}).get("labels") or {}).get(LABEL_MODEL) == identity.name
    )
    return _Observed(
        identity=identity,
        ref=ObjectRef(
            api_version=model.api_version,
            kind=model.kind,
            name=identity.name,
            namespace=identity.namespace,
            uid=identity.uid or None,
        ),
        previous=model.status.to_wire() if model.status is not None else {},
        generation=meta.generation or 0,
        pods=pods,
    )


# ------------------------------------------------------------------ serving


def _serving(model: Model, built: _Built, observed: _Observed, *, cluster: ClusterState) -> _Parts:
    """``model`` as observed now; ``built`` from its spec version (whose ``setup.model`` may
    be an earlier observation of the same spec)."""
    setup, pod = built.setup, built.pod
    identity = identity_of(setup)
    parts = _Parts(
        conditions=[ConditionSpec(CONFIGURED, "True", "Configured", _configured_message(setup))]
    )
    if built.files_map is not None:
        parts.desired.append(built.files_map)
    pods_allowed = _cache(built, observed, parts, cluster=cluster)
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
        parts.delete += [_pod_ref(identity, p) for p in decision.delete]
    if built.adapters_map is not None:
        parts.desired.append(built.adapters_map)
        parts.desired += loader_rbac(
            identity, pods=_loader_pods(observed, decision), account=service_account(setup)
        )
        parts.conditions += _adapter_conditions(setup, observed, pod)
    ready = _ready(observed, decision, pod, replicas=replicas, allowed=pods_allowed)
    parts.conditions.append(_capped(ready, asked=asked) if asked > replicas else ready)
    parts.finalizers = _finalizers(model, wanted=setup.cache is not None)
    return parts


def _configured_message(setup: ModelSetup) -> str:
    profile = setup.model.spec.resource_profile or "no resource profile"
    return f"Served by {setup.image} with {profile}"


def _cache(built: _Built, observed: _Observed, parts: _Parts, *, cluster: ClusterState) -> bool:
    """Add the cache's objects and condition; whether the Pods may run (files loaded)."""
    setup = built.setup
    cache = setup.cache
    if cache is None or built.load_job is None:
        return True
    identity = identity_of(setup)
    parts.shared.append(cache_volume_manifest(identity.namespace, cache.profile, cache.filesystem))
    loaded_before = (observed.previous.get("cache") or {}).get("loaded") is True
    outcome = job_outcome(cluster.child_of(identity.uid, kind="Job", name=load_job(identity.name)))
    if loaded_before or outcome.state is JobState.COMPLETE:
        parts.cache_loaded = True
        parts.conditions.append(
            ConditionSpec(
                CACHE_LOADED, "True", "Loaded", f"The files are in {cache_volume(cache.profile)}"
            )
        )
        return True
    parts.cache_loaded = False
    parts.desired.append(built.load_job)
    parts.conditions.append(_loading(outcome, job=load_job(identity.name)))
    return False


def _loading(outcome: JobOutcome, *, job: str) -> ConditionSpec:
    if outcome.state is JobState.FAILED:
        return ConditionSpec(
            CACHE_LOADED,
            "False",
            "LoadFailed",
            f"Job {job} failed ({outcome.message}); see its logs, and delete it to try again",
        )
    return ConditionSpec(CACHE_LOADED, "False", "Loading", f"Job {job} loads the files")


def _job_settings(config: ModelsConfig, setup: ModelSetup | None = None) -> JobSettings:
    pods = config.model_server_pods
    secrets = [s.name for s in pods.image_pull_secrets]
    if setup is not None:
        secrets += [n for n in setup.namespace.image_pull_secrets if n not in secrets]
    return JobSettings(
        image=config.model_loading.image,
        pod_security_context=pods.pod_security_context,
        security_context=pods.security_context,
        image_pull_secrets=tuple(secrets),
    )


def _load_job(setup: ModelSetup, identity: ModelIdentity) -> dict[str, Any]:
    spec = setup.model.spec
    assert setup.cache is not None
    credentials = source_additions(
        setup.source,
        secrets=setup.config.secret_names,
        namespace=setup.namespace,
        user_env=spec.env or {},
    )
    return load_job_manifest(
        identity,
        url=spec.url,
        profile=setup.cache.profile,
        settings=_job_settings(setup.config, setup),
        env=spec.env or {},
        credentials=credentials,
        env_from=tuple(source.to_wire() for source in spec.env_from or ()),
    )


def _pod_ref(identity: ModelIdentity, pod: ObservedPod) -> ObjectRef:
    return ObjectRef(
        api_version="v1", kind="Pod", name=pod.name, namespace=identity.namespace, uid=pod.uid
    )


def _loader_pods(observed: _Observed, decision: PodDecision | None) -> list[str]:
    """Every Pod whose adapter loader may report: the live ones and those being created."""
    live = [p.name for p in observed.pods if not p.terminating]
    return sorted({*live, *(decision.create if decision else ())})


def _adapter_conditions(
    setup: ModelSetup, observed: _Observed, pod: ServerPod
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
    observed: _Observed,
    decision: PodDecision | None,
    pod: ServerPod,
    *,
    replicas: int,
    allowed: bool,
) -> ConditionSpec:
    if not allowed or decision is None:
        return ConditionSpec(READY, "False", "WaitingForCache", "No Pods until the cache is loaded")
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
    return ConditionSpec(READY, "False", "ReplicasNotReady", shown)


def _capped(ready: ConditionSpec, *, asked: int) -> ConditionSpec:
    """The Ready condition of a Model asking for more Pods than one plan can carry."""
    return ConditionSpec(
        READY,
        ready.status,
        "ReplicasCapped",
        f"spec.replicas: {asked} asked, but a Model runs at most {MAX_SERVER_PODS} server Pods"
        f" (their manifests travel in one bus message); {ready.message}",
    )


def _finalizers(model: Model, *, wanted: bool) -> tuple[str, ...] | None:
    """The operator's finalizers when they must change, else None (no write)."""
    present = CACHE_EVICTION_FINALIZER in (model.metadata.finalizers or ())
    if present == wanted:
        return None
    return (CACHE_EVICTION_FINALIZER,) if wanted else ()


# ------------------------------------------------------------------ not configured


def _not_configured(problem: SetupProblem) -> _Parts:
    return _Parts(
        conditions=[
            ConditionSpec(CONFIGURED, "False", problem.reason, problem.message),
            ConditionSpec(READY, "False", "NotConfigured", "See the Configured condition"),
        ],
        prune=(),
    )


# ------------------------------------------------------------------ deleting


def _deleting(
    model: Model, observed: _Observed, *, config: ModelsConfig, cluster: ClusterState
) -> _Parts:
    identity = observed.identity
    parts = _Parts(
        delete=[_pod_ref(identity, p) for p in observed.pods if not p.terminating],
        conditions=[ConditionSpec(READY, "False", "Deleting", "The Model is being deleted")],
        cache_loaded=(observed.previous.get("cache") or {}).get("loaded")
        if model.spec.cache_profile
        else None,
    )
    if CACHE_EVICTION_FINALIZER not in (model.metadata.finalizers or ()):
        return parts
    profile = model.spec.cache_profile
    volume = (
        cluster.find_object(
            group="",
            kind="PersistentVolumeClaim",
            name=cache_volume(profile),
            namespace=identity.namespace,
        )
        if profile
        else None
    )
    if profile is None or volume is None or (volume.get("metadata") or {}).get("deletionTimestamp"):
        parts.finalizers = ()
        return parts
    job = evict_job(identity.name)
    outcome = job_outcome(cluster.child_of(identity.uid, kind="Job", name=job))
    if outcome.state is JobState.COMPLETE:
        parts.finalizers = ()
        parts.conditions.append(
            ConditionSpec(CACHE_EVICTED, "True", "Evicted", f"Job {job} removed the files")
        )
        return parts
    parts.desired.append(
        evict_job_manifest(identity, profile=profile, settings=_job_settings(config))
    )
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


# ------------------------------------------------------------------ the plan


def _plan(
    model: Model,
    observed: _Observed,
    parts: _Parts,
    *,
    now: datetime,
    scale: ScaleIntent | None,
) -> Plan:
    conditions = list(parts.conditions)
    if _condition_status(observed.previous, VALID_CONDITION) == "False":
        conditions.append(ConditionSpec(VALID_CONDITION, "True", REASON_VALID, "The spec is valid"))
    status = model_status(
        previous=observed.previous,
        generation=observed.generation,
        pods=observed.pods,
        cache_loaded=parts.cache_loaded,
        conditions=conditions,
        now=now,
    )
    uid = observed.identity.uid
    events: tuple[EventIntent, ...] = condition_events(observed.previous, conditions)
    return Plan(
        owner=observed.ref,
        observed_generation=model.metadata.generation,
        observed_resource_version=model.metadata.resource_version,
        desired=sort_objects(parts.desired),
        status=status,
        events=events,
        prune=parts.prune if uid else (),
        prune_selector=inventory_labels(uid) if uid and parts.prune else {},
        delete=tuple(sorted(parts.delete, key=ObjectRef.sort_key)),
        shared=sort_objects(parts.shared),
        finalizers=parts.finalizers,
        scale=scale,
        owner_labels=None if model.metadata.deletion_timestamp else feature_labels(model),
    )


def feature_labels(model: Model) -> dict[str, str] | None:
    """``features.kubeai.org/<feature>: "true"`` for each of ``spec.features``, when the
    Model's labels under that prefix are not exactly those (else None: no write)."""
    wanted = {
        f"{MODEL_FEATURE_LABEL_PREFIX}{feature}": "true" for feature in model.spec.features or ()
    }
    present = {
        key: value
        for key, value in (model.metadata.labels or {}).items()
        if key.startswith(MODEL_FEATURE_LABEL_PREFIX)
    }
    return None if present == wanted else wanted


def _condition_status(status: Mapping[str, Any], condition_type: str) -> str | None:
    return next(
        (
            c.get("status")
            for c in status.get("conditions") or ()
            if isinstance(c, Mapping) and c.get("type") == condition_type
        ),
        None,
    )
