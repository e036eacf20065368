"""``kaiwo submit``: the scientist's config, the manifest it sends, and what it refuses
before sending anything."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from kaiwo_cli.main import app
from kaiwo_cli.submission import (
    ScientistConfig,
    SubmissionError,
    config_path,
    effective_config,
    prepare_manifest,
    read_config,
)


def job(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoJob",
        "metadata": {"name": "train"},
        "spec": {"image": "busybox", "entrypoint": "echo hi", **spec},
    }


def test_the_config_comes_from_kaiwoconfig_else_the_home_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert config_path({"KAIWOCONFIG": str(tmp_path / "c.yaml")}) == tmp_path / "c.yaml"
    assert config_path({}) == tmp_path / ".config" / "kaiwo" / "kaiwoconfig.yaml"


def test_a_config_names_user_and_queue_and_flags_win(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("user: alice@example.com\nclusterQueue: team-nlp\n")

    config = read_config(path)

    assert config == ScientistConfig(user="alice@example.com", cluster_queue="team-nlp")
    assert effective_config(config, user="bob@example.com", queue=None) == ScientistConfig(
        user="bob@example.com", cluster_queue="team-nlp"
    )
    assert read_config(tmp_path / "absent.yaml") == ScientistConfig()


def test_a_broken_config_names_the_key(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("user: [alice]\n")

    with pytest.raises(SubmissionError, match="user: must be a string"):
        read_config(path)


def test_user_queue_and_namespace_fill_only_what_the_manifest_leaves_out() -> None:
    config = ScientistConfig(user="alice@example.com", cluster_queue="team-nlp")

    filled = prepare_manifest(job(), config=config, namespace=None)
    kept = prepare_manifest(
        job(user="carol@example.com", clusterQueue="gpu-a"), config=config, namespace="ml-team"
    )

    assert filled["metadata"]["namespace"] == "default"
    assert (filled["spec"]["user"], filled["spec"]["clusterQueue"]) == (
        "alice@example.com",
        "team-nlp",
    )
    assert kept["metadata"]["namespace"] == "ml-team"
    assert (kept["spec"]["user"], kept["spec"]["clusterQueue"]) == ("carol@example.com", "gpu-a")


def test_a_namespace_that_contradicts_the_manifest_is_refused() -> None:
    manifest = job()
    manifest["metadata"]["namespace"] = "ml-team"

    with pytest.raises(SubmissionError, match=r"metadata\.namespace: the manifest says ml-team"):
        prepare_manifest(manifest, config=ScientistConfig(), namespace="other")


def test_only_kaiwo_workloads_are_submitted() -> None:
    with pytest.raises(
        SubmissionError, match="kind: kaiwo submit takes a KaiwoJob or KaiwoService"
    ):
        prepare_manifest(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}},
            config=ScientistConfig(),
            namespace=None,
        )


def test_submit_refuses_an_invalid_manifest_naming_the_field_before_connecting(
    tmp_path: Path,
) -> None:
    manifest = tmp_path / "job.yaml"
    manifest.write_text(
        "apiVersion: kaiwo.silogen.ai/v1alpha1\nkind: KaiwoJob\nmetadata: {name: train}\n"
        "spec: {image: busybox, gpus: many}\n"
    )
    # No cluster at all: an attempt to connect would exit 2, not 1.
    result = CliRunner().invoke(
        app,
        ["submit", "-f", str(manifest), "--kubeconfig", str(tmp_path / "absent")],
        env={"KAIWOCONFIG": str(tmp_path / "none.yaml"), "COLUMNS": "200"},
    )

    assert result.exit_code == 1, result.output
    assert "KaiwoJob/train: spec.gpus:" in result.output
    assert "nothing submitted" in result.output


def test_submit_reads_standard_input(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app,
        ["submit", "-f", "-", "--kubeconfig", str(tmp_path / "absent")],
        input="apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n",
        env={"KAIWOCONFIG": str(tmp_path / "none.yaml")},
    )

    assert result.exit_code == 1
    assert "-: kind: kaiwo submit takes a KaiwoJob or KaiwoService" in result.output
