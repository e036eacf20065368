"""``kaiwo plan``'s output: each child object as a YAML document with a ``# Source:`` comment,
then the owner's status and Events; or the plans as JSON."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import yaml
from kaiwo_planner.domain.planning import PlanningResult

from kaiwo_cli.offline_cluster import (
    Document,
    OfflineCluster,
)

_NO_PLAN_REASONS = {
    "KaiwoConfig": (
        "owns no objects; it changes how KaiwoJobs, KaiwoServices and the KaiwoQueueConfig "
        "are planned (pass it with --config)"
    ),
    "AIMNamespaceConfig": (
        "owns no objects; it changes the workloads of its namespace (pull secrets, "
        "credentials, an HTTPRoute per KaiwoService)"
    ),
}


class _ReadableDumper(yaml.SafeDumper):
    """Multi-line strings (entrypoints, config files) as literal blocks."""


def _represent_text(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_ReadableDumper.add_representer(str, _represent_text)


def _yaml(value: Any) -> str:
    return yaml.dump(
        value, Dumper=_ReadableDumper, sort_keys=False, default_flow_style=False, width=100
    )


def display_name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    where = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{obj.get('kind')} {where}{meta.get('name')}"


def _header(document: Document, filled: Sequence[str], assumptions: Sequence[str]) -> list[str]:
    lines = [f"# Plan for {display_name(document.content)} ({document.source})"]
    lines += [f"#   {note}" for note in filled]
    lines += [f"#   {note}" for note in assumptions]
    return lines


def as_yaml(results: Sequence[tuple[Document, PlanningResult]], cluster: OfflineCluster) -> str:
    out: list[str] = []
    for document, result in results:
        out += _header(document, cluster.filled.get(document.source, []), cluster.assumptions)
        plan = result.plan
        owner = document.content
        if plan is None:
            reason = _NO_PLAN_REASONS.get(str(owner.get("kind")), "owns no objects")
            out.append(f"# {display_name(owner)}: {reason}")
            continue
        for desired in plan.desired:
            out += ["---", f"# Source: {display_name(owner)} -> {display_name(desired)}"]
            out.append(_yaml(desired).rstrip("\n"))
        for shared in plan.shared:
            out += ["---", f"# Shared: {display_name(owner)} -> {display_name(shared)}"]
            out += ["# (created when missing, used by others too, never updated or deleted)"]
            out.append(_yaml(shared).rstrip("\n"))
        out += ["---", f"# Status of {display_name(owner)} (written to its status)"]
        out += [f"# Event {e.type} {e.reason}: {e.message}" for e in plan.events]
        out += [f"# Deletes {ref.display()} (uid {ref.uid})" for ref in plan.delete]
        out += [
            f"# Takes {', '.join(r.finalizers)} off {r.target.display()} to let it go"
            for r in plan.release_finalizers
        ]
        if plan.finalizers is not None:
            listed = ", ".join(plan.finalizers) or "none"
            out.append(f"# Sets its own finalizers on {display_name(owner)}: {listed}")
        if plan.owner_labels is not None:
            listed = ", ".join(f"{k}={v}" for k, v in sorted(plan.owner_labels.items())) or "none"
            out.append(f"# Sets its own labels on {display_name(owner)}: {listed}")
        if plan.prune:
            kinds = ", ".join(rule.kind for rule in plan.prune)
            labels = ",".join(f"{k}={v}" for k, v in sorted(plan.prune_selector.items()))
            out.append(f"# Deletes its own {kinds} ({labels}) that are not listed above")
        if result.replan_at is not None:
            out.append(f"# Planned again at {result.replan_at.isoformat()} at the latest")
        out += [f"# Also plans {ref.display()} now" for ref in result.also_replan]
        meta = owner["metadata"]
        identity = {"name": meta["name"]} | (
            {"namespace": meta["namespace"]} if meta.get("namespace") else {}
        )
        status = {
            "apiVersion": owner["apiVersion"],
            "kind": owner["kind"],
            "metadata": identity,
            "status": plan.status,
        }
        out.append(_yaml(status).rstrip("\n"))
    return "\n".join(out) + "\n"


def as_json(results: Sequence[tuple[Document, PlanningResult]], cluster: OfflineCluster) -> str:
    items = []
    for document, result in results:
        plan = result.plan
        items.append(
            {
                "source": document.source,
                "filled": cluster.filled.get(document.source, []),
                "assumed": cluster.assumptions,
                "plan": plan.model_dump(mode="json") if plan is not None else None,
                "note": None
                if plan is not None
                else _NO_PLAN_REASONS.get(str(document.content.get("kind")), "owns no objects"),
                "replanAt": result.replan_at.isoformat() if result.replan_at else None,
                "alsoReplan": [ref.model_dump(mode="json") for ref in result.also_replan],
            }
        )
    return json.dumps({"plans": items}, indent=2, ensure_ascii=False)
