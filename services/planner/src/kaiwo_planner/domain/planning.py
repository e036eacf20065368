"""The one entry point of planning: an owner object and the planning context in, its plan out.

:func:`plan_object` is what the planner service and replay call for every owner; it is pure
(no I/O, no clock: ``now`` is given) and deterministic (equal inputs give plans whose
:func:`~kaiwo_contracts.plans.canonical_json` is byte-identical). The context
(:class:`~kaiwo_planner.domain.state.planning_context.PlanningContext`) holds the cluster
state and the values worked out from it; a fresh one and one carried along from earlier
states give the same plans.

By kind:

* KaiwoJob, KaiwoService: the workload plan (:mod:`~kaiwo_planner.domain.workload_plan`).
* KaiwoQueueConfig: the Kueue objects, node labels and status
  (:func:`~kaiwo_planner.domain.queues.queue_config.plan_queue_config`), with a LocalQueue in every
  namespace whose workloads use a queue that lists no namespaces: the KaiwoQueueConfig plan
  is the one owner of every LocalQueue (upstream also creates them from workload reconciles).
* KaiwoConfig, AIMNamespaceConfig: they own nothing; they change the plans of others
  (the KaiwoQueueConfig and the workloads, which read them from the cluster state), and the
  planner re-plans those when they change. Their own plan is None, but for one the operator
  cannot use as written, or an AIMNamespaceConfig another of its namespace overrides: then a
  plan of only a Warning Event on it, naming its fields or the one in force (no status: they
  have none; :mod:`~kaiwo_planner.domain.status.config_events`, decisions 0206 and 0209).
* Model (KubeAI): its model-server Pods, files, cache and adapters
  (:mod:`~kaiwo_planner.domain.models`).
* GpuWorkload, and the root of a GPU workload no Kaiwo kind owns (a Pod, Job, Deployment,
  StatefulSet, RayJob or RayCluster controlled by nothing, asking for GPUs): the record's
  status and the preemption of its workload, and the record's creation
  (:mod:`~kaiwo_planner.domain.gpu_workload_plan`, decision 0047).
* Anything else: None (not an owner).

An owner the models reject, or one observed only in part because it was too large for the
bus (its object carries the ``oversized`` marker), gets a plan that reports the problem and
changes nothing else (:mod:`~kaiwo_planner.domain.status.invalid_owner`).

Every plan names its sources: the owner and the configuration objects it read, with a digest
of what people wrote in each (:mod:`~kaiwo_planner.domain.plan_sources`, decision 0038; those
its kind alone does not tell are named by the planning result, ``also_read``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

from kaiwo_contracts.crds.kaiwo_v1alpha1.common import WorkloadStatus
from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwojob import KaiwoJob
from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwoqueueconfig import KaiwoQueueConfig
from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwoservice import KaiwoService
from kaiwo_contracts.events.observed import oversized_marker
from kaiwo_contracts.gpu_workloads import ROOT_KINDS
from kaiwo_contracts.plans import ObjectRef, Plan
from kaiwo_contracts.validation import Problem
from pydantic import ValidationError

from kaiwo_planner.domain.gpu_workload_plan import plan_gpu_root, plan_gpu_workload
from kaiwo_planner.domain.models.planning_entry import plan_model_object
from kaiwo_planner.domain.plan_sources import with_sources
from kaiwo_planner.domain.queues.previous_run import previous_run_recheck_at
from kaiwo_planner.domain.queues.queue_config import plan_queue_config
from kaiwo_planner.domain.settings.cluster_settings import (
    KAIWO_CONFIG_KIND,
    KAIWO_GROUP,
    NAMESPACE_CONFIG_KIND,
    kaiwo_config,
    namespace_config_object,
    namespaces_by_queue,
)
from kaiwo_planner.domain.settings.storage_mounts import storage_mount_problems
from kaiwo_planner.domain.state.cluster import api_group_of
from kaiwo_planner.domain.state.planning_context import PlanningContext
from kaiwo_planner.domain.status.config_events import plan_kaiwo_config, plan_namespace_config
from kaiwo_planner.domain.status.invalid_owner import (
    invalid_owner_plan,
    oversized_owner_plan,
    spec_problems,
)
from kaiwo_planner.domain.workload_plan import plan_workload

MODEL_KIND = ("kubeai.org", "Model")
GPU_WORKLOAD = "GpuWorkload"
WORKLOAD_MODELS: Mapping[str, type[KaiwoJob] | type[KaiwoService]] = MappingProxyType(
    {
        "KaiwoJob": KaiwoJob,
        "KaiwoService": KaiwoService,
    }
)


@dataclass(frozen=True, slots=True)
class PlanningResult:
    """A plan (None: the object owns nothing) and what the caller should schedule.

    ``replan_at``: plan this owner again at this moment at the latest, even if nothing is
    observed to change (a duration deadline, or the moment its wait for GPUs becomes long
    enough to preempt others; a KaiwoQueueConfig's only one, the next look at a previous
    run's object it waits for, :mod:`~kaiwo_planner.domain.queues.previous_run`).
    ``also_replan``: other owners to plan now, because a decision
    made here concerns them (expired workloads to terminate for this waiting one).
    ``also_read``: configuration objects (wire form) the plan was computed from that its
    owner's kind alone does not tell, named in its sources too (an AIMNamespaceConfig not
    in force: the one that is, decision 0209).
    """

    plan: Plan | None
    replan_at: datetime | None = None
    also_replan: tuple[ObjectRef, ...] = ()
    also_read: tuple[Mapping[str, Any], ...] = ()


def plan_object(
    *, owner: Mapping[str, Any], context: PlanningContext, now: datetime
) -> PlanningResult:
    """The plan for ``owner`` (wire form) in ``context`` (its plan is None for non-owners),
    when to plan it again and whom else to plan now. Every plan names what it was computed
    from (``Plan.sources``, :mod:`~kaiwo_planner.domain.plan_sources`)."""
    result = _plan_by_kind(owner=owner, context=context, now=now)
    if result.plan is None:
        return result
    return replace(
        result,
        plan=with_sources(result.plan, owner=owner, context=context, also_read=result.also_read),
    )


def _plan_by_kind(
    *, owner: Mapping[str, Any], context: PlanningContext, now: datetime
) -> PlanningResult:
    moment = now if now.tzinfo else now.replace(tzinfo=UTC)
    group = api_group_of(str(owner.get("apiVersion", "")))
    kind = str(owner.get("kind", ""))
    other = _plan_model_or_gpu_workload(owner, context=context, now=moment)
    if other is not None:
        return other
    if group != KAIWO_GROUP:
        return _plan_configuration(owner, (group, kind), context=context)
    if kind in WORKLOAD_MODELS or kind == "KaiwoQueueConfig":
        oversized = oversized_marker(owner)
        if oversized is not None:
            queue_config = kind == "KaiwoQueueConfig"
            return PlanningResult(
                plan=oversized_owner_plan(
                    owner=owner,
                    owner_ref=ObjectRef.of(owner),
                    oversized=oversized,
                    invalid_phase=WorkloadStatus.FAILED if queue_config else WorkloadStatus.ERROR,
                    now=moment,
                    writes_observed_generation=not queue_config,
                )
            )
    if kind in WORKLOAD_MODELS:
        return _plan_workload(owner, WORKLOAD_MODELS[kind], context=context, now=moment)
    if kind == "KaiwoQueueConfig":
        plan = _plan_queue_config(owner, context=context, now=moment)
        recheck = previous_run_recheck_at(
            plan.desired, cluster=context.cluster, owner_uid=plan.owner.uid, now=moment
        )
        return PlanningResult(plan=plan, replan_at=recheck)
    return PlanningResult(plan=None)


def _plan_configuration(
    owner: Mapping[str, Any], kind: tuple[str, str], *, context: PlanningContext
) -> PlanningResult:
    """A KaiwoConfig's or an AIMNamespaceConfig's plan: only its Warning Event, when the
    operator cannot use it as written or, for an AIMNamespaceConfig, another of its
    namespace is in force (:mod:`~kaiwo_planner.domain.status.config_events`); None for them
    otherwise, and for any other kind (not an owner)."""
    if kind == KAIWO_CONFIG_KIND:
        return PlanningResult(plan=plan_kaiwo_config(owner))
    if kind == NAMESPACE_CONFIG_KIND:
        namespace = str((owner.get("metadata") or {}).get("namespace") or "")
        found = plan_namespace_config(owner, in_force=namespace_config_object(context, namespace))
        return PlanningResult(plan=found.plan, also_read=found.also_read)
    return PlanningResult(plan=None)


def _plan_model_or_gpu_workload(
    owner: Mapping[str, Any], *, context: PlanningContext, now: datetime
) -> PlanningResult | None:
    """The plan of a Model, a GpuWorkload or a GPU workload's root; None for other kinds."""
    api_version, kind = str(owner.get("apiVersion", "")), str(owner.get("kind", ""))
    if (api_group_of(api_version), kind) == MODEL_KIND:
        model = plan_model_object(owner=owner, context=context, now=now)
        return PlanningResult(plan=model.plan, replan_at=model.replan_at)
    if (api_version, kind) in ROOT_KINDS:
        root = plan_gpu_root(root=owner, context=context, now=now)
        return PlanningResult(plan=root.plan, also_replan=root.also_replan)
    if (api_group_of(api_version), kind) == (KAIWO_GROUP, GPU_WORKLOAD):
        record = plan_gpu_workload(record=owner, context=context, now=now)
        return PlanningResult(plan=record.plan, replan_at=record.replan_at)
    return None


