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
5. its files and adapters ConfigMaps, the adapter loaders' Role (steps 3 to 5 for a Model
   that is served: :mod:`~kaiwo_planner.domain.models.serving`);
6. the status and Events (:mod:`~kaiwo_planner.domain.models.status`).

Replicas (:mod:`~kaiwo_planner.domain.models.replicas`): with autoscaling (the default)
``spec.replicas`` clamped into ``[minReplicas, maxReplicas]``, ``minReplicas`` when it is
not set; with ``autoscalingDisabled`` ``spec.replicas`` as it is (none: 0). As upstream, the
clamped value is written back into ``spec.replicas`` through the scale subresource, an unset
one included (decisions 0016, 0223), and the plan uses the clamped value. The autoscaler's latest
decision for the Model, while it still applies, makes the plan set ``spec.replicas`` through
the scale subresource (``Plan.scale``, :mod:`~kaiwo_planner.domain.models.autoscaling`); the
Pods follow once the new replicas are observed. The cluster's ceiling on the autoscaler
(``modelAutoscaling.maxReplicas``), when it holds the Model below its own bounds, is reported
on its ``LimitedByClusterCeiling`` condition with a Warning Event. A Model runs at most
:data:`~kaiwo_planner.domain.models.replicas.MAX_SERVER_PODS` Pods; asking for more is
reported on its Ready condition.

A Model being deleted (:mod:`~kaiwo_planner.domain.models.model_deletion`; only one with a
cache has a finalizer, so only such a Model is seen so): its Pods are deleted, its files
evicted from the cache, and then its finalizer dropped.

What is pruned (children of the Model no longer wanted): ConfigMaps, Jobs, the Role and its
binding. Pods only ever go by explicit deletion (``Plan.delete``), one by one as the rollout
decides: a rollout keeps Pods of the old spec that no plan describes any more.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from kaiwo_contracts.confinement import MODEL_FEATURE_LABEL_PREFIX
from kaiwo_contracts.crds.config_v1alpha1 import AIMNamespaceConfig
from kaiwo_contracts.crds.kubeai_v1.model import Model
from kaiwo_contracts.models_config import ModelsConfig
from kaiwo_contracts.plans import EventIntent, ObjectRef, Plan, ScaleIntent, sort_objects

from kaiwo_planner.domain.children.labels import inventory_labels
from kaiwo_planner.domain.models.adapters import adapters_config_map_manifest, uses_adapters
from kaiwo_planner.domain.models.autoscaling import (
    ClusterCeiling,
    ceiling_condition,
    max_replicas_condition,
    scale_intent,
)
from kaiwo_planner.domain.models.cache_jobs import load_job_of
from kaiwo_planner.domain.models.files import files_config_map_manifest
from kaiwo_planner.domain.models.json_patch import JsonPatchError
from kaiwo_planner.domain.models.model_deletion import deleting_parts
from kaiwo_planner.domain.models.model_parts import (
    BuiltModel,
    ModelParts,
    ObservedModel,
    kept_cache,
)
from kaiwo_planner.domain.models.names import LABEL_MODEL
from kaiwo_planner.domain.models.ownership import model_ref
from kaiwo_planner.domain.models.replicas import replica_bounds_intent
from kaiwo_planner.domain.models.rollout import ObservedPod
from kaiwo_planner.domain.models.server_pod import identity_of, server_pod
from kaiwo_planner.domain.models.serving import serving_parts
from kaiwo_planner.domain.models.setup import REASON_INVALID_CONFIG, SetupProblem, model_setup
from kaiwo_planner.domain.models.status import CONFIGURED, READY, condition_events, model_status
from kaiwo_planner.domain.models.system_config import ceiling_origin, models_config
from kaiwo_planner.domain.settings.cluster_settings import namespace_config
from kaiwo_planner.domain.settings.namespace_config import namespace_settings
from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.state.planning_context import PlanningContext
from kaiwo_planner.domain.status.conditions import ConditionSpec
from kaiwo_planner.domain.status.invalid_owner import REASON_VALID, VALID_CONDITION

REASON_INVALID_PATCH: Final = "InvalidJSONPatch"


@dataclass(frozen=True, slots=True)
class ModelPlanning:
    """A Model's plan, and when to plan it again though nothing it reads changes (None:
    only when something does)."""

    plan: Plan
    replan_at: datetime | None = None


