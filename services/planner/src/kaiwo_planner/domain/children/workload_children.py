"""The children a KaiwoJob or KaiwoService needs: the entry point of the child planners.

:func:`plan_children` is pure: the GPU allocation, the download job's outcome and the observed
main child (if any) are inputs. Its output is sorted and byte-identical for equal inputs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

from kaiwo_contracts.crds.config_v1alpha1 import AIMNamespaceConfig, KaiwoConfig
from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwojob import KaiwoJob, on_existing_ray_cluster
from kaiwo_contracts.plans import ObjectRef, PruneRule, sort_objects

from kaiwo_planner.domain.children.batch_job import build_batch_job
from kaiwo_planner.domain.children.change_causes import (
    ConfigurationOrigins,
    configuration_origins,
    kept_paths_text,
)
from kaiwo_planner.domain.children.deployment import (
    build_deployment,
    build_service,
    deployment_pod_labels,
    serving_port,
)
from kaiwo_planner.domain.children.downloads import (
    claims_made_anew,
    download_config_map,
    download_job,
    download_name,
    made_with_configuration,
    with_claims_it_fills,
    with_configuration,
)
from kaiwo_planner.domain.children.http_route import http_route
from kaiwo_planner.domain.children.ignored_settings import ignored_settings
from kaiwo_planner.domain.children.job_changes import (
    CONDITION_TYPE,
    REASON_IMMUTABLE,
    REASON_REPLACING,
    JobUpdate,
    existing_job_update,
    replacing_message,
    spec_version_of,
    waits_in_its_queue,
)
from kaiwo_planner.domain.children.labels import inventory_labels
from kaiwo_planner.domain.children.main_child_changes import (
    ChildUpdate,
    app_wrapper_update,
    deployment_update,
    ray_job_update,
)
from kaiwo_planner.domain.children.naming import main_child_name
from kaiwo_planner.domain.children.pod_additions import image_pull_secrets, pod_additions
from kaiwo_planner.domain.children.pod_additions import workload_env as _workload_env
from kaiwo_planner.domain.children.pod_template import (
    without_flavor_terms,
)
from kaiwo_planner.domain.children.ray_job import build_ray_job
from kaiwo_planner.domain.children.ray_service import (
    SERVE_PORT,
    build_app_wrapper,
    build_ray_service,
    serve_service_name,
)
from kaiwo_planner.domain.children.resources import gpu_resource_key
from kaiwo_planner.domain.children.storage import claim_update, persistent_volume_claims
from kaiwo_planner.domain.scheduling.gpu_allocation import GpuAllocation, split_made_from
from kaiwo_planner.domain.settings.namespace_config import (
    NamespaceSettings,
    namespace_settings,
    with_default_credentials,
)
from kaiwo_planner.domain.settings.workload_inputs import (
    ChildDefaults,
    Workload,
    WorkloadInputs,
    child_defaults,
    workload_inputs,
)
from kaiwo_planner.domain.state.planning_context import PlanningContext
from kaiwo_planner.domain.state.priority_classes import NO_PRIORITY, PriorityChoice
from kaiwo_planner.domain.status.kueue_admission import kueue_admitted

DOWNLOAD_CONDITION = "DownloadJobSucceeded"

# Kinds whose operator-labelled children are deleted when no longer desired. PVCs are left out
# on purpose: they hold data, and they go with the workload (owner reference) anyway.
PRUNED_KINDS = (
    PruneRule(api_version="batch/v1", kind="Job"),
    PruneRule(api_version="ray.io/v1", kind="RayJob"),
    PruneRule(api_version="apps/v1", kind="Deployment"),
    PruneRule(api_version="workload.codeflare.dev/v1beta2", kind="AppWrapper"),
    PruneRule(api_version="v1", kind="ConfigMap"),
    PruneRule(api_version="v1", kind="Service"),
    PruneRule(api_version="gateway.networking.k8s.io/v1", kind="HTTPRoute"),
)


class DownloadState(StrEnum):
    """What is known about the download job (only relevant when downloads are configured)."""

    PENDING = "Pending"
    """Not finished yet (or not created yet)."""
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"


@dataclass(frozen=True, slots=True)
class ChildCondition:
    """A condition for the workload's status; the status step stamps the transition time."""

    type: str
    status: Literal["True", "False", "Unknown"]
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class ChildrenDecision:
    """What must exist for one workload, and what the status step should know about it.

    ``main_child`` is the Job/RayJob/Deployment/AppWrapper when it is desired (None while
    downloads gate it or after they failed). ``failed`` is set when the workload cannot start
    (the download job failed). ``notes`` are remarks worth an event (ignored settings).
    """

    desired: tuple[dict[str, Any], ...]
    conditions: tuple[ChildCondition, ...] = ()
    notes: tuple[str, ...] = ()
    main_child: ObjectRef | None = None
    waiting_for_downloads: bool = False
    failed: bool = False
    prune: tuple[PruneRule, ...] = PRUNED_KINDS
    prune_selector: dict[str, str] = field(default_factory=dict)