def _plan_workload(
    owner: Mapping[str, Any],
    model: type[KaiwoJob] | type[KaiwoService],
    *,
    context: PlanningContext,
    now: datetime,
) -> PlanningResult:
    try:
        # Frozen models of an object the projection never edits: parse each version once.
        uid = (owner.get("metadata") or {}).get("uid")
        workload = context.owner_value(
            ("owner", model, uid), (owner,), lambda: _parsed(owner, model, uid, context)
        )
    except ValidationError as error:
        return PlanningResult(
            plan=_invalid(owner, spec_problems(owner, error), WorkloadStatus.ERROR, now=now)
        )
    missing = _missing_identity(workload.metadata.name, workload.metadata.namespace)
    if missing:
        return PlanningResult(plan=_invalid(owner, missing, WorkloadStatus.ERROR, now=now))
    storage_defaults = kaiwo_config(context).spec.effective_storage
    mount_problems = storage_mount_problems(
        workload.spec,
        default_data_mount_path=storage_defaults.default_data_mount_path,
        default_hf_mount_path=storage_defaults.default_hf_mount_path,
    )
    if mount_problems:
        return PlanningResult(plan=_invalid(owner, mount_problems, WorkloadStatus.ERROR, now=now))
    try:
        result = plan_workload(workload=workload, context=context, now=now)
    except ArithmeticError as error:
        # The models bound every number they know of; a value that still overflows (a date
        # past year 9999, a sum beyond what a float holds) is the spec's, not a crash.
        problems = [Problem("spec", f"a value is too large to plan with ({error})")]
        return PlanningResult(plan=_invalid(owner, problems, WorkloadStatus.ERROR, now=now))
    return PlanningResult(
        plan=result.plan, replan_at=result.replan_at, also_replan=result.also_replan
    )


