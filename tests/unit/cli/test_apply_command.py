"""``kaiwo apply``: server-side apply of manifest documents through the Kubernetes port."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from kaiwo_cli.commands.apply import FIELD_MANAGER, apply_document
from kaiwo_cli.main import app
from kaiwo_cli.manifest_files import ManifestDocument
from kaiwo_contracts.crds.registry import SERVED_KINDS
from kaiwo_contracts.crds.schema import custom_resource_definitions
from kaiwo_kube import resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_kubefake import FakeKubeServer


def document(content: Any) -> ManifestDocument:
    return ManifestDocument(source=Path("manifests.yaml"), number=1, content=content)


@pytest.fixture
async def kube(tmp_path: Path) -> AsyncIterator[KubernetesAsyncioAdapter]:
    async with FakeKubeServer(kubeconfig_path=tmp_path / "kubeconfig") as server:
        for crd in custom_resource_definitions(SERVED_KINDS):
            server.store.register_crd(crd)
        adapter = await KubernetesAsyncioAdapter.from_kubeconfig(server.kubeconfig_path)
        async with adapter:
            yield adapter


async def test_a_namespaced_object_without_namespace_goes_to_the_given_one(kube: Any) -> None:
    await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml-team"}})
    job = {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoJob",
        "metadata": {"name": "train"},
        "spec": {"image": "busybox", "entrypoint": "echo hi"},
    }

    line = await apply_document(kube, document(job), namespace="ml-team", force=False)

    assert line == "kaiwojobs.kaiwo.silogen.ai/train serverside-applied"
    stored = await kube.get(resources.KAIWO_JOB, "train", namespace="ml-team")
    # What was applied, and the CRD's defaults the API server filled in.
    assert stored["spec"] == {
        "image": "busybox",
        "entrypoint": "echo hi",
        "dangerous": False,
        "gpuVendor": "amd",
        "gpus": 0,
        "ray": False,
        "replicas": 1,
    }
    managers = [(m["manager"], m["operation"]) for m in stored["metadata"]["managedFields"]]
    assert managers == [(FIELD_MANAGER, "Apply")]
    assert "namespace" not in job["metadata"]  # the document itself is left as it was


async def test_a_cluster_scoped_object_and_a_conflict(kube: Any) -> None:
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "vision"}}
    assert (
        await apply_document(kube, document(namespace), namespace="default", force=False)
        == "namespaces/vision serverside-applied"
    )
    await kube.merge_patch(
        resources.NAMESPACE, "vision", {"metadata": {"labels": {"team": "a"}}}, field_manager="ops"
    )
    labelled = {**namespace, "metadata": {"name": "vision", "labels": {"team": "b"}}}

    refused = await apply_document(kube, document(labelled), namespace="default", force=False)
    forced = await apply_document(kube, document(labelled), namespace="default", force=True)

    assert refused.startswith("error: Apply failed with 1 conflict")
    assert forced == "namespaces/vision serverside-applied"
    assert (await kube.get(resources.NAMESPACE, "vision"))["metadata"]["labels"]["team"] == "b"


async def test_unknown_kinds_and_non_objects_are_reported(kube: Any) -> None:
    widget = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    assert await apply_document(kube, document(widget), namespace="default", force=False) == (
        "error: kind Widget of example.com/v1 is not served"
    )
    assert await apply_document(kube, document(["a"]), namespace="default", force=False) == (
        "error: the document is not an object"
    )


def test_an_unreachable_cluster_is_one_line_and_exit_status_2(tmp_path: Path) -> None:
    manifest = tmp_path / "ns.yaml"
    manifest.write_text("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: []\n")

    result = CliRunner().invoke(
        app, ["apply", "-f", str(manifest), "--kubeconfig", str(kubeconfig)]
    )

    assert result.exit_code == 2
    assert result.output.startswith("kaiwo apply: no usable kubeconfig (")
    assert len(result.output.strip().splitlines()) == 1


def test_a_kubeconfig_file_that_does_not_exist_is_said_so(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere" / "kubeconfig"

    result = CliRunner().invoke(app, ["list", "--kubeconfig", str(missing)])

    assert result.exit_code == 2
    # Not the client library's "Expected key current-context in kube-config".
    assert f"({missing}: no kubeconfig file at {missing})" in result.output


def test_apply_validates_first_and_applies_nothing_when_a_document_is_invalid(
    tmp_path: Path,
) -> None:
    manifest = tmp_path / "two.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: ml-team}\n---\n"
        "apiVersion: kaiwo.silogen.ai/v1alpha1\nkind: KaiwoJob\nmetadata: {name: bad}\n"
        "spec: {replicas: -1, gpus: many}\n"
    )
    # No cluster: reaching for one would exit 2; refusing the input exits 1 first.
    result = CliRunner().invoke(
        app,
        ["apply", "-f", str(manifest), "--kubeconfig", str(tmp_path / "absent")],
        env={"COLUMNS": "200"},
    )

    assert result.exit_code == 1, result.output
    assert "KaiwoJob/bad: spec.replicas:" in result.output
    assert "KaiwoJob/bad: spec.gpus:" in result.output
    assert "nothing applied: 1 document(s) invalid" in result.output
