"""`kaiwo validate`: the examples pass; broken variants of every kind fail naming the field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from kaiwo_cli.main import app

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
runner = CliRunner()


def _run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def test_every_example_is_accepted() -> None:
    code, output = _run("validate", "-f", str(EXAMPLES))
    assert code == 0, output
    assert output.strip().endswith("document(s) valid")
    assert len(list(EXAMPLES.glob("*.yaml"))) >= 6


@pytest.mark.parametrize("example", sorted(EXAMPLES.glob("*.yaml")), ids=lambda path: path.name)
def test_each_example_file_is_accepted_on_its_own(example: Path) -> None:
    code, output = _run("validate", "-f", str(example))
    assert code == 0, output


def _set(document: dict[str, Any], dotted: str, value: Any) -> None:
    """Set (or, with value ``_DELETE``, remove) ``a.b[0].c`` in a parsed manifest."""
    steps: list[str | int] = []
    for part in dotted.split("."):
        name, _, rest = part.partition("[")
        steps.append(name)
        steps += [int(index) for index in rest.rstrip("]").split("][") if index]
    node: Any = document
    for step in steps[:-1]:
        node = node[step]
    if value is _DELETE:
        del node[steps[-1]]
    else:
        node[steps[-1]] = value


_DELETE = object()

# (example, field to break, value (or _DELETE), "kind/name", expected message). Every kind
# gets each way of being wrong: enum, pattern, bound, unknown field, missing field, type.
_BROKEN = [
    # KaiwoJob
    ("kaiwojob-gpu-training.yaml", "spec.storage.accessMode", "ReadWriteSometimes",
     "KaiwoJob/llama-3-8b-sft",
     "must be one of ReadWriteOnce, ReadOnlyMany, ReadWriteMany, ReadWriteOncePod"),
    ("kaiwojob-gpu-training.yaml", "spec.duration", "12 hours", "KaiwoJob/llama-3-8b-sft",
     "must be a duration such as 30m"),
    ("kaiwojob-gpu-training.yaml", "spec.gpus", -1, "KaiwoJob/llama-3-8b-sft",
     "must be at least 0"),
    ("kaiwojob-gpu-training.yaml", "spec.gpuz", 8, "KaiwoJob/llama-3-8b-sft", "unknown field"),
    ("kaiwojob-gpu-training.yaml", "spec.env[0].name", _DELETE, "KaiwoJob/llama-3-8b-sft",
     "required field is missing"),
    ("kaiwojob-gpu-training.yaml", "spec.replicas", "two", "KaiwoJob/llama-3-8b-sft",
     "must be a whole number"),
    ("kaiwojob-gpu-training.yaml", "spec.storage.data.storageSize", 200,
     "KaiwoJob/llama-3-8b-sft", "must be a string"),
    # KaiwoService
    ("kaiwoservice-deployment.yaml", "spec.storage.accessMode", "rwx", "KaiwoService/qwen-chat",
     "must be one of ReadWriteOnce, ReadOnlyMany, ReadWriteMany, ReadWriteOncePod"),
    ("kaiwoservice-deployment.yaml", "spec.duration", "forever", "KaiwoService/qwen-chat",
     "must be a duration such as 30m"),
    ("kaiwoservice-deployment.yaml", "spec.gpus", -2, "KaiwoService/qwen-chat",
     "must be at least 0"),
    ("kaiwoservice-deployment.yaml", "spec.entryPoint", "x", "KaiwoService/qwen-chat",
     "unknown field"),
    ("kaiwoservice-deployment.yaml", "spec.storage.huggingFace.preCacheRepos[0].repoId",
     _DELETE, "KaiwoService/qwen-chat", "required field is missing"),
    ("kaiwoservice-deployment.yaml", "spec.storage.storageEnabled", "yes please",
     "KaiwoService/qwen-chat", "must be true or false"),
    # KaiwoQueueConfig
    ("kaiwoqueueconfig.yaml", "spec.resourceFlavors[0].taints[0].effect", "Sometimes",
     "KaiwoQueueConfig/kaiwo", "must be one of NoSchedule, PreferNoSchedule, NoExecute"),
    ("kaiwoqueueconfig.yaml", "spec.resourceFlavors[0].nodeLabels",
     {f"label-{n}": "x" for n in range(11)}, "KaiwoQueueConfig/kaiwo",
     "must have at most 10 entries"),
    ("kaiwoqueueconfig.yaml", "spec.clusterQueue", [], "KaiwoQueueConfig/kaiwo",
     "unknown field"),
    ("kaiwoqueueconfig.yaml", "spec.clusterQueues[0].name", _DELETE, "KaiwoQueueConfig/kaiwo",
     "required field is missing"),
    ("kaiwoqueueconfig.yaml", "spec.clusterQueues[0].namespaces", "ml-team",
     "KaiwoQueueConfig/kaiwo", "must be a list"),
    # KaiwoConfig
    ("kaiwoconfig.yaml", "spec.resourceMonitoring.profile", "cpu", "KaiwoConfig/kaiwo",
     "must be gpu"),
    ("kaiwoconfig.yaml", "spec.resourceMonitoring.terminateUnderutilizedAfter", "1 day",
     "KaiwoConfig/kaiwo", "must be a duration such as 30"),
    ("kaiwoconfig.yaml", "spec.resourceMonitoring.lowUtilizationThreshold", -1,
     "KaiwoConfig/kaiwo", "must be at least 0"),
    ("kaiwoconfig.yaml", "spec.storageClass", "x", "KaiwoConfig/kaiwo", "unknown field"),
    ("kaiwoconfig.yaml", "spec.nodes.addTaintsToGpuNodes", "true", "KaiwoConfig/kaiwo",
     "must be true or false"),
    # AIMNamespaceConfig
    ("aimnamespaceconfig.yaml", "spec.gateway.hostname", "x", "AIMNamespaceConfig/aim",
     "unknown field"),
    ("aimnamespaceconfig.yaml", "spec.images.imagePullSecrets", "aim-registry-creds",
     "AIMNamespaceConfig/aim", "must be a list"),
    # Model
    ("model-vllm.yaml", "spec.engine", "vLLM", "Model/llama-3.1-8b-instruct-mi300x",
     "must be one of OLlama, VLLM, FasterWhisper, Infinity"),
    ("model-vllm.yaml", "spec.url", _DELETE, "Model/llama-3.1-8b-instruct-mi300x",
     "required field is missing"),
    ("model-vllm.yaml", "spec.minReplicas", -1, "Model/llama-3.1-8b-instruct-mi300x",
     "must be at least 0"),
    ("model-vllm.yaml", "spec.targetRequests", 0, "Model/llama-3.1-8b-instruct-mi300x",
     "must be at least 1"),
    ("model-vllm.yaml", "spec.replicaz", 1, "Model/llama-3.1-8b-instruct-mi300x",
     "unknown field"),
    ("model-vllm.yaml", "spec.args", "--max-model-len=32768", "Model/llama-3.1-8b-instruct-mi300x",
     "must be a list"),
    ("model-vllm.yaml", "spec.features[0]", "Chat", "Model/llama-3.1-8b-instruct-mi300x",
     "must be one of TextGeneration, TextEmbedding, SpeechToText"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("example", "field", "value", "label", "message"),
    _BROKEN,
    ids=[f"{case[0]}:{case[1]}" for case in _BROKEN],
)
def test_a_broken_variant_is_rejected_naming_the_field(
    tmp_path: Path, example: str, field: str, value: Any, label: str, message: str
) -> None:
    document = yaml.safe_load((EXAMPLES / example).read_text())
    _set(document, field, value)
    broken = tmp_path / example
    broken.write_text(yaml.safe_dump(document))

    code, output = _run("validate", "-f", str(broken))

    assert code == 1
    assert f"{broken}:doc#1 {label}: {field}: {message}" in output, output
    assert "1 of 1 document(s) invalid" in output


def test_every_document_of_a_multi_document_file_is_checked(tmp_path: Path) -> None:
    job = yaml.safe_load((EXAMPLES / "kaiwojob-gpu-training.yaml").read_text())
    broken_job = yaml.safe_load((EXAMPLES / "kaiwojob-gpu-training.yaml").read_text())
    broken_job["spec"]["gpus"] = -1
    broken_job["spec"]["gpuVendors"] = "amd"
    stream = tmp_path / "all.yaml"
    stream.write_text(yaml.safe_dump_all([job, None, broken_job]))

    code, output = _run("validate", "-f", str(stream))

    assert code == 1
    assert f"{stream}:doc#3 KaiwoJob/llama-3-8b-sft: spec.gpus: must be at least 0" in output
    assert f"{stream}:doc#3 KaiwoJob/llama-3-8b-sft: spec.gpuVendors: unknown field" in output
    assert "doc#1" not in output
    assert "1 of 2 document(s) invalid (2 problem(s))" in output


def test_an_unknown_kind_is_a_problem(tmp_path: Path) -> None:
    manifest = tmp_path / "pod.yaml"
    manifest.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec: {}\n")

    code, output = _run("validate", "-f", str(manifest))

    assert code == 1
    assert f"{manifest}:doc#1 Pod/web: apiVersion: unknown kind v1/Pod; served kinds:" in output


def test_a_kind_in_the_wrong_api_version_is_named(tmp_path: Path) -> None:
    manifest = tmp_path / "job.yaml"
    manifest.write_text("apiVersion: kaiwo.silogen.ai/v1\nkind: KaiwoJob\nmetadata: {name: j}\n")

    code, output = _run("validate", "-f", str(manifest))

    assert code == 1
    assert (
        f"{manifest}:doc#1 KaiwoJob/j: apiVersion: KaiwoJob is served as "
        "kaiwo.silogen.ai/v1alpha1, not kaiwo.silogen.ai/v1"
    ) in output


def test_a_file_that_is_not_yaml_is_reported(tmp_path: Path) -> None:
    manifest = tmp_path / "bad.yaml"
    manifest.write_text("spec: [unclosed\n")

    code, output = _run("validate", "-f", str(manifest))

    assert code == 1
    assert f"{manifest}: not valid YAML" in output


def test_a_directory_without_manifests_fails(tmp_path: Path) -> None:
    code, output = _run("validate", "-f", str(tmp_path))
    assert code == 1
    assert "no manifests found" in output


def test_version_prints_the_installed_version() -> None:
    code, output = _run("version")
    assert code == 0
    assert output.startswith("kaiwo 0.")


def test_crds_prints_every_crd_as_multi_document_yaml() -> None:
    code, output = _run("crds")
    assert code == 0
    documents = list(yaml.safe_load_all(output))
    assert sorted(document["metadata"]["name"] for document in documents) == [
        "aimnamespaceconfigs.config.kaiwo.silogen.ai",
        "gpuworkloads.kaiwo.silogen.ai",
        "kaiwoconfigs.config.kaiwo.silogen.ai",
        "kaiwojobs.kaiwo.silogen.ai",
        "kaiwoqueueconfigs.kaiwo.silogen.ai",
        "kaiwoservices.kaiwo.silogen.ai",
        "models.kubeai.org",
    ]


def test_crds_writes_one_file_per_crd(tmp_path: Path) -> None:
    code, _ = _run("crds", "--output-dir", str(tmp_path))
    assert code == 0
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "config.kaiwo.silogen.ai_aimnamespaceconfigs.yaml",
        "config.kaiwo.silogen.ai_kaiwoconfigs.yaml",
        "kaiwo.silogen.ai_gpuworkloads.yaml",
        "kaiwo.silogen.ai_kaiwojobs.yaml",
        "kaiwo.silogen.ai_kaiwoqueueconfigs.yaml",
        "kaiwo.silogen.ai_kaiwoservices.yaml",
        "kubeai.org_models.yaml",
    ]
    job_crd = yaml.safe_load((tmp_path / "kaiwo.silogen.ai_kaiwojobs.yaml").read_text())
    assert job_crd["spec"]["names"]["kind"] == "KaiwoJob"


def test_a_value_no_branch_of_a_union_takes_gets_one_message(tmp_path: Path) -> None:
    document = yaml.safe_load((EXAMPLES / "kaiwojob-gpu-training.yaml").read_text())
    document["spec"]["resources"]["requests"]["cpu"] = [32]
    manifest = tmp_path / "job.yaml"
    manifest.write_text(yaml.safe_dump(document))

    code, output = _run("validate", "-f", str(manifest))

    assert code == 1
    assert (
        f"{manifest}:doc#1 KaiwoJob/llama-3-8b-sft: spec.resources.requests.cpu: "
        "must be a whole number or a string"
    ) in output


def test_unquoted_yaml_timestamps_and_lists_of_a_kind_are_understood(tmp_path: Path) -> None:
    model = yaml.safe_load((EXAMPLES / "model-vllm.yaml").read_text())
    manifest = tmp_path / "models.yaml"
    manifest.write_text(
        "apiVersion: kubeai.org/v1\nkind: ModelList\nmetadata: {}\nitems:\n"
        + "\n".join("  " + line for line in yaml.safe_dump([model]).splitlines())
        + "\n---\n"
        + yaml.safe_dump(model).replace(
            "metadata:\n", "metadata:\n  creationTimestamp: 2025-01-31T12:00:00Z\n", 1
        )
    )

    code, output = _run("validate", "-f", str(manifest))

    assert code == 0, output
    assert "2 document(s) valid" in output


def test_a_lone_surrogate_in_the_yaml_is_reported_not_a_traceback(tmp_path: Path) -> None:
    # Found by fuzzing: printing the problem about "\ud800" raised UnicodeEncodeError.
    manifest = tmp_path / "job.yaml"
    manifest.write_text(
        'apiVersion: "\\ud800"\nkind: KaiwoJob\nmetadata: {name: a, namespace: b}\n',
        encoding="utf-8",
    )
    result = runner.invoke(app, ["validate", "-f", str(manifest)])
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.exit_code == 1
    assert "KaiwoJob is served as kaiwo.silogen.ai/v1alpha1, not \ufffd" in result.output


DELETES_EXISTING = (
    "with spec.clusterSelector: the existing Ray cluster is not the RayJob's to delete, and "
    "KubeRay refuses a RayJob on an existing cluster whose deletion policy deletes the cluster "
    "or its workers (DeleteCluster, DeleteWorkers); use DeleteSelf or DeleteNone"
)


@pytest.mark.parametrize(
    ("ray_job_spec", "message"),
    [
        (
            {"clusterSelector": {"app": "shared"}},
            "spec.rayJob: spec.clusterSelector must name the Ray cluster under the key "
            "ray.io/cluster (ray.io/cluster: <name of a RayCluster in the KaiwoJob's "
            "namespace>): KubeRay runs the RayJob on the RayCluster of that name and reads no "
            "other key",
        ),
        (
            {"clusterSelector": {"ray.io/cluster": "shared"}, "rayClusterSpec": {}},
            "spec.rayJob: spec.clusterSelector and spec.rayClusterSpec must not both be given: "
            "with clusterSelector the RayJob runs on the existing cluster and rayClusterSpec is "
            "ignored; leave out one of them",
        ),
        (
            {"clusterSelector": {"ray.io/cluster": "shared"}, "backoffLimit": 2},
            "spec.rayJob: spec.backoffLimit must not be above 0 with spec.clusterSelector: "
            "KubeRay retries a RayJob on a cluster of its own, and refuses to retry one on an "
            "existing cluster; leave spec.backoffLimit out",
        ),
        (
            {"clusterSelector": {"ray.io/cluster": "shared"}, "submissionMode": "SidecarMode"},
            "spec.rayJob: spec.submissionMode must not be SidecarMode with "
            "spec.clusterSelector: in SidecarMode KubeRay submits the job from a container it "
            "adds to the head pod of the RayJob's own cluster, and refuses it on an existing "
            "cluster; leave spec.submissionMode out (K8sJobMode) or set K8sJobMode, HTTPMode "
            "or InteractiveMode",
        ),
        (
            {
                "clusterSelector": {"ray.io/cluster": "shared"},
                "deletionStrategy": {
                    "onSuccess": {"policy": "DeleteCluster"},
                    "onFailure": {"policy": "DeleteNone"},
                },
            },
            "spec.rayJob: spec.deletionStrategy.onSuccess.policy must not be DeleteCluster "
            + DELETES_EXISTING,
        ),
        (
            {
                "clusterSelector": {"ray.io/cluster": "shared"},
                "deletionStrategy": {
                    "onSuccess": {"policy": "DeleteSelf"},
                    "onFailure": {"policy": "DeleteWorkers"},
                },
            },
            "spec.rayJob: spec.deletionStrategy.onFailure.policy must not be DeleteWorkers "
            + DELETES_EXISTING,
        ),
        (
            {
                "clusterSelector": {"ray.io/cluster": "shared"},
                "deletionStrategy": {
                    "deletionRules": [
                        {"policy": "DeleteSelf", "condition": {"jobStatus": "SUCCEEDED"}},
                        {"policy": "DeleteWorkers", "condition": {"jobStatus": "FAILED"}},
                    ]
                },
            },
            "spec.rayJob: spec.deletionStrategy.deletionRules[1].policy must not be "
            "DeleteWorkers " + DELETES_EXISTING,
        ),
        (
            {
                "clusterSelector": {"ray.io/cluster": "shared"},
                "deletionStrategy": {
                    "deletionRules": [
                        {"policy": "DeleteCluster", "condition": {"jobDeploymentStatus": "Failed"}}
                    ]
                },
            },
            "spec.rayJob: spec.deletionStrategy.deletionRules[0].policy must not be "
            "DeleteCluster " + DELETES_EXISTING,
        ),
    ],
    ids=[
        "no-cluster-name",
        "two-clusters",
        "retries",
        "sidecar",
        "deletes-cluster-on-success",
        "deletes-workers-on-failure",
        "rule-deletes-workers",
        "rule-deletes-cluster",
    ],
)
def test_a_ray_job_on_an_existing_cluster_kuberay_cannot_run_is_refused_offline(
    tmp_path: Path, ray_job_spec: dict[str, Any], message: str
) -> None:
    """A ``rayJob.spec`` with a ``clusterSelector`` KubeRay would fail for good (decision
    0156) is refused before anything is sent, naming the user's field."""
    job = yaml.safe_load((EXAMPLES / "kaiwojob-ray.yaml").read_text())
    job["spec"]["rayJob"] = {"spec": ray_job_spec}
    manifest = tmp_path / "job.yaml"
    manifest.write_text(yaml.safe_dump(job))

    code, output = _run("validate", "-f", str(manifest))

    assert code == 1
    assert f"KaiwoJob/batch-inference-ray: {message}" in " ".join(output.split()), output


