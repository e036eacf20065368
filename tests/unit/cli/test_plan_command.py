"""`kaiwo plan`: every example plans offline and prints what a user expects to see created."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from kaiwo_cli.main import app

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
NOW = "2026-01-01T12:00:00Z"
runner = CliRunner()

# What each example creates, as `# Source:` lines name it (owner -> child). Examples with
# downloads are planned twice: while the download job runs, and once it has succeeded.
EXPECTED_SOURCES = {
    "kaiwojob-gpu-training.yaml": [
        "KaiwoJob ml-team/llama-3-8b-sft -> Job ml-team/llama-3-8b-sft-download",
        "KaiwoJob ml-team/llama-3-8b-sft -> ConfigMap ml-team/llama-3-8b-sft-download",
        "KaiwoJob ml-team/llama-3-8b-sft -> PersistentVolumeClaim ml-team/llama-3-8b-sft-data",
        "KaiwoJob ml-team/llama-3-8b-sft -> PersistentVolumeClaim ml-team/llama-3-8b-sft-hf",
        "KaiwoJob ml-team/llama-3-8b-sft -> Job ml-team/llama-3-8b-sft",
        "KaiwoJob ml-team/llama-3-8b-sft -> Job ml-team/llama-3-8b-sft-download",
        "KaiwoJob ml-team/llama-3-8b-sft -> ConfigMap ml-team/llama-3-8b-sft-download",
        "KaiwoJob ml-team/llama-3-8b-sft -> PersistentVolumeClaim ml-team/llama-3-8b-sft-data",
        "KaiwoJob ml-team/llama-3-8b-sft -> PersistentVolumeClaim ml-team/llama-3-8b-sft-hf",
    ],
    "kaiwojob-ray.yaml": [
        "KaiwoJob vision/batch-inference-ray -> Job vision/batch-inference-ray-download",
        "KaiwoJob vision/batch-inference-ray -> ConfigMap vision/batch-inference-ray-download",
        "KaiwoJob vision/batch-inference-ray -> PersistentVolumeClaim "
        "vision/batch-inference-ray-hf",
        "KaiwoJob vision/batch-inference-ray -> Job vision/batch-inference-ray-download",
        "KaiwoJob vision/batch-inference-ray -> RayJob vision/batch-inference-ray",
        "KaiwoJob vision/batch-inference-ray -> ConfigMap vision/batch-inference-ray-download",
        "KaiwoJob vision/batch-inference-ray -> PersistentVolumeClaim "
        "vision/batch-inference-ray-hf",
    ],
    "kaiwoservice-deployment.yaml": [
        "KaiwoService ml-team/qwen-chat -> Job ml-team/qwen-chat-download",
        "KaiwoService ml-team/qwen-chat -> ConfigMap ml-team/qwen-chat-download",
        "KaiwoService ml-team/qwen-chat -> PersistentVolumeClaim ml-team/qwen-chat-hf",
        "KaiwoService ml-team/qwen-chat -> Deployment ml-team/qwen-chat",
        "KaiwoService ml-team/qwen-chat -> Job ml-team/qwen-chat-download",
        "KaiwoService ml-team/qwen-chat -> ConfigMap ml-team/qwen-chat-download",
        "KaiwoService ml-team/qwen-chat -> PersistentVolumeClaim ml-team/qwen-chat-hf",
    ],
    "kaiwoservice-ray.yaml": [
        "KaiwoService ml-team/llm-serve -> Job ml-team/llm-serve-download",
        "KaiwoService ml-team/llm-serve -> ConfigMap ml-team/llm-serve-download",
        "KaiwoService ml-team/llm-serve -> PersistentVolumeClaim ml-team/llm-serve-hf",
        "KaiwoService ml-team/llm-serve -> Job ml-team/llm-serve-download",
        "KaiwoService ml-team/llm-serve -> ConfigMap ml-team/llm-serve-download",
        "KaiwoService ml-team/llm-serve -> PersistentVolumeClaim ml-team/llm-serve-hf",
        "KaiwoService ml-team/llm-serve -> AppWrapper ml-team/llm-serve",
    ],
    "kaiwoqueueconfig.yaml": [
        "KaiwoQueueConfig kaiwo -> ClusterQueue team-nlp",
        "KaiwoQueueConfig kaiwo -> ClusterQueue team-vision",
        "KaiwoQueueConfig kaiwo -> LocalQueue ml-team/team-nlp",
        "KaiwoQueueConfig kaiwo -> LocalQueue nlp-research/team-nlp",
        "KaiwoQueueConfig kaiwo -> LocalQueue vision/team-vision",
        "KaiwoQueueConfig kaiwo -> ResourceFlavor amd-mi300x-8gpu",
        "KaiwoQueueConfig kaiwo -> ResourceFlavor cpu-only",
        "KaiwoQueueConfig kaiwo -> WorkloadPriorityClass high-priority",
        "KaiwoQueueConfig kaiwo -> WorkloadPriorityClass normal-priority",
    ],
    "kaiwoconfig.yaml": [],
    "aimnamespaceconfig.yaml": [],
    # The pod-hash in a Pod's name changes whenever what the Pod runs does.
    "model-ollama.yaml": [
        "Model kubeai/nomic-embed-text-cpu -> Pod kubeai/model-nomic-embed-text-cpu-61a0963acd-0",
    ],
    # No replicas wanted (minReplicas 0): shown again with one, said in the output.
    "model-vllm.yaml": [
        "Model kubeai/llama-3.1-8b-instruct-mi300x -> "
        "Pod kubeai/model-llama-3.1-8b-instruct-mi300x-c54b4a3364-0",
    ],
}
NO_PLAN = {
    "kaiwoconfig.yaml": "# KaiwoConfig kaiwo: owns no objects",
    "aimnamespaceconfig.yaml": "# AIMNamespaceConfig ml-prod/aim: owns no objects",
    "model-vllm.yaml": "model-vllm.yaml, with 1 replica (assumed))",
}


def run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["plan", *args])
    return result.exit_code, result.output


def sources(output: str) -> list[str]:
    return [line.removeprefix("# Source: ") for line in output.splitlines() if "# Source:" in line]


def documents(output: str) -> list[dict]:
    return [d for d in yaml.safe_load_all(output) if d is not None]


def write(path: Path, *objects: dict) -> Path:
    path.write_text(yaml.safe_dump_all(objects))
    return path


def test_every_example_has_expected_sources() -> None:
    assert sorted(EXPECTED_SOURCES) == sorted(p.name for p in EXAMPLES.glob("*.yaml"))


@pytest.mark.parametrize("example", sorted(EXPECTED_SOURCES))
def test_each_example_plans_what_a_user_expects(example: str) -> None:
    code, output = run("-f", str(EXAMPLES / example), "--now", NOW)

    assert code == 0, output
    assert sources(output) == EXPECTED_SOURCES[example]
    if example in NO_PLAN:
        assert NO_PLAN[example] in output


def test_the_training_job_runs_on_the_gpus_it_asks_for() -> None:
    code, output = run("-f", str(EXAMPLES / "kaiwojob-gpu-training.yaml"), "--now", NOW)

    assert code == 0, output
    parsed = documents(output)
    job = next(
        d for d in parsed if d["kind"] == "Job" and d["metadata"]["name"] == "llama-3-8b-sft"
    )
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["amd.com/gpu"] == "4"
    # One pod: the env says so (decision 0118), so torchrun does not wait for a second node.
    assert {"name": "NUM_REPLICAS", "value": "1"} in container["env"]
    assert {"name": "NUM_GPUS", "value": "4"} in container["env"]
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-nlp"
    statuses = [d["status"]["status"] for d in parsed if d["kind"] == "KaiwoJob"]
    assert statuses == ["DOWNLOADING", "PENDING"]
    assert "#   metadata.uid: 06dd5e2b-4d75-5565-b651-5b3a6193c46a (derived from" in output


def test_plans_are_repeatable_with_a_fixed_time() -> None:
    first = run("-f", str(EXAMPLES), "--now", NOW)
    second = run("-f", str(EXAMPLES), "--now", NOW)

    assert first == second
    assert first[0] == 0


def test_json_output_holds_the_plans() -> None:
    code, output = run("-f", str(EXAMPLES / "kaiwoqueueconfig.yaml"), "--now", NOW, "-o", "json")

    assert code == 0, output
    (item,) = json.loads(output)["plans"]
    assert item["plan"]["owner"]["kind"] == "KaiwoQueueConfig"
    # Planned from the files alone, no Kueue object exists yet (decision 0048).
    assert item["plan"]["status"]["status"] == "PENDING"
    assert item["source"] == str(EXAMPLES / "kaiwoqueueconfig.yaml")


HELLO = {
    "apiVersion": "kaiwo.silogen.ai/v1alpha1",
    "kind": "KaiwoJob",
    "metadata": {"name": "hello", "namespace": "team"},
    "spec": {"gpus": 2, "image": "busybox:1", "entrypoint": "echo hi"},
}
GPU_NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {
        "name": "gpu-0",
        "labels": {
            "amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM",
            "beta.amd.com/gpu.family.AI": "8",
        },
    },
    "status": {"capacity": {"amd.com/gpu": "8"}, "allocatable": {"amd.com/gpu": "8"}},
}


def test_nodes_and_config_files_are_used(tmp_path: Path) -> None:
    config = {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfig",
        "metadata": {"name": "kaiwo"},
        "spec": {"scheduling": {"kubeSchedulerName": "my-scheduler"}},
    }
    nodes = {"apiVersion": "v1", "kind": "List", "items": [GPU_NODE]}

    code, output = run(
        "-f",
        str(write(tmp_path / "job.yaml", HELLO)),
        "--nodes",
        str(write(tmp_path / "nodes.yaml", nodes)),
        "--config",
        str(write(tmp_path / "config.yaml", config)),
        "--now",
        NOW,
    )

    assert code == 0, output
    job, status = documents(output)
    assert job["spec"]["template"]["spec"]["schedulerName"] == "my-scheduler"
    assert status["status"]["status"] == "PENDING"
    assert "assumed 8-GPU nodes" not in output


def test_observed_children_move_the_status_on(tmp_path: Path) -> None:
    running_job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "hello", "namespace": "team"},
        "spec": {"suspend": False, "template": {"spec": {"containers": [{"name": "workload"}]}}},
        "status": {"active": 1, "ready": 1},
    }
    admission = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {
            "name": "job-hello",
            "namespace": "team",
            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": "hello"}],
        },
        "status": {"conditions": [{"type": "Admitted", "status": "True"}]},
    }

    code, output = run(
        "-f",
        str(write(tmp_path / "job.yaml", HELLO)),
        "--nodes",
        str(write(tmp_path / "nodes.yaml", GPU_NODE)),
        "--observed",
        str(write(tmp_path / "observed.yaml", running_job, admission)),
        "--now",
        NOW,
    )

    assert code == 0, output
    job, status = documents(output)
    assert "suspend" not in job["spec"]  # Kueue's once the Job exists
    assert status["status"]["status"] == "RUNNING"
    assert status["status"]["startTime"] == NOW
    assert "# Event Normal WorkloadRunning: Workload has started" in output


def test_a_cluster_without_gpus_says_why_nothing_is_created(tmp_path: Path) -> None:
    cpu_node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "cpu-0"}}
    code, output = run(
        "-f",
        str(EXAMPLES / "kaiwojob-ray.yaml"),
        "--nodes",
        str(write(tmp_path / "nodes.yaml", cpu_node)),
        "--now",
        NOW,
    )

    assert code == 0, output
    assert sources(output) == []
    (status,) = documents(output)
    assert status["status"]["status"] == "ERROR"
    assert "# Event Warning WorkloadError: Cluster has 0 GPUs (vendor: amd)" in output


def test_a_broken_manifest_names_the_field_and_exits_1(tmp_path: Path) -> None:
    broken = yaml.safe_load((EXAMPLES / "kaiwojob-ray.yaml").read_text())
    broken["spec"]["gpuVendor"] = 7
    path = write(tmp_path / "broken.yaml", broken)

    code, output = run("-f", str(path), "--now", NOW)

    assert code == 1
    assert output.strip() == f"{path}: spec.gpuVendor: must be a string"


def test_a_file_of_the_wrong_kind_is_refused(tmp_path: Path) -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}
    config_path = write(tmp_path / "config.yaml", node)

    code, output = run(
        "-f", str(EXAMPLES / "kaiwojob-ray.yaml"), "--config", str(config_path), "--now", NOW
    )

    assert code == 1
    assert output.strip() == f"{config_path}: kind: expected KaiwoConfig, got Node"


def test_a_kind_that_is_not_served_is_an_error_not_an_empty_plan(tmp_path: Path) -> None:
    unknown = {"apiVersion": "example.com/v1", "kind": "Frobnicator", "metadata": {"name": "f"}}
    typo = {**yaml.safe_load((EXAMPLES / "kaiwojob-ray.yaml").read_text()), "kind": "KaiwoJobb"}

    unknown_code, unknown_output = run("-f", str(write(tmp_path / "f.yaml", unknown)))
    typo_code, typo_output = run("-f", str(write(tmp_path / "typo.yaml", typo)))

    assert unknown_code == 1
    assert unknown_output.startswith(
        f"{tmp_path / 'f.yaml'}: apiVersion: unknown kind example.com/v1/Frobnicator; "
        "served kinds: config.kaiwo.silogen.ai/v1alpha1/AIMNamespaceConfig, "
    )
    assert typo_code == 1
    assert typo_output == (
        f"{tmp_path / 'typo.yaml'}: kind: unknown kind KaiwoJobb in kaiwo.silogen.ai/v1alpha1; "
        "known: GpuWorkload, KaiwoJob, KaiwoQueueConfig, KaiwoService\n"
    )


def test_a_hexadecimal_integer_of_200000_digits_is_refused_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "hex.yaml"
    path.write_text(
        "apiVersion: kaiwo.silogen.ai/v1alpha1\nkind: KaiwoJob\n"
        "metadata: {name: hex, namespace: ml-team}\nspec:\n  replicas: 0x" + "f" * 200_000 + "\n"
    )

    assert run("-f", str(path)) == (
        1,
        f"{path}: refused: an integer of 200000 digits (line 5); at most 100 are read\n",
    )


def test_unreadable_input_is_reported(tmp_path: Path) -> None:
    not_yaml = tmp_path / "bad.yaml"
    not_yaml.write_text("kind: [unclosed\n")

    assert run("-f", str(not_yaml))[0] == 1
    assert run("-f", str(tmp_path / "missing.yaml")) == (
        1,
        f"{tmp_path / 'missing.yaml'}: no such file or directory\n",
    )
    assert run("-f", str(EXAMPLES / "kaiwojob-ray.yaml"), "--now", "yesterday") == (
        1,
        "--now: not an ISO 8601 time: 'yesterday'\n",
    )


CACHED_MODEL = {
    "apiVersion": "kubeai.org/v1",
    "kind": "Model",
    "metadata": {"name": "qwen", "namespace": "llm"},
    "spec": {
        "url": "hf://Qwen/Qwen2.5-0.5B-Instruct",
        "engine": "VLLM",
        "features": ["TextGeneration"],
        "resourceProfile": "mi300x-small:2",
        "cacheProfile": "nfs",
        "replicas": 1,
    },
}
MODELS_YAML = """\
resourceProfiles:
  mi300x-small:
    imageName: amd-gpu
    requests: {cpu: "4", memory: 16Gi, amd.com/gpu: "1"}
    limits: {amd.com/gpu: "1"}
