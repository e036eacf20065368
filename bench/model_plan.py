"""How long one Model plan takes: µs per ``plan_object`` call, p50 and p99, per Model shape.

Shapes: one per engine (VLLM from Hugging Face on 1 MI300X, OLlama on CPU, FasterWhisper,
Infinity), a VLLM Model with a loaded cache, one with two LoRA adapters and files (2
replicas), and one with 32 replicas. Each is planned in steady state: its Pods observed,
Ready, of the current spec, in a projection that also holds the system configuration's
ConfigMap, an AIMNamespaceConfig and 50 other Models with their Pods; before every plan
another Model's Pod changes (untimed), so each plan gets a new cluster state, as after every
single observed change in the planner service.

Run: ``uv run python bench/model_plan.py [--plans N]``. Wall-clock percentiles include what
else the machine runs; ``cpu`` columns are the planner thread's own CPU time.
"""

from __future__ import annotations

import argparse
import copy
import gc
import statistics
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from kaiwo_contracts.events import ObservedObjectV1
from kaiwo_planner.domain.planning import plan_object
from kaiwo_planner.domain.state.context_keeper import PlanningContextKeeper
from kaiwo_planner.domain.state.projection import Projection

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
NAMESPACE = "llm"
CONFIG = """\
cacheProfiles:
  fast:
    sharedFilesystem: {storageClassName: nfs-rwx, size: 500Gi}
resourceProfiles:
  mi300x:
    imageName: amd-gpu
    requests: {cpu: "8", memory: 64Gi}
    limits: {amd.com/gpu: "1"}
"""
SHAPES: dict[str, dict[str, Any]] = {
    "VLLM": {
        "url": "hf://meta-llama/Llama-3.1-8B-Instruct",
        "engine": "VLLM",
        "resourceProfile": "mi300x:1",
        "args": ["--max-model-len=32768"],
        "env": {"VLLM_USE_TRITON_FLASH_ATTN": "0"},
        "minReplicas": 1,
    },
    "OLlama": {
        "url": "ollama://qwen2:0.5b",
        "engine": "OLlama",
        "features": ["TextGeneration"],
        "resourceProfile": "cpu:2",
        "replicas": 1,
        "autoscalingDisabled": True,
    },
    "FasterWhisper": {
        "url": "hf://Systran/faster-whisper-medium.en",
        "engine": "FasterWhisper",
        "resourceProfile": "cpu:1",
        "minReplicas": 1,
    },
    "Infinity": {
        "url": "hf://BAAI/bge-small-en-v1.5",
        "engine": "Infinity",
        "resourceProfile": "cpu:1",
        "minReplicas": 1,
    },
    "VLLM + cache": {
        "url": "s3://models/llama-3.1-8b",
        "engine": "VLLM",
        "resourceProfile": "mi300x:1",
        "cacheProfile": "fast",
        "minReplicas": 1,
    },
    "VLLM + adapters": {
        "url": "hf://meta-llama/Llama-3.1-8B",
        "engine": "VLLM",
        "resourceProfile": "mi300x:1",
        "adapters": [
            {"name": "sql", "url": "hf://org/sql-lora"},
            {"name": "chat", "url": "s3://bucket/chat-lora"},
        ],
        "files": [{"path": "/config/chat.jinja", "content": "{{ messages }}"}],
        "minReplicas": 2,
    },
    "VLLM x 32": {
        "url": "hf://meta-llama/Llama-3.1-70B-Instruct",
        "engine": "VLLM",
        "resourceProfile": "mi300x:4",
        "minReplicas": 32,
    },
}


def model(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = {
        "apiVersion": "kubeai.org/v1",
        "kind": "Model",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "uid": f"uid-{name}",
            "generation": 1,
            "resourceVersion": "1",
        },
        "spec": spec,
    }
    if spec.get("cacheProfile"):
        found["status"] = {"cache": {"loaded": True}}
    return found


def config_map() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "kaiwo-models",
            "namespace": "kaiwo-system",
            "uid": "cm-models",
            "labels": {"kaiwo.silogen.ai/system-config": "models"},
        },
        "data": {"models.yaml": CONFIG},
    }