def _with_namespace_credentials(
    inputs: WorkloadInputs, namespace: NamespaceSettings
) -> WorkloadInputs:
    if inputs.storage is None or not inputs.storage.downloads:
        return inputs
    downloads = with_default_credentials(inputs.storage.downloads, namespace)
    storage = dataclasses.replace(inputs.storage, downloads=downloads)
    return dataclasses.replace(inputs, storage=storage)


def _download_condition(state: DownloadState, job_name: str) -> ChildCondition:
    match state:
        case DownloadState.SUCCEEDED:
            return ChildCondition(
                DOWNLOAD_CONDITION, "True", "JobCompleted", "Download job succeeded"
            )
        case DownloadState.FAILED:
            return ChildCondition(
                DOWNLOAD_CONDITION,
                "False",
                "JobFailed",
                f"Download job {job_name} failed, so the workload will not start; "
                f"see the logs of job {job_name} for the cause",
            )
        case _:
            return ChildCondition(
                DOWNLOAD_CONDITION,
                "False",
                "JobInProgress",
                f"Waiting for download job {job_name}; the workload starts once it succeeds",
            )


def _job_children(
    inputs: WorkloadInputs,
    *,
    allocation: GpuAllocation,
    defaults: ChildDefaults,
    namespace: NamespaceSettings,
    gpu_model_flavors: tuple[tuple[tuple[str, str], ...], ...] = (),
) -> list[dict[str, Any]]:
    additions = pod_additions(
        inputs,
        allocation=allocation,
        defaults=defaults,
        namespace=namespace,
        gpu_model_flavors=gpu_model_flavors,
    )
    build = build_ray_job if inputs.ray else build_batch_job
    return [build(inputs, allocation=allocation, defaults=defaults, additions=additions)]


def _service_children(
    inputs: WorkloadInputs,
    *,
    allocation: GpuAllocation,
    defaults: ChildDefaults,
    namespace: NamespaceSettings,
    gpu_model_flavors: tuple[tuple[tuple[str, str], ...], ...] = (),
) -> list[dict[str, Any]]:
    identity = inputs.identity
    if inputs.ray:
        additions = pod_additions(
            inputs,
            allocation=allocation,
            defaults=defaults,
            namespace=namespace,
            gpu_model_flavors=gpu_model_flavors,
        )
        ray_service = build_ray_service(
            inputs, allocation=allocation, defaults=defaults, additions=additions
        )
        children = [build_app_wrapper(inputs, ray_service)]
        backend, port = serve_service_name(main_child_name(identity.name)), SERVE_PORT
    else:
        additions = pod_additions(
            inputs,
            allocation=allocation,
            defaults=defaults,
            namespace=namespace,
            extra_labels=deployment_pod_labels(inputs),
            gpu_model_flavors=gpu_model_flavors,
        )
        deployment = build_deployment(
            inputs, allocation=allocation, defaults=defaults, additions=additions
        )
        children = [deployment]
        backend, port = main_child_name(identity.name), serving_port(deployment)
        if namespace.gateway is not None:
            children.append(build_service(identity, port=port))
    if namespace.gateway is not None:
        children.append(http_route(identity, namespace.gateway, service_name=backend, port=port))
    return children