def plan_model(*, model: Model, context: PlanningContext, now: datetime) -> ModelPlanning:
    """Everything that must be true for one valid Model (module docstring)."""
    cluster = context.cluster
    observed = _observe(model, cluster)
    lookup = models_config(context)
    if model.metadata.deletion_timestamp is not None:
        namespace_name = observed.identity.namespace or ""
        settings = namespace_settings(namespace_config(context, namespace_name), namespace_name)
        problem = f"the system configuration {lookup.source} is invalid: {lookup.problem}"
        parts = deleting_parts(
            model,
            observed,
            config=lookup.config,
            config_problem=problem,
            namespace=settings,
            cluster=cluster,
            now=now,
        )
    elif lookup.config is None:
        message = f"the system configuration {lookup.source} is invalid: {lookup.problem}"
        parts = _not_configured(SetupProblem(REASON_INVALID_CONFIG, message), model, observed)
    else:
        namespace = namespace_config(context, observed.identity.namespace or "")
        built = _built(model, lookup.config, namespace, context=context)
        if isinstance(built, SetupProblem):
            parts = _not_configured(built, model, observed)
        else:
            parts = serving_parts(model, built, observed, cluster=cluster)
    request = cluster.scale_requests.get(observed.identity.uid or "")
    ceiling = (lookup.config or ModelsConfig.default()).model_autoscaling.max_replicas
    scale = None
    if observed.identity.uid:
        scale = scale_intent(
            model, observed.ref, request, ceiling=ceiling
        ) or replica_bounds_intent(model, observed.ref)
    if model.metadata.deletion_timestamp is None and lookup.config is not None:
        # Told while the configuration is valid; an invalid one is told on Configured.
        limited = ceiling_condition(
            model,
            observed.ref,
            request,
            ceiling=ClusterCeiling(ceiling, ceiling_origin(lookup.config, lookup.source)),
            previous=observed.previous,
        )
        if limited is not None:
            parts.conditions.append(limited)
        held = max_replicas_condition(
            model, observed.ref, request, ceiling=ceiling, previous=observed.previous
        )
        if held is not None:
            parts.conditions.append(held)
    return ModelPlanning(_plan(model, observed, parts, now=now, scale=scale), parts.replan_at)


def _built(
    model: Model,
    config: ModelsConfig,
    namespace: AIMNamespaceConfig | None,
    *,
    context: PlanningContext,
) -> BuiltModel | SetupProblem:
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
) -> BuiltModel | SetupProblem:
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
    return BuiltModel(
        setup=setup,
        pod=pod,
        files_map=files_config_map_manifest(identity, files),
        adapters_map=adapters,
        load_job=load_job_of(setup, identity) if setup.cache is not None else None,
    )


def _observe(model: Model, cluster: ClusterState) -> ObservedModel:
    meta = model.metadata
    identity = model_ref(name=meta.name or "", namespace=meta.namespace or "", uid=meta.uid or "")
    pods = tuple(
        ObservedPod.from_wire(child)
        for child in cluster.children_of(identity.uid or "")
        if child.get("kind") == "Pod"
        and ((child.get("metadata") or {}).get("labels") or {}).get(LABEL_MODEL) == identity.name
    )
    return ObservedModel(
        identity=identity,
        ref=ObjectRef(
            api_version=model.api_version,
            kind=model.kind,
            name=identity.name,
            namespace=identity.namespace or "",
            uid=identity.uid or None,
        ),
        previous=model.status.to_wire() if model.status is not None else {},
        generation=meta.generation or 0,
        pods=pods,
    )


# ------------------------------------------------------------------ not configured


def _not_configured(problem: SetupProblem, model: Model, observed: ObservedModel) -> ModelParts:
    """Only the status changes; what it says of the cache stays as it was (a cache
    loaded before the problem is still loaded once it is fixed)."""
    return ModelParts(
        conditions=[
            ConditionSpec(CONFIGURED, "False", problem.reason, problem.message),
            ConditionSpec(READY, "False", "NotConfigured", "See the Configured condition"),
        ],
        cache=kept_cache(model.spec.cache_profile, observed),
        prune=(),
    )


# ------------------------------------------------------------------ the plan


def _plan(
    model: Model,
    observed: ObservedModel,
    parts: ModelParts,
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
        cache=parts.cache,
        conditions=conditions,
        now=now,
        retired=parts.retired,
    )
    uid = observed.identity.uid or ""
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