@pytest.mark.parametrize(
    "ray_job_extra",
    [
        {},
        {"submissionMode": "HTTPMode"},
        {"submissionMode": "InteractiveMode"},
        {
            "deletionStrategy": {
                "onSuccess": {"policy": "DeleteSelf"},
                "onFailure": {"policy": "DeleteNone"},
            }
        },
        {
            "deletionStrategy": {
                "deletionRules": [
                    {
                        "policy": "DeleteSelf",
                        "condition": {"jobStatus": "SUCCEEDED", "ttlSeconds": 60},
                    },
                    {"policy": "DeleteNone", "condition": {"jobStatus": "FAILED"}},
                ]
            }
        },
    ],
    ids=["plain", "http-mode", "interactive-mode", "legacy-keeps-cluster", "rules-keep-cluster"],
)
def test_a_ray_job_naming_its_existing_cluster_is_accepted(
    tmp_path: Path, ray_job_extra: dict[str, Any]
) -> None:
    """What KubeRay accepts on an existing cluster is not refused (measured on the real
    stack, decision 0159): the other submission modes, and deletion policies that delete
    only the RayJob, or nothing."""
    job = yaml.safe_load((EXAMPLES / "kaiwojob-ray.yaml").read_text())
    job["spec"]["rayJob"] = {
        "spec": {"clusterSelector": {"ray.io/cluster": "shared"}, **ray_job_extra}
    }
    manifest = tmp_path / "job.yaml"
    manifest.write_text(yaml.safe_dump(job))

    code, output = _run("validate", "-f", str(manifest))

    assert code == 0, output