def _reconcile_with_observed(
    main: dict[str, Any],
    observed: Mapping[str, Any] | None,
    context: PlanningContext | None,
    origins: ConfigurationOrigins,
    *,
    flavor_terms_told: bool,
) -> tuple[dict[str, Any] | None, ChildCondition]:
    """The main child to apply given the one that exists (None: it does not exist yet), and
    what the workload's status says of it. No child to apply: the existing one is replaced
    (pruned now, created anew from the spec once it is gone).

    Every kind of main child reports ``ChildSpecApplied``, so that the condition never
    speaks of a child the workload no longer has (a KaiwoService switched between
    ``ray: true`` and ``ray: false``). A path kept or replaced for is named with the
    configuration object it comes from (``origins``, decision 0144). The ``gpuModels`` flavor
    terms a running child keeps are named only when ``flavor_terms_told`` (decision 0267).
    """
    kind = main["kind"]
    if observed is None or observed.get("kind") != kind:
        # Created from the spec as it is, so nothing of it is left unapplied. Saying so from
        # the start (rather than once the child is observed) spares every new workload a
        # second status write, and the plan and observation that come with it.
        return main, _matches(kind)
    admitted = _admitted_by_kueue(observed, context)

    def as_it_exists() -> tuple[dict[str, Any] | None, ChildCondition]:
        return _as_it_exists(
            main,
            observed,
            context,
            origins,
            admitted=admitted,
            flavor_terms_told=flavor_terms_told,
        )

    version = spec_version_of(observed)
    if context is None or version is None:
        return as_it_exists()
    # Kept per spec version of the observed child, as the job update is (job_update_in):
    # most plans of a workload come from a status that moved, and the child's spec did not.
    read = _read_besides_the_generation(observed)
    held, found = context.owner_value(
        ("as-it-exists", *version, admitted, flavor_terms_told),
        (main, origins),
        lambda: (read, as_it_exists()),
    )
    return found if held == read else as_it_exists()


def _read_besides_the_generation(observed: Mapping[str, Any]) -> tuple[object, ...]:
    """What the update of an existing main child reads of ``observed`` that may change
    without a new ``metadata.generation``: its labels and annotations (Kueue's, the split
    mark), a Deployment's ready replicas, and the spec itself, so that a hand-made
    observation that changes it without a new generation is compared afresh."""
    meta = observed.get("metadata")
    status = observed.get("status")
    return (
        meta.get("labels") if isinstance(meta, Mapping) else None,
        meta.get("annotations") if isinstance(meta, Mapping) else None,
        status.get("readyReplicas") if isinstance(status, Mapping) else None,
        observed.get("spec"),
    )


def _as_it_exists(
    main: dict[str, Any],
    observed: Mapping[str, Any],
    context: PlanningContext | None,
    origins: ConfigurationOrigins,
    *,
    admitted: bool,
    flavor_terms_told: bool,
) -> tuple[dict[str, Any] | None, ChildCondition]:
    """:func:`_reconcile_with_observed` of a main child observed of its kind."""
    kind = main["kind"]
    if kind == "Job":
        return _job_as_it_exists(
            main,
            observed,
            context,
            origins,
            admitted=admitted,
            flavor_terms_told=flavor_terms_told,
        )
    update = _child_update(main, observed, admitted=admitted)
    if not (update.replace or flavor_terms_told):
        kept = without_flavor_terms(update.spec_not_applied, main, observed)
        update = dataclasses.replace(update, spec_not_applied=kept)
    if update.spec_not_applied:
        told = _kept_told(
            update.spec_not_applied,
            desired=main,
            observed=observed,
            origins=origins,
            context=context,
            shown=3 if update.replace else None,
        )
        update = dataclasses.replace(update, spec_not_applied_told=told)
    if update.replace:
        return None, _replacing(update.message)
    if update.applied_whole:
        return update.manifest, _matches(kind)
    return update.manifest, _not_applied(update.message)


