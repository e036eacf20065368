"""The Models page's rows: replicas, autoscaling bounds and the endpoints that serve."""

from __future__ import annotations

from dataclasses import dataclass

from kaiwo_contracts.queue_estimates.kueue import (
    is_true,
)

from kaiwo_console.domain.cluster import (
    MODEL_KIND,
    POD,
    ClusterState,
    Visible,
    as_int,
    meta,
    spec,
    status,
)


@dataclass(frozen=True, slots=True)
class ModelRow:
    namespace: str
    name: str
    engine: str
    desired: int
    ready: int
    min_replicas: int
    max_replicas: int | None
    endpoints: tuple[str, ...]


def model_rows(state: ClusterState, visible: Visible) -> list[ModelRow]:
    rows = []
    for model in state.of(MODEL_KIND):
        namespace = str(meta(model).get("namespace") or "")
        if not visible(namespace):
            continue
        name = str(meta(model).get("name") or "")
        replicas = status(model).get("replicas") or {}
        endpoints = tuple(
            sorted(
                f"{status(served).get('podIP')}"
                for served in state.of(POD)
                if meta(served).get("namespace") == namespace
                and (meta(served).get("labels") or {}).get("model") == name
                and status(served).get("podIP")
                and is_true(served, "Ready")
            )
        )
        maximum = spec(model).get("maxReplicas")
        rows.append(
            ModelRow(
                namespace=namespace,
                name=name,
                engine=str(spec(model).get("engine") or ""),
                desired=as_int(spec(model).get("replicas")),
                ready=as_int(replicas.get("ready")),
                min_replicas=as_int(spec(model).get("minReplicas")),
                max_replicas=None if maximum is None else as_int(maximum),
                endpoints=endpoints,
            )
        )
    return sorted(rows, key=lambda r: (r.namespace, r.name))