KUEUE_SWEEP_ANNOTATIONS = {
    "kueue.x-k8s.io/job-min-parallelism": "2",
    "kueue.x-k8s.io/job-completions-equal-parallelism": "true",
}


def test_a_nonindexed_job_kueue_would_keep_complete_as_admitted_is_refused_offline(
    tmp_path: Path,
) -> None:
    """``job-completions-equal-parallelism: "true"`` on a NonIndexed Job: Kueue's webhook
    refuses the Job (decision 0160); ``kaiwo validate`` says so first, naming the field."""
    job = yaml.safe_load((EXAMPLES / "kaiwojob-gpu-training.yaml").read_text())
    job["spec"]["job"] = {
        "metadata": {"annotations": KUEUE_SWEEP_ANNOTATIONS},
        "spec": {"parallelism": 4, "completions": 4},
    }
    manifest = tmp_path / "job.yaml"
    manifest.write_text(yaml.safe_dump(job))

    code, output = _run("validate", "-f", str(manifest))

    assert code == 1
    assert (
        "KaiwoJob/llama-3-8b-sft: spec.job: spec.completionMode must be Indexed with "
        'metadata.annotations["kueue.x-k8s.io/job-completions-equal-parallelism"] "true": '
        "Kueue then sets the completions"
    ) in " ".join(output.split()), output


