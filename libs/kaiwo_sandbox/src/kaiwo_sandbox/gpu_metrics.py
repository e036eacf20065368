"""Simulated GPU utilization, served as Prometheus serves it.

Every GPU a running pod holds (the ids the sandbox's scheduler noted in the pod's annotations,
or under a real scheduler the lowest ids left on its node) has a
``gpu_gfx_activity`` series labelled as the AMD device-metrics exporter labels it (``gpu_id``,
``gpu_partition_id``, ``namespace``, ``pod``, ``container``, ``hostname``). Its value is the
pod's annotation :data:`~kaiwo_sandbox.lifecycle.GPU_UTILIZATION` when set (e.g. ``3`` for an
idle job the monitor should notice), else a steady busy value between 70 and 95 derived from
the pod and GPU. ``GET /api/v1/query`` answers an instant query (any query: the one series
family is returned; a ``timestamp(...)`` query, the monitor's second one, with each series'
sample time, now); ``GET /metrics`` gives the exposition text.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from aiohttp import web

from kaiwo_sandbox.lifecycle import GPU_UTILIZATION, node_of
from kaiwo_sandbox.scheduling import held_gpus

METRIC: Final = "gpu_gfx_activity"


@dataclass(frozen=True, slots=True)
class GpuSeries:
    labels: Mapping[str, str]
    value: float


def utilization(pods: Iterable[Mapping[str, Any]]) -> list[GpuSeries]:
    """One series per GPU held by a Running pod."""
    pods = list(pods)
    held = held_gpus(pods)
    found = []
    for pod in pods:
        if (pod.get("status") or {}).get("phase") != "Running":
            continue
        metadata = pod.get("metadata") or {}
        given = (metadata.get("annotations") or {}).get(GPU_UTILIZATION)
        containers = (pod.get("spec") or {}).get("containers") or [{}]
        for gpu in held.get(f"{metadata.get('namespace', '')}/{metadata.get('name', '')}", ()):
            labels = {
                "gpu_id": str(gpu),
                "gpu_partition_id": "0",
                "namespace": metadata.get("namespace", ""),
                "pod": metadata.get("name", ""),
                "container": containers[0].get("name", ""),
                "hostname": node_of(pod),
            }
            found.append(GpuSeries(labels, _value(given, f"{labels['pod']}/{gpu}")))
    return found


def _value(given: str | None, seed: str) -> float:
    if given is not None:
        try:
            return float(given)
        except ValueError:
            pass
    digest = int.from_bytes(hashlib.sha256(seed.encode()).digest()[:2], "big")
    return 70.0 + round(25.0 * digest / 0xFFFF, 1)


def query_answer(
    series: Sequence[GpuSeries], *, now: datetime, timestamps: bool = False
) -> dict[str, Any]:
    """A Prometheus instant-query answer (vector); with ``timestamps``, that of
    ``timestamp(...)``: each series' sample time (every sample is taken ``now``), no name."""
    at = now.timestamp()
    return {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [
                {"metric": dict(s.labels), "value": [at, str(at)]}
                if timestamps
                else {"metric": {"__name__": METRIC, **s.labels}, "value": [at, str(s.value)]}
                for s in series
            ],
        },
    }


def exposition(series: Sequence[GpuSeries]) -> str:
    lines = [f"# HELP {METRIC} GPU activity in percent (simulated)", f"# TYPE {METRIC} gauge"]
    for s in series:
        labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
        lines.append(f"{METRIC}{{{labels}}} {s.value}")
    return "\n".join(lines) + "\n"


def metrics_app(
    pods: Callable[[], Sequence[Mapping[str, Any]]], clock: Callable[[], datetime]
) -> web.Application:
    """The HTTP endpoint; ``pods`` gives the sandbox's latest view of the pods."""

    async def query(request: web.Request) -> web.Response:
        timestamps = request.query.get("query", "").lstrip().startswith("timestamp(")
        answer = query_answer(utilization(pods()), now=clock(), timestamps=timestamps)
        return web.Response(text=json.dumps(answer), content_type="application/json")

    async def text(_request: web.Request) -> web.Response:
        return web.Response(text=exposition(utilization(pods())), content_type="text/plain")

    app = web.Application()
    app.router.add_route("*", "/api/v1/query", query)
    app.router.add_get("/metrics", text)
    return app
