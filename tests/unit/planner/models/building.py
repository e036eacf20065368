"""Builders for the Model planning tests: Models, observed Pods and Jobs, the cluster, and
expected manifests written by hand (``expected/``; ``<hash>`` stands for the pod-hash).
Every plan is made from scratch (no values kept from earlier tests)."""

from __future__ import annotations

import copy
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from kaiwo_contracts.plans import Plan
from kaiwo_planner.domain.state.cluster import ClusterState

from tests.planning_calls import planned

EXPECTED_DIR = Path(__file__).parent / "expected"
NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
NAMESPACE = "ai"
UID = "u-1"
HASH = re.compile(r"^[0-9a-f]{10}$")


def model(
    spec: dict[str, Any],
    *,
    name: str = "llm",
    status: dict[str, Any] | None = None,
    **metadata: Any,
) -> dict[str, Any]:
    """A Model as the API server returns it (generation 1, uid ``u-1`` unless given)."""
    found = {
        "apiVersion": "kubeai.org/v1",
        "kind": "Model",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "uid": UID,
            "generation": 1,
            "resourceVersion": "10",
            **metadata,
        },
        "spec": spec,
    }
    if status is not None:
        found["status"] = status
    return found


def models_config(text: str) -> dict[str, Any]:
    """The system configuration's ConfigMap holding ``text`` as models.yaml."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "kaiwo-models",
            "namespace": "kaiwo-system",
            "uid": "cm-models",
            "labels": {"kaiwo.silogen.ai/system-config": "models"},
        },
        "data": {"models.yaml": text},
    }


def plan_for(owner: dict[str, Any], *objects: dict[str, Any], now: datetime = NOW) -> Plan:
    cluster = ClusterState.from_wire(objects=[owner, *objects], namespaces=[NAMESPACE])
    plan = planned(owner=owner, cluster=cluster, now=now)
    assert plan is not None
    return plan


def desired(plan: Plan, kind: str) -> list[dict[str, Any]]:
    return [copy.deepcopy(d) for d in plan.desired if d["kind"] == kind]


def only(plan: Plan, kind: str) -> dict[str, Any]:
    [found] = desired(plan, kind)
    return found


def expected(name: str, *, pod_hash: str | None = None) -> dict[str, Any]:
    """An expected manifest from ``expected/<name>.yaml``, with ``<hash>`` filled in."""
    text = (EXPECTED_DIR / f"{name}.yaml").read_text()
    if pod_hash is not None:
        # Quoted where it is a whole value: a hash of digits only is read as a number.
        text = text.replace(": <hash>", f': "{pod_hash}"').replace("<hash>", pod_hash)
    loaded: dict[str, Any] = yaml.safe_load(text)
    return loaded


def pod_hash_of(pod: dict[str, Any]) -> str:
    found = pod["metadata"]["labels"]["pod-hash"]
    assert HASH.match(found), found
    return str(found)


def condition(plan: Plan, condition_type: str) -> dict[str, Any] | None:
    return next(
        (c for c in (plan.status or {}).get("conditions") or () if c["type"] == condition_type),
        None,
    )


def observed_pod(
    manifest: dict[str, Any],
    *,
    uid: str,
    ready: bool = True,
    scheduled: bool = True,
    created: str = "2026-01-01T10:00:00Z",
    deleting: bool = False,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A planned Pod as the API server would show it once a kubelet runs it."""
    pod = copy.deepcopy(manifest)
    meta = pod["metadata"]
    meta |= {"uid": uid, "creationTimestamp": created, "resourceVersion": "1"}
    meta["labels"] = {**meta["labels"], **(labels or {})}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T11:59:00Z"
    if scheduled:
        pod["spec"]["nodeName"] = "node-1"
    pod["status"] = {
        "phase": "Running" if scheduled else "Pending",
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
    }
    return pod


def finished_job(manifest: dict[str, Any], *, failed: bool = False) -> dict[str, Any]:
    job = copy.deepcopy(manifest)
    job["metadata"]["uid"] = f"uid-{job['metadata']['name']}"
    condition_type = "Failed" if failed else "Complete"
    job["status"] = {
        "conditions": [
            {
                "type": condition_type,
                "status": "True",
                "reason": "BackoffLimitExceeded" if failed else "Completed",
                "message": "Job has reached the specified backoff limit" if failed else "",
            }
        ]
    }
    return job
