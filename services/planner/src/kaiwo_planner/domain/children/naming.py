"""Names of child objects and label values that Kubernetes accepts (RFC 1123)."""

from __future__ import annotations

import hashlib
import re

MAX_LABEL_LENGTH = 63

_OUTSIDE_ALPHABET = re.compile(r"[^a-z0-9.-]+")
_SEPARATOR_RUNS = re.compile(r"[-.]{2,}")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def rfc1123_label(value: str) -> str:
    """``value`` turned into a valid label value / DNS label (``test@amd.com`` -> ``test-amd.com``).

    Lower-cases, replaces every run of characters outside ``[a-z0-9.-]`` with ``-``, collapses
    runs of separators, trims separators at both ends and keeps at most 63 characters.
    """
    text = _OUTSIDE_ALPHABET.sub("-", value.lower())
    text = _SEPARATOR_RUNS.sub("-", text).strip("-.")
    return text[:MAX_LABEL_LENGTH].rstrip("-.")


def label_value(value: str) -> str:
    """``value`` when Kubernetes takes it as a label value, else :func:`rfc1123_label` of it
    (a GPU model cleaned from a product label may start with ``-`` or end with ``_``)."""
    if len(value) <= MAX_LABEL_LENGTH and _LABEL_VALUE.match(value):
        return value
    return rfc1123_label(value)


def child_name(workload_name: str, suffix: str) -> str:
    """The name of a child ``<workload>-<suffix>`` (``train-data``), at most 63 characters.

    When the workload name is too long the suffix is kept intact and a short hash of the full
    name replaces the cut tail, so two long names sharing a prefix still get distinct children
    (upstream truncates blindly, which can make ``-data`` and ``-hf`` collide).
    """
    full = rfc1123_label(f"{workload_name}-{suffix}")
    if len(f"{workload_name}-{suffix}") <= MAX_LABEL_LENGTH and full.endswith(suffix):
        return full
    digest = hashlib.sha256(workload_name.encode()).hexdigest()[:8]
    room = MAX_LABEL_LENGTH - len(suffix) - len(digest) - 2
    if room < 1:  # a suffix too long to keep whole (a node pool's shape of huge numbers)
        return bounded_label(f"{workload_name}-{suffix}", keep_valid=False)
    base = rfc1123_label(workload_name)[:room].rstrip("-.")
    return f"{base}-{digest}-{suffix}"


# ------------------------------------------------------------------ bounded to 63 characters

HASH_LENGTH = 8
_VALID_LABEL_VALUE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?")


def bounded_label(value: str, *, keep_valid: bool = True) -> str:
    """``value`` as a label value (and DNS label) of at most 63 characters, deterministic.

    A valid value of at most 63 characters is kept as it is (``keep_valid=False``: always
    cleaned as :func:`rfc1123_label` does, for the user label whose values were always
    cleaned). Anything else is cleaned (``test@amd.com`` -> ``test-amd.com``); when the
    cleaned text is still longer than 63 characters, its first 54 are kept and ``-`` plus the
    first 8 hex digits of the SHA-256 of the whole value are appended, the way Kubernetes'
    own controllers shorten generated names: two long values sharing a prefix stay distinct,
    and the same value always gives the same label. Every label the planner derives from a
    user's name and every selector matching one goes through this function.
    """
    if keep_valid and len(value) <= MAX_LABEL_LENGTH and _VALID_LABEL_VALUE.fullmatch(value):
        return value
    cleaned = _SEPARATOR_RUNS.sub("-", _OUTSIDE_ALPHABET.sub("-", value.lower())).strip("-.")
    if len(cleaned) <= MAX_LABEL_LENGTH:
        return cleaned
    digest = hashlib.sha256(value.encode()).hexdigest()[:HASH_LENGTH]
    return f"{cleaned[: MAX_LABEL_LENGTH - HASH_LENGTH - 1].rstrip('-.')}-{digest}"


def main_child_name(workload_name: str) -> str:
    """The name of a workload's main child (Job, RayJob, Deployment, Service, RayService,
    AppWrapper, HTTPRoute): the workload's own name, or :func:`bounded_label` of it when that
    is longer than 63 characters (a CR name may have 253; a Job's, a Service's may not)."""
    return bounded_label(workload_name)
