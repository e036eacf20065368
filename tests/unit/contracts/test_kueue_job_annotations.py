"""Kueue 0.17's rules for its partial-admission annotations of a batch Job, given in a
KaiwoJob's ``spec.job`` (decision 0160): what Kueue's Job webhook refuses, or what passes it
and never runs, is refused with the KaiwoJob's spec, naming the field; what Kueue accepts and
runs is not. Expected values written by hand from Kueue's ``pkg/controller/jobs/job``."""

from __future__ import annotations

from typing import Any

import pytest
from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwojob import KaiwoJobSpec
from kaiwo_contracts.crds.kaiwo_v1alpha1.kueue_job_annotations import kueue_min_count
from pydantic import ValidationError

MIN = "kueue.x-k8s.io/job-min-parallelism"
EQUAL = "kueue.x-k8s.io/job-completions-equal-parallelism"
MIN_KEY = f'metadata.annotations["{MIN}"]'
EQUAL_KEY = f'metadata.annotations["{EQUAL}"]'


def job(annotations: dict[str, Any], **spec: Any) -> dict[str, Any]:
    made: dict[str, Any] = {"metadata": {"annotations": annotations}}
    if spec:
        made["spec"] = spec
    return made


def refusal(spec_job: dict[str, Any], **kaiwo: Any) -> tuple[str, str]:
    with pytest.raises(ValidationError) as raised:
        KaiwoJobSpec.model_validate({"job": spec_job, **kaiwo})
    [error] = raised.value.errors()
    assert error["loc"] == ("job",)
    return error["type"], error["msg"]


MIN_OUT_OF_RANGE = (
    ": Kueue admits the Job with no fewer pods than this, and starts it with fewer only when "
    "its queue has no room for all; "
)


@pytest.mark.parametrize(
    ("spec_job", "kind", "message"),
    [
        (
            job({MIN: "abc"}, parallelism=4, completions=4),
            "kueue_min_parallelism_not_a_number",
            f'{MIN_KEY} must be a whole number of pods, not "abc": the fewest pods Kueue may '
            "start the Job with",
        ),
        (
            job({MIN: ""}, parallelism=4),
            "kueue_min_parallelism_not_a_number",
            f'{MIN_KEY} must be a whole number of pods, not "": the fewest pods Kueue may '
            "start the Job with",
        ),
        (
            job({MIN: "2.0"}, parallelism=4),
            "kueue_min_parallelism_not_a_number",
            f'{MIN_KEY} must be a whole number of pods, not "2.0": the fewest pods Kueue may '
            "start the Job with",
        ),
        (
            job({MIN: "9223372036854775808"}, parallelism=4),
            "kueue_min_parallelism_not_a_number",
            f'{MIN_KEY} must be a whole number of pods, not "9223372036854775808": the fewest '
            "pods Kueue may start the Job with",
        ),
        (
            job({MIN: "4"}, parallelism=4, completions=4),
            "kueue_min_parallelism_out_of_range",
            f"{MIN_KEY} (4) must be at least 1 and below the 4 pods the Job runs at once "
            f"(spec.parallelism 4){MIN_OUT_OF_RANGE}give a number from 1 to 3",
        ),
        (
            job({MIN: "0"}, parallelism=4),
            "kueue_min_parallelism_out_of_range",
            f"{MIN_KEY} (0) must be at least 1 and below the 4 pods the Job runs at once "
            f"(spec.parallelism 4){MIN_OUT_OF_RANGE}give a number from 1 to 3",
        ),
        (
            job({MIN: "-1"}, parallelism=4),
            "kueue_min_parallelism_out_of_range",
            f"{MIN_KEY} (-1) must be at least 1 and below the 4 pods the Job runs at once "
            f"(spec.parallelism 4){MIN_OUT_OF_RANGE}give a number from 1 to 3",
        ),
        (
            # Kueue counts no more pods than completions: 2 here.
            job({MIN: "2"}, parallelism=4, completions=2),
            "kueue_min_parallelism_out_of_range",
            f"{MIN_KEY} (2) must be at least 1 and below the 2 pods the Job runs at once "
            f"(spec.completions 2, below spec.parallelism 4){MIN_OUT_OF_RANGE}give 1",
        ),
        (
            # No spec.job.spec: Kaiwo writes parallelism 1 (replicas do not size a Job).
            job({MIN: "1"}),
            "kueue_min_parallelism_out_of_range",
            f"{MIN_KEY} (1) must be at least 1 and below the 1 pod the Job runs at once "
            "(spec.parallelism not given: Kaiwo writes 1, spec.replicas does not size a Job)"
            f"{MIN_OUT_OF_RANGE}raise spec.parallelism (and spec.completions) or leave the "
            "annotation out",
        ),
        (
            # Passes Kueue's webhook (int32 of it is below 1), but the Workload's minCount is
            # then negative and refused: the Job waits for good.
            job({MIN: "2147483648"}, parallelism=4),
            "kueue_min_parallelism_out_of_range",
            f"{MIN_KEY} (2147483648) must be at least 1 and below the 4 pods the Job runs at "
            f"once (spec.parallelism 4){MIN_OUT_OF_RANGE}give a number from 1 to 3",
        ),
        (
            job({MIN: 2}, parallelism=4),
            "kueue_annotation_not_a_string",
            f"{MIN_KEY} must be a string (quote it in YAML): annotations of a Kubernetes "
            "object are strings, and Kueue reads no other",
        ),
        (
            job({EQUAL: True}, parallelism=2, completions=2, completionMode="Indexed"),
            "kueue_annotation_not_a_string",
            f"{EQUAL_KEY} must be a string (quote it in YAML): annotations of a Kubernetes "
            "object are strings, and Kueue reads no other",
        ),
        (
            job({EQUAL: "yes"}, parallelism=2, completions=2, completionMode="Indexed"),
            "kueue_completions_equal_parallelism_not_a_bool",
            f'{EQUAL_KEY} must be "true" or "false", not "yes"',
        ),
        (
            job({MIN: "2", EQUAL: "true"}, parallelism=4, completions=4),
            "kueue_completions_equal_parallelism_not_indexed",
            f'spec.completionMode must be Indexed with {EQUAL_KEY} "true": Kueue then sets the '
            "completions of the Job to the pods it admits, which Kubernetes lets change only "
            "for an Indexed Job whose completions equal its parallelism (left out, the mode is "
            "NonIndexed); set spec.completionMode: Indexed or leave the annotation out",
        ),
        (
            job({EQUAL: "T"}, parallelism=4, completions=4, completionMode="NonIndexed"),
            "kueue_completions_equal_parallelism_not_indexed",
            f'spec.completionMode must be Indexed with {EQUAL_KEY} "T": Kueue then sets the '
            "completions of the Job to the pods it admits, which Kubernetes lets change only "
            "for an Indexed Job whose completions equal its parallelism (left out, the mode is "
            "NonIndexed); set spec.completionMode: Indexed or leave the annotation out",
        ),
        (
            job({MIN: "1", EQUAL: "true"}, parallelism=2, completions=4, completionMode="Indexed"),
            "kueue_completions_equal_parallelism_unequal",
            f'spec.completions (4) must equal spec.parallelism (2) with {EQUAL_KEY} "true": '
            "Kueue keeps the completions equal to the pods it admits, and each index of the "
            "Job is one of its pods at once",
        ),
        (
            # parallelism left out is Kaiwo's 1.
            job({EQUAL: "1"}, completions=4, completionMode="Indexed"),
            "kueue_completions_equal_parallelism_unequal",
            f"spec.completions (4) must equal spec.parallelism (not given: 1) with {EQUAL_KEY} "
            '"1": Kueue keeps the completions equal to the pods it admits, and each index of '
            "the Job is one of its pods at once",
        ),
    ],
    ids=[
        "min-not-a-number",
        "min-empty",
        "min-decimal",
        "min-beyond-int64",
        "min-not-below-parallelism",
        "min-zero",
        "min-negative",
        "min-not-below-completions",
        "min-with-kaiwos-parallelism-1",
        "min-cut-to-32-bits-below-1",
        "min-not-a-string",
        "equal-not-a-string",
        "equal-not-a-bool",
        "equal-nonindexed-by-default",
        "equal-nonindexed-given",
        "equal-completions-differ",
        "equal-kaiwos-parallelism-1",
    ],
)
def test_what_kueue_refuses_of_its_job_annotations_is_refused_naming_the_field(
    spec_job: dict[str, Any], kind: str, message: str
) -> None:
    assert refusal(spec_job) == (kind, message)