def namespace_config() -> dict[str, Any]:
    return {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "AIMNamespaceConfig",
        "metadata": {"name": "aim", "namespace": NAMESPACE, "uid": "aim"},
        "spec": {"credentials": {"huggingFaceToken": {"secretName": "hf", "secretKey": "t"}}},
    }


class Cluster:
    """A projection fed one observation per object, as the planner service's is."""

    def __init__(self) -> None:
        self.projection = Projection()
        self.contexts = PlanningContextKeeper()
        self.sequence = 0
        self.version = 100

    def observe(self, obj: dict[str, Any]) -> None:
        self.sequence += 1
        self.version += 1
        meta = obj["metadata"]
        meta["resourceVersion"] = str(self.version)
        observed = ObservedObjectV1(
            kind=obj["kind"],
            api_version=obj["apiVersion"],
            namespace=meta.get("namespace"),
            name=meta["name"],
            uid=meta["uid"],
            resource_version=meta["resourceVersion"],
            event_type="MODIFIED",
            object=obj,
        )
        self.projection.apply(observed, sequence=self.sequence)

    def settle(self, owner: dict[str, Any]) -> list[dict[str, Any]]:
        """Plan ``owner`` and observe its Pods running and Ready; returns the Pods."""
        self.observe(owner)
        plan = plan_object(
            owner=owner, context=self.contexts.context(self.projection), now=NOW
        ).plan
        assert plan is not None, owner
        pods = []
        for manifest in plan.desired:
            if manifest["kind"] != "Pod":
                continue
            pod = copy.deepcopy(manifest)
            pod["metadata"]["uid"] = f"uid-{pod['metadata']['name']}"
            pod["metadata"]["creationTimestamp"] = "2026-03-01T11:00:00Z"
            pod["spec"]["nodeName"] = "node-1"
            pod["status"] = {
                "phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}],
            }
            self.observe(pod)
            pods.append(pod)
        return pods


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def churn(cluster: Cluster, pods: list[dict[str, Any]]) -> Iterator[None]:
    """Another Model's Pod changes before every plan (its readiness flips)."""
    while True:
        for pod in pods:
            condition = pod["status"]["conditions"][0]
            condition["status"] = "False" if condition["status"] == "True" else "True"
            cluster.observe(copy.deepcopy(pod))
            yield


def bench(shape: str, spec: dict[str, Any], *, plans: int) -> tuple[float, float, float, float]:
    cluster = Cluster()
    cluster.observe(config_map())
    cluster.observe(namespace_config())
    others: list[dict[str, Any]] = []
    for index in range(50):
        others += cluster.settle(model(f"other-{index}", SHAPES["FasterWhisper"]))
    owner = model("subject", spec)
    cluster.settle(owner)
    changes = churn(cluster, others)
    wall: list[float] = []
    cpu: list[float] = []
    for _ in range(plans):
        next(changes)
        started, started_cpu = time.perf_counter(), time.thread_time()
        context = cluster.contexts.context(cluster.projection)
        plan = plan_object(owner=owner, context=context, now=NOW).plan
        cpu.append((time.thread_time() - started_cpu) * 1e6)
        wall.append((time.perf_counter() - started) * 1e6)
        assert plan is not None and not plan.delete, shape
    return (
        statistics.median(wall),
        percentile(wall, 0.99),
        statistics.median(cpu),
        percentile(cpu, 0.99),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plans", type=int, default=2000)
    plans = parser.parse_args().plans
    gc.collect()
    print(f"{'shape':<18} {'p50 µs':>8} {'p99 µs':>8} {'cpu p50':>8} {'cpu p99':>8}")
    for shape, spec in SHAPES.items():
        p50, p99, cpu50, cpu99 = bench(shape, spec, plans=plans)
        print(f"{shape:<18} {p50:8.0f} {p99:8.0f} {cpu50:8.0f} {cpu99:8.0f}")


if __name__ == "__main__":
    main()