def test_an_indexed_sweep_kueue_keeps_complete_as_admitted_is_accepted(tmp_path: Path) -> None:
    job = yaml.safe_load((EXAMPLES / "kaiwojob-gpu-training.yaml").read_text())
    job["spec"]["job"] = {
        "metadata": {"annotations": KUEUE_SWEEP_ANNOTATIONS},
        "spec": {"parallelism": 4, "completions": 4, "completionMode": "Indexed"},
    }
    manifest = tmp_path / "job.yaml"
    manifest.write_text(yaml.safe_dump(job))

    code, output = _run("validate", "-f", str(manifest))

    assert code == 0, output


def test_a_job_asking_for_another_vendors_gpus_in_its_template_is_refused_offline(
    tmp_path: Path,
) -> None:
    """An AMD job (``gpus`` given, vendor left out) whose ``spec.job`` container limits
    ``nvidia.com/gpu``: its pods would ask for both kinds and wait for good (decision 0161);
    ``kaiwo validate`` says so first, naming the field."""
    job = yaml.safe_load((EXAMPLES / "kaiwojob-gpu-training.yaml").read_text())
    job["spec"].pop("gpuVendor", None)
    job["spec"]["job"] = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": 1}}}]
                }
            }
        }
    }
    manifest = tmp_path / "job.yaml"
    manifest.write_text(yaml.safe_dump(job))

    code, output = _run("validate", "-f", str(manifest))

    assert code == 1
    assert (
        "KaiwoJob/llama-3-8b-sft: spec.job: spec.template.spec.containers[0].resources.limits"
        '["nvidia.com/gpu"] (1) must not be given: the KaiwoJob asks Kaiwo for AMD GPUs'
    ) in " ".join(output.split()), output
