"""What of a changed KaiwoJob can still reach its existing batch Job.

A Job's pod template, selector and completion settings cannot change after creation (the API
server rejects the update), and ``suspend`` belongs to Kueue once the Job exists. So for an
existing Job the manifest to apply keeps the immutable fields as they are, or their observed
values where the desired ones differ, leaves
``suspend`` out (see :data:`KUEUE_OWNED_SPEC_FIELDS`), takes everything else from the new
desired Job, and the fields that could not be applied are reported so the workload's status
can say what was not applied and why.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kaiwo_planner.domain.children.labels import LABEL_PRIORITY_CLASS, LABEL_QUEUE_NAME
from kaiwo_planner.domain.children.partial_admission import (
    KUEUE_JOB_ANNOTATIONS,
    partially_admitted_counts,
)
from kaiwo_planner.domain.state.first_few import first_few
from kaiwo_planner.domain.state.json_trees import copy_tree
from kaiwo_planner.domain.state.manifest_comparison import differing_paths, removed_paths
from kaiwo_planner.domain.state.planning_context import PlanningContext

IMMUTABLE_JOB_SPEC_FIELDS = (
    "template",
    "selector",
    "manualSelector",
    "completions",
    "completionMode",
    "podFailurePolicy",
    "successPolicy",
    "backoffLimitPerIndex",
    "maxFailedIndexes",
)
KUEUE_OWNED_SPEC_FIELDS = ("suspend",)
"""Left out of the manifest of an existing child: the executor created it suspended under
field manager ``kaiwo-create`` (see ``kaiwo_contracts.plans``), so leaving the field out of
later applies never takes it away; Kueue unsuspends (and suspends) it from then on. Copying the
observed value instead made every plan made from an older observation flip the Job back: on a
real API server the Job controller answered each flip with a status write, and the operator
flipped ``suspend`` ten times a second."""

CONDITION_TYPE = "ChildSpecApplied"
REASON_IMMUTABLE = "JobFieldsImmutable"
REASON_REPLACING = "Replacing"


@dataclass(frozen=True, slots=True)
class JobUpdate:
    """The manifest to apply to an existing Job, and the desired changes it had to leave out:
    immutable spec fields, and Kueue's labels that Kueue's admission holds
    (:func:`kueue_label_update`)."""

    manifest: dict[str, Any]
    not_applied: tuple[str, ...]
    labels_not_applied: tuple[str, ...] = ()
    not_applied_told: str = ""
    """``not_applied`` as the message names them, with the configuration each comes from
    (:func:`~kaiwo_planner.domain.children.change_causes.kept_paths_text`); empty: the
    paths as they are."""
    annotations_not_applied: tuple[str, ...] = ()
    """Kueue's Job annotations a running Job keeps (:func:`kueue_annotation_update`), each
    told with the value kept and the one asked."""

    @property
    def anything_kept(self) -> bool:
        """Some desired change is left out of :attr:`manifest`."""
        return bool(self.not_applied or self.labels_not_applied or self.annotations_not_applied)

    @property
    def message(self) -> str:
        if not self.anything_kept:
            return ""
        reasons = []
        if self.not_applied:
            reasons.append(
                "a Job's pod template, selector and completion settings cannot change after "
                "it is created: " + (self.not_applied_told or ", ".join(self.not_applied))
            )
        if self.labels_not_applied:
            reasons.append(KUEUE_LABELS_HELD + ", ".join(self.labels_not_applied))
        if self.annotations_not_applied:
            reasons.append(KUEUE_ANNOTATIONS_HELD + ", ".join(self.annotations_not_applied))
        return not_applied_message("Job", reasons, recreate="KaiwoJob")


def waits_in_its_queue(observed: Mapping[str, Any], *, admitted: bool = False) -> bool:
    """Whether the Kueue-managed child ``observed`` (Job, RayJob, AppWrapper) waits in its
    queue: suspended (Kueue's webhook creates it so, a preemption suspends it again), and its
    Kueue Workload not ``admitted``. Nothing of it runs, so it can take an edit it could not
    take running, or be replaced to take it (decision 0129).

    Kueue admits the Workload before it unsuspends the child, so an admitted Workload beside a
    child still observed suspended means the child is starting (its newer version not observed
    yet): treated as running, an edit is not applied to it as to a waiting one."""
    spec = observed.get("spec")
    return not admitted and isinstance(spec, Mapping) and spec.get("suspend") is True


def replacing_message(kind: str, paths: Sequence[str], *, shown: int = 3, told: str = "") -> str:
    """What the ``ChildSpecApplied`` condition says while a waiting child of ``kind`` is
    replaced to take the edit of ``paths`` (the first few named: a new image names every
    container's), or of ``told`` (the first few already named with their causes)."""
    listed = told or first_few(paths, shown=shown)
    return (
        f"The {kind} waiting in its queue is replaced by one made from the edited spec "
        f"({listed}), which waits in the queue anew"
    )


def not_applied_message(kind: str, reasons: Iterable[str], *, recreate: str) -> str:
    """What the ``ChildSpecApplied`` condition says of an existing child of ``kind`` that
    kept some of what the spec asks, for ``reasons`` (each naming the fields it kept)."""
    return (
        f"Not applied to the existing {kind}, because "
        + "; and ".join(reasons)
        + f". Delete and re-create the {recreate} to run with these changes."
    )


KUEUE_LABELS_HELD = (
    "Kueue keeps a running workload in its queue and without a priority class it started "
    "without, and never takes a priority class away: "
)


def kueue_label_update(
    desired: dict[str, Any], observed: Mapping[str, Any], *, running: bool | None = None
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """``desired`` (a Kueue-managed child: Job, RayJob, AppWrapper) with Kueue's labels as
    Kueue's admission webhook lets them change on ``observed``, and the label paths kept.

    The webhook refuses the whole update when it changes ``kueue.x-k8s.io/queue-name`` of a
    child that is not suspended (admitted), adds ``kueue.x-k8s.io/priority-class`` to one, or
    removes that label from any child. Applied as desired, an edit of ``clusterQueue`` or
    ``priorityClass`` at the wrong moment was refused on every plan (``ApplyRefused``), and
    the rest of the update with it. So the observed value is kept (or the label left out)
    and named instead. ``desired`` is not modified (it is returned itself when all applies).

    ``running`` says whether Kueue counts ``observed`` as admitted; by default, when its
    ``spec.suspend`` is not true (a Deployment has no ``suspend``: its caller says).
    """
    meta = observed.get("metadata")
    observed_labels = meta.get("labels") if isinstance(meta, Mapping) else None
    if not isinstance(observed_labels, Mapping):
        observed_labels = {}
    if running is None:
        spec = observed.get("spec")
        running = not (isinstance(spec, Mapping) and spec.get("suspend") is True)
    labels = dict((desired.get("metadata") or {}).get("labels") or {})
    kept: list[str] = []
    queue = observed_labels.get(LABEL_QUEUE_NAME)
    if running and queue is not None and labels.get(LABEL_QUEUE_NAME) != queue:
        labels[LABEL_QUEUE_NAME] = queue
        kept.append(f"metadata.labels[{LABEL_QUEUE_NAME}]")
    priority = observed_labels.get(LABEL_PRIORITY_CLASS)
    wanted = labels.get(LABEL_PRIORITY_CLASS)
    if priority and not wanted:
        labels[LABEL_PRIORITY_CLASS] = priority
        kept.append(f"metadata.labels[{LABEL_PRIORITY_CLASS}]")
    elif running and not priority and wanted:
        del labels[LABEL_PRIORITY_CLASS]
        kept.append(f"metadata.labels[{LABEL_PRIORITY_CLASS}]")
    if not kept:
        return desired, ()
    return {**desired, "metadata": {**desired["metadata"], "labels": labels}}, tuple(kept)


KUEUE_ANNOTATIONS_HELD = (
    "Kueue stops a running Job and queues it anew when its minimum of pods changes, and "
    "refuses a change of whether its completions follow its parallelism while it runs: "
)


def kueue_annotation_update(
    desired: dict[str, Any], observed: Mapping[str, Any], *, running: bool
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """``desired`` (a batch Job) with Kueue's Job annotations (:data:`KUEUE_JOB_ANNOTATIONS`)
    as the ``observed`` Job has them while it ``running``, and the kept ones told.

    Kueue 0.17 compares a running Job's ``kueue.x-k8s.io/job-min-parallelism`` (the Workload's
    ``minCount``) with its Workload: once it differs, Kueue suspends the Job, deletes the
    Workload and queues a new one, so every pod starts again (measured: the edit applied
    restarted a running sweep without a word). Its Job webhook refuses any change of
    ``kueue.x-k8s.io/job-completions-equal-parallelism`` while the Job is not suspended, and
    the whole update with it. So a running Job keeps both as it has them, as a running RayJob
    keeps its spec (decision 0123); a waiting one takes them (Kueue updates its Workload, and
    judges them as at creation, which the spec's validator does, decision 0160). Compared as
    written: a new spelling of the same minimum is judged again by the webhook against the
    pods Kueue admitted. ``desired`` is not modified (returned itself when all applies)."""
    if not running:
        return desired, ()
    meta = observed.get("metadata")
    held = meta.get("annotations") if isinstance(meta, Mapping) else None
    if not isinstance(held, Mapping):
        held = {}
    annotations = dict((desired.get("metadata") or {}).get("annotations") or {})
    kept: list[str] = []
    for key in KUEUE_JOB_ANNOTATIONS:
        had, asked = held.get(key), annotations.get(key)
        if had == asked:
            continue
        if isinstance(had, str):
            annotations[key] = had
        else:
            annotations.pop(key, None)
        kept.append(f"metadata.annotations[{key}] ({_quoted(had)} kept, {_quoted(asked)} asked)")
    if not kept:
        return desired, ()
    metadata = {**desired["metadata"], "annotations": annotations}
    if not annotations:
        del metadata["annotations"]
    return {**desired, "metadata": metadata}, tuple(kept)


def _quoted(value: object) -> str:
    return f'"{value}"' if isinstance(value, str) else "none"


def job_update(
    desired: Mapping[str, Any], observed: Mapping[str, Any], *, admitted: bool = False
) -> JobUpdate:
    """The part of ``desired`` that can be applied to the ``observed`` Job, and what cannot.

    ``admitted``: Kueue has admitted the Job's Workload, so a Job still observed suspended is
    starting, and Kueue's label rules for a running Job apply (decision 0129)."""
    return _with_kueue_metadata(_spec_update(desired, observed), observed, admitted=admitted)


def _spec_update(desired: Mapping[str, Any], observed: Mapping[str, Any]) -> JobUpdate:
    """The spec part of :func:`job_update`, which does not depend on ``admitted``: the
    comparison of the templates, its largest cost."""
    # Only the top level and spec change: the rest is shared with ``desired``, which nothing
    # mutates afterwards (copying the whole Job was the largest cost of planning one).
    manifest = dict(desired)
    spec = manifest["spec"] = dict(manifest.get("spec") or {})
    observed_spec = observed.get("spec")
    if not isinstance(observed_spec, Mapping):  # damaged (a list, a string): nothing observed
        observed_spec = {}
    # Kueue's while the Job runs partially admitted: its webhook refuses any change of
    # parallelism (0153), and completions kept equal to it are its too (0157).
    spec.update(partially_admitted_counts(observed))
    not_applied = keep_observed_fields(spec, observed_spec, IMMUTABLE_JOB_SPEC_FIELDS)
    if "template" in spec and any(p.startswith("spec.template") for p in not_applied):
        spec["template"] = _without_job_controller_labels(spec["template"])
    for field_name in KUEUE_OWNED_SPEC_FIELDS:
        spec.pop(field_name, None)
    return JobUpdate(manifest=manifest, not_applied=tuple(not_applied))


def _with_kueue_metadata(
    spec_update: JobUpdate, observed: Mapping[str, Any], *, admitted: bool
) -> JobUpdate:
    """``spec_update`` with Kueue's labels and annotations kept where Kueue owns them now."""
    manifest, labels_kept = kueue_label_update(
        spec_update.manifest, observed, running=True if admitted else None
    )
    manifest, annotations_kept = kueue_annotation_update(
        manifest, observed, running=not waits_in_its_queue(observed, admitted=admitted)
    )
    return JobUpdate(
        manifest=manifest,
        not_applied=spec_update.not_applied,
        labels_not_applied=labels_kept,
        annotations_not_applied=annotations_kept,
    )


JOB_CONTROLLER_TEMPLATE_LABELS = (
    "controller-uid",
    "job-name",
    "batch.kubernetes.io/controller-uid",
    "batch.kubernetes.io/job-name",
)
"""Labels the API server puts on a Job's pod template when it creates the Job, owned by no
field manager. Sent back in a kept template they became the operator's; once the template
was the desired one again (the edit undone) the apply took them away, which the API server
refuses ("must be '<uid>'") on every plan (decision 0131)."""


def _without_job_controller_labels(template: Any) -> Any:
    if not isinstance(template, Mapping):
        return template
    metadata = template.get("metadata")
    if not isinstance(metadata, Mapping):
        return template
    labels = metadata.get("labels")
    if not isinstance(labels, Mapping) or not any(
        key in labels for key in JOB_CONTROLLER_TEMPLATE_LABELS
    ):
        return template
    kept = {k: v for k, v in labels.items() if k not in JOB_CONTROLLER_TEMPLATE_LABELS}
    return {**template, "metadata": {**metadata, "labels": kept}}


def keep_observed_fields(
    spec: dict[str, Any], observed_spec: Mapping[str, Any], names: Iterable[str]
) -> list[str]:
    """Put back into ``spec`` (modified) the observed value of each of ``names`` whose
    desired value differs from it, or leave the field out where none is observed; returns
    the desired paths so left out.

    A desired value differs too when it drops an item of a pod's named lists that the
    observed one holds (:func:`removed_paths`): the observed object holds more than was
    asked anyway, so the removal would not be seen, and the apply would take the item away
    (refused by the API server for a Job's template; for a running RayJob, a restart)."""
    not_applied: list[str] = []
    for field_name in names:
        if field_name not in spec:
            continue
        observed_value = observed_spec.get(field_name)
        path = f"spec.{field_name}"
        differing = differing_paths(observed_value, spec[field_name], path=path)
        differing += [
            removed
            for removed in removed_paths(observed_value, spec[field_name], path=path)
            if not any(removed.startswith((d + ".", d + "[")) for d in differing)
        ]
        if not differing:
            # As created (the server's defaults aside): the manifest keeps its own bytes, so
            # the executor finds it applied already and writes nothing.
            continue
        not_applied += differing
        if field_name in observed_spec:
            spec[field_name] = copy_tree(observed_spec[field_name])
        else:
            spec.pop(field_name, None)
    return not_applied


def existing_job_update(
    desired: dict[str, Any],
    observed: Mapping[str, Any] | None,
    context: PlanningContext | None = None,
    *,
    admitted: bool = False,
) -> JobUpdate:
    """:func:`job_update` of a Job that may not exist yet (``observed`` None: ``desired``
    whole), kept in ``context`` when one is given (:func:`job_update_in`)."""
    if observed is None:
        return JobUpdate(manifest=desired, not_applied=())
    if context is None:
        return job_update(desired, observed, admitted=admitted)
    return job_update_in(context, desired, observed, admitted=admitted)


_ABSENT = object()


def job_update_in(
    context: PlanningContext,
    desired: Mapping[str, Any],
    observed: Mapping[str, Any],
    *,
    admitted: bool = False,
) -> JobUpdate:
    """:func:`job_update`, kept in ``context`` for the observed Job's spec version.

    Comparing the desired template with the observed one is the largest cost of planning a
    KaiwoJob whose Job exists, and most of its plans come from a status that moved (the
    Job's, the Workload's, the KaiwoJob's) while neither spec did. The value is kept while
    ``desired`` is the very same object (children are kept per spec version, see
    ``plan_children``) and the observed Job has the same uid and ``metadata.generation``
    (the API server bumps it on every spec change of a kind with a status subresource) and
    equal immutable fields (checked too, so a hand-made observation that changes them
    without a new generation is compared afresh), and the same ``admitted``; the templates'
    comparison is kept for both values of ``admitted``. The manifest is shared: not
    modified.
    """
    version = spec_version_of(observed)
    if version is None:
        return job_update(desired, observed, admitted=admitted)
    uid, generation = version
    fields = _immutable_fields(observed)

    def spec_update() -> JobUpdate:
        # Kept apart from ``admitted``, which flips once in a Job's life and leaves the
        # templates compared as they were.
        held, update = context.owner_value(
            ("job-spec-update", uid, generation),
            (desired,),
            lambda: (fields, _spec_update(desired, observed)),
        )
        return update if held == fields else _spec_update(desired, observed)

    held_fields, update = context.owner_value(
        ("job-update", uid, generation, admitted),
        (desired,),
        lambda: (fields, _with_kueue_metadata(spec_update(), observed, admitted=admitted)),
    )
    if held_fields != fields:  # changed without a new generation: a label, or hand-made
        return job_update(desired, observed, admitted=admitted)
    return update


def spec_version_of(observed: Mapping[str, Any]) -> tuple[str, int] | None:
    """The uid and ``metadata.generation`` of an observed child, which together name its spec
    (the API server bumps the generation on every spec change of a kind with a status
    subresource); None without them (a hand-made observation): nothing is kept for it."""
    meta = observed.get("metadata")
    if not isinstance(meta, Mapping):
        return None
    uid, generation = meta.get("uid"), meta.get("generation")
    if not isinstance(uid, str) or not uid or not isinstance(generation, int):
        return None
    return uid, generation


def _immutable_fields(observed: Mapping[str, Any]) -> tuple[object, ...]:
    """What an update of ``observed`` is decided from: its immutable fields, and Kueue's
    labels and Job annotations (which change without a new generation)."""
    spec = observed.get("spec")
    meta = observed.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    kueue_labels = tuple(
        labels.get(name) if isinstance(labels, Mapping) else None
        for name in (LABEL_QUEUE_NAME, LABEL_PRIORITY_CLASS)
    ) + tuple(
        annotations.get(name) if isinstance(annotations, Mapping) else None
        for name in KUEUE_JOB_ANNOTATIONS
    )
    if not isinstance(spec, Mapping):
        return kueue_labels
    return (*kueue_labels, *(spec.get(name, _ABSENT) for name in IMMUTABLE_JOB_SPEC_FIELDS))
