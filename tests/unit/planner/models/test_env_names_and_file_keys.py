"""Decision 0212: each variable name once in a Model's containers, and a ConfigMap key the API
server accepts for every file path the CRD accepts. Expected values written out by hand
(the hashes are the first hex digits of the SHA-256 of the path, as decision 0203's)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kaiwo_planner.domain.models.files import file_keys

from tests.unit.planner.models.building import model, only, plan_for

CONFIG_MAP_KEY = re.compile(r"[-._a-zA-Z0-9]+")
LOADER_OWN = [
    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
    {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
    {"name": "KAIWO_ADAPTERS_FILE", "value": "/kaiwo/adapter-loader/adapters.json"},
    {"name": "KAIWO_ADAPTERS_DIR", "value": "/adapters"},
    {"name": "KAIWO_SERVER_URL", "value": "http://127.0.0.1:8000"},
]
HF_TOKEN = {
    "name": "HF_TOKEN",
    "valueFrom": {"secretKeyRef": {"name": "kubeai-huggingface", "key": "token", "optional": True}},
}


def containers(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    pod = only(plan_for(model({"replicas": 1, **spec})), "Pod")
    return {c["name"]: c for c in pod["spec"]["containers"]}


# ------------------------------------------------------------------ the server's variables


def test_a_users_ollama_keep_alive_replaces_the_engines() -> None:
    # Before: OLLAMA_KEEP_ALIVE twice (999999h, then -1), which the API server's apply refuses.
    server = containers(
        {
            "url": "ollama://qwen2:0.5b",
            "engine": "OLlama",
            "env": {"OLLAMA_KEEP_ALIVE": "-1", "A": "1"},
        }
    )["server"]

    assert server["env"] == [
        {"name": "OLLAMA_HOST", "value": "0.0.0.0:8000"},
        {"name": "A", "value": "1"},
        {"name": "OLLAMA_KEEP_ALIVE", "value": "-1"},
    ]


@pytest.mark.parametrize(
    ("spec", "env"),
    [
        (
            {
                "url": "pvc://ollama-store?model=nomic-embed-text",
                "engine": "OLlama",
                "env": {"OLLAMA_HOST": "0.0.0.0:8000", "OLLAMA_MODELS": "/model/blobs"},
            },
            [
                {"name": "OLLAMA_KEEP_ALIVE", "value": "999999h"},
                {"name": "OLLAMA_HOST", "value": "0.0.0.0:8000"},
                {"name": "OLLAMA_MODELS", "value": "/model/blobs"},
            ],
        ),
        (
            {
                "url": "hf://Systran/faster-whisper-medium.en",
                "engine": "FasterWhisper",
                "env": {"ENABLE_UI": "true"},
            },
            [
                {"name": "WHISPER__MODEL", "value": "Systran/faster-whisper-medium.en"},
                {"name": "ENABLE_UI", "value": "true"},
                HF_TOKEN,
            ],
        ),
        (
            {
                "url": "hf://BAAI/bge-small-en-v1.5",
                "engine": "Infinity",
                "env": {"INFINITY_ENGINE": "optimum", "INFINITY_PORT": "8000"},
            },
            [
                {"name": "INFINITY_MODEL_ID", "value": "BAAI/bge-small-en-v1.5"},
                {"name": "INFINITY_SERVED_MODEL_NAME", "value": "llm"},
                {"name": "INFINITY_URL_PREFIX", "value": "/v1"},
                {"name": "INFINITY_ENGINE", "value": "optimum"},
                {"name": "INFINITY_PORT", "value": "8000"},
                HF_TOKEN,
            ],
        ),
        (
            {
                "url": "hf://org/model",
                "engine": "VLLM",
                "adapters": [],
                "env": {"VLLM_ALLOW_RUNTIME_LORA_UPDATING": "true", "HF_TOKEN": "mine"},
            },
            [
                {"name": "HF_TOKEN", "value": "mine"},
                {"name": "VLLM_ALLOW_RUNTIME_LORA_UPDATING", "value": "true"},
            ],
        ),
    ],
    ids=["ollama-pvc", "fasterwhisper", "infinity", "vllm-adapters"],
)
def test_every_engines_variable_the_user_sets_is_the_users_alone(
    spec: dict[str, Any], env: list[dict[str, Any]]
) -> None:
    assert containers(spec)["server"]["env"] == env


def test_the_loader_keeps_its_own_variables_and_the_server_gets_the_users() -> None:
    # Before: POD_NAME and POD_NAMESPACE twice in the sidecar, which the apply refuses.
    found = containers(
        {
            "url": "hf://org/model",
            "engine": "VLLM",
            "adapters": [{"name": "sql", "url": "hf://org/sql-lora"}],
            "env": {"POD_NAME": "mine", "POD_NAMESPACE": "ours", "HF_ENDPOINT": "http://hub"},
        }
    )

    assert found["server"]["env"] == [
        {"name": "VLLM_ALLOW_RUNTIME_LORA_UPDATING", "value": "True"},
        {"name": "HF_ENDPOINT", "value": "http://hub"},
        {"name": "POD_NAME", "value": "mine"},
        {"name": "POD_NAMESPACE", "value": "ours"},
        HF_TOKEN,
    ]
    loader = found["loader"]["env"]
    assert loader[0] == {"name": "HF_ENDPOINT", "value": "http://hub"}
    assert loader[1] == HF_TOKEN
    assert loader[-5:] == LOADER_OWN
    assert len({v["name"] for v in loader}) == len(loader) == 12


# ------------------------------------------------------------------ file keys


def test_a_path_upstream_keys_validly_keeps_its_key() -> None:
    # The keys of running Models: ConfigMaps and Pods must not change on upgrade.
    longest = "/" + "b" * 252
    assert file_keys(["/config/prompt-template.txt", "/etc/extra.json", longest]) == {
        "/config/prompt-template.txt": "_config_prompt-template.txt",
        "/etc/extra.json": "_etc_extra.json",
        longest: "_" + "b" * 252,
    }


def test_a_path_of_other_characters_gets_them_replaced_and_its_hash() -> None:
    assert file_keys(["/app/chat template.jinja", "/etc/tmpl@v2.j2", "/etc/modèle.txt"]) == {
        "/app/chat template.jinja": "_app_chat_template.jinja-e4956777",
        "/etc/tmpl@v2.j2": "_etc_tmpl_v2.j2-ad9dd107",
        "/etc/modèle.txt": "_etc_mod_le.txt-3afcc795",
    }


def test_a_long_path_gets_a_bounded_prefix_and_its_hash() -> None:
    path = "/" + "a" * 300  # the CRD takes up to 1024 characters

    [key] = file_keys([path]).values()

    assert key == "_" + "a" * 243 + "-d7a2578f"
    assert len(key) == 253


def test_two_long_paths_of_one_upstream_key_stay_within_a_keys_length() -> None:
    # 245 characters each, valid alone; with decision 0203's hash they were 254.
    first, second = "/m/" + "x" * 240 + "/y", "/m/" + "x" * 240 + "_y"

    assert file_keys([first, second]) == {
        first: "_m_" + "x" * 240 + "_-5f0397ad",
        second: "_m_" + "x" * 240 + "_-8a7a4c19",
    }


def test_a_replaced_character_does_not_share_a_valid_paths_key() -> None:
    # "/a b" turns into "_a_b", as "/a_b" and "/a/b" do: only the path that needed the
    # replacement gets the hash, unless upstream's keys collide as well (decision 0203).
    assert file_keys(["/a b", "/a_b"]) == {"/a b": "_a_b-73c9c45d", "/a_b": "_a_b"}
    assert file_keys(["/a b", "/a_b", "/a/b"]) == {
        "/a b": "_a_b-73c9c45d",
        "/a_b": "_a_b-328ff01f",
        "/a/b": "_a_b-662b7b62",
    }


def test_a_key_still_shared_after_the_short_hash_takes_the_whole_hash() -> None:
    # "/a_b-73c9c45d" is upstream's key of itself and the hashed key of "/a b".
    assert file_keys(["/a b", "/a_b-73c9c45d"]) == {
        "/a b": "_a_b-73c9c45d21e1dbbab5ec7d874b3972a958e80d75b7b71cbe5ae4262b74958205",
        "/a_b-73c9c45d": "_a_b-73c9c45d-1020ee73",
    }


def test_the_configmap_and_the_mount_use_the_same_valid_key() -> None:
    plan = plan_for(
        model(
            {
                "url": "hf://org/model",
                "engine": "VLLM",
                "replicas": 1,
                "files": [{"path": "/app/chat template.jinja", "content": "{{ messages }}"}],
            }
        )
    )

    assert only(plan, "ConfigMap")["data"] == {
        "_app_chat_template.jinja-e4956777": "{{ messages }}"
    }
    mounts = only(plan, "Pod")["spec"]["containers"][0]["volumeMounts"]
    assert mounts[1] == {
        "name": "model-files",
        "mountPath": "/app/chat template.jinja",
        "subPath": "_app_chat_template.jinja-e4956777",
        "readOnly": True,
    }


CRD_PATHS = st.lists(
    st.text(alphabet=st.sampled_from("/_.-aZ9 @é\t~"), min_size=0, max_size=1023).map(
        lambda rest: "/" + rest
    ),
    min_size=1,
    max_size=10,
    unique=True,
)


@settings(max_examples=300, derandomize=True, database=None, deadline=None)
@given(CRD_PATHS)
def test_every_path_the_crd_takes_gets_a_valid_key_of_its_own(paths: list[str]) -> None:
    keys = file_keys(paths)

    assert sorted(keys) == sorted(paths)
    assert len(set(keys.values())) == len(paths)
    for path, key in keys.items():
        assert CONFIG_MAP_KEY.fullmatch(key) and len(key) <= 253, (path, key)
        assert not key.startswith("..")