cacheProfiles:
  nfs:
    sharedFilesystem: {storageClassName: nfs-rwx, size: 100Gi}
"""


@pytest.mark.parametrize("as_config_map", [False, True], ids=["models.yaml", "ConfigMap"])
def test_a_model_with_a_cache_shows_the_volume_the_load_job_and_then_its_pods(
    tmp_path: Path, as_config_map: bool
) -> None:
    config = tmp_path / "models.yaml"
    if as_config_map:
        write(
            config,
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "kaiwo-models", "namespace": "kaiwo-system"},
                "data": {"models.yaml": MODELS_YAML},
            },
        )
    else:
        config.write_text(MODELS_YAML)
    model = write(tmp_path / "model.yaml", CACHED_MODEL)

    code, output = run("-f", str(model), "--models-config", str(config), "--now", NOW)

    assert code == 0, output
    assert sources(output)[0] == "Model llm/qwen -> Job llm/load-cache-qwen"
    assert "# Shared: Model llm/qwen -> PersistentVolumeClaim llm/shared-model-cache-nfs" in output
    assert "model.yaml, once it carries its finalizers (assumed))" in output
    assert "model.yaml, once its cache is loaded (assumed))" in output
    assert "# Sets its own finalizers on Model llm/qwen: kubeai.org/cache-eviction" in output
    pod = next(d for d in documents(output) if d["kind"] == "Pod")
    [server] = pod["spec"]["containers"]
    assert server["resources"] == {
        "requests": {"cpu": "8", "memory": "32Gi", "amd.com/gpu": "2"},
        "limits": {"amd.com/gpu": "2"},
    }
    assert server["args"][0] == "--model=/models/qwen-" + str(
        next(d for d in documents(output) if d["kind"] == "Job")["metadata"]["ownerReferences"][0][
            "uid"
        ]
    )


def test_an_unknown_resource_profile_is_reported_and_nothing_is_planned(tmp_path: Path) -> None:
    model = write(
        tmp_path / "model.yaml",
        {**CACHED_MODEL, "spec": {**CACHED_MODEL["spec"], "resourceProfile": "tpu-v9:1"}},
    )

    code, output = run("-f", str(model), "--now", NOW)

    assert code == 0, output
    assert sources(output) == []
    assert '# Event Warning NotConfigured: resource profile not found: "tpu-v9"' in output
