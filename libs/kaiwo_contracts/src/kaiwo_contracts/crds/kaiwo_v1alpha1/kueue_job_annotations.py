"""Kueue's partial-admission annotations of a batch Job, given in a KaiwoJob's ``spec.job``
(decisions 0153, 0157, 0160), and what Kueue 0.17 refuses of them.

Kaiwo carries both annotations from ``spec.job.metadata.annotations`` onto the Job. Kueue's
Job webhook (``pkg/controller/jobs/job``, ``validatePartialAdmissionCreate`` and
``validateSyncCompletionCreate``) refuses the Job when:

- ``kueue.x-k8s.io/job-min-parallelism`` is not a whole number Go's ``strconv.Atoi`` reads, or
  is not ``1..pods-1``, where ``pods`` is the Job's ``parallelism``, no more than its
  ``completions`` (Kueue compares the number cut to 32 bits, so a number above 2147483647
  whose cut is 0 or less passes the webhook, but the Workload's ``minCount`` is then below 1
  and the Workload is never made: the Job waits for good);
- ``kueue.x-k8s.io/job-completions-equal-parallelism`` is not a word Go's ``strconv.ParseBool``
  reads, or is true while the Job is not Indexed (``completionMode`` left out is NonIndexed),
  or while its ``completions`` differ from its ``parallelism`` (each 1 when left out).

A refused Job is never made: the KaiwoJob waits PENDING for good, told only by
``ApplyRefused`` with Kueue's words. :func:`kueue_job_annotation_refusal` says the same before
anything is sent, naming the KaiwoJob's fields. Counts not given are those Kaiwo writes:
``parallelism`` 1 (``replicas`` does not size a Job), ``completions`` none.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

JOB_MIN_PARALLELISM_ANNOTATION = "kueue.x-k8s.io/job-min-parallelism"
"""Kueue's partial admission of a Job: it may admit (and run) as few pods as this when the
queue has no room for ``parallelism``."""

JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION = "kueue.x-k8s.io/job-completions-equal-parallelism"
"""Kueue's partial admission of a Job: when true, the ``completions`` of the Job follow the
``parallelism`` Kueue admits it with."""

KUEUE_JOB_ANNOTATIONS = (
    JOB_MIN_PARALLELISM_ANNOTATION,
    JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION,
)

GO_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
"""What Go's ``strconv.ParseBool`` takes for true."""

GO_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})
"""What Go's ``strconv.ParseBool`` takes for false."""

_GO_INT = re.compile(r"[+-]?[0-9]+")
"""What Go's ``strconv.Atoi`` reads (base 10, a sign, no spaces or underscores, which
Python's ``int`` also takes)."""

_INT64 = 1 << 63


def go_atoi(given: str) -> int | None:
    """``given`` as Go's ``strconv.Atoi`` reads it on a 64-bit machine; None where it fails."""
    if not _GO_INT.fullmatch(given):
        return None
    value = int(given)
    return value if -_INT64 <= value < _INT64 else None


def kueue_min_count(given: str) -> int | None:
    """The ``minCount`` Kueue 0.17 gives the Job's pod set for the annotation value ``given``
    (``int32(strconv.Atoi(given))``); None where ``Atoi`` fails (no partial admission)."""
    value = go_atoi(given)
    if value is None:
        return None
    cut = value & 0xFFFFFFFF
    return cut - (1 << 32) if cut >= 1 << 31 else cut


def _key(annotation: str) -> str:
    return f'metadata.annotations["{annotation}"]'


def _count(spec: Mapping[str, Any], field: str) -> int | None:
    value = spec.get(field)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def kueue_job_annotation_refusal(job: Any) -> tuple[str, str] | None:
    """Why Kueue would refuse (or could never run) the Job made of ``job`` (a KaiwoJob's
    ``spec.job``, wire form, read defensively) for its partial-admission annotations: an error
    kind and a message naming the fields of ``spec.job``. None when Kueue takes it, or when a
    count is not a whole number (the API server refuses that, in its own words)."""
    metadata = job.get("metadata") if isinstance(job, Mapping) else None
    annotations = metadata.get("annotations") if isinstance(metadata, Mapping) else None
    if not isinstance(annotations, Mapping):
        return None
    spec = job.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    if any(field in spec and _count(spec, field) is None for field in _COUNTS):
        return None
    parallelism, completions = (_count(spec, field) for field in _COUNTS)
    refusals = (
        _not_a_string(annotations),
        _min_parallelism_refusal(
            annotations.get(JOB_MIN_PARALLELISM_ANNOTATION), parallelism, completions
        ),
        _completions_equal_parallelism_refusal(
            annotations.get(JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION),
            spec.get("completionMode"),
            parallelism,
            completions,
        ),
    )
    return next((refused for refused in refusals if refused is not None), None)