def _child_update(
    main: dict[str, Any], observed: Mapping[str, Any], *, admitted: bool
) -> ChildUpdate:
    """How a main child other than a batch Job is applied once it exists."""
    match main["kind"]:
        case "RayJob":
            return ray_job_update(main, observed, admitted=admitted)
        case "AppWrapper":
            return app_wrapper_update(main, observed, admitted=admitted)
        case _:
            return deployment_update(main, observed)


def _admitted_by_kueue(observed: Mapping[str, Any], context: PlanningContext | None) -> bool:
    """Whether Kueue has admitted the suspended ``observed`` child's Workload (and is not
    evicting it): the child is about to run, though still observed suspended. Asked only of a
    suspended child (a Job, RayJob or AppWrapper): one that is not waits for nothing whatever
    its Workload says, so most plans do not look its Workloads up."""
    spec = observed.get("spec")
    if not (isinstance(spec, Mapping) and spec.get("suspend") is True):
        return False
    meta = observed.get("metadata")
    uid = meta.get("uid") if isinstance(meta, Mapping) else None
    if context is None or not isinstance(uid, str) or not uid:
        return False
    workloads = context.cluster.kueue_workloads_for(uid)
    return bool(workloads) and all(kueue_admitted(w.get("status") or {}) for w in workloads)


def _job_as_it_exists(
    main: dict[str, Any],
    observed: Mapping[str, Any],
    context: PlanningContext | None,
    origins: ConfigurationOrigins,
    *,
    admitted: bool,
    flavor_terms_told: bool,
) -> tuple[dict[str, Any] | None, ChildCondition]:
    update = existing_job_update(main, observed, context, admitted=admitted)
    if update.not_applied and waits_in_its_queue(observed, admitted=admitted):
        # Its template cannot change, but nothing of it runs: made anew from the edited spec
        # (pruned now, created once it is gone), it takes the edit (decision 0129).
        told = _kept_told(
            update.not_applied,
            desired=main,
            observed=observed,
            origins=origins,
            context=context,
            shown=3,
        )
        return None, _replacing(replacing_message("Job", update.not_applied, told=told))
    if not flavor_terms_told:
        kept = without_flavor_terms(update.not_applied, main, observed)
        update = dataclasses.replace(update, not_applied=kept)
    if update.not_applied:
        told = _kept_told(
            update.not_applied, desired=main, observed=observed, origins=origins, context=context
        )
        update = dataclasses.replace(update, not_applied_told=told)
    if update.anything_kept:
        return update.manifest, _not_applied(update.message)
    return update.manifest, _matches("Job")


def _kept_told(
    paths: tuple[str, ...],
    *,
    desired: dict[str, Any],
    observed: Mapping[str, Any],
    origins: ConfigurationOrigins,
    context: PlanningContext | None,
    shown: int | None = None,
) -> str:
    """:func:`kept_paths_text` of the kept ``paths``, kept in ``context`` for the observed
    child's spec version: it follows every path into both objects, and a child that keeps
    its spec is planned again at every change of its status (replay of a store whose Jobs
    all kept 23 paths ran 22% slower without it). Reused only while ``desired`` and
    ``origins`` are the very same objects (each kept per spec version already), ``paths``
    are equal (those left after the flavor terms are a new tuple each plan) and the observed
    child has the same uid and ``metadata.generation``: the paths lead into its spec
    alone."""
    kind = str(desired.get("kind", ""))

    def told() -> str:
        return kept_paths_text(
            paths, desired=desired, observed=observed, origins=origins, kind=kind, shown=shown
        )

    version = spec_version_of(observed)
    if context is None or version is None:
        return told()
    return context.owner_value(("kept-told", *version, shown, paths), (desired, origins), told)


