"""``kaiwo submit``'s small promises (decision 0141): ``--timeout`` without ``--wait`` is a usage
error, a multi-document file is created whole or not at all, and a ``--wait`` that runs out
names each workload it gave up on with its last phase."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result
from kaiwo_cli.cluster_access import ClusterError
from kaiwo_cli.commands.submit import _submit_all
from kaiwo_cli.main import app
from kaiwo_cli.submission import config_path, read_config, repeated_names
from kaiwo_cli.workload_follow import not_settled_message
from kaiwo_contracts.crds.registry import SERVED_KINDS
from kaiwo_contracts.crds.schema import custom_resource_definitions
from kaiwo_kube import AlreadyExists, NotFound, resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_kube.resources import ResourceType
from kaiwo_kubefake import FakeKubeServer


def job(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoJob",
        "metadata": {"name": name, "namespace": "ml-team"},
        "spec": {"image": "busybox", "entrypoint": "echo hi", "user": "alice@example.com"},
    }


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[FakeKubeServer, KubernetesAsyncioAdapter]]:
    async with FakeKubeServer(kubeconfig_path=tmp_path / "kubeconfig") as server:
        for crd in custom_resource_definitions(SERVED_KINDS):
            server.store.register_crd(crd)
        kube = await KubernetesAsyncioAdapter.from_kubeconfig(server.kubeconfig_path)
        async with kube:
            await kube.create(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml-team"}}
            )
            yield server, kube


def invoke(tmp_path: Path, documents: list[dict[str, Any]], *arguments: str) -> Result:
    manifest = tmp_path / "jobs.yaml"
    manifest.write_text(yaml.safe_dump_all(documents))
    env = {"KAIWO_STATE": str(tmp_path / "no-stack"), "KAIWOCONFIG": str(tmp_path / "none")}
    return CliRunner().invoke(app, ["submit", "-f", str(manifest), *arguments], env=env)


async def submit(tmp_path: Path, documents: list[dict[str, Any]], *arguments: str) -> Result:
    return await asyncio.to_thread(invoke, tmp_path, documents, *arguments)


async def job_names(kube: KubernetesAsyncioAdapter) -> list[str]:
    listed = await kube.list(resources.KAIWO_JOB, namespace="ml-team")
    return sorted(item["metadata"]["name"] for item in listed.items)


# --------------------------------------------------------------------------- --timeout


def test_timeout_without_wait_is_a_usage_error_naming_both_options(tmp_path: Path) -> None:
    # It was ignored without a word: the job was submitted and nothing waited. No cluster
    # here: the refusal comes before the file is read or a connection tried.
    result = invoke(tmp_path, [job("train")], "--timeout", "60", "--kubeconfig", "/absent")

    assert result.exit_code == 2, result.output
    assert result.stderr.endswith(
        "Error: --timeout bounds --wait and means nothing without it: add --wait, or drop "
        "--timeout\n"
    )


def test_a_timeout_of_no_time_is_refused(tmp_path: Path) -> None:
    result = invoke(tmp_path, [job("train")], "--wait", "--timeout", "0")

    assert result.exit_code == 2, result.output
    assert "Invalid value for '--timeout': 0.0 is not in the range x>0." in result.stderr


# --------------------------------------------------------------------------- all or nothing


async def test_a_later_document_that_exists_already_leaves_nothing_created(
    tmp_path: Path, cluster: Any
) -> None:
    server, kube = cluster
    await kube.create(job("eval"), field_manager="test")

    result = await submit(
        tmp_path,
        [job("train"), job("eval"), job("serve")],
        "--kubeconfig",
        str(server.kubeconfig_path),
    )

    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr == (
        "kaiwo submit: KaiwoJob ml-team/eval exists already; nothing submitted "
        "(kaiwo delete it first, or change metadata.name)\n"
    )
    assert await job_names(kube) == ["eval"]


async def test_every_existing_workload_is_named_at_once(tmp_path: Path, cluster: Any) -> None:
    server, kube = cluster
    await kube.create(job("train"), field_manager="test")
    await kube.create(job("serve"), field_manager="test")

    result = await submit(
        tmp_path,
        [job("train"), job("eval"), job("serve")],
        "--kubeconfig",
        str(server.kubeconfig_path),
    )

    assert result.exit_code == 2, result.output
    assert result.stderr == (
        "kaiwo submit: KaiwoJob ml-team/train, KaiwoJob ml-team/serve exist already; nothing "
        "submitted (kaiwo delete it first, or change metadata.name)\n"
    )
    assert await job_names(kube) == ["serve", "train"]


async def test_a_file_whose_names_are_free_is_created_whole(tmp_path: Path, cluster: Any) -> None:
    server, kube = cluster

    result = await submit(
        tmp_path, [job("train"), job("eval")], "--kubeconfig", str(server.kubeconfig_path)
    )

    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "kaiwojob.kaiwo.silogen.ai/train submitted in ml-team (user alice@example.com, queue -)\n"
        "kaiwojob.kaiwo.silogen.ai/eval submitted in ml-team (user alice@example.com, queue -)\n"
    )
    assert await job_names(kube) == ["eval", "train"]


def test_a_file_that_names_one_workload_twice_is_refused_before_connecting(
    tmp_path: Path,
) -> None:
    result = invoke(tmp_path, [job("train"), job("eval"), job("train")], "--kubeconfig", "/absent")

    assert result.exit_code == 1, result.output
    manifest = tmp_path / "jobs.yaml"
    assert result.stderr == (
        f"kaiwo submit: {manifest}:doc#3 KaiwoJob ml-team/train: doc#1 names it too\n"
        "kaiwo submit: nothing submitted: the manifest is invalid\n"
    )


def test_the_same_name_in_two_namespaces_or_kinds_is_no_repetition() -> None:
    other_namespace = {**job("train"), "metadata": {"name": "train", "namespace": "other"}}
    service = {**job("train"), "kind": "KaiwoService"}

    assert repeated_names([job("train"), other_namespace, service]) == []
    assert repeated_names([job("a"), job("b"), job("a"), job("a")]) == [
        "doc#3 KaiwoJob ml-team/a: doc#1 names it too",
        "doc#4 KaiwoJob ml-team/a: doc#1 names it too",
    ]


class RefusesTheSecondCreate:
    """Nothing exists at the look-up; the second create is refused (made meanwhile)."""

    def __init__(self) -> None:
        self.created: list[str] = []

    async def get(self, resource: ResourceType, name: str, *, namespace: str | None = None) -> Any:
        raise NotFound(f"{resource.kind} {name} not found", code=404)

    async def create(self, manifest: dict[str, Any], *, field_manager: str) -> dict[str, Any]:
        if len(self.created) == 1:
            raise AlreadyExists('kaiwojobs "eval" already exists', code=409)
        self.created.append(manifest["metadata"]["name"])
        return manifest


def test_a_create_refused_half_way_says_what_was_created_and_what_was_not_sent() -> None:
    kube = RefusesTheSecondCreate()

    with pytest.raises(ClusterError) as refused:
        asyncio.run(
            _submit_all(
                kube,  # type: ignore[arg-type]
                [job("train"), job("eval"), job("serve")],
                wait=False,
                within=None,
            )
        )

    assert str(refused.value) == (
        'KaiwoJob ml-team/eval: kaiwojobs "eval" already exists; created before it: '
        "KaiwoJob ml-team/train; not sent: KaiwoJob ml-team/serve"
    )
    assert kube.created == ["train"]


# --------------------------------------------------------------------------- --wait timeout


async def test_a_wait_that_runs_out_names_the_workload_and_its_last_phase(
    tmp_path: Path, cluster: Any
) -> None:
    # It said only "not settled within 1 s". No operator runs here: the job stays NEW.
    server, _kube = cluster

    result = await submit(
        tmp_path,
        [job("train")],
        "--wait",
        "--timeout",
        "1",
        "--kubeconfig",
        str(server.kubeconfig_path),
    )

    assert result.exit_code == 3, result.output
    assert result.stderr.endswith(
        "kaiwo submit: KaiwoJob ml-team/train: not settled within 1 s (last phase NEW)\n"
    )


def test_the_timeout_names_each_workload_not_settled_and_only_those() -> None:
    pending = {**job("train"), "status": {"status": "PENDING"}}
    complete = {**job("eval"), "status": {"status": "COMPLETE"}}
    running = {**job("serve"), "status": {"status": "RUNNING"}}

    assert not_settled_message([pending, complete, running], within=600) == (
        "KaiwoJob ml-team/train: not settled within 600 s (last phase PENDING)\n"
        "KaiwoJob ml-team/serve: not settled within 600 s (last phase RUNNING)"
    )
    assert not_settled_message([complete], within=2.5) == "not settled within 2.5 s"


# --------------------------------------------------------------------------- --config


async def test_a_config_given_with_c_fills_what_the_manifest_leaves_out(
    tmp_path: Path, cluster: Any
) -> None:
    # Upstream's -c/--config, over $KAIWOCONFIG (which the test points at no file).
    server, kube = cluster
    config = tmp_path / "team.yaml"
    config.write_text("user: bob@example.com\nclusterQueue: research\n")
    anonymous = job("train")
    del anonymous["spec"]["user"]

    result = await submit(
        tmp_path, [anonymous], "-c", str(config), "--kubeconfig", str(server.kubeconfig_path)
    )

    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "kaiwojob.kaiwo.silogen.ai/train submitted in ml-team (user bob@example.com, "
        "queue research)\n"
    )
    stored = await kube.get(resources.KAIWO_JOB, "train", namespace="ml-team")
    assert (stored["spec"]["user"], stored["spec"]["clusterQueue"]) == (
        "bob@example.com",
        "research",
    )


def test_a_config_given_that_does_not_exist_is_an_error_not_an_empty_config(
    tmp_path: Path,
) -> None:
    result = invoke(tmp_path, [job("train")], "--config", str(tmp_path / "typo.yaml"))

    assert result.exit_code == 1, result.output
    assert result.stderr == f"kaiwo submit: {tmp_path / 'typo.yaml'}: no such file (--config)\n"


@pytest.mark.parametrize(
    ("files", "read"),
    [
        ({"kaiwoconfig.yaml": "user: ref@example.com\n"}, "ref@example.com"),
        ({"config.yaml": "user: earlier@example.com\n"}, "earlier@example.com"),
        (
            {"kaiwoconfig.yaml": "user: ref@example.com\n", "config.yaml": "user: x@example.com\n"},
            "ref@example.com",
        ),
        ({}, None),
    ],
    ids=["the-references-name", "an-earlier-releases-name", "both", "none"],
)
def test_the_default_config_is_kaiwoconfig_yaml_as_the_reference_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: dict[str, str], read: str | None
) -> None:
    """The API reference: "the clusterQueue field in the kaiwoconfig.yaml file" (decision 0217);
    an earlier release's config.yaml is still read when it alone is there."""
    directory = tmp_path / ".config" / "kaiwo"
    directory.mkdir(parents=True)
    for name, text in files.items():
        (directory / name).write_text(text)
    monkeypatch.setenv("HOME", str(tmp_path))

    assert read_config(config_path({})).user == read
    assert config_path({"KAIWOCONFIG": "/elsewhere.yaml"}) == Path("/elsewhere.yaml")
