"""Kueue's partial admission of a KaiwoJob's batch Job (decision 0153).

A Job annotated ``kueue.x-k8s.io/job-min-parallelism`` may be admitted with fewer pods than
its ``parallelism`` (no fewer than the annotation) when its queue has no room for all: Kueue
lowers ``spec.parallelism`` to the pods it admitted as it unsuspends the Job, its webhook
refuses any change of ``parallelism`` while the Job runs, and it puts the Job's own count back
when it suspends the Job again. While the Job runs, its observed ``parallelism`` is therefore
the pods Kueue admitted and reserves quota for.

Before the Job is made, the annotation in the KaiwoJob's ``spec.job`` says the fewest pods
Kueue may start it with (:func:`partial_admission_min_pods`): the cluster-size check of
``Schedulable`` holds the Job to that minimum width, not to every pod it asks for (decision
0155).

A Job also annotated ``kueue.x-k8s.io/job-completions-equal-parallelism: "true"`` (an Indexed
Job whose every index is one of its pods) gets ``completions`` set to the admitted pods as
well, and back with ``parallelism`` when suspended again (decision 0157): while it runs so,
both counts are Kueue's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kaiwo_contracts.crds.kaiwo_v1alpha1.kueue_job_annotations import (
    GO_TRUE,
    JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION,
    JOB_MIN_PARALLELISM_ANNOTATION,
    KUEUE_JOB_ANNOTATIONS,
    kueue_min_count,
)

__all__ = [
    "JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION",
    "JOB_MIN_PARALLELISM_ANNOTATION",
    "KUEUE_JOB_ANNOTATIONS",
    "kueue_job_annotations",
    "partial_admission_min_pods",
    "partially_admitted_counts",
    "partially_admitted_parallelism",
]


def kueue_job_annotations(job: Any) -> dict[str, str]:
    """The annotations of the user's ``spec.job`` (wire form, read defensively) that Kueue
    reads from the Job itself: those of a partial admission (:data:`KUEUE_JOB_ANNOTATIONS`).
    The rest of the embedded Job's metadata stays ignored, as upstream ignores it."""
    metadata = job.get("metadata") if isinstance(job, Mapping) else None
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    if not isinstance(annotations, Mapping):
        return {}
    return {
        key: given
        for key in KUEUE_JOB_ANNOTATIONS
        if isinstance(given := annotations.get(key), str)
    }


def partial_admission_min_pods(job: Any, pods: int) -> int | None:
    """The fewest of its ``pods`` (:func:`~kaiwo_planner.domain.scheduling.gpu_allocation.job_pods`)
    Kueue may admit the Job of a KaiwoJob whose ``spec.job`` is ``job`` (wire form, read
    defensively) with: the annotation :data:`JOB_MIN_PARALLELISM_ANNOTATION`, when it is a
    whole number that Kueue 0.17's Job webhook accepts, ``1..pods-1`` (as Kueue reads it,
    :func:`~kaiwo_contracts.crds.kaiwo_v1alpha1.kueue_job_annotations.kueue_min_count`). None
    otherwise: the Job runs every pod or none (a value the webhook refuses is refused with the
    spec, decision 0160)."""
    given = kueue_job_annotations(job).get(JOB_MIN_PARALLELISM_ANNOTATION)
    minimum = None if given is None else kueue_min_count(given)
    return minimum if minimum is not None and 1 <= minimum < pods else None


def partially_admitted_counts(observed: Mapping[str, Any]) -> dict[str, int]:
    """The counts Kueue set on the ``observed`` Job as it runs partially admitted: its
    ``parallelism`` (:func:`partially_admitted_parallelism`), and its ``completions`` too when
    the Job keeps them equal (:data:`JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION`, decision
    0157). Empty while the operator's counts hold."""
    parallelism = partially_admitted_parallelism(observed)
    if parallelism is None:
        return {}
    annotations = observed["metadata"]["annotations"]
    if annotations.get(JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION) not in GO_TRUE:
        return {"parallelism": parallelism}
    completions = observed["spec"].get("completions")
    if isinstance(completions, bool) or not isinstance(completions, int):
        return {"parallelism": parallelism}
    return {"parallelism": parallelism, "completions": completions}


def partially_admitted_parallelism(observed: Mapping[str, Any]) -> int | None:
    """The parallelism Kueue runs the ``observed`` Job with, when the Job may be admitted
    partially and runs (not suspended): Kueue set it on admission, to the pods it admitted.
    None otherwise: the operator's ``parallelism`` holds."""
    if observed.get("kind") not in (None, "Job"):
        return None
    meta = observed.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    if not isinstance(annotations, Mapping) or JOB_MIN_PARALLELISM_ANNOTATION not in annotations:
        return None
    spec = observed.get("spec")
    if not isinstance(spec, Mapping) or spec.get("suspend") is True:
        return None
    parallelism = spec.get("parallelism")
    if isinstance(parallelism, bool) or not isinstance(parallelism, int):
        return None
    return parallelism
