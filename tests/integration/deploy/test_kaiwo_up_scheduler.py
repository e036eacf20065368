"""``kaiwo up`` and the kaiwo-scheduler on the real API server (decision 0026).

By default ``kaiwo up`` deploys the objects of ``deploy/k8s/scheduler`` (compared here with
what ``kubectl kustomize`` renders, object by object) and names the scheduler in the
KaiwoConfig; a second run changes nothing; with ``--scheduler external`` nothing is installed
and the KaiwoConfig names ``default-scheduler``; a name another manager set is kept.

There is no kubelet and no scheduler in the test's control plane: the kaiwo-scheduler's own
pods are created by the controller manager but never run, so what is checked is what the API
server stores, not that the scheduler schedules.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final

import pytest
import yaml
from click.testing import CliRunner, Result
from kaiwo_cli.main import app
from kaiwo_cli.stack.local import LocalStack, StackOptions
from kaiwo_cli.stack.scheduler import prepare_scheduler
from kaiwo_kube import NotFound, Retryable, resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter

from tests.deploy_manifests import DEPLOY, kubectl
from tests.integration.pipeline.harness import Pending, eventually
from tests.real_cluster import RealCluster

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(240)]

INSTALLER: Final = "kaiwo-installer"
NAMESPACE: Final = "kaiwo-system"
WANTED_OBJECTS: Final = [
    ("ServiceAccount", "kaiwo-scheduler", NAMESPACE),
    ("ClusterRoleBinding", "kaiwo-scheduler-kube-scheduler", None),
    ("ClusterRoleBinding", "kaiwo-scheduler-volume-scheduler", None),
    ("Role", "kaiwo-scheduler-lease", NAMESPACE),
    ("RoleBinding", "kaiwo-scheduler-lease", NAMESPACE),
    ("ConfigMap", "kaiwo-scheduler-config", NAMESPACE),
    ("Deployment", "kaiwo-scheduler", NAMESPACE),
]


def kustomize_rendering() -> list[dict[str, Any]]:
    result = subprocess.run(
        [kubectl(), "kustomize", str(DEPLOY / "k8s" / "scheduler")],
        capture_output=True,
        text=True,
        check=True,
    )
    return [o for o in yaml.safe_load_all(result.stdout) if o]


def contained(wanted: Any, stored: Any, path: str = "") -> list[str]:
    """Where ``stored`` differs from ``wanted``: every field given is there with its value
    (the API server adds defaults, status and metadata of its own)."""
    if isinstance(wanted, dict):
        if not isinstance(stored, dict):
            return [f"{path}: {stored!r} is not a mapping"]
        return [
            difference
            for key, value in wanted.items()
            for difference in contained(value, stored.get(key), f"{path}.{key}")
        ]
    if isinstance(wanted, list):
        if not isinstance(stored, list) or len(stored) != len(wanted):
            return [f"{path}: {stored!r} is not {wanted!r}"]
        return [
            difference
            for index, (item, kept) in enumerate(zip(wanted, stored, strict=True))
            for difference in contained(item, kept, f"{path}[{index}]")
        ]
    return [] if wanted == stored else [f"{path}: {stored!r} is not {wanted!r}"]


async def stored(kube: KubernetesAsyncioAdapter, obj: dict[str, Any]) -> dict[str, Any]:
    resource = await kube.resolve(obj["apiVersion"], obj["kind"])
    meta = obj["metadata"]
    return await kube.get(resource, meta["name"], namespace=meta.get("namespace"))


async def remove_scheduler(kube: KubernetesAsyncioAdapter) -> None:
    """No kaiwo-scheduler objects and no KaiwoConfig (kaiwo-system itself stays: other tests
    use it)."""
    for obj in kustomize_rendering():
        resource = await kube.resolve(obj["apiVersion"], obj["kind"])
        with contextlib.suppress(NotFound):
            await kube.delete(
                resource, obj["metadata"]["name"], namespace=obj["metadata"].get("namespace")
            )
    with contextlib.suppress(NotFound):
        await kube.delete(resources.KAIWO_CONFIG, "kaiwo")


async def kaiwo_system_usable(kube: KubernetesAsyncioAdapter) -> None:
    """Not being deleted (the RBAC test deletes kaiwo-system without waiting)."""

    async def check() -> bool | Pending:
        try:
            namespace = await kube.get(resources.NAMESPACE, NAMESPACE)
        except NotFound:
            return True
        phase = (namespace.get("status") or {}).get("phase")
        return phase != "Terminating" or Pending("kaiwo-system is being deleted")

    await eventually(check, what="kaiwo-system usable", within=90, interval=0.5)


@pytest.fixture
async def kube(real_cluster: RealCluster) -> AsyncIterator[KubernetesAsyncioAdapter]:
    client = await KubernetesAsyncioAdapter.from_kubeconfig(real_cluster.kubeconfig)
    try:
        await kaiwo_system_usable(client)

        async def clean() -> bool | Pending:
            try:
                await remove_scheduler(client)
            except Retryable as error:  # first in a session: a new CRD's storage may start
                return Pending(error.message)
            return True

        await eventually(clean, what="no kaiwo-scheduler left", within=30, interval=0.5)
        yield client
        await remove_scheduler(client)
    finally:
        await client.close()


async def scheduler_name_of(kube: KubernetesAsyncioAdapter) -> tuple[str, list[str]]:
    """The KaiwoConfig's scheduler name and the managers of that field."""
    config = await kube.get(resources.KAIWO_CONFIG, "kaiwo")
    owners = [
        entry["manager"]
        for entry in config["metadata"].get("managedFields") or []
        if "f:kubeSchedulerName"
        in ((entry.get("fieldsV1") or {}).get("f:spec") or {}).get("f:scheduling", {})
    ]
    return config["spec"]["scheduling"]["kubeSchedulerName"], owners