def _matches(kind: str) -> ChildCondition:
    return ChildCondition(
        CONDITION_TYPE, "True", "Applied", f"The {kind} matches the workload's spec"
    )


def _replacing(message: str) -> ChildCondition:
    return ChildCondition(CONDITION_TYPE, "False", REASON_REPLACING, message)


def _not_applied(message: str) -> ChildCondition:
    return ChildCondition(CONDITION_TYPE, "False", REASON_IMMUTABLE, message)


@dataclass(frozen=True, slots=True)
class _BuiltChildren:
    """The children as the workload's spec and settings make them, before the observed child."""

    storage: tuple[dict[str, Any], ...]
    main: dict[str, Any] | None
    main_ref: ObjectRef | None
    others: tuple[dict[str, Any], ...]
    conditions: tuple[ChildCondition, ...]
    notes: tuple[str, ...]
    waiting: bool
    failed: bool
    selector: dict[str, str]
    origins: ConfigurationOrigins
    """Which of the children's fields the configuration gives (decision 0144)."""


def plan_children(
    *,
    workload: Workload,
    allocation: GpuAllocation,
    config: KaiwoConfig | None,
    priority: PriorityChoice = NO_PRIORITY,
    namespace_config: AIMNamespaceConfig | None = None,
    download_state: DownloadState = DownloadState.PENDING,
    observed_main_child: Mapping[str, Any] | None = None,
    observed_download_job: Mapping[str, Any] | None = None,
    observed_claims: Sequence[Mapping[str, Any]] = (),
    context: PlanningContext | None = None,
    gpu_taint_on_nodes: bool = False,
    recorded_gpu_taint_keys: tuple[str, ...] = (),
    main_made_anew: str | None = None,
    gpu_model_flavors: tuple[tuple[tuple[str, str], ...], ...] = (),
    admitted_without_models: bool = False,
    kind_kept: str | None = None,
) -> ChildrenDecision:
    """Every child ``workload`` needs now, sorted, with the conditions the status step reports.

    ``download_state`` matters only when downloads are configured: until it is SUCCEEDED only
    the storage children (claims, download ConfigMap and Job) are desired; FAILED keeps it so
    and marks the decision failed. ``observed_main_child`` is the existing Job/RayJob/
    Deployment/AppWrapper (wire form), used to keep fields that cannot or must not change.
    ``observed_download_job`` is the existing download Job: it keeps the pod template it ran
    with. ``observed_claims`` are the existing PersistentVolumeClaims: what of their spec
    cannot change is kept (:func:`claim_update`). ``gpu_taint_on_nodes``: some Node carries
    the KaiwoConfig's GPU taint, so GPU pods tolerate it even with ``addTaintsToGpuNodes`` off;
    ``recorded_gpu_taint_keys``: the keys of the GPU taints the operator recorded on Nodes,
    tolerated too while it is off
    (:attr:`~kaiwo_planner.domain.settings.workload_inputs.ChildDefaults.gpu_toleration_keys`).
    ``main_made_anew``: why the existing main child is replaced whatever its spec (pruned now,
    created again once it is gone), as ``ChildSpecApplied`` says with reason ``Replacing``.
    ``gpu_model_flavors``: the node labels of the flavors of the workload's queue that hold
    one of its ``gpuModels``, when the queue has others too (decision 0237).
    ``admitted_without_models``: Kueue admitted the existing main child into a flavor that
    holds none of them (decision 0264); only then are the flavor terms it keeps named (the
    child is where its models are, or made anew: decision 0267).
    ``kind_kept``: why the main child is of another kind than the spec asks for now (a
    KaiwoJob's ``ray`` switched while its child runs, :mod:`.kind_switch`), as
    ``ChildSpecApplied`` says; ``workload`` is then planned as that kind.

    Building the children from the spec is most of the cost of a plan, and most plans are
    made because a child's status or the workload's own status moved while its spec and the
    settings stayed as they were; so, given a ``context``, that part is kept per spec version
    (:meth:`~kaiwo_planner.domain.state.planning_context.PlanningContext.owner_value`).
    """

    def build() -> _BuiltChildren:
        return _build_children(
            workload=workload,
            allocation=allocation,
            config=config,
            priority=priority,
            namespace_config=namespace_config,
            download_state=download_state,
            gpu_taint_on_nodes=gpu_taint_on_nodes,
            recorded_gpu_taint_keys=recorded_gpu_taint_keys,
            gpu_model_flavors=gpu_model_flavors,
        )

    if context is None:
        built = build()
    else:
        meta = workload.metadata
        settings = (config, namespace_config)
        built = context.owner_value(
            (
                "children",
                meta.uid,
                *_spec_version(workload),
                # A KaiwoJob whose running child is kept is planned as that kind, with the
                # generation of the spec that asks for the other one (decision 0247).
                _main_kind(workload),
                allocation,
                priority,
                download_state,
                gpu_taint_on_nodes,
                recorded_gpu_taint_keys,
                gpu_model_flavors,
            ),
            settings if meta.uid and meta.generation else (workload, *settings),
            build,
        )
    desired, notes = _storage_as_it_exists(
        built.storage,
        observed_download_job,
        observed_claims,
        context,
        download_state=download_state,
    )
    conditions = list(built.conditions)
    main_child = None
    if built.main is not None:
        main, applied = (
            (None, _replacing(main_made_anew))
            if main_made_anew is not None and observed_main_child is not None
            else _reconcile_with_observed(
                built.main,
                observed_main_child,
                context,
                built.origins,
                flavor_terms_told=admitted_without_models,
            )
        )
        if kind_kept is not None:
            also = f" {applied.message}" if applied.status == "False" else ""
            applied = _not_applied(kind_kept + also)
        conditions.append(applied)
        desired += [main, *built.others] if main is not None else built.others
        main_child = built.main_ref
    return ChildrenDecision(
        desired=sort_objects(desired),
        conditions=tuple(conditions),
        notes=built.notes + notes,
        main_child=main_child,
        waiting_for_downloads=built.waiting,
        failed=built.failed,
        prune_selector=built.selector,
    )


