"""``kaiwo plan -f MANIFEST``: what the planner would create for a manifest, offline.

Like ``helm template``: no cluster is contacted. The manifests are planned with the same
``plan_object`` the planner service runs, against a cluster state read from files:

* ``--nodes``: Node objects (as ``kubectl get nodes -o yaml`` prints them);
* ``--config``: the KaiwoConfig; ``--queue-config``: the KaiwoQueueConfig;
* ``--models-config``: the system configuration of Models, as its ConfigMap or as the bare
  ``models.yaml`` document (without it, upstream KubeAI chart's defaults);
* ``--observed``: objects that already exist (children such as the Job, Kueue Workloads,
  Namespaces, other workloads).

Every file may hold several YAML documents or a ``List``. The output is the child objects the
plan applies, one YAML document each with a ``# Source:`` comment, then the owner's status and
the Events (``-o json`` prints the plans as JSON instead).

What the files leave out is filled in the way a cluster would, and each filling is printed
as a comment: a manifest without ``metadata.uid`` gets one derived from its kind, namespace
and name (so runs are repeatable), ``generation`` 1, ``creationTimestamp`` ``--now`` and the
namespace ``default``. A Model that would run no Pods (no replicas wanted yet, or its cache
still loading) is shown once more with one replica and its cache loaded, said in the output.
Without ``--nodes``, enough 8-GPU nodes of each vendor the workloads ask for are assumed;
without a KaiwoQueueConfig, the one the operator creates at start-up, plus an open cluster
queue for every queue a workload names; without Namespace objects, every
namespace mentioned exists; a ``priorityClass`` nothing given defines is assumed to name an
existing PriorityClass. An observed object without ``ownerReferences`` belongs to the
planned workload of its namespace (when there is one); an owner reference without ``uid``
is resolved by kind and name.

Invalid input, a kind that is not served among them, is reported as ``FILE: FIELD:
PROBLEM`` and exits with status 1.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from kaiwo_contracts.crds.registry import model_for
from kaiwo_contracts.validation import Problem, validate_manifest
from kaiwo_planner.domain.planning import PlanningResult, plan_object
from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.state.planning_context import PlanningContext
from kaiwo_planner.domain.status.invalid_owner import spec_problems
from pydantic import ValidationError

from kaiwo_cli.manifest_files import ManifestReadError, manifest_paths, read_documents
from kaiwo_cli.model_assumptions import AssumedPlan, model_with_pods, models_config_map
from kaiwo_cli.offline_cluster import (
    Document,
    OfflineCluster,
    assume_namespaces,
    assume_nodes,
    assume_priority_classes,
    assume_queue_config,
    by_identity,
    derived_uid,
    fill_manifest,
    place_observed,
    resolve_owner_references,
)

KAIWO_API = "kaiwo.silogen.ai/v1alpha1"
CONFIG_API = "config.kaiwo.silogen.ai/v1alpha1"
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


class OutputFormat(StrEnum):
    yaml = "yaml"
    json = "json"


class InputError(Exception):
    """Input the command cannot use; the message names the file and the field."""


def plan(
    filename: Annotated[
        Path,
        typer.Option(
            "--filename", "-f", help="The manifest(s) to plan: a YAML file or a directory."
        ),
    ],
    nodes: Annotated[
        Path | None, typer.Option("--nodes", help="Node objects the cluster has.")
    ] = None,
    config: Annotated[
        Path | None, typer.Option("--config", help="The KaiwoConfig (named kaiwo).")
    ] = None,
    queue_config: Annotated[
        Path | None,
        typer.Option("--queue-config", help="The KaiwoQueueConfig (named kaiwo)."),
    ] = None,
    models_config: Annotated[
        Path | None,
        typer.Option(
            "--models-config",
            help="The system configuration of Models: its ConfigMap or a models.yaml.",
        ),
    ] = None,
    observed: Annotated[
        Path | None,
        typer.Option(
            "--observed", help="Objects that exist already (children, Kueue Workloads, ...)."
        ),
    ] = None,
    now: Annotated[
        str | None,
        typer.Option("--now", help="The time to plan at (ISO 8601); default: the current time."),
    ] = None,
    output: Annotated[
        OutputFormat, typer.Option("--output", "-o", help="yaml (default) or json.")
    ] = OutputFormat.yaml,
) -> None:
    """Print the child objects, status and Events the planner decides for manifests, offline."""
    try:
        moment = _parse_now(now)
        cluster = _read_cluster(
            filename=filename,
            nodes=nodes,
            config=config,
            queue_config=queue_config,
            observed=observed,
            now=moment,
        )
        if models_config is not None:
            cluster.objects.append(models_config_map(models_config))
    except InputError as error:
        typer.echo(str(error), err=True)
        raise typer.Exit(code=1) from error
    context = PlanningContext.of(cluster.state())
    results: list[tuple[Document, PlanningResult]] = []
    for document in cluster.manifests:
        result = plan_object(owner=document.content, context=context, now=moment)
        results.append((document, result))
        later = _after_downloads(document, result, cluster, now=moment)
        if later is None:
            later = model_with_pods(document, result, cluster.state(), now=moment)
        if later is not None:
            results.append((Document(later.source, later.content), later.result))
    if output is OutputFormat.json:
        typer.echo(_as_json(results, cluster))
    else:
        typer.echo(_as_yaml(results, cluster), nl=False)


# ------------------------------------------------------------------ reading the input


def _parse_now(text: str | None) -> datetime:
    if text is None:
        return datetime.now(UTC)
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError as error:
        raise InputError(f"--now: not an ISO 8601 time: {text!r}") from error
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _documents(path: Path) -> Iterator[Document]:
    """The objects of a file or directory; ``List`` documents are opened into their items."""
    if not path.exists():
        raise InputError(f"{path}: no such file or directory")
    for source in manifest_paths([path]):
        try:
            parsed = list(read_documents(source))
        except ManifestReadError as error:
            raise InputError(f"{error.source}: {error.reason}") from error
        for document in parsed:
            where = str(source) if document.number == 1 else f"{source}[{document.number}]"
            content = document.content
            if not isinstance(content, dict):
                raise InputError(f"{where}: the document must be a mapping of fields")
            if str(content.get("kind", "")).endswith("List") and "items" in content:
                items = content.get("items") or []
                for index, item in enumerate(items):
                    if not isinstance(item, dict):
                        raise InputError(f"{where}: items[{index}]: must be a mapping of fields")
                    yield Document(source=f"{where}: items[{index}]", content=item)
            else:
                yield Document(source=where, content=content)


def _check_object(document: Document) -> None:
    content = document.content
    for key in ("apiVersion", "kind"):
        if not isinstance(content.get(key), str) or not content.get(key):
            raise InputError(f"{document.source}: {key}: required field is missing")
    metadata = content.get("metadata")
    if not isinstance(metadata, dict) or not isinstance(metadata.get("name"), str):
        raise InputError(f"{document.source}: metadata.name: required field is missing")


def _check_plannable(document: Document) -> None:
    """Only the served kinds have a plan: anything else (a typo in ``kind``, another
    operator's kind) is an error, not an empty plan that exits 0."""
    content = document.content
    if model_for(str(content.get("apiVersion")), str(content.get("kind"))) is not None:
        return
    [problem] = validate_manifest(content)  # the unknown kind, with the served ones
    raise InputError(f"{document.source}: {problem.path}: {problem.message}")


def _check_served(document: Document) -> None:
    """Served kinds are checked as the API server and the operator would check them."""
    content = document.content
    if model_for(str(content.get("apiVersion")), str(content.get("kind"))) is None:
        return
    problems = _problems(content)
    if problems:
        first = problems[0]
        where = f"{first.path}: " if first.path else ""
        raise InputError(f"{document.source}: {where}{first.message}")


def _problems(content: dict[str, Any]) -> list[Problem]:
    # Strictly, as the API server parses JSON; timestamps are left to the lax parse below
    # (the strict check does not accept them as strings yet).
    without_times = {key: value for key, value in content.items() if key != "status"}
    metadata = content.get("metadata")
    if isinstance(metadata, dict):
        without_times["metadata"] = {
            key: value
            for key, value in metadata.items()
            if key not in {"creationTimestamp", "deletionTimestamp"}
        }
    problems = validate_manifest(without_times)
    if problems:
        return problems
    model = model_for(str(content.get("apiVersion")), str(content.get("kind")))
    assert model is not None
    try:
        model.model_validate(json.loads(json.dumps(content, default=_plain)))
    except ValidationError as error:
        return spec_problems(content, error)
    return []


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    raise TypeError(f"not plain data: {value!r}")


def _as_wire(content: dict[str, Any]) -> dict[str, Any]:
    """The document as the API server would return it: JSON types only (YAML dates -> text)."""
    wire: dict[str, Any] = json.loads(json.dumps(content, default=_plain))
    return wire


def _read_cluster(
    *,
    filename: Path,
    nodes: Path | None,
    config: Path | None,
    queue_config: Path | None,
    observed: Path | None,
    now: datetime,
) -> OfflineCluster:
    manifests = [Document(d.source, _as_wire(d.content)) for d in _documents(filename)]
    if not manifests:
        raise InputError(f"{filename}: no manifests found")
    for document in manifests:
        _check_object(document)
        _check_plannable(document)
        _check_served(document)
    cluster = OfflineCluster(manifests=manifests)
    for document in manifests:
        cluster.filled[document.source] = fill_manifest(document.content, now=now)
    settings = [
        *_typed_documents(config, kinds={"KaiwoConfig"}),
        *_typed_documents(queue_config, kinds={"KaiwoQueueConfig"}),
    ]
    node_objects = _typed_documents(nodes, kinds={"Node"})
    observed_objects = [d.content for d in _observed_documents(observed)]
    cluster.objects = by_identity([*(d.content for d in manifests), *settings])
    for obj in observed_objects:
        place_observed(obj, cluster)
    cluster.nodes.extend(node_objects)
    resolve_owner_references(cluster)
    assume_nodes(cluster, given=nodes is not None)
    assume_queue_config(cluster)
    assume_priority_classes(cluster)
    assume_namespaces(cluster)
    return cluster


def _typed_documents(path: Path | None, *, kinds: set[str]) -> list[dict[str, Any]]:
    if path is None:
        return []
    found = []
    for document in _documents(path):
        _check_object(document)
        kind = document.content.get("kind")
        if kind not in kinds:
            wanted = " or ".join(sorted(kinds))
            raise InputError(f"{document.source}: kind: expected {wanted}, got {kind}")
        _check_served(document)
        found.append(_as_wire(document.content))
    return found


def _observed_documents(path: Path | None) -> list[Document]:
    if path is None:
        return []
    documents = []
    for document in _documents(path):
        _check_object(document)
        _check_served(document)
        documents.append(Document(document.source, _as_wire(document.content)))
    return documents


def _after_downloads(
    document: Document, result: PlanningResult, cluster: OfflineCluster, *, now: datetime
) -> AssumedPlan | None:
    """While a workload waits for its download job, its main child is not planned yet. To
    show it too, plan once more as if the download job had succeeded (said in the output)."""
    plan = result.plan
    if plan is None or (plan.status or {}).get("status") != "DOWNLOADING":
        return None
    jobs = [d for d in plan.desired if d.get("kind") == "Job"]
    if len(jobs) != 1:
        return None
    succeeded = {
        **jobs[0],
        "metadata": {**jobs[0]["metadata"], "uid": derived_uid(jobs[0])},
        "status": {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]},
    }
    state = ClusterState.from_wire(
        nodes=cluster.nodes,
        objects=[*cluster.objects, succeeded],
        kueue_workloads=cluster.kueue_workloads,
        namespaces=cluster.namespaces,
    )
    source = f"{document.source}, once {_display(succeeded)} has succeeded (assumed)"
    later = plan_object(owner=document.content, context=PlanningContext.of(state), now=now)
    return AssumedPlan(source=source, content=document.content, result=later)