async def test_kaiwo_up_deploys_what_kustomize_renders_and_a_second_run_changes_nothing(
    kube: KubernetesAsyncioAdapter, real_cluster: RealCluster, tmp_path: Path
) -> None:
    options = StackOptions(state_dir=tmp_path / "kaiwo", kubeconfig=real_cluster.kubeconfig)
    async with LocalStack(options) as stack:  # kaiwo up without flags
        note = stack.scheduler_note
    assert note == "kaiwo-scheduler deployed in kaiwo-system; KaiwoConfig names kaiwo-scheduler"

    rendered = kustomize_rendering()
    assert sorted(
        (o["kind"], o["metadata"]["name"], o["metadata"].get("namespace") or "") for o in rendered
    ) == sorted((kind, name, namespace or "") for kind, name, namespace in WANTED_OBJECTS)
    versions = {}
    for obj in rendered:
        found = await stored(kube, obj)
        assert contained(obj, found) == [], obj["kind"]
        assert INSTALLER in [e["manager"] for e in found["metadata"]["managedFields"]]
        versions[obj["kind"], obj["metadata"]["name"]] = found["metadata"]["resourceVersion"]
    assert await scheduler_name_of(kube) == ("kaiwo-scheduler", [INSTALLER])
    config_version = (await kube.get(resources.KAIWO_CONFIG, "kaiwo"))["metadata"][
        "resourceVersion"
    ]

    # kaiwo up again: the same step, and nothing moves.
    again = await prepare_scheduler(
        kube, mode="install", fake_cluster=False, field_manager=INSTALLER
    )
    assert again == note
    for obj in rendered:
        found = await stored(kube, obj)
        assert (
            found["metadata"]["resourceVersion"] == versions[obj["kind"], obj["metadata"]["name"]]
        ), f"{obj['kind']} {obj['metadata']['name']} was written again"
    config = await kube.get(resources.KAIWO_CONFIG, "kaiwo")
    assert config["metadata"]["resourceVersion"] == config_version


async def test_with_an_external_scheduler_nothing_is_installed_and_default_scheduler_is_named(
    kube: KubernetesAsyncioAdapter,
) -> None:
    note = await prepare_scheduler(
        kube, mode="external", fake_cluster=False, field_manager=INSTALLER
    )

    assert note == "KaiwoConfig names default-scheduler"
    assert await scheduler_name_of(kube) == ("default-scheduler", [INSTALLER])
    for obj in kustomize_rendering():
        with pytest.raises(NotFound):
            await stored(kube, obj)

    # Back to the kaiwo-scheduler: the field is the installer's, so it follows the choice.
    await prepare_scheduler(kube, mode="install", fake_cluster=False, field_manager=INSTALLER)
    assert await scheduler_name_of(kube) == ("kaiwo-scheduler", [INSTALLER])


async def test_a_name_the_platform_team_set_is_kept(kube: KubernetesAsyncioAdapter) -> None:
    await kube.apply(
        {
            "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
            "kind": "KaiwoConfig",
            "metadata": {"name": "kaiwo"},
            "spec": {"scheduling": {"kubeSchedulerName": "volcano"}},
        },
        field_manager="platform-team",
    )

    note = await prepare_scheduler(
        kube, mode="external", fake_cluster=False, field_manager=INSTALLER
    )

    assert note == "KaiwoConfig names volcano (set by another manager; not default-scheduler)"
    assert await scheduler_name_of(kube) == ("volcano", ["platform-team"])


async def test_existing_leaves_the_cluster_as_it_is(kube: KubernetesAsyncioAdapter) -> None:
    note = await prepare_scheduler(
        kube, mode="existing", fake_cluster=False, field_manager=INSTALLER
    )

    assert note == "left as the cluster has it"
    with pytest.raises(NotFound):
        await kube.get(resources.KAIWO_CONFIG, "kaiwo")
    for obj in kustomize_rendering():
        with pytest.raises(NotFound):
            await stored(kube, obj)