def _storage_as_it_exists(
    storage: Sequence[dict[str, Any]],
    observed_download_job: Mapping[str, Any] | None,
    observed_claims: Sequence[Mapping[str, Any]],
    context: PlanningContext | None,
    *,
    download_state: DownloadState,
) -> tuple[list[dict[str, Any]], tuple[str, ...]]:
    """The storage children to apply, given those that exist, and what a user is told of
    the changes they leave out (of the download Job's, only while it has not finished: an
    edit can matter only to a download still to be done, such as a fixed Secret name)."""
    claims = {_name_of(claim): claim for claim in observed_claims}
    desired: list[dict[str, Any]] = []
    notes: list[str] = []
    for child in storage:
        if child["kind"] == "Job":
            # The download Job's template carries the workload's env, its sources and its
            # security context, which a user may edit later, and a Job's template cannot
            # change: once it exists it keeps the one it runs with (decision 0117); applied
            # as desired, such an edit was refused on every plan.
            # It names the uids of the claims it fills: one that filled a claim since deleted
            # is not desired (deleted), and the next plan makes a new one for the new, empty
            # claim (decision 0140).
            if observed_download_job is None and download_state is DownloadState.SUCCEEDED:
                # Succeeded, then removed by someone (kubectl delete job, a clean-up policy):
                # the data is still in the claims it filled (one made anew makes the state
                # PENDING, decision 0140). Made again, it downloaded once more, and the
                # workload's running child was deleted meanwhile (decision 0248).
                continue
            if observed_download_job is not None and claims_made_anew(
                observed_download_job, observed_claims
            ):
                continue
            job = with_claims_it_fills(child, observed_claims)
            if observed_download_job is not None:
                # It names the configuration it was made with, not the spec's of now: the
                # download runs once, and an edit of what it fetches is told (decision 0248).
                made_with = made_with_configuration(observed_download_job)
                if made_with is not None and made_with != made_with_configuration(job):
                    notes.append(_download_configuration_kept_note(job, download_state))
                job = with_configuration(job, made_with)
            update = existing_job_update(job, observed_download_job, context)
            desired.append(update.manifest)
            if download_state is DownloadState.PENDING and update.not_applied:
                notes.append(_download_kept_note(update))
        elif child["kind"] == "PersistentVolumeClaim" and _name_of(child) in claims:
            claim = claim_update(child, claims[_name_of(child)])
            desired.append(claim.manifest)
            if (note := claim.note()) is not None:
                notes.append(note)
        else:
            desired.append(child)
    return desired, tuple(notes)


