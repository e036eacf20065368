"""What a plan was computed from: its owner and the configuration objects it read, named in
the plan (``Plan.sources``) so the executor can check them against the API server before it
carries the plan out (decision 0038).

By owner kind:

* KaiwoJob, KaiwoService: the owner, the KaiwoConfig ``kaiwo``, the AIMNamespaceConfig of
  its namespace (the one in force: the first valid by name), each when it exists, and its
  Namespace when that carries GPU idle-preemption annotations (they opt the namespace's
  workloads in: :mod:`kaiwo_contracts.gpu_preemption`);
* KaiwoQueueConfig: the owner and the KaiwoConfig;
* Model: the owner, the Models' system configuration (the ConfigMap in force) and the
  AIMNamespaceConfig of its namespace;
* KaiwoConfig, AIMNamespaceConfig (a plan only of a Warning Event on it, decision 0206): the
  owner alone, but for an AIMNamespaceConfig told another of its namespace is in force: then
  that one too (decision 0209).

Which configuration objects a plan read beyond those of its kind, the planning result says
(``also_read``), and they are named with the others: so an edit of the AIMNamespaceConfig in
force re-tells only the ones it overrides, not the ones told they are invalid.

A configuration object that does not exist is not named: the plan then used the documented
defaults, which nobody has to have written. An object the planner holds only in part (too
large for the bus) is named without a digest.

Sources are worked out once per object version: the owner's with the context's owner values
(keyed by uid, held while the very same spec and metadata are planned), a configuration
object's once per planning context and carried to the next while the object is the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kaiwo_contracts.events.observed import oversized_marker
from kaiwo_contracts.gpu_preemption import ANNOTATION_PREFIX as GPU_PREEMPTION_PREFIX
from kaiwo_contracts.plan_sources import source_of
from kaiwo_contracts.plans import ObjectRef, Plan, PlanSource

from kaiwo_planner.domain.models.system_config import CONFIG_MAP_KIND, config_map_of
from kaiwo_planner.domain.settings.cluster_settings import (
    KAIWO_CONFIG_KIND,
    NAMESPACE_CONFIG_KIND,
    NAMESPACE_KIND,
    kaiwo_config_object,
    namespace_config_object,
)
from kaiwo_planner.domain.state.planning_context import PlanningContext

WORKLOAD_KINDS: Final = frozenset({"KaiwoJob", "KaiwoService"})


def with_sources(
    plan: Plan | None,
    *,
    owner: Mapping[str, Any],
    context: PlanningContext,
    also_read: tuple[Mapping[str, Any], ...] = (),
) -> Plan | None:
    """``plan`` naming what it was computed from (None and create-only plans as they are:
    a create-only plan makes an object that does not exist yet). ``also_read``: the
    configuration objects the plan read beyond those its owner's kind reads."""
    if plan is None or plan.create_only:
        return plan
    sources = plan_sources(owner, context=context, also_read=also_read)
    return plan.model_copy(update={"sources": sources})


def plan_sources(
    owner: Mapping[str, Any],
    *,
    context: PlanningContext,
    also_read: tuple[Mapping[str, Any], ...] = (),
) -> tuple[PlanSource, ...]:
    """The owner's source, then those of the configuration objects its plan reads (by its
    kind, and ``also_read``), sorted."""
    kind = str(owner.get("kind", ""))
    namespace = str((owner.get("metadata") or {}).get("namespace") or "")
    configs: list[PlanSource] = []
    if kind in WORKLOAD_KINDS or kind == "KaiwoQueueConfig":
        found = kaiwo_config_object(context.cluster)
        configs.extend(_config_source(context, "kaiwo-config", found))
    if kind in WORKLOAD_KINDS:
        found_namespace = context.cluster.find_object(group="", kind="Namespace", name=namespace)
        if found_namespace is not None and _opts_in(found_namespace):
            configs.extend(_config_source(context, ("namespace", namespace), found_namespace))
    if kind in WORKLOAD_KINDS or kind == "Model":
        configs.extend(
            _config_source(
                context,
                ("namespace-config", namespace),
                namespace_config_object(context, namespace),
            )
        )
    if kind == "Model":
        configs.extend(_config_source(context, "models-config", config_map_of(context.cluster)))
    for found in also_read:
        uid = (found.get("metadata") or {}).get("uid")
        configs.extend(_config_source(context, ("also-read", uid), found))
    return (_owner_source(owner, context), *sorted(configs, key=_order))


def _owner_source(owner: Mapping[str, Any], context: PlanningContext) -> PlanSource:
    if oversized_marker(owner) is not None:
        return source_of(owner, whole=False)
    uid = (owner.get("metadata") or {}).get("uid")
    # Worked out once per owner version: most plans of an owner are made because a child
    # moved. A status assumed in place of the observed one (planned_status) makes a copy of
    # the owner that shares everything else, so the source, which leaves status out, is
    # reused for it too.
    written = tuple(value for key, value in owner.items() if key != "status")
    return context.owner_value(("plan-source", uid), written, lambda: source_of(owner))


def _config_source(
    context: PlanningContext, key: object, found: Mapping[str, Any] | None
) -> tuple[PlanSource, ...]:
    if found is None:
        return ()
    return (
        context.derived(
            ("plan-source", key),
            reads=(KAIWO_CONFIG_KIND, NAMESPACE_CONFIG_KIND, CONFIG_MAP_KIND, NAMESPACE_KIND),
            inputs=lambda: (found,),
            compute=lambda: source_of(found, whole=oversized_marker(found) is None),
        ),
    )


def _opts_in(namespace: Mapping[str, Any]) -> bool:
    annotations = (namespace.get("metadata") or {}).get("annotations")
    return isinstance(annotations, Mapping) and any(
        str(key).startswith(GPU_PREEMPTION_PREFIX) for key in annotations
    )


def _order(source: PlanSource) -> tuple[str, str, str, str]:
    ref: ObjectRef = source.ref
    return ref.sort_key()