def _parsed(
    owner: Mapping[str, Any],
    model: type[KaiwoJob] | type[KaiwoService],
    uid: object,
    context: PlanningContext,
) -> KaiwoJob | KaiwoService:
    """``owner`` as ``model``, its spec parsed once per spec version.

    Most versions of a workload differ from the last only in status and metadata (the
    operator's own status writes), and the spec was most of the parsing. The API server
    bumps ``metadata.generation`` on every spec change, so for one uid it names the spec
    (as for the children, ``plan_children``); the spec is compared too, so a hand-made
    object that changes it without a new generation is parsed afresh. The parsed spec is a
    frozen model: the owner parsed with it is the owner parsed whole."""
    generation, spec = (owner.get("metadata") or {}).get("generation"), owner.get("spec")
    if not uid or not isinstance(generation, int) or not isinstance(spec, Mapping):
        return model.model_validate(owner)
    held_spec, parsed_spec = context.owner_value(
        ("owner-spec", model, uid, generation),
        (),
        lambda: (spec, model.model_validate(owner).spec),
    )
    if held_spec != spec:
        return model.model_validate(owner)
    return model.model_validate({**owner, "spec": parsed_spec})


def _plan_queue_config(
    owner: Mapping[str, Any], *, context: PlanningContext, now: datetime
) -> Plan:
    try:
        queue_config = KaiwoQueueConfig.model_validate(owner)
    except ValidationError as error:
        return _invalid(
            owner,
            spec_problems(owner, error),
            WorkloadStatus.FAILED,
            now=now,
            writes_observed_generation=False,
        )
    return plan_queue_config(
        queue_config=queue_config,
        kaiwo_config=kaiwo_config(context),
        cluster=context.cluster,
        now=now,
        workload_namespaces=namespaces_by_queue(context),
    )


def _missing_identity(name: str | None, namespace: str | None) -> list[Problem]:
    problems = []
    if not name:
        problems.append(Problem("metadata.name", "required field is missing"))
    if not namespace:
        problems.append(Problem("metadata.namespace", "required field is missing"))
    return problems


def _invalid(
    owner: Mapping[str, Any],
    problems: list[Problem],
    phase: WorkloadStatus,
    *,
    now: datetime,
    writes_observed_generation: bool = True,
) -> Plan:
    return invalid_owner_plan(
        owner=owner,
        owner_ref=ObjectRef.of(owner),
        problems=problems,
        invalid_phase=phase,
        now=now,
        writes_observed_generation=writes_observed_generation,
    )
