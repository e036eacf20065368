"""Hand-written Model and Pod objects as the watcher observes them."""

from __future__ import annotations

from typing import Any


def model_object(
    name: str,
    *,
    namespace: str = "team-a",
    uid: str | None = None,
    version: str = "1",
    labels: dict[str, str] | None = None,
    features: list[str] | None = None,
    adapters: list[str] | None = None,
    strategy: str = "LeastLoad",
    generation: int | None = None,
    **scaling: Any,
) -> dict[str, Any]:
    """``scaling``: more spec fields (``replicas``, ``minReplicas``, ``targetRequests``...)."""
    spec: dict[str, Any] = {
        "url": "hf://org/model",
        "engine": "VLLM",
        "features": features if features is not None else ["TextGeneration"],
        "loadBalancing": {"strategy": strategy},
        **scaling,
    }
    if adapters:
        spec["adapters"] = [{"name": a, "url": f"hf://org/{a}"} for a in adapters]
    return {
        "apiVersion": "kubeai.org/v1",
        "kind": "Model",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid or f"uid-{namespace}-{name}",
            "resourceVersion": version,
            "labels": labels or {},
            "creationTimestamp": "2026-03-01T12:00:00Z",
            **({"generation": generation} if generation is not None else {}),
        },
        "spec": spec,
    }


def pod_object(
    name: str,
    *,
    model: str,
    model_uid: str,
    namespace: str = "team-a",
    ip: str = "10.0.0.1",
    port: str | None = "8000",
    ready: bool = True,
    version: str = "1",
    adapters: tuple[str, ...] = (),
    uid: str | None = None,
) -> dict[str, Any]:
    labels = {
        "model": model,
        "app.kubernetes.io/managed-by": "kaiwo",
        "kaiwo.silogen.ai/owner-uid": model_uid,
        **{f"adapter.kubeai.org/{a}": "h123" for a in adapters},
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": uid or f"pod-uid-{name}",
            "resourceVersion": version,
            "labels": labels,
            "annotations": {} if port is None else {"model-pod-port": port},
        },
        "status": {
            "podIP": ip,
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }
