"""What ``kaiwo plan`` assumes to show a Model's Pods, and how it reads ``--models-config``.

A cached Model's first plan only puts the operator's finalizer on it: its load Job comes
once the finalizer is there (decision 0278). To show the Job, the command plans it once more
as carrying the finalizers its plan sets. A Model with no replicas wanted (``minReplicas: 0``
and no ``replicas``, the usual start of an autoscaled Model) or whose cache is still loading
has no Pods in its plan. To show them anyway, the command plans it once more with one
replica and its cache loaded (the load Job completed). Each assumption is said in the
output.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from kaiwo_contracts.models_config import CONFIG_MAP_KEY, CONFIG_MAP_LABEL, CONFIG_MAP_LABEL_VALUE
from kaiwo_planner.domain.planning import PlanningResult, plan_object
from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.state.planning_context import PlanningContext


@dataclass(frozen=True, slots=True)
class AssumedPlan:
    """A plan made under an assumption the source text states."""

    source: str
    content: dict[str, Any]
    result: PlanningResult


def models_config_map(path: Path) -> dict[str, Any]:
    """``--models-config`` as the ConfigMap the planner looks for: a ConfigMap file is
    taken as it is (and labelled), any other YAML is the ``models.yaml`` document."""
    from kaiwo_cli.commands.plan_input import InputError

    try:
        text = path.read_text(encoding="utf-8")
        document = yaml.safe_load(text)
    except (OSError, yaml.YAMLError) as error:
        raise InputError(f"{path}: {error}") from error
    if isinstance(document, dict) and document.get("kind") == "ConfigMap":
        found = copy.deepcopy(document)
    else:
        found = {"apiVersion": "v1", "kind": "ConfigMap", "data": {CONFIG_MAP_KEY: text}}
    meta = found.setdefault("metadata", {})
    meta.setdefault("name", "kaiwo-models")
    meta.setdefault("namespace", "kaiwo-system")
    meta.setdefault("uid", f"uid-models-config-{meta['name']}")
    meta.setdefault("labels", {})[CONFIG_MAP_LABEL] = CONFIG_MAP_LABEL_VALUE
    return found


def later_model_plans(
    document: Any, result: PlanningResult, cluster: ClusterState, *, now: datetime
) -> list[AssumedPlan]:
    """The Model planned as carrying the finalizers its plan sets, then with one replica and
    its cache loaded, each when the plan before needs it (none: it is no Model, or its plan
    sets no finalizer and has Pods)."""
    content = document.content
    if content.get("kind") != "Model":
        return []
    context = PlanningContext.of(cluster)
    later: list[AssumedPlan] = []
    finalized = _with_finalizers(document.source, content, result, context=context, now=now)
    if finalized is not None:
        later.append(finalized)
        content, result = finalized.content, finalized.result
    pods = _with_pods(document.source, content, result, context=context, now=now)
    return [*later, pods] if pods is not None else later


def _with_finalizers(
    source: str,
    content: dict[str, Any],
    result: PlanningResult,
    *,
    context: PlanningContext,
    now: datetime,
) -> AssumedPlan | None:
    plan = result.plan
    if plan is None or not plan.finalizers:
        return None
    assumed = copy.deepcopy(content)
    metadata = assumed.setdefault("metadata", {})
    metadata["finalizers"] = [*(metadata.get("finalizers") or ()), *plan.finalizers]
    return AssumedPlan(
        source=f"{source}, once it carries its finalizers (assumed)",
        content=assumed,
        result=plan_object(owner=assumed, context=context, now=now),
    )


def _with_pods(
    source: str,
    content: dict[str, Any],
    result: PlanningResult,
    *,
    context: PlanningContext,
    now: datetime,
) -> AssumedPlan | None:
    """The Model planned with one replica and its cache loaded, when its plan has no Pods
    (None: it has some, or it cannot be served). ``content`` is the Model as planned for
    ``result`` (with its assumed finalizers, if any)."""
    plan = result.plan
    if plan is None or not content.get("spec"):
        return None
    if any(d.get("kind") == "Pod" for d in plan.desired):
        return None
    configured = next(
        (c for c in (plan.status or {}).get("conditions") or () if c.get("type") == "Configured"),
        None,
    )
    if configured is None or configured.get("status") != "True":
        return None
    assumed = copy.deepcopy(content)
    notes = []
    spec = assumed["spec"]
    if not plan_has_replicas(content):
        spec["replicas"] = max(int(spec.get("minReplicas") or 0), 1)
        spec["autoscalingDisabled"] = True
        notes.append("with 1 replica")
    if spec.get("cacheProfile"):
        assumed["status"] = {**(assumed.get("status") or {}), "cache": {"loaded": True}}
        notes.append("once its cache is loaded")
    later = plan_object(owner=assumed, context=context, now=now)
    return AssumedPlan(
        source=f"{source}, {' and '.join(notes)} (assumed)",
        content=content,
        result=later,
    )


def plan_has_replicas(content: dict[str, Any]) -> bool:
    spec = content.get("spec") or {}
    return bool(spec.get("replicas") or spec.get("minReplicas"))
