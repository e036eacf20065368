"""``kaiwo plan``'s input: manifests and cluster files read, checked and completed the way a
cluster would (each filling said), every problem one :class:`InputError` naming file and field."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kaiwo_contracts.crds.registry import model_for
from kaiwo_contracts.validation import Problem, validate_manifest
from kaiwo_planner.domain.planning import PlanningResult, plan_object
from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.state.planning_context import PlanningContext
from kaiwo_planner.domain.status.invalid_owner import spec_problems
from pydantic import ValidationError

from kaiwo_cli.commands.plan_output import (
    display_name,
)
from kaiwo_cli.manifest_files import STDIN, ManifestReadError, manifest_paths, read_documents
from kaiwo_cli.model_assumptions import AssumedPlan
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


class InputError(Exception):
    """Input the command cannot use; the message names the file and the field."""


def parse_now(text: str | None) -> datetime:
    if text is None:
        return datetime.now(UTC)
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError as error:
        raise InputError(f"--now: not an ISO 8601 time: {text!r}") from error
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def documents_in(path: Path, *, stdin: bool = False) -> Iterator[Document]:
    """The objects of a file or directory (``stdin``: ``-`` is standard input, for ``-f``);
    ``List`` documents are opened into their items."""
    if str(path) == STDIN and not stdin:
        raise InputError(
            f"{path}: standard input is read for -f only (--nodes, --config, --queue-config "
            "and --observed take files)"
        )
    if str(path) != STDIN and not path.exists():
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


def check_object(document: Document) -> None:
    content = document.content
    for key in ("apiVersion", "kind"):
        if not isinstance(content.get(key), str) or not content.get(key):
            raise InputError(f"{document.source}: {key}: required field is missing")
    metadata = content.get("metadata")
    if not isinstance(metadata, dict) or not isinstance(metadata.get("name"), str):
        raise InputError(f"{document.source}: metadata.name: required field is missing")


def check_plannable(document: Document) -> None:
    """Only the served kinds have a plan: anything else (a typo in ``kind``, another
    operator's kind) is an error, not an empty plan that exits 0."""
    content = document.content
    if model_for(str(content.get("apiVersion")), str(content.get("kind"))) is not None:
        return
    [problem] = validate_manifest(content)  # the unknown kind, with the served ones
    raise InputError(f"{document.source}: {problem.path}: {problem.message}")


def check_served(document: Document) -> None:
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


def read_cluster(
    *,
    filename: Path,
    nodes: Path | None,
    config: Path | None,
    queue_config: Path | None,
    observed: Path | None,
    now: datetime,
) -> OfflineCluster:
    manifests = [
        Document(d.source, _as_wire(d.content)) for d in documents_in(filename, stdin=True)
    ]
    if not manifests:
        raise InputError(f"{filename}: no manifests found")
    for document in manifests:
        check_object(document)
        check_plannable(document)
        check_served(document)
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
    for document in documents_in(path):
        check_object(document)
        kind = document.content.get("kind")
        if kind not in kinds:
            wanted = " or ".join(sorted(kinds))
            raise InputError(f"{document.source}: kind: expected {wanted}, got {kind}")
        check_served(document)
        found.append(_as_wire(document.content))
    return found


def _observed_documents(path: Path | None) -> list[Document]:
    if path is None:
        return []
    documents = []
    for document in documents_in(path):
        check_object(document)
        check_served(document)
        documents.append(Document(document.source, _as_wire(document.content)))
    return documents


def after_downloads(
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
    source = f"{document.source}, once {display_name(succeeded)} has succeeded (assumed)"
    later = plan_object(owner=document.content, context=PlanningContext.of(state), now=now)
    return AssumedPlan(source=source, content=document.content, result=later)