# ------------------------------------------------------------------ printing


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


def _display(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    where = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{obj.get('kind')} {where}{meta.get('name')}"


def _header(document: Document, filled: Sequence[str], assumptions: Sequence[str]) -> list[str]:
    lines = [f"# Plan for {_display(document.content)} ({document.source})"]
    lines += [f"#   {note}" for note in filled]
    lines += [f"#   {note}" for note in assumptions]
    return lines


def _as_yaml(results: Sequence[tuple[Document, PlanningResult]], cluster: OfflineCluster) -> str:
    out: list[str] = []
    for document, result in results:
        out += _header(document, cluster.filled.get(document.source, []), cluster.assumptions)
        plan = result.plan
        owner = document.content
        if plan is None:
            reason = _NO_PLAN_REASONS.get(str(owner.get("kind")), "owns no objects")
            out.append(f"# {_display(owner)}: {reason}")
            continue
        for desired in plan.desired:
            out += ["---", f"# Source: {_display(owner)} -> {_display(desired)}"]
            out.append(_yaml(desired).rstrip("\n"))
        for shared in plan.shared:
            out += ["---", f"# Shared: {_display(owner)} -> {_display(shared)}"]
            out += ["# (created when missing, used by others too, never updated or deleted)"]
            out.append(_yaml(shared).rstrip("\n"))
        out += ["---", f"# Status of {_display(owner)} (written to its status)"]
        out += [f"# Event {e.type} {e.reason}: {e.message}" for e in plan.events]
        out += [f"# Deletes {ref.display()} (uid {ref.uid})" for ref in plan.delete]
        out += [
            f"# Takes {', '.join(r.finalizers)} off {r.target.display()} to let it go"
            for r in plan.release_finalizers
        ]
        if plan.finalizers is not None:
            listed = ", ".join(plan.finalizers) or "none"
            out.append(f"# Sets its own finalizers on {_display(owner)}: {listed}")
        if plan.owner_labels is not None:
            listed = ", ".join(f"{k}={v}" for k, v in sorted(plan.owner_labels.items())) or "none"
            out.append(f"# Sets its own labels on {_display(owner)}: {listed}")
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


def _as_json(results: Sequence[tuple[Document, PlanningResult]], cluster: OfflineCluster) -> str:
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