@pytest.mark.parametrize(
    "spec_job",
    [
        job({MIN: "2"}, parallelism=4, completions=4),
        job({MIN: "3"}, parallelism=4),
        job({MIN: "+2"}, parallelism=4),  # Go's Atoi takes a sign
        job({MIN: "02"}, parallelism=4),
        job({MIN: "1"}, parallelism=4, completions=2),
        # int32 of 4294967298 is 2: Kueue takes it and admits with minCount 2.
        job({MIN: "4294967298"}, parallelism=4),
        job({MIN: "2", EQUAL: "true"}, parallelism=4, completions=4, completionMode="Indexed"),
        job({MIN: "2", EQUAL: "True"}, parallelism=4, completions=4, completionMode="Indexed"),
        # Without the minimum, Kueue never changes completions: an equal Indexed Job runs.
        job({EQUAL: "true"}, parallelism=2, completions=2, completionMode="Indexed"),
        # False (in any of Go's words) asks nothing.
        job({MIN: "2", EQUAL: "false"}, parallelism=4, completions=4),
        job({EQUAL: "0"}, parallelism=4, completions=8),
        job({"team": "a"}, parallelism=1),
        # A count the API server refuses is left to it (told in its own words).
        job({MIN: "2"}, parallelism="4"),
        {"spec": {"parallelism": 4}},
    ],
    ids=[
        "min-below-parallelism",
        "min-one-below",
        "min-signed",
        "min-leading-zero",
        "min-below-completions",
        "min-cut-to-32-bits-in-range",
        "both-indexed-equal",
        "both-go-true-word",
        "equal-alone-indexed",
        "equal-false",
        "equal-false-nonindexed-unequal",
        "other-annotations",
        "count-not-a-number",
        "no-annotations",
    ],
)
def test_what_kueue_accepts_and_runs_is_accepted(spec_job: dict[str, Any]) -> None:
    assert KaiwoJobSpec.model_validate({"job": spec_job}).job == spec_job


def test_a_ray_kaiwojobs_spec_job_makes_no_job_and_is_not_judged() -> None:
    spec_job = job({MIN: "4"}, parallelism=4)
    assert KaiwoJobSpec.model_validate({"job": spec_job, "ray": True}).job == spec_job


@pytest.mark.parametrize(
    ("given", "count"),
    [("2", 2), ("+2", 2), ("-3", -3), ("4294967298", 2), ("2147483648", -2147483648), ("x", None)],
)
def test_kueue_reads_the_minimum_as_a_32_bit_count(given: str, count: int | None) -> None:
    assert kueue_min_count(given) == count
