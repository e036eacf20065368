"""Which of a workload's conditions explains its failure: shared by the planner's public
``failed`` events and the CLI's failure lines. Plain constants, so that the CLI's quick
commands read them without importing the API models (pydantic)."""

from __future__ import annotations

from typing import Final

FAILURE_CONDITIONS: Final = (
    "Valid",
    "Schedulable",
    "DownloadJobSucceeded",
    "ChildHealthy",
    "ChildSpecApplied",
)
"""Conditions whose False explains a FAILED or ERROR phase, most telling first."""


def failure_rank(condition_type: str) -> int:
    """How telling a False ``condition_type`` is of a failure: its place in
    :data:`FAILURE_CONDITIONS`, after all of them for any other type (sort by it, take the
    first)."""
    try:
        return FAILURE_CONDITIONS.index(condition_type)
    except ValueError:
        return len(FAILURE_CONDITIONS)