def _download_kept_note(update: JobUpdate) -> str:
    """What a user who edited the spec while the download Job runs is told: the edit (a
    Secret's name fixed, say) does not reach it, and how to make it (decision 0218)."""
    metadata = update.manifest["metadata"]
    name, namespace = metadata["name"], metadata.get("namespace", "")
    kept = update.not_applied_told or ", ".join(update.not_applied)
    return (
        f"Not applied to the running download Job {name}, because a Job's pod template cannot "
        f"change after it is created: {kept}. The download goes on as it was created; delete "
        f"the Job (kubectl delete job -n {namespace} {name}) and the next one is made from "
        "the edited spec"
    )


def _download_configuration_kept_note(job: Mapping[str, Any], state: DownloadState) -> str:
    """What a user who edited what the download fetches (``storage.data.download``,
    ``storage.huggingFace.preCacheRepos``, their mount paths) once the download Job exists is
    told: its ConfigMap follows the spec, but the Job ran, or runs, with what it read when its
    pod started (decision 0248)."""
    metadata = job["metadata"]
    name, namespace = metadata["name"], metadata.get("namespace", "")
    edited = (
        "The download configuration was edited (storage.data.download, "
        "storage.huggingFace.preCacheRepos or their mount paths)"
    )
    if state is DownloadState.PENDING:
        return (
            f"{edited} while download Job {name} runs: it reads its configuration once, when "
            f"its pod starts, and may go on with the earlier one; delete the Job (kubectl "
            f"delete job -n {namespace} {name}) and the next one is made from the edited spec"
        )
    return (
        f"{edited} after download Job {name} finished: nothing more is downloaded, and the "
        "workload runs on what that download fetched. A download runs once; delete and "
        "re-create the workload to download what the spec says now"
    )


def _name_of(obj: Mapping[str, Any]) -> object:
    meta = obj.get("metadata")
    return meta.get("name") if isinstance(meta, Mapping) else None


def _spec_version(workload: Workload) -> tuple[object, ...]:
    """What identifies the part of a workload its children are built from.

    The API server bumps ``metadata.generation`` on every spec change (and on nothing else
    for a kind with a status subresource), so for one uid, with the labels and annotations,
    which are copied to the children, it names the spec exactly. Without a uid or a
    generation (a manifest planned offline) there is no such name, and the caller keys on
    the object itself. (Hand-made objects that reuse a uid and generation for another spec
    break that rule; no API server makes them.)
    """
    meta = workload.metadata
    return (
        meta.generation,
        tuple(sorted((meta.labels or {}).items())),
        tuple(sorted((meta.annotations or {}).items())),
    )


