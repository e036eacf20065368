"""The Helm chart (deploy/helm/kaiwo), with Helm's own library (helm-sdkpy: Helm v4 in a Go
shared library; no helm binary ships on PyPI or in Debian): ``helm lint`` finds no error, and
``helm install`` on the real API server succeeds with the default values and with
values-production.yaml, the latter installing exactly the objects of the production overlay.
An install creates the objects for real (stronger than a dry run); each is uninstalled after.
``helm template`` is not in that library: the rendering compared is the release's manifest as
Helm stores it."""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
import re
import shutil
import subprocess
import tarfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final

import pytest
import pytest_asyncio
import yaml

from tests.deploy_manifests import (
    DEFAULT_QUEUE,
    MESSENGER,
    NATS_CLIENTS,
    DeployTree,
    by_kind_and_name,
    helm_sdk,
    kubectl,
    merged,
    shared_deploy_tree,
    write_nats_credentials,
)
from tests.integration.deploy.test_on_the_api_server import prepared, run_kubectl
from tests.real_cluster import OPERATOR_NAMESPACE, RealCluster

pytestmark = [pytest.mark.k8s, pytest.mark.timeout(240)]

RELEASE: Final = "kaiwo"
ERROR: Final = 3
"""helm lint's severity of an error."""
GENERATED_SUFFIX: Final = re.compile(
    r"\b(kaiwo-nats-(?:config|cluster|admin|watcher|planner|executor|monitor|recorder|gateway|console))-[a-z0-9]{10}\b"
)


@pytest.fixture(scope="module")
def tree() -> DeployTree:
    return shared_deploy_tree()


@pytest_asyncio.fixture
async def cluster(real_cluster: RealCluster) -> AsyncIterator[RealCluster]:
    """The API server serving ServiceMonitors, kaiwo-system there, no release left behind."""
    await asyncio.to_thread(prepared, real_cluster)
    yield real_cluster
    helm = helm_sdk()
    config = helm.Configuration(
        namespace=OPERATOR_NAMESPACE, kubeconfig=str(real_cluster.kubeconfig)
    )
    releases = await helm.List(config).run(all=True)
    if any(release["name"] == RELEASE for release in releases or []):
        await helm.Uninstall(config).run(RELEASE, wait=False)


async def install(
    cluster: RealCluster, tree: DeployTree, values: dict[str, Any], *, credentials: bool = True
) -> list[dict[str, Any]]:
    """``helm install`` (not waiting for pods: no kubelet runs) with ``values`` over the NATS
    credentials (as ``-f deploy/helm/nats-credentials.yaml -f ...``), then the manifest Helm
    stored."""
    helm = helm_sdk()
    config = helm.Configuration(namespace=OPERATOR_NAMESPACE, kubeconfig=str(cluster.kubeconfig))
    values = tree.chart_values(values) if credentials else values
    await helm.Install(config).run(RELEASE, str(tree.chart), values=values, wait=False,
                                   timeout=120, take_ownership=True)  # fmt: skip
    manifest = await stored_manifest(cluster, revision=1)
    await helm.Uninstall(config).run(RELEASE, wait=False)
    return manifest


async def stored_manifest(cluster: RealCluster, *, revision: int) -> list[dict[str, Any]]:
    """The objects of the release's ``revision`` as Helm stored them."""
    stored = await asyncio.to_thread(
        run_kubectl, cluster, "-n", OPERATOR_NAMESPACE, "get", "secret",
        f"sh.helm.release.v1.{RELEASE}.v{revision}", "-o", "jsonpath={.data.release}",
    )  # fmt: skip
    release = json.loads(gzip.decompress(base64.b64decode(base64.b64decode(stored))))
    return [o for o in yaml.safe_load_all(release["manifest"]) if o]


