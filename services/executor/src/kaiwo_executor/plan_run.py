"""The state of one plan being carried out, and the small readings of manifests its steps share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kaiwo_contracts.events.results import ActionOutcome
from kaiwo_contracts.plans import Plan
from kaiwo_kube.resources import NODE

from kaiwo_executor.apply_refusals import Refusal
from kaiwo_executor.child_ownership import NameConflict
from kaiwo_executor.execution_memo import OwnerMemo


@dataclass(slots=True)
class PlanRun:
    """The state of one plan being carried out."""

    plan: Plan
    fingerprint: str
    memo: OwnerMemo
    absent: frozenset[str]
    drifted: frozenset[str]
    desired_keys: frozenset[str]
    childless: bool = False
    """No executor ever acted for this owner: no child of ours can exist yet (the memo has no
    record of it, and it was created after the memo began to record owners)."""
    recreate: set[str] = field(default_factory=set)
    """Keys named ``absent`` whose manifest was applied before unchanged: create only."""
    replacing: frozenset[str] = frozenset()
    """Keys of desired objects the plan also deletes (``Plan.delete``): the old object goes
    first, the new one is created, never applied over the old (decision 0048)."""
    refusals: list[Refusal] = field(default_factory=list)
    """Desired objects the API server refused to apply for good (``ApplyRefused``)."""
    conflicts: list[NameConflict] = field(default_factory=list)
    """Objects holding a name the plan wants without being the owner's (never adopted)."""
    unread: set[str] = field(default_factory=set)
    """Keys whose name could not be checked (the read, or the apply that only creates,
    failed): reported, and not written this time."""
    created_first: dict[str, int] = field(default_factory=dict)
    """Keys created by the apply that checked their name (it only creates), and its
    attempts: written already, reported at their turn."""
    actions: list[ActionOutcome] = field(default_factory=list)
    must_retry: bool = False
    status_unwritten: bool = False
    """The plan's status was not written (planned from an older owner, or the write failed):
    the preemption that must follow it waits for the plan that writes it."""


def label_selector(labels: dict[str, str]) -> str:
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))


def is_node(manifest: dict[str, Any]) -> bool:
    return (manifest.get("apiVersion"), manifest.get("kind")) == (NODE.api_version, NODE.kind)
