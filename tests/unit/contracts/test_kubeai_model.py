"""KubeAI Model: seed defaults, field validation, CEL rules (schema and offline), round trips."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from kaiwo_contracts.crds.base import ScaleSubresource
from kaiwo_contracts.crds.kubeai_v1 import (
    Model,
    ModelList,
    ModelSpec,
    ModelStatusReplicas,
    RuleViolation,
)
from kaiwo_contracts.crds.meta import ObjectMeta
from pydantic import ValidationError

# A Model as the API server returns it: defaults materialised, labels written by the
# controller, finalizer of a cache-backed model, status with replicas and cache.
MODEL_FROM_API: dict[str, Any] = {
    "apiVersion": "kubeai.org/v1",
    "kind": "Model",
    "metadata": {
        "name": "llama-3.1-8b-instruct-mi300x",
        "namespace": "kubeai",
        "uid": "9c1f3b8e-2a7d-4f0e-8b61-5d2c7e9a4f30",
        "resourceVersion": "120044",
        "generation": 4,
        "creationTimestamp": "2025-09-01T10:00:00Z",
        "labels": {"features.kubeai.org/TextGeneration": "true"},
        "finalizers": ["kubeai.org/cache-eviction"],
    },
    "spec": {
        "url": "hf://meta-llama/Llama-3.1-8B-Instruct",
        "features": ["TextGeneration"],
        "engine": "VLLM",
        "resourceProfile": "amd-gpu-mi300x:1",
        "cacheProfile": "shared-nfs",
        "args": ["--max-model-len=32768"],
        "env": {"VLLM_USE_TRITON_FLASH_ATTN": "0"},
        "envFrom": [{"secretRef": {"name": "hf-token"}}],
        "adapters": [{"name": "sql-lora", "url": "hf://org/sql-lora"}],
        "replicas": 2,
        "minReplicas": 1,
        "maxReplicas": 4,
        "targetRequests": 32,
        "scaleDownDelaySeconds": 120,
        "owner": "",
        "loadBalancing": {
            "strategy": "PrefixHash",
            "prefixHash": {"meanLoadFactor": 125, "replication": 20, "prefixCharLength": 100},
        },
        "files": [{"path": "/config/chat-template.jinja", "content": "{{ messages }}"}],
        "priorityClassName": "inference-high",
    },
    "status": {"replicas": {"all": 2, "ready": 1}, "cache": {"loaded": True}},
}


def _model(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubeai.org/v1",
        "kind": "Model",
        "metadata": {"name": "m", "namespace": "kubeai"},
        "spec": {"url": "hf://org/model", "engine": "VLLM", "features": ["TextGeneration"]} | spec,
    }


def _errors(error: ValidationError) -> list[tuple[tuple[str | int, ...], str]]:
    return [(entry["loc"], entry["msg"]) for entry in error.errors()]


# ------------------------------------------------------------------ defaults


def test_a_minimal_model_reads_as_the_seed_defaults() -> None:
    spec = Model.from_wire(_model()).spec

    assert spec.replicas is None
    assert spec.min_replicas == 0
    assert spec.max_replicas is None
    assert spec.autoscaling_disabled is False
    assert spec.target_requests == 100
    assert spec.scale_down_delay_seconds == 30
    assert spec.owner == ""
    assert spec.load_balancing.strategy == "LeastLoad"
    assert spec.load_balancing.prefix_hash.mean_load_factor == 125
    assert spec.load_balancing.prefix_hash.replication == 20
    assert spec.load_balancing.prefix_hash.prefix_char_length == 100
    assert spec.adapters is None
    assert spec.resource_profile is None
    assert spec.cache_profile is None
    assert spec.image is None
    assert spec.args is None
    assert spec.env is None
    assert spec.env_from is None
    assert spec.files is None
    assert spec.priority_class_name is None


def test_url_and_engine_are_all_a_model_needs() -> None:
    spec = ModelSpec.from_wire({"url": "ollama://qwen2:0.5b", "engine": "OLlama"})

    assert spec.features is None
    assert spec.engine == "OLlama"


def test_a_fresh_model_has_no_status_and_empty_status_counts_zero() -> None:
    model = Model.from_wire(_model())
    status_only_cache = Model.from_wire(_model() | {"status": {"cache": {"loaded": False}}})

    assert model.status is None
    assert status_only_cache.status is not None
    assert status_only_cache.status.replicas == ModelStatusReplicas(all=0, ready=0)


def test_a_model_built_in_python_is_sent_with_its_type() -> None:
    model = Model(
        metadata=ObjectMeta(name="qwen", namespace="kubeai"),
        spec=ModelSpec(url="ollama://qwen2:0.5b", engine="OLlama", features=["TextGeneration"]),
    )

    assert model.to_wire() == {
        "apiVersion": "kubeai.org/v1",
        "kind": "Model",
        "metadata": {"name": "qwen", "namespace": "kubeai"},
        "spec": {"url": "ollama://qwen2:0.5b", "engine": "OLlama", "features": ["TextGeneration"]},
    }


# ------------------------------------------------------------------ round trips


def test_a_model_from_the_api_server_round_trips_unchanged() -> None:
    parsed = Model.from_wire(copy.deepcopy(MODEL_FROM_API))

    assert parsed.to_wire() == MODEL_FROM_API
    assert parsed.spec.env_from is not None
    assert parsed.spec.env_from[0].secret_ref is not None
    assert parsed.spec.env_from[0].secret_ref.name == "hf-token"


def test_a_model_list_round_trips() -> None:
    wire = {
        "apiVersion": "kubeai.org/v1",
        "kind": "ModelList",
        "metadata": {"resourceVersion": "120045"},
        "items": [copy.deepcopy(MODEL_FROM_API), _model()],
    }

    parsed = ModelList.from_wire(copy.deepcopy(wire))

    assert [item.metadata.name for item in parsed.items] == ["llama-3.1-8b-instruct-mi300x", "m"]
    assert parsed.to_wire() == wire


# ------------------------------------------------------------------ field validation


@pytest.mark.parametrize(
    ("spec", "loc", "message"),
    [
        (
            {"engine": "vllm"},
            ("spec", "engine"),
            "Input should be 'OLlama', 'VLLM', 'FasterWhisper' or 'Infinity'",
        ),
        (
            {"features": ["Reranking"]},
            ("spec", "features", 0),
            "Input should be 'TextGeneration', 'TextEmbedding' or 'SpeechToText'",
        ),
        (
            {"minReplicas": -1},
            ("spec", "minReplicas"),
            "Input should be greater than or equal to 0",
        ),
        ({"maxReplicas": 0}, ("spec", "maxReplicas"), "Input should be greater than or equal to 1"),
        (
            {"targetRequests": 0},
            ("spec", "targetRequests"),
            "Input should be greater than or equal to 1",
        ),
        (
            {"loadBalancing": {"strategy": "RoundRobin"}},
            ("spec", "loadBalancing", "strategy"),
            "Input should be 'LeastLoad' or 'PrefixHash'",
        ),
        (
            {"loadBalancing": {"prefixHash": {"meanLoadFactor": 99}}},
            ("spec", "loadBalancing", "prefixHash", "meanLoadFactor"),
            "Input should be greater than or equal to 100",
        ),
        (
            {"adapters": [{"name": "Sql_Lora", "url": "hf://org/sql"}]},
            ("spec", "adapters", 0, "name"),
            "String should match pattern '^[a-z0-9-]+$'",
        ),
        (
            {"adapters": [{"name": "a" * 64, "url": "hf://org/sql"}]},
            ("spec", "adapters", 0, "name"),
            "String should have at most 63 characters",
        ),
        (
            {"adapters": [{"url": "hf://org/sql"}]},
            ("spec", "adapters", 0, "name"),
            "Field required",
        ),
        (
            {"files": [{"path": f"/f{index}", "content": ""} for index in range(11)]},
            ("spec", "files"),
            "List should have at most 10 items after validation, not 11",
        ),
        (
            {"files": [{"path": "/f", "content": "x" * 100001}]},
            ("spec", "files", 0, "content"),
            "String should have at most 100000 characters",
        ),
        (
            {"files": [{"path": "/" + "p" * 1024, "content": ""}]},
            ("spec", "files", 0, "path"),
            "String should have at most 1024 characters",
        ),
        (
            {"resourceProfile": "amd-gpu-mi300x"},
            ("spec", "resourceProfile"),
            'must look like "<resource-profile>:<count>", for example "amd-gpu-mi300x:1"',
        ),
        (
            {"resourceProfile": "amd-gpu-mi300x:two"},
            ("spec", "resourceProfile"),
            'must look like "<resource-profile>:<count>", for example "amd-gpu-mi300x:1"',
        ),
        (
            {"resourceProfile": "cpu:" + "1" * 5000},  # past Python's 4,300 digits too
            ("spec", "resourceProfile"),
            "the count must be at most 999999999",
        ),
        (
            {"resourceProfile": "cpu:1000000000"},
            ("spec", "resourceProfile"),
            "the count must be at most 999999999",
        ),
        ({"gpus": 1}, ("spec", "gpus"), "Extra inputs are not permitted"),
        (
            {"loadBalancing": {"prefixHash": {"replication": 0}}},
            ("spec", "loadBalancing", "prefixHash", "replication"),
            "Input should be greater than or equal to 1",
        ),
        (
            {"loadBalancing": {"prefixHash": {"replication": 1001}}},
            ("spec", "loadBalancing", "prefixHash", "replication"),
            "Input should be less than or equal to 1000",
        ),
    ],
)
def test_field_validations_name_the_field(
    spec: dict[str, Any], loc: tuple[str | int, ...], message: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        Model.from_wire(_model(**spec))

    assert _errors(caught.value) == [(loc, message)]


@pytest.mark.parametrize("missing", ["url", "engine"])
def test_url_and_engine_are_required(missing: str) -> None:
    wire = _model()
    del wire["spec"][missing]

    with pytest.raises(ValidationError) as caught:
        Model.from_wire(wire)

    assert _errors(caught.value) == [(("spec", missing), "Field required")]


def test_the_api_version_must_be_kubeai_v1() -> None:
    wire = _model()
    wire["apiVersion"] = "kubeai.org/v1alpha1"

    with pytest.raises(ValidationError) as caught:
        Model.from_wire(wire)

    assert _errors(caught.value) == [(("apiVersion",), "Input should be 'kubeai.org/v1'")]


# ------------------------------------------------------------------ CEL rules, offline


@pytest.mark.parametrize(
    ("spec", "loc", "message"),
    [
        (
            {"url": "file:///models/llama"},
            ("spec", "url"),
            'url must start with "hf://", "pvc://", "ollama://", "s3://", "gs://", or "oss://"'
            " and not be empty.",
        ),
        (
            {"url": ""},
            ("spec", "url"),
            'url must start with "hf://", "pvc://", "ollama://", "s3://", "gs://", or "oss://"'
            " and not be empty.",
        ),
        (
            {"adapters": [{"name": "sql", "url": "pvc://adapters/sql"}]},
            ("spec", "adapters", 0, "url"),
            'adapter url must start with "hf://", "s3://", "gs://", or "oss://".',
        ),
        (
            {"files": [{"path": "config/template.txt", "content": ""}]},
            ("spec", "files", 0, "path"),
            "Path must be an absolute path, starting with /, and must not contain a ':' character.",
        ),
        (
            {"files": [{"path": "/config/a:b", "content": ""}]},
            ("spec", "files", 0, "path"),
            "Path must be an absolute path, starting with /, and must not contain a ':' character.",
        ),
        (
            {"url": "pvc://models/llama", "cacheProfile": "nfs"},
            ("spec", "cacheProfile"),
            'cacheProfile is only supported with urls of format "hf://...", "s3://...", '
            '"gs://...", or "oss://..." at the moment.',
        ),
        (
            {"url": "gs://bucket/llama"},
            ("spec", "url"),
            'urls of format "gs://..." only supported when using a cacheProfile',
        ),
        (
            {"url": "oss://bucket/llama"},
            ("spec", "url"),
            'urls of format "oss://..." only supported when using a cacheProfile',
        ),
        (
            {"minReplicas": 3, "maxReplicas": 2},
            ("spec", "minReplicas"),
            "minReplicas should be less than or equal to maxReplicas.",
        ),
        (
            {"engine": "OLlama", "url": "ollama://qwen2", "adapters": []},
            ("spec", "adapters"),
            "adapters only supported with VLLM engine.",
        ),
        (
            {
                "files": [
                    {"path": "/config/a.txt", "content": "one"},
                    {"path": "/config/b.txt", "content": "two"},
                    {"path": "/config/a.txt", "content": "three"},
                ]
            },
            ("spec", "files"),
            "All file paths must be unique.",
        ),
    ],
)
def test_each_cel_rule_is_enforced_offline_at_its_field(
    spec: dict[str, Any], loc: tuple[str | int, ...], message: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        Model.from_wire(_model(**spec))

    assert _errors(caught.value) == [(loc, message)]


def test_every_broken_rule_is_reported_at_once() -> None:
    with pytest.raises(ValidationError) as caught:
        Model.from_wire(
            _model(
                url="gs://bucket/llama",
                engine="Infinity",
                adapters=[{"name": "a", "url": "hf://org/a"}],
                minReplicas=5,
                maxReplicas=1,
            )
        )

    assert _errors(caught.value) == [
        (("spec", "url"), 'urls of format "gs://..." only supported when using a cacheProfile'),
        (("spec", "minReplicas"), "minReplicas should be less than or equal to maxReplicas."),
        (("spec", "adapters"), "adapters only supported with VLLM engine."),
    ]


@pytest.mark.parametrize(
    "spec",
    [
        {"url": "gs://bucket/llama", "cacheProfile": "nfs"},
        {"url": "oss://bucket/llama", "cacheProfile": "nfs"},
        {"url": "s3://bucket/llama"},
        {"url": "s3://bucket/llama", "cacheProfile": "nfs"},
        {"url": "pvc://models/llama/subdir"},
        {"minReplicas": 2, "maxReplicas": 2},
        {"minReplicas": 7},
        {"maxReplicas": 3},
        {"adapters": [{"name": "sql-lora", "url": "s3://bucket/sql"}]},
        {"files": [{"path": "/a", "content": ""}, {"path": "/b", "content": ""}]},
    ],
)
def test_specs_the_cel_rules_allow_are_accepted(spec: dict[str, Any]) -> None:
    model = Model.from_wire(_model(**spec))

    assert model.to_wire()["spec"] == _model(**spec)["spec"]


def test_names_longer_than_forty_characters_are_rejected() -> None:
    wire = _model()
    wire["metadata"]["name"] = "a" * 41

    with pytest.raises(ValidationError) as caught:
        Model.from_wire(wire)

    assert _errors(caught.value) == [(("metadata", "name"), "name must not exceed 40 characters.")]


def test_a_forty_character_name_is_accepted() -> None:
    wire = _model()
    wire["metadata"]["name"] = "a" * 40

    assert Model.from_wire(wire).metadata.name == "a" * 40


# ------------------------------------------------------------------ CEL rules, in the schema


def test_spec_carries_upstreams_cel_rules_in_upstreams_order() -> None:
    # One departs from upstream's text: the replica bounds rule reads an unset minReplicas as 0.
    rules = ModelSpec.model_json_schema()["x-kubernetes-validations"]

    assert rules == [
        {
            "rule": '!has(self.cacheProfile) || self.url.startsWith("hf://") || '
            'self.url.startsWith("s3://") || self.url.startsWith("gs://") || '
            'self.url.startsWith("oss://")',
            "message": 'cacheProfile is only supported with urls of format "hf://...", '
            '"s3://...", "gs://...", or "oss://..." at the moment.',
        },
        {
            "rule": '!self.url.startsWith("gs://") || has(self.cacheProfile)',
            "message": 'urls of format "gs://..." only supported when using a cacheProfile',
        },
        {
            "rule": '!self.url.startsWith("oss://") || has(self.cacheProfile)',
            "message": 'urls of format "oss://..." only supported when using a cacheProfile',
        },
        {
            "rule": "!has(self.maxReplicas) || "
            "(has(self.minReplicas) ? self.minReplicas : 0) <= self.maxReplicas",
            "message": "minReplicas should be less than or equal to maxReplicas.",
        },
        {
            "rule": '!has(self.adapters) || self.engine == "VLLM"',
            "message": "adapters only supported with VLLM engine.",
        },
        {
            "rule": "!has(oldSelf.cacheProfile) || self.url == oldSelf.url",
            "message": "url is immutable when using cacheProfile.",
        },
        {
            "rule": "!has(self.files) || self.files.size() <= 1 || !self.files.exists(f, "
            "self.files.filter(other, other.path == f.path).size() > 1)",
            "message": "All file paths must be unique.",
        },
        {
            "rule": "!has(oldSelf.cacheProfile) || has(self.cacheProfile)",
            "message": "cacheProfile cannot be removed: delete the Model (its files are then "
            "evicted from the cache) and create it again without one.",
        },
    ]


def test_field_level_cel_rules_sit_on_their_fields() -> None:
    schema = Model.model_json_schema()
    spec = schema["$defs"]["ModelSpec"]["properties"]
    definitions = schema["$defs"]

    assert schema["x-kubernetes-validations"] == [
        {"rule": "size(self.metadata.name) <= 40", "message": "name must not exceed 40 characters."}
    ]
    assert spec["url"]["x-kubernetes-validations"] == [
        {
            "rule": 'self.startsWith("hf://") || self.startsWith("pvc://") || '
            'self.startsWith("ollama://") || self.startsWith("s3://") || '
            'self.startsWith("gs://") || self.startsWith("oss://")',
            "message": 'url must start with "hf://", "pvc://", "ollama://", "s3://", "gs://", '
            'or "oss://" and not be empty.',
        }
    ]
    assert spec["cacheProfile"]["x-kubernetes-validations"] == [
        {"rule": "self == oldSelf", "message": "cacheProfile is immutable."}
    ]
    assert definitions["PrefixHash"]["properties"]["replication"]["x-kubernetes-validations"] == [
        {"rule": "self == oldSelf", "message": "replication is immutable."}
    ]
    assert definitions["Adapter"]["properties"]["url"]["x-kubernetes-validations"] == [
        {
            "rule": 'self.startsWith("hf://") || self.startsWith("s3://") || '
            'self.startsWith("gs://") || self.startsWith("oss://")',
            "message": 'adapter url must start with "hf://", "s3://", "gs://", or "oss://".',
        }
    ]
    assert definitions["File"]["properties"]["path"]["x-kubernetes-validations"] == [
        {
            "rule": "self.startsWith('/') && !self.contains(':')",
            "message": "Path must be an absolute path, starting with /, and must not contain "
            "a ':' character.",
        }
    ]


# ------------------------------------------------------------------ oldSelf rules


def _spec(**fields: Any) -> ModelSpec:
    return ModelSpec.from_wire({"url": "hf://org/model", "engine": "VLLM"} | fields)


def test_changing_the_cache_profile_breaks_its_immutability() -> None:
    previous = _spec(cacheProfile="nfs")

    assert _spec(cacheProfile="ssd").update_violations(previous=previous) == [
        RuleViolation(field="cacheProfile", message="cacheProfile is immutable.")
    ]


def test_adding_a_cache_profile_is_allowed_as_kubernetes_does() -> None:
    assert _spec(cacheProfile="nfs").update_violations(previous=_spec()) == []


def test_removing_a_cache_profile_is_refused_since_its_files_would_stay_for_good() -> None:
    assert _spec().update_violations(previous=_spec(cacheProfile="nfs")) == [
        RuleViolation(
            field="cacheProfile",
            message="cacheProfile cannot be removed: delete the Model (its files are then "
            "evicted from the cache) and create it again without one.",
        )
    ]


def test_the_url_is_immutable_once_cached() -> None:
    previous = _spec(cacheProfile="nfs")
    changed = _spec(url="hf://org/other", cacheProfile="nfs")

    assert changed.update_violations(previous=previous) == [
        RuleViolation(field="url", message="url is immutable when using cacheProfile.")
    ]


def test_the_url_may_change_without_a_cache() -> None:
    assert _spec(url="hf://org/other").update_violations(previous=_spec()) == []


def test_replication_is_immutable_even_through_its_default() -> None:
    previous = _spec()
    changed = _spec(loadBalancing={"prefixHash": {"replication": 256}})

    assert changed.update_violations(previous=previous) == [
        RuleViolation(
            field="loadBalancing.prefixHash.replication", message="replication is immutable."
        )
    ]


def test_model_level_update_check_names_spec_fields() -> None:
    previous = Model.from_wire(_model(cacheProfile="nfs"))
    changed = Model.from_wire(_model(cacheProfile="ssd", url="hf://org/other"))

    assert changed.update_violations(previous=previous) == [
        RuleViolation(field="spec.url", message="url is immutable when using cacheProfile."),
        RuleViolation(field="spec.cacheProfile", message="cacheProfile is immutable."),
    ]


def test_an_update_of_replicas_only_breaks_nothing() -> None:
    previous = Model.from_wire(copy.deepcopy(MODEL_FROM_API))
    wire = copy.deepcopy(MODEL_FROM_API)
    wire["spec"]["replicas"] = 3

    assert Model.from_wire(wire).update_violations(previous=previous) == []


# ------------------------------------------------------------------ CRD metadata


def test_crd_is_namespaced_with_status_and_scale() -> None:
    info = Model.crd

    assert info.api_version == "kubeai.org/v1"
    assert info.crd_name == "models.kubeai.org"
    assert info.scope == "Namespaced"
    assert info.status_subresource is True
    assert info.scale == ScaleSubresource(
        spec_replicas_path=".spec.replicas",
        status_replicas_path=".status.replicas.all",
        label_selector_path=None,
    )
    assert info.short_names == ("mdl",)


def test_printer_columns_show_engine_features_replicas_and_url() -> None:
    columns = {column.name: column.json_path for column in Model.crd.printer_columns}

    assert columns == {
        "Engine": ".spec.engine",
        "Features": ".spec.features",
        "Replicas": ".status.replicas.all",
        "Ready": ".status.replicas.ready",
        "URL": ".spec.url",
        "Profile": ".spec.resourceProfile",
        "Age": ".metadata.creationTimestamp",
    }


# ------------------------------------------------------------------ examples


def test_the_vllm_example_uses_an_amd_profile_and_autoscaling(repo_root: Path) -> None:
    wire = yaml.safe_load((repo_root / "examples" / "model-vllm.yaml").read_text())

    model = Model.from_wire(wire)

    assert model.spec.engine == "VLLM"
    assert model.spec.url == "hf://meta-llama/Llama-3.1-8B-Instruct"
    assert model.spec.resource_profile == "amd-gpu-mi300x:1"
    assert (model.spec.min_replicas, model.spec.max_replicas) == (0, 4)
    assert model.spec.target_requests == 32
    assert model.spec.scale_down_delay_seconds == 120
    assert model.spec.load_balancing.strategy == "PrefixHash"
    assert model.to_wire() == wire


@pytest.mark.parametrize("name", ["model-vllm.yaml", "model-ollama.yaml"], ids=["vllm", "ollama"])
def test_every_model_example_validates_and_round_trips(repo_root: Path, name: str) -> None:
    wire = yaml.safe_load((repo_root / "examples" / name).read_text())

    assert Model.from_wire(wire).to_wire() == wire


def test_the_model_examples_are_the_ones_tested(repo_root: Path) -> None:
    assert sorted(path.name for path in (repo_root / "examples").glob("model-*.yaml")) == [
        "model-ollama.yaml",
        "model-vllm.yaml",
    ]