async def install_and_upgrade(
    cluster: RealCluster,
    tree: DeployTree,
    revisions: list[dict[str, Any]],
    *,
    credentials: bool = True,
    server_side_apply: bool = False,
) -> list[list[dict[str, Any]]]:
    """``helm install`` with the first values, ``helm upgrade`` with each next (not waiting
    for pods), then the objects of every revision as Helm stored them. The ``cluster`` fixture
    uninstalls after."""
    helm = helm_sdk()
    config = helm.Configuration(namespace=OPERATOR_NAMESPACE, kubeconfig=str(cluster.kubeconfig))
    first, *later = (tree.chart_values(v) if credentials else v for v in revisions)
    await helm.Install(config).run(RELEASE, str(tree.chart), values=first, wait=False,
                                   timeout=120, take_ownership=True,
                                   server_side_apply=server_side_apply)  # fmt: skip
    for values in later:
        await helm.Upgrade(config).run(RELEASE, str(tree.chart), values=values, wait=False,
                                       timeout=120)  # fmt: skip
    return [await stored_manifest(cluster, revision=n) for n in range(1, len(revisions) + 1)]


def pod_annotations(objects: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """The pod template's annotations of NATS and every Deployment, by name."""
    return {
        o["metadata"]["name"]: o["spec"]["template"]["metadata"].get("annotations", {})
        for o in objects
        if o["kind"] in ("Deployment", "StatefulSet")
    }


def values_file(tree: DeployTree, name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((tree.chart / name).read_text())
    return loaded


def normalised(objects: list[dict[str, Any]]) -> dict[tuple[str, str], Any]:
    """What must agree between the chart and the overlay: everything but the namespace (the
    release's), kustomize's content hashes, checksum annotations, the provisioning Job's
    revision suffix and the keys themselves (each tree generated its own)."""
    text = GENERATED_SUFFIX.sub(r"\1", yaml.safe_dump_all(objects))
    text = re.sub(r"\bkaiwo-nats-provision-\d+\b", "kaiwo-nats-provision", text)
    found = {}
    for obj in (o for o in yaml.safe_load_all(text) if o and o["kind"] != "Namespace"):
        obj["metadata"].pop("namespace", None)
        if obj["kind"] == "Secret" or obj["metadata"]["name"] == "kaiwo-nats-config":
            obj.pop("data", None)
            obj.setdefault("type", "Opaque")
        template = obj.get("spec", {}).get("template", {}).get("metadata", {})
        annotations = {
            k: v
            for k, v in template.get("annotations", {}).items()
            if not k.startswith("checksum/")
        }
        if template:
            template.pop("annotations", None)
            if annotations:
                template["annotations"] = annotations
        found[(obj["kind"], obj["metadata"]["name"])] = obj
    return found


async def test_helm_lint_finds_no_error(tree: DeployTree) -> None:
    helm = helm_sdk()
    result = await helm.Lint(helm.Configuration(namespace=OPERATOR_NAMESPACE)).run(str(tree.chart))
    assert result["TotalChartsLinted"] == 1
    assert [m for m in result["Messages"] if m["Severity"] >= ERROR] == []


async def test_helm_lint_sees_a_broken_template(tree: DeployTree, tmp_path: Path) -> None:
    broken = tmp_path / "kaiwo"
    subprocess.run(["cp", "-r", str(tree.chart), str(broken)], check=True)
    (broken / "templates" / "broken.yaml").write_text("{{ .Values.absent.field }}\n")
    helm = helm_sdk()
    result = await helm.Lint(helm.Configuration(namespace=OPERATOR_NAMESPACE)).run(str(broken))
    assert [m["Path"] for m in result["Messages"] if m["Severity"] >= ERROR] == ["templates/"]


async def test_a_packaged_chart_carries_no_nats_key(tree: DeployTree, tmp_path: Path) -> None:
    """``helm package`` bundles every file of the chart that .helmignore does not exclude: keys
    an older ``make nats-credentials`` left in the chart's directory stay out of the archive."""
    chart = tmp_path / "kaiwo"
    shutil.copytree(tree.chart, chart)
    write_nats_credentials(chart / "nats-credentials")
    (chart / "stray.nk").write_text("SUAKEY\n")
    helm = helm_sdk()

    archive = await helm.Package(helm.Configuration(namespace=OPERATOR_NAMESPACE)).run(
        str(chart), dest_dir=str(tmp_path)
    )

    with tarfile.open(archive) as packaged:
        names = packaged.getnames()
    assert "kaiwo/templates/nats-credentials.yaml" in names
    assert [n for n in names if n.endswith(".nk") or "/nats-credentials/" in n] == []
    assert [n for n in names if n.endswith(".conf")] == []


async def test_the_production_values_install_the_production_overlay(
    cluster: RealCluster, tree: DeployTree
) -> None:
    installed = await install(cluster, tree, values_file(tree, "values-production.yaml"))
    overlay = tree.objects("overlays/production")

    chart, kustomized = normalised(installed), normalised(overlay)
    assert sorted(chart) == sorted(kustomized)
    different = [key for key in chart if chart[key] != kustomized[key]]
    assert different == [], {key: (chart[key], kustomized[key]) for key in different[:2]}


async def test_the_messenger_values_install_the_messenger_component(
    cluster: RealCluster, tree: DeployTree
) -> None:
    """``gateway.messenger.enabled`` does what components/messenger does: the gateway's
    ``KAIWO_MESSENGER_ENABLED`` and ``kaiwo nats provision --messenger``."""
    values = merged(
        values_file(tree, "values-production.yaml"), {"gateway": {"messenger": {"enabled": True}}}
    )
    installed = await install(cluster, tree, values)
    overlay = tree.objects(MESSENGER)

    chart, kustomized = normalised(installed), normalised(overlay)
    assert sorted(chart) == sorted(kustomized)
    different = [key for key in chart if chart[key] != kustomized[key]]
    assert different == [], {key: (chart[key], kustomized[key]) for key in different[:2]}
    gateway = chart[("Deployment", "kaiwo-gateway")]["spec"]["template"]["spec"]
    [container] = gateway["containers"]
    assert {"name": "KAIWO_MESSENGER_ENABLED", "value": "true"} in container["env"]


async def test_the_default_values_install_all_but_the_service_monitor(
    cluster: RealCluster, tree: DeployTree
) -> None:
    installed = await install(cluster, tree, {})
    overlay = tree.objects("overlays/production")

    assert set(normalised(installed)) == set(normalised(overlay)) - {("ServiceMonitor", "kaiwo")}
    config = by_kind_and_name(installed)[("KaiwoConfig", "kaiwo")]
    assert config["spec"]["scheduling"] == {"kubeSchedulerName": "kaiwo-scheduler"}


async def test_without_the_scheduler_the_operator_is_told_the_default_one(
    cluster: RealCluster, tree: DeployTree
) -> None:
    values = {
        "scheduler": {"enabled": False},
        "nats": {"replicas": 1},
        "replicas": {"watcher": 1, "planner": 1, "executor": 1, "monitor": 1, "gateway": 1},
        "kaiwoQueueConfig": {"create": True, "spec": {}},
        "eventstore": {"url": "postgresql://kaiwo:secret@db:5432/kaiwo"},
    }
    installed = by_kind_and_name(await install(cluster, tree, values))

    assert [key for key in installed if "scheduler" in key[1]] == []
    assert installed[("KaiwoConfig", "kaiwo")]["spec"] == {
        "scheduling": {"kubeSchedulerName": "default-scheduler"}
    }
    assert ("KaiwoQueueConfig", "kaiwo") in installed
    assert installed[("Secret", "kaiwo-eventstore")]["stringData"] == {
        "url": "postgresql://kaiwo:secret@db:5432/kaiwo"
    }
    nats = installed[("StatefulSet", "nats")]
    assert nats["spec"]["replicas"] == 1
    [container] = nats["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["-js", "-sd", "/data", "-c", "/etc/nats/kaiwo/nats-server.conf"]
    assert ("ConfigMap", "kaiwo-nats-cluster") not in installed
    assert not [key for key in installed if key[0] == "PodDisruptionBudget"]


async def test_without_the_nats_credentials_the_install_says_what_to_do(
    cluster: RealCluster, tree: DeployTree
) -> None:
    helm = helm_sdk()
    with pytest.raises(helm.InstallError, match=r"run `make nats-credentials` and pass -f"):
        await install(cluster, tree, {}, credentials=False)


async def test_a_scheduler_name_no_scheduler_serves_is_refused(
    cluster: RealCluster, tree: DeployTree
) -> None:
    helm = helm_sdk()
    values = {"kaiwoConfig": {"spec": {"scheduling": {"kubeSchedulerName": "other"}}}}
    with pytest.raises(helm.InstallError, match=r"kubeSchedulerName must equal scheduler\.name"):
        await install(cluster, tree, values)
    assert kubectl()


def planner_env(installed: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
    [container] = installed[("Deployment", "kaiwo-planner")]["spec"]["template"]["spec"][
        "containers"
    ]
    return {e["name"]: e.get("value") for e in container["env"]}


async def test_the_default_queue_setting_goes_into_the_kaiwoconfig_and_the_planner(
    cluster: RealCluster, tree: DeployTree
) -> None:
    """``defaultClusterQueueName`` (the reference's DEFAULT_CLUSTER_QUEUE_NAME) names the queue
    in the KaiwoConfig the chart renders, which the operator never replaces, and in the
    planner's setting, for a KaiwoConfig the operator creates (decision 0116)."""
    installed = by_kind_and_name(
        await install(cluster, tree, {"defaultClusterQueueName": "research"})
    )

    assert installed[("KaiwoConfig", "kaiwo")]["spec"] == {
        "defaultClusterQueueName": "research",
        "scheduling": {"kubeSchedulerName": "kaiwo-scheduler"},
    }
    assert planner_env(installed)["KAIWO_DEFAULT_CLUSTER_QUEUE_NAME"] == "research"
    executor = installed[("Deployment", "kaiwo-executor")]["spec"]["template"]["spec"]
    assert "KAIWO_DEFAULT_CLUSTER_QUEUE_NAME" not in str(executor)


async def test_the_default_queue_setting_installs_what_the_overlay_recipe_renders(
    cluster: RealCluster, tree: DeployTree
) -> None:
    """The chart's ``defaultClusterQueueName`` and the kustomize recipe of docs/operations.md
    (two patches over the production overlay) install the same objects."""
    values = merged(
        values_file(tree, "values-production.yaml"), {"defaultClusterQueueName": "research"}
    )
    installed = await install(cluster, tree, values)

    chart, kustomized = normalised(installed), normalised(tree.objects(DEFAULT_QUEUE))
    assert sorted(chart) == sorted(kustomized)
    different = [key for key in chart if chart[key] != kustomized[key]]
    assert different == [], {key: (chart[key], kustomized[key]) for key in different[:2]}


async def test_without_a_rendered_kaiwoconfig_the_planner_still_gets_the_default_queue(
    cluster: RealCluster, tree: DeployTree
) -> None:
    values = {"kaiwoConfig": {"create": False, "spec": {"defaultClusterQueueName": "research"}}}
    installed = by_kind_and_name(await install(cluster, tree, values))

    assert ("KaiwoConfig", "kaiwo") not in installed
    assert planner_env(installed)["KAIWO_DEFAULT_CLUSTER_QUEUE_NAME"] == "research"


async def test_without_the_default_queue_setting_nothing_names_one(
    cluster: RealCluster, tree: DeployTree
) -> None:
    """An install or upgrade that does not set it renders no such field: the KaiwoConfig's own
    value (the CRD's default, or an admin's edit) stays."""
    installed = by_kind_and_name(await install(cluster, tree, {}))

    assert "defaultClusterQueueName" not in installed[("KaiwoConfig", "kaiwo")]["spec"]
    assert "KAIWO_DEFAULT_CLUSTER_QUEUE_NAME" not in planner_env(installed)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {
                "defaultClusterQueueName": "research",
                "kaiwoConfig": {"spec": {"defaultClusterQueueName": "ops"}},
            },
            r"defaultClusterQueueName \(research\) and kaiwoConfig\.spec\.defaultClusterQueueName "
            r"\(ops\) differ",
        ),
        (
            {"defaultClusterQueueName": "Research_Queue"},
            r"defaultClusterQueueName \"Research_Queue\" is not a valid ClusterQueue name",
        ),
    ],
)
async def test_a_default_queue_setting_that_cannot_hold_is_refused(
    cluster: RealCluster, tree: DeployTree, values: dict[str, Any], message: str
) -> None:
    helm = helm_sdk()
    with pytest.raises(helm.InstallError, match=message):
        await install(cluster, tree, values)


def claim_templates(statefulset: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    """Each volume claim template's name, requested storage and StorageClass."""
    return [
        (t["metadata"]["name"], t["spec"]["resources"]["requests"]["storage"],
         t["spec"].get("storageClassName"))
        for t in statefulset["spec"]["volumeClaimTemplates"]
    ]  # fmt: skip


def live_nats(cluster: RealCluster) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(
        run_kubectl(cluster, "-n", OPERATOR_NAMESPACE, "get", "statefulset", "nats", "-o", "json")
    )
    return found


@pytest.mark.parametrize("server_side_apply", [False, True], ids=["client-side", "server-side"])
async def test_a_new_nats_storage_holds_from_the_next_statefulset_and_fails_no_upgrade(
    cluster: RealCluster, tree: DeployTree, server_side_apply: bool
) -> None:
    """Kubernetes refuses any change to a StatefulSet's volumeClaimTemplates: ``helm upgrade``
    with a new nats.storage or nats.storageClassName failed (UPGRADE FAILED, spec: Forbidden).
    It now keeps the live templates, and the resize recipe of docs/operations.md ("NATS
    storage": the StatefulSet deleted with --cascade=orphan, upgrade again) makes the
    StatefulSet again with the new ones."""
    helm = helm_sdk()
    config = helm.Configuration(namespace=OPERATOR_NAMESPACE, kubeconfig=str(cluster.kubeconfig))
    bigger = {"nats": {"storage": "20Gi", "storageClassName": "fast"}}

    [_, upgraded] = await install_and_upgrade(
        cluster, tree, [{}, bigger], server_side_apply=server_side_apply
    )

    assert claim_templates(by_kind_and_name(upgraded)[("StatefulSet", "nats")]) == [
        ("data", "10Gi", None)
    ]
    assert claim_templates(await asyncio.to_thread(live_nats, cluster)) == [("data", "10Gi", None)]
    status = await helm.Status(config).run(RELEASE)
    assert "nats.storage is 20Gi" in json.dumps(status), status

    await asyncio.to_thread(
        run_kubectl, cluster, "-n", OPERATOR_NAMESPACE, "delete", "statefulset", "nats",
        "--cascade=orphan",
    )  # fmt: skip
    await helm.Upgrade(config).run(RELEASE, str(tree.chart), values=tree.chart_values(bigger),
                                   wait=False, timeout=120)  # fmt: skip

    assert claim_templates(await asyncio.to_thread(live_nats, cluster)) == [
        ("data", "20Gi", "fast")
    ]


async def test_a_new_event_store_url_rolls_the_pods_that_read_it(
    cluster: RealCluster, tree: DeployTree
) -> None:
    """The URLs reach the recorder (eventstore.url) and the console (readerUrl) through
    Secrets the chart makes; their pods restarted only when the NATS keys changed, so a new
    URL went unread until something else rolled them. Each now carries a hash of its Secret,
    never its text."""
    recorder = {n: f"postgresql://kaiwo:{n}@db:5432/kaiwo" for n in ("first", "second")}
    reader = {n: f"postgresql://kaiwo_reader:{n}@db:5432/kaiwo" for n in ("first", "second")}
    revisions = await install_and_upgrade(
        cluster,
        tree,
        [
            {"eventstore": {"url": recorder["first"], "readerUrl": reader["first"]}},
            {"eventstore": {"url": recorder["second"], "readerUrl": reader["first"]}},
            {"eventstore": {"url": recorder["second"], "readerUrl": reader["second"]}},
        ],
    )
    first, second, third = (pod_annotations(objects) for objects in revisions)

    changed = [
        sorted(name for name in before if before[name] != after[name])
        for before, after in ((first, second), (second, third))
    ]
    assert changed == [["kaiwo-recorder"], ["kaiwo-console"]]
    for revision in (first, second, third):
        assert "checksum/eventstore" in revision["kaiwo-recorder"]
        assert "checksum/eventstore" in revision["kaiwo-console"]
        assert "first" not in json.dumps(revision) and "second" not in json.dumps(revision)


async def test_a_new_credentials_revision_rolls_nats_and_every_service(
    cluster: RealCluster, tree: DeployTree
) -> None:
    """With existingCredentials the chart renders no key, so the checksum that rolls the pods
    hashed nothing and never changed: rotating those keys rolled nothing. Bumping
    nats.credentialsRevision rolls NATS and every service holding a key."""
    existing = {"existingCredentials": True}
    revisions = await install_and_upgrade(
        cluster,
        tree,
        [
            {"nats": existing},
            {"nats": existing | {"credentialsRevision": "2026-05-01"}},
            {"nats": existing | {"credentialsRevision": "2026-05-01"}},
        ],
        credentials=False,
    )
    first, second, third = (pod_annotations(objects) for objects in revisions)

    rolled = sorted(name for name in first if first[name] != second[name])
    assert rolled == sorted(
        ["nats", "kaiwo-console", "kaiwo-executor", "kaiwo-gateway", "kaiwo-monitor",
         "kaiwo-planner", "kaiwo-recorder", "kaiwo-watcher"]
    )  # fmt: skip
    assert second == third


async def test_the_nats_client_namespaces_install_the_nats_clients_component(
    cluster: RealCluster, tree: DeployTree
) -> None:
    """nats.clientNamespaceSelector with components/nats-clients' label installs what the
    production overlay with that component renders; nats.clientNamespaces names namespaces.
    Messenger tenants and subscriber tools in other namespaces reach NATS's client port only
    so."""
    label = {"matchLabels": {"kaiwo.silogen.ai/nats-client": "true"}}
    values = merged(
        values_file(tree, "values-production.yaml"), {"nats": {"clientNamespaceSelector": label}}
    )
    installed = await install(cluster, tree, values)

    chart, kustomized = normalised(installed), normalised(tree.objects(NATS_CLIENTS))
    assert sorted(chart) == sorted(kustomized)
    different = [key for key in chart if chart[key] != kustomized[key]]
    assert different == [], {key: (chart[key], kustomized[key]) for key in different[:2]}

    by_name = by_kind_and_name(
        await install(cluster, tree, {"nats": {"clientNamespaces": ["team-a", "team-b"]}})
    )
    [rule] = by_name[("NetworkPolicy", "nats-namespace-clients")]["spec"]["ingress"]
    assert rule == {
        "from": [
            {
                "namespaceSelector": {
                    "matchExpressions": [
                        {"key": "kubernetes.io/metadata.name", "operator": "In",
                         "values": ["team-a", "team-b"]}
                    ]
                }
            }
        ],
        "ports": [{"port": 4222, "protocol": "TCP"}],
    }  # fmt: skip
    without = by_kind_and_name(await install(cluster, tree, {}))
    assert ("NetworkPolicy", "nats-namespace-clients") not in without