def _main_kind(workload: Workload) -> bool:
    """Whether the spec asks for a Ray child (a RayJob, or a RayService in an AppWrapper)."""
    if isinstance(workload, KaiwoJob):
        return workload.spec.is_ray_job
    return workload.spec.is_ray_service


def _marked_with_split(
    main: dict[str, Any], allocation: GpuAllocation, asked: int
) -> dict[str, Any]:
    """The main child with the ``spec.gpus`` its GPUs were split from by node size: what a
    later plan reads back to keep that split while the workload runs (decision 0137)."""
    marks = split_made_from(allocation, asked)
    if not marks or main["kind"] == "Job":  # a batch Job's one pod is never split by nodes
        return main
    # A RayJob on an existing cluster has no pods to split: spec.gpus sizes nothing (decision
    # 0159). One made with the mark before keeps it: a running RayJob's is kept as observed.
    if main["kind"] == "RayJob" and on_existing_ray_cluster(main):
        return main
    metadata = main["metadata"]
    return {
        **main,
        "metadata": {**metadata, "annotations": {**metadata.get("annotations", {}), **marks}},
    }


def _build_children(
    *,
    workload: Workload,
    allocation: GpuAllocation,
    config: KaiwoConfig | None,
    priority: PriorityChoice,
    namespace_config: AIMNamespaceConfig | None,
    download_state: DownloadState,
    gpu_taint_on_nodes: bool,
    recorded_gpu_taint_keys: tuple[str, ...],
    gpu_model_flavors: tuple[tuple[tuple[str, str], ...], ...] = (),
) -> _BuiltChildren:
    defaults = child_defaults(
        config,
        gpu_taint_on_nodes=gpu_taint_on_nodes,
        recorded_gpu_taint_keys=recorded_gpu_taint_keys,
    )
    namespace = namespace_settings(namespace_config, workload.metadata.namespace or "")
    inputs = _with_namespace_credentials(workload_inputs(workload, defaults, priority), namespace)
    identity = inputs.identity
    storage = inputs.storage

    storage_children = persistent_volume_claims(identity, storage, defaults)
    conditions: list[ChildCondition] = []
    waiting = failed = False
    if storage is not None and storage.has_downloads:
        env = [
            variable
            for variable in _workload_env(inputs, namespace)
            if variable.get("name") != "HF_HOME"
        ]
        storage_children += [
            download_config_map(identity, storage),
            download_job(
                identity,
                storage,
                env=env,
                dangerous=inputs.dangerous,
                pod_labels=inputs.pod_template_spec_labels,
                pull_secrets=image_pull_secrets(inputs, namespace),
            ),
        ]
        conditions.append(_download_condition(download_state, download_name(identity.name)))
        waiting = download_state is DownloadState.PENDING
        failed = download_state is DownloadState.FAILED

    main: dict[str, Any] | None = None
    others: list[dict[str, Any]] = []
    if not (waiting or failed):
        build = _job_children if identity.workload_type == "job" else _service_children
        main, *others = build(
            inputs,
            allocation=allocation,
            defaults=defaults,
            namespace=namespace,
            gpu_model_flavors=gpu_model_flavors,
        )
        main = _marked_with_split(main, allocation, workload.spec.gpus)
    return _BuiltChildren(
        storage=tuple(storage_children),
        main=main,
        main_ref=ObjectRef.of(main) if main is not None else None,
        others=tuple(others),
        conditions=tuple(conditions),
        notes=ignored_settings(
            inputs,
            workload.spec.storage,
            allocation=allocation,
            gpu_key=gpu_resource_key(
                inputs.gpu_vendor, default_key=defaults.default_gpu_resource_key
            ),
        ),
        waiting=waiting,
        failed=failed,
        selector=inventory_labels(identity.uid),
        origins=configuration_origins(
            inputs, defaults, namespace_config=namespace_config, config=config
        ),
    )