_COUNTS = ("parallelism", "completions")


def _not_a_string(annotations: Mapping[str, Any]) -> tuple[str, str] | None:
    for annotation in KUEUE_JOB_ANNOTATIONS:
        if annotation in annotations and not isinstance(annotations[annotation], str):
            return (
                "kueue_annotation_not_a_string",
                f"{_key(annotation)} must be a string (quote it in YAML): annotations of a "
                "Kubernetes object are strings, and Kueue reads no other",
            )
    return None


def _min_parallelism_refusal(
    given: Any, parallelism: int | None, completions: int | None
) -> tuple[str, str] | None:
    """``parallelism`` None: not given (Kaiwo writes 1)."""
    if not isinstance(given, str):
        return None
    key = _key(JOB_MIN_PARALLELISM_ANNOTATION)
    value = go_atoi(given)
    if value is None:
        return (
            "kueue_min_parallelism_not_a_number",
            f'{key} must be a whole number of pods, not "{given}": the fewest pods Kueue may '
            "start the Job with",
        )
    at_once = 1 if parallelism is None else parallelism
    pods = at_once if completions is None else min(at_once, completions)
    minimum = kueue_min_count(given)
    if value > 0 and minimum is not None and 1 <= minimum < pods:
        return None
    return (
        "kueue_min_parallelism_out_of_range",
        f"{key} ({given}) must be at least 1 and below the {_runs(pods, parallelism, completions)}"
        ": Kueue admits the Job with no fewer pods than this, and starts it with fewer only "
        f"when its queue has no room for all; {_min_advice(pods)}",
    )


def _runs(pods: int, parallelism: int | None, completions: int | None) -> str:
    """The pods the Job runs at once and the fields that say so (``parallelism`` None: not
    given)."""
    counted = f"{pods} pod{'' if pods == 1 else 's'} the Job runs at once"
    if parallelism is None:
        return (
            f"{counted} (spec.parallelism not given: Kaiwo writes 1, spec.replicas does not "
            "size a Job)"
        )
    if completions is not None and completions < parallelism:
        return f"{counted} (spec.completions {completions}, below spec.parallelism {parallelism})"
    return f"{counted} (spec.parallelism {parallelism})"


def _min_advice(pods: int) -> str:
    if pods <= 1:
        return "raise spec.parallelism (and spec.completions) or leave the annotation out"
    return "give 1" if pods == 2 else f"give a number from 1 to {pods - 1}"


def _completions_equal_parallelism_refusal(
    given: Any, mode: Any, parallelism: int | None, completions: int | None
) -> tuple[str, str] | None:
    """``parallelism`` None: not given (Kaiwo writes 1)."""
    key = _key(JOB_COMPLETIONS_EQUAL_PARALLELISM_ANNOTATION)
    if not isinstance(given, str) or given in GO_FALSE:
        return None
    if given not in GO_TRUE:
        return (
            "kueue_completions_equal_parallelism_not_a_bool",
            f'{key} must be "true" or "false", not "{given}"',
        )
    if mode is None or mode == "NonIndexed":
        return (
            "kueue_completions_equal_parallelism_not_indexed",
            f'spec.completionMode must be Indexed with {key} "{given}": Kueue then sets the '
            "completions of the Job to the pods it admits, which Kubernetes lets change only "
            "for an Indexed Job whose completions equal its parallelism (left out, the mode "
            "is NonIndexed); set spec.completionMode: Indexed or leave the annotation out",
        )
    if mode != "Indexed":
        return None
    if (1 if completions is None else completions) != (1 if parallelism is None else parallelism):
        return (
            "kueue_completions_equal_parallelism_unequal",
            f"spec.completions ({_shown(completions)}) must equal spec.parallelism "
            f"({_shown(parallelism)}) with "
            f'{key} "{given}": Kueue keeps the completions equal to the pods it admits, and '
            "each index of the Job is one of its pods at once",
        )
    return None


def _shown(count: int | None) -> str:
    return "not given: 1" if count is None else str(count)
