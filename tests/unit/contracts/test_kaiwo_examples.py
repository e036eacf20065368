"""The Kaiwo examples in examples/ are valid manifests and survive a round trip unchanged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from kaiwo_contracts.crds.kaiwo_v1alpha1 import (
    KaiwoJob,
    KaiwoQueueConfig,
    KaiwoService,
    WorkloadStatus,
)

EXAMPLES = {
    "kaiwojob-gpu-training.yaml": KaiwoJob,
    "kaiwojob-ray.yaml": KaiwoJob,
    "kaiwoservice-deployment.yaml": KaiwoService,
    "kaiwoservice-ray.yaml": KaiwoService,
    "kaiwoqueueconfig.yaml": KaiwoQueueConfig,
}


def _load(repo_root: Path, name: str) -> dict[str, Any]:
    loaded = yaml.safe_load((repo_root / "examples" / name).read_text())
    assert isinstance(loaded, dict)
    return loaded


@pytest.mark.parametrize(("name", "model"), EXAMPLES.items())
def test_example_is_valid_and_round_trips(
    repo_root: Path, name: str, model: type[KaiwoJob | KaiwoService | KaiwoQueueConfig]
) -> None:
    manifest = _load(repo_root, name)

    parsed = model.from_wire(manifest)

    assert parsed.to_wire() == manifest
    assert parsed.status.status is WorkloadStatus.NEW


def test_gpu_training_example_downloads_before_it_starts(repo_root: Path) -> None:
    job = KaiwoJob.from_wire(_load(repo_root, "kaiwojob-gpu-training.yaml"))

    assert job.spec.gpu_vendor == "amd"
    assert (job.spec.gpus, job.spec.replicas, job.spec.gpus_per_replica) == (4, 1, 4)
    assert job.spec.storage is not None
    assert job.spec.storage.has_object_storage_downloads
    assert job.spec.storage.has_hf_downloads
    assert job.spec.is_ray_job is False


def test_ray_examples_are_ray_workloads(repo_root: Path) -> None:
    ray_job = KaiwoJob.from_wire(_load(repo_root, "kaiwojob-ray.yaml"))
    ray_service = KaiwoService.from_wire(_load(repo_root, "kaiwoservice-ray.yaml"))
    deployment = KaiwoService.from_wire(_load(repo_root, "kaiwoservice-deployment.yaml"))

    assert ray_job.spec.is_ray_job
    assert ray_service.spec.is_ray_service
    assert ray_service.spec.serve_config_v2 is not None
    assert ray_service.spec.serve_config_v2.startswith("applications:")
    assert not deployment.spec.is_ray_service


def test_queue_config_example_shape(repo_root: Path) -> None:
    config = KaiwoQueueConfig.from_wire(_load(repo_root, "kaiwoqueueconfig.yaml"))
    spec = config.spec

    assert config.metadata.name == "kaiwo"
    assert [f.name for f in spec.resource_flavors or ()] == ["amd-mi300x-8gpu", "cpu-only"]
    assert [q.name for q in spec.cluster_queues or ()] == ["team-nlp", "team-vision"]
    assert [q.namespaces for q in spec.cluster_queues or ()] == [
        ["ml-team", "nlp-research"],
        ["vision"],
    ]
    assert [(p.metadata.name, p.value) for p in spec.workload_priority_classes or ()] == [
        ("high-priority", 1000),
        ("normal-priority", 100),
    ]