async def test_kaiwo_scheduler_name_says_what_it_did(
    kube: KubernetesAsyncioAdapter, real_cluster: RealCluster
) -> None:
    def name(scheduler: str) -> Result:
        arguments = ["scheduler", "name", scheduler, "--kubeconfig", str(real_cluster.kubeconfig)]
        return CliRunner().invoke(app, arguments)

    named = await asyncio.to_thread(name, "default-scheduler")
    assert (named.exit_code, named.stdout) == (0, "KaiwoConfig kaiwo names default-scheduler\n")

    await kube.apply(  # the platform team takes the field over on purpose
        {
            "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
            "kind": "KaiwoConfig",
            "metadata": {"name": "kaiwo"},
            "spec": {"scheduling": {"kubeSchedulerName": "volcano"}},
        },
        field_manager="platform-team",
        force=True,
    )
    kept = await asyncio.to_thread(name, "kaiwo-scheduler")
    assert kept.exit_code == 1
    assert kept.stderr == (
        "kaiwo scheduler: the KaiwoConfig names 'volcano', set by another manager; left as it "
        "is (not 'kaiwo-scheduler')\n"
    )
    assert await scheduler_name_of(kube) == ("volcano", ["platform-team"])


async def test_the_kaiwoconfig_it_creates_names_the_installations_default_queue(
    kube: KubernetesAsyncioAdapter,
) -> None:
    """``DEFAULT_CLUSTER_QUEUE_NAME`` reaches the KaiwoConfig that ``kaiwo up`` creates (the
    operator then finds one and creates none), and only the one it creates."""
    note = await prepare_scheduler(
        kube,
        mode="external",
        fake_cluster=False,
        field_manager=INSTALLER,
        default_cluster_queue="research",
    )

    assert note == "KaiwoConfig names default-scheduler"
    spec = (await kube.get(resources.KAIWO_CONFIG, "kaiwo"))["spec"]
    assert spec["defaultClusterQueueName"] == "research"
    assert spec["scheduling"]["kubeSchedulerName"] == "default-scheduler"

    await kube.apply(  # the platform team names another queue afterwards
        {
            "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
            "kind": "KaiwoConfig",
            "metadata": {"name": "kaiwo"},
            "spec": {"defaultClusterQueueName": "ops"},
        },
        field_manager="platform-team",
        force=True,
    )
    await prepare_scheduler(
        kube,
        mode="external",
        fake_cluster=False,
        field_manager=INSTALLER,
        default_cluster_queue="research",
    )
    spec = (await kube.get(resources.KAIWO_CONFIG, "kaiwo"))["spec"]
    assert spec["defaultClusterQueueName"] == "ops"
    # The scheduler's name is still the installer's alone, so it follows the next choice.
    assert await scheduler_name_of(kube) == ("default-scheduler", [INSTALLER])
    await prepare_scheduler(kube, mode="install", fake_cluster=False, field_manager=INSTALLER)
    assert await scheduler_name_of(kube) == ("kaiwo-scheduler", [INSTALLER])


async def test_kaiwo_scheduler_name_creates_the_kaiwoconfig_with_the_default_queue(
    kube: KubernetesAsyncioAdapter, real_cluster: RealCluster
) -> None:
    """Compose's one-shot step reads the setting from its environment; a name the API server
    refuses is one line naming the variable, exit 2."""

    def name(queue: str) -> Result:
        arguments = [
            "scheduler",
            "name",
            "kaiwo-scheduler",
            "--kubeconfig",
            str(real_cluster.kubeconfig),
        ]
        return CliRunner().invoke(app, arguments, env={"DEFAULT_CLUSTER_QUEUE_NAME": queue})

    refused = await asyncio.to_thread(name, "Not_A_Queue")
    assert refused.exit_code == 2
    assert refused.stderr == (
        "kaiwo scheduler: the KaiwoConfig cannot name the default queue 'Not_A_Queue' "
        "(KAIWO_DEFAULT_CLUSTER_QUEUE_NAME or DEFAULT_CLUSTER_QUEUE_NAME): String should "
        "match pattern '^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$'\n"
    )
    with pytest.raises(NotFound):
        await kube.get(resources.KAIWO_CONFIG, "kaiwo")

    named = await asyncio.to_thread(name, "team-a")
    assert (named.exit_code, named.stdout) == (0, "KaiwoConfig kaiwo names kaiwo-scheduler\n")
    spec = (await kube.get(resources.KAIWO_CONFIG, "kaiwo"))["spec"]
    assert spec["defaultClusterQueueName"] == "team-a"
