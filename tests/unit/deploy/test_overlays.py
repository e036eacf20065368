"""What each kustomize overlay renders (``kubectl kustomize``): dev with one replica of
everything, NATS on an emptyDir and its own PostgreSQL; production with a 3-node NATS and R3
streams, two replicas where the design allows, budgets, anti-affinity, NetworkPolicies, a
ServiceMonitor and limits everywhere; the kaiwo-scheduler whose profile is the name the
KaiwoConfig gives the operator, or, with components/external-scheduler, no such scheduler and
no such name. Whether the API server accepts them: tests/integration/deploy."""

from __future__ import annotations

import base64
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy_manifests import (
    DEFAULT_QUEUE,
    EXTERNAL_SCHEDULER,
    MESSENGER,
    NATS_CLIENTS,
    REPO_ROOT,
    DeployTree,
    by_kind_and_name,
    shared_deploy_tree,
)

SERVICES = ("watcher", "planner", "executor", "monitor", "recorder")
NATS_KEYS = ("admin", "watcher", "planner", "executor", "monitor", "recorder", "gateway", "console")
OPERATIONS = REPO_ROOT / "docs" / "operations.md"


@pytest.fixture(scope="module")
def tree() -> DeployTree:
    return shared_deploy_tree()


@pytest.fixture(scope="module")
def dev(tree: DeployTree) -> dict[tuple[str, str], dict[str, Any]]:
    return by_kind_and_name(tree.objects("overlays/dev"))


@pytest.fixture(scope="module")
def production(tree: DeployTree) -> dict[tuple[str, str], dict[str, Any]]:
    return by_kind_and_name(tree.objects("overlays/production"))


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = obj["spec"]["template"]["spec"]
    return spec


def env_of(obj: dict[str, Any]) -> dict[str, Any]:
    [container, *_] = pod_spec(obj)["containers"]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


def workloads(objects: dict[tuple[str, str], dict[str, Any]]) -> list[dict[str, Any]]:
    kinds = ("Deployment", "StatefulSet", "Job")
    return [o for (kind, _), o in objects.items() if kind in kinds]


def scheduler_profile(objects: dict[tuple[str, str], dict[str, Any]]) -> str:
    config = yaml.safe_load(objects[("ConfigMap", "kaiwo-scheduler-config")]["data"]["config.yaml"])
    [profile] = config["profiles"]
    name: str = profile["schedulerName"]
    return name


def test_dev_runs_one_of_everything_with_nats_on_an_empty_dir(dev: Any) -> None:
    for obj in workloads(dev):
        if obj["kind"] != "Job":
            assert obj["spec"]["replicas"] == 1, obj["metadata"]["name"]
    nats = dev[("StatefulSet", "nats")]
    assert "volumeClaimTemplates" not in nats["spec"]
    volumes = {v["name"]: v for v in pod_spec(nats)["volumes"]}
    assert volumes["data"] == {"name": "data", "emptyDir": {"sizeLimit": "2Gi"}}


def test_dev_brings_postgresql_and_the_recorder_reads_its_url_from_the_secret(dev: Any) -> None:
    recorder = dev[("Deployment", "kaiwo-recorder")]
    reference = env_of(recorder)["KAIWO_EVENTSTORE_URL"]["secretKeyRef"]
    [secret] = [o for (kind, name), o in dev.items() if name == reference["name"]]
    assert secret["kind"] == "Secret"
    assert reference["name"].startswith("kaiwo-eventstore-")
    assert reference["key"] == "url"
    assert ("StatefulSet", "kaiwo-postgresql") in dev
    assert dev[("Service", "kaiwo-postgresql")]["spec"]["ports"] == [
        {"name": "postgresql", "port": 5432}
    ]


def test_the_console_reads_the_event_store_as_a_role_that_may_only_select(
    dev: Any, production: Any
) -> None:
    # The console held the recorder's login (create tables, insert): it only reads.
    for objects, recorder_secret, reader_secret in (
        (dev, "kaiwo-eventstore-", "kaiwo-eventstore-reader-"),
        (production, "kaiwo-eventstore", "kaiwo-eventstore-reader"),
    ):
        console = env_of(objects[("Deployment", "kaiwo-console")])["KAIWO_EVENTSTORE_URL"]
        recorder = env_of(objects[("Deployment", "kaiwo-recorder")])["KAIWO_EVENTSTORE_URL"]
        assert console["secretKeyRef"]["name"].startswith(reader_secret)
        assert recorder["secretKeyRef"]["name"].startswith(recorder_secret)
        assert not recorder["secretKeyRef"]["name"].startswith(reader_secret)
    [reader] = [o for (kind, name), o in dev.items() if name.startswith("kaiwo-eventstore-reader-")]
    assert base64.b64decode(reader["data"]["url"]).decode().startswith("postgresql://kaiwo_reader:")
    # The dev PostgreSQL makes the role with the database.
    postgresql = pod_spec(dev[("StatefulSet", "kaiwo-postgresql")])
    [container] = postgresql["containers"]
    assert "KAIWO_READER_PASSWORD" in env_of(dev[("StatefulSet", "kaiwo-postgresql")])
    assert {"name": "init", "mountPath": "/docker-entrypoint-initdb.d", "readOnly": True} in (
        container["volumeMounts"]
    )
    [init] = [v for v in postgresql["volumes"] if v["name"] == "init"]
    [config_map] = [o for (kind, name), o in dev.items() if name == init["configMap"]["name"]]
    assert sorted(config_map["data"]) == ["kaiwo-reader.psql", "kaiwo-reader.sh"]


def test_the_eventstore_reader_secret_template_documents_the_key_the_console_reads() -> None:
    template = Path(__file__).resolve().parents[3] / (
        "deploy/k8s/overlays/production/eventstore-reader-secret.template.yaml"
    )
    [secret] = yaml.safe_load_all(template.read_text())
    assert secret["metadata"] == {"name": "kaiwo-eventstore-reader", "namespace": "kaiwo-system"}
    assert list(secret["stringData"]) == ["url"]


def test_production_runs_nats_as_a_three_node_cluster_with_three_copies(production: Any) -> None:
    nats = production[("StatefulSet", "nats")]
    [container] = pod_spec(nats)["containers"]
    [cluster_conf] = [
        o for (kind, n), o in production.items() if n.startswith("kaiwo-nats-cluster")
    ]
    conf = cluster_conf["data"]["cluster.conf"]

    assert nats["spec"]["replicas"] == 3
    assert nats["spec"]["serviceName"] == "nats-headless"
    assert container["args"] == ["-c", "/etc/nats/cluster.conf"]
    for ordinal in range(3):
        assert f"nats://nats-{ordinal}.nats-headless:6222" in conf
    assert "include ./kaiwo/nats-server.conf" in conf
    anti = pod_spec(nats)["affinity"]["podAntiAffinity"]
    assert anti["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKey"] == (
        "kubernetes.io/hostname"
    )
    with_replicas = [
        o["metadata"]["name"]
        for o in workloads(production)
        if env_of(o).get("KAIWO_BUS_STREAM_REPLICAS") == "3"
    ]
    assert sorted(with_replicas) == sorted(
        [
            *(f"kaiwo-{s}" for s in SERVICES),
            "kaiwo-gateway",
            "kaiwo-console",
            "kaiwo-nats-provision",
        ]
    )


def test_production_replicas_budgets_and_spread(production: Any) -> None:
    replicas = {
        name: obj["spec"]["replicas"]
        for (kind, name), obj in production.items()
        if kind == "Deployment"
    }
    assert replicas == {
        "kaiwo-watcher": 2,
        "kaiwo-planner": 2,
        "kaiwo-executor": 2,
        "kaiwo-monitor": 2,
        "kaiwo-recorder": 1,
        "kaiwo-gateway": 2,
        "kaiwo-console": 1,
        "kaiwo-scheduler": 2,
    }
    budgets = {
        name: o["spec"] for (kind, name), o in production.items() if kind == "PodDisruptionBudget"
    }
    for name, count in replicas.items():
        if count > 1:
            assert budgets[name]["minAvailable"] == 1
            assert budgets[name]["selector"] == {"matchLabels": {"app.kubernetes.io/name": name}}
            [term] = pod_spec(production[("Deployment", name)])["affinity"]["podAntiAffinity"][
                "preferredDuringSchedulingIgnoredDuringExecution"
            ]
            assert term["podAffinityTerm"]["labelSelector"] == {
                "matchLabels": {"app.kubernetes.io/name": name}
            }
    assert "kaiwo-recorder" not in budgets
    assert budgets["nats"]["maxUnavailable"] == 1


def test_production_limits_every_container(production: Any) -> None:
    for obj in workloads(production):
        for container in pod_spec(obj)["containers"]:
            resources = container["resources"]
            assert resources["requests"]["cpu"], obj["metadata"]["name"]
            assert resources["requests"]["memory"], obj["metadata"]["name"]
            assert resources["limits"]["memory"], obj["metadata"]["name"]


def test_production_admits_only_what_the_services_need(production: Any) -> None:
    policies = {
        name: o["spec"] for (kind, name), o in production.items() if kind == "NetworkPolicy"
    }
    assert sorted(policies) == [
        "console-readers",
        "default-deny-ingress",
        "gateway-clients",
        "metrics-from-monitoring",
        "nats-clients",
        "nats-routes",
        "postgresql-clients",
    ]
    assert policies["default-deny-ingress"] == {"podSelector": {}, "policyTypes": ["Ingress"]}
    assert policies["postgresql-clients"]["ingress"][0]["from"] == [
        {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "kaiwo-recorder"}}},
        {"podSelector": {"matchLabels": {"kaiwo.silogen.ai/eventstore-client": "true"}}},
    ]
    assert policies["nats-routes"]["ingress"] == [
        {
            "from": [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": "nats"}}}],
            "ports": [{"protocol": "TCP", "port": 6222}],
        }
    ]
    # The OpenAI API: any client, on the gateway's port only (its metrics stay on 8080).
    assert policies["gateway-clients"] == {
        "podSelector": {"matchLabels": {"app.kubernetes.io/name": "kaiwo-gateway"}},
        "policyTypes": ["Ingress"],
        "ingress": [{"ports": [{"protocol": "TCP", "port": 8000}]}],
    }
    # The console: any reader (each signs in with a token), on the pages' port only.
    assert policies["console-readers"] == {
        "podSelector": {"matchLabels": {"app.kubernetes.io/name": "kaiwo-console"}},
        "policyTypes": ["Ingress"],
        "ingress": [{"ports": [{"protocol": "TCP", "port": 8090}]}],
    }


def test_production_has_a_service_monitor_on_every_service_s_metrics(production: Any) -> None:
    monitor = production[("ServiceMonitor", "kaiwo")]
    service = production[("Service", "kaiwo-metrics")]
    assert monitor["spec"]["selector"] == {
        "matchLabels": {"app.kubernetes.io/name": "kaiwo-metrics"}
    }
    assert service["spec"]["selector"] == {"app.kubernetes.io/part-of": "kaiwo"}
    assert service["spec"]["ports"] == [{"name": "metrics", "port": 8080, "targetPort": "http"}]
    assert monitor["spec"]["endpoints"][0]["port"] == "metrics"
    assert ("Secret", "kaiwo-eventstore") not in production  # the platform team's (template)


@pytest.mark.parametrize("overlay", ["overlays/dev", "overlays/production"])
def test_the_scheduler_serves_the_name_the_kaiwoconfig_gives_the_operator(
    tree: DeployTree, overlay: str
) -> None:
    objects = by_kind_and_name(tree.objects(overlay))
    config = objects[("KaiwoConfig", "kaiwo")]
    scheduler = objects[("Deployment", "kaiwo-scheduler")]
    [container] = pod_spec(scheduler)["containers"]

    assert config["spec"]["scheduling"]["kubeSchedulerName"] == "kaiwo-scheduler"
    assert scheduler_profile(objects) == "kaiwo-scheduler"
    assert container["image"].startswith("registry.k8s.io/kube-scheduler:v1.32.0@sha256:")


def test_the_scheduler_packs_gpus(tree: DeployTree) -> None:
    objects = by_kind_and_name(tree.objects("base"))
    config = yaml.safe_load(objects[("ConfigMap", "kaiwo-scheduler-config")]["data"]["config.yaml"])
    [profile] = config["profiles"]
    [fit] = profile["pluginConfig"]
    strategy = fit["args"]["scoringStrategy"]

    assert fit["name"] == "NodeResourcesFit"
    assert strategy["type"] == "RequestedToCapacityRatio"
    assert strategy["resources"] == [
        {"name": "amd.com/gpu", "weight": 5},
        {"name": "nvidia.com/gpu", "weight": 5},
    ]
    # Fuller nodes score higher: bin-packing, not spreading.
    assert strategy["requestedToCapacityRatio"]["shape"] == [
        {"utilization": 0, "score": 0},
        {"utilization": 100, "score": 10},
    ]


def overlay_of_its_own(tree: DeployTree, name: str, kustomization: dict[str, Any]) -> str:
    """A test's overlay beside the others (overlays/<name>), for ``tree.objects``."""
    directory = tree.root / "k8s" / "overlays" / name
    directory.mkdir(exist_ok=True)
    (directory / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return f"overlays/{name}"


@pytest.mark.parametrize("over", ["production", "dev"])
def test_without_the_scheduler_the_operator_names_the_default_one(
    tree: DeployTree, over: str
) -> None:
    """Nothing of the scheduler is left, the production overlay's budget for it included
    (it selected no pod), and the component still renders over an overlay without that
    budget."""
    overlay = (
        EXTERNAL_SCHEDULER
        if over == "production"
        else overlay_of_its_own(
            tree,
            f"{over}-external-scheduler",
            {"resources": [f"../{over}"], "components": ["../../components/external-scheduler"]},
        )
    )
    objects = by_kind_and_name(tree.objects(overlay))
    left = [key for key in objects if "kaiwo-scheduler" in key[1]]

    assert left == []
    assert objects[("KaiwoConfig", "kaiwo")]["spec"]["scheduling"] == {
        "kubeSchedulerName": "default-scheduler"
    }


def test_the_eventstore_secret_template_documents_the_key_the_recorder_reads() -> None:
    template = Path(__file__).resolve().parents[3] / (
        "deploy/k8s/overlays/production/eventstore-secret.template.yaml"
    )
    [secret] = yaml.safe_load_all(template.read_text())
    assert secret["metadata"] == {"name": "kaiwo-eventstore", "namespace": "kaiwo-system"}
    assert list(secret["stringData"]) == ["url"]


def test_the_messenger_is_off_unless_its_component_switches_it_on(
    production: Any, tree: DeployTree
) -> None:
    """Off: the gateway says so and the provisioning Job declares no messenger stream. With
    components/messenger: the gateway answers requests through NATS and the Job declares the
    streams and consumer it reads (``kaiwo nats provision --messenger``)."""
    with_messenger = by_kind_and_name(tree.objects(MESSENGER))

    for objects, enabled, command in (
        (production, "false", ["kaiwo", "nats", "provision"]),
        (with_messenger, "true", ["kaiwo", "nats", "provision", "--messenger"]),
    ):
        assert (
            env_of(objects[("Deployment", "kaiwo-gateway")])["KAIWO_MESSENGER_ENABLED"] == enabled
        )
        [job] = [o for (kind, _), o in objects.items() if kind == "Job"]
        [container] = pod_spec(job)["containers"]
        assert container["command"] == command
    # Nothing else changes.
    assert set(with_messenger) == set(production)


@pytest.mark.parametrize("overlay", ["overlays/dev", "overlays/production"])
def test_the_overlays_name_no_default_queue_of_their_own(tree: DeployTree, overlay: str) -> None:
    """The KaiwoConfig they apply leaves ``defaultClusterQueueName`` to the CRD's default (or
    to an admin's edit, which a re-apply therefore never conflicts with), and the planner
    gets no setting of its own to disagree with it (decision 0116)."""
    objects = by_kind_and_name(tree.objects(overlay))

    assert "defaultClusterQueueName" not in objects[("KaiwoConfig", "kaiwo")]["spec"]
    assert "KAIWO_DEFAULT_CLUSTER_QUEUE_NAME" not in env_of(
        objects[("Deployment", "kaiwo-planner")]
    )


def test_the_documented_patches_name_the_default_queue_in_the_kaiwoconfig_and_the_planner(
    tree: DeployTree,
) -> None:
    """docs/operations.md's recipe for the reference's DEFAULT_CLUSTER_QUEUE_NAME: the
    KaiwoConfig the overlay applies names the queue, and so does the planner's setting, for a
    KaiwoConfig the operator would create after a deletion."""
    objects = by_kind_and_name(tree.objects(DEFAULT_QUEUE))

    assert objects[("KaiwoConfig", "kaiwo")]["spec"] == {
        "defaultClusterQueueName": "research",
        "scheduling": {"kubeSchedulerName": "kaiwo-scheduler"},
    }
    assert env_of(objects[("Deployment", "kaiwo-planner")])["KAIWO_DEFAULT_CLUSTER_QUEUE_NAME"] == (
        "research"
    )
    assert "KAIWO_DEFAULT_CLUSTER_QUEUE_NAME" not in env_of(
        objects[("Deployment", "kaiwo-executor")]
    )


def generated_nats_objects(objects: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The kaiwo-nats-* ConfigMaps and Secrets, named without kustomize's content hash."""
    return sorted(
        (o["kind"], re.sub(r"-[a-z0-9]{10}$", "", o["metadata"]["name"]))
        for o in objects
        if o["kind"] in ("ConfigMap", "Secret") and o["metadata"]["name"].startswith("kaiwo-nats-")
    )


def test_the_documented_key_rotation_applies_what_holds_the_keys(tree: DeployTree) -> None:
    """docs/operations.md's "Rotating credentials": the kustomize command it gives renders the
    server configuration and every key (so their new names roll NATS and the services), and
    the Helm command passes the values file ``make nats-credentials`` writes. It once named
    deploy/k8s, which holds the CRDs alone: the rotation applied nothing."""
    [paragraph] = re.findall(
        r"^\*\*Rotating credentials\.\*\*.*?(?=^\*\*|^#)",
        OPERATIONS.read_text(),
        flags=re.MULTILINE | re.DOTALL,
    )
    applied = re.findall(r"kubectl apply (--server-side )?-k (\S+)", paragraph)
    [helm_values] = re.findall(r"helm upgrade kaiwo deploy/helm/kaiwo .*?-f\s+(\S+)", paragraph)
    [written] = re.findall(r"--helm-values (\S+)", (REPO_ROOT / "Makefile").read_text())

    assert applied == [("--server-side ", "deploy/k8s/overlays/production")]
    for _, path in applied:
        overlay = tree.objects(path.removeprefix("deploy/k8s/"))
        assert generated_nats_objects(overlay) == sorted(
            [("ConfigMap", "kaiwo-nats-cluster"), ("ConfigMap", "kaiwo-nats-config")]
            + [("Secret", f"kaiwo-nats-{key}") for key in NATS_KEYS]
        )
    assert helm_values == written == "deploy/helm/nats-credentials.yaml"


NATS_NAMESPACE_CLIENTS = {
    "podSelector": {"matchLabels": {"app.kubernetes.io/name": "nats"}},
    "policyTypes": ["Ingress"],
    "ingress": [
        {
            "from": [
                {"namespaceSelector": {"matchLabels": {"kaiwo.silogen.ai/nats-client": "true"}}}
            ],
            "ports": [{"protocol": "TCP", "port": 4222}],
        }
    ],
}


def test_the_nats_clients_component_admits_the_labelled_namespaces_to_the_client_port(
    tree: DeployTree, production: Any
) -> None:
    """Messenger tenants and subscriber tools run in pods of their own namespaces, which
    nats-clients (the operator's pods only) never admitted: the component adds a policy for
    the namespaces labelled kaiwo.silogen.ai/nats-client=true, on the client port alone, in
    kaiwo-system beside NATS. Nothing else changes."""
    with_clients = by_kind_and_name(tree.objects(NATS_CLIENTS))
    policy = with_clients[("NetworkPolicy", "nats-namespace-clients")]

    assert set(with_clients) - set(production) == {("NetworkPolicy", "nats-namespace-clients")}
    assert set(production) - set(with_clients) == set()
    assert policy["metadata"]["namespace"] == "kaiwo-system"
    assert policy["spec"] == NATS_NAMESPACE_CLIENTS


def test_the_documented_patch_admits_the_namespaces_it_names(tree: DeployTree) -> None:
    """docs/operations.md's recipe for naming namespaces instead of labelling them, over the
    production overlay."""
    [section] = re.findall(
        r"^### NATS clients in other namespaces\n(.*?)(?=^##)",
        OPERATIONS.read_text(),
        flags=re.MULTILINE | re.DOTALL,
    )
    [recipe] = re.findall(r"```yaml\n(.*?)```", section, flags=re.DOTALL)
    kustomization = {"resources": ["../production"], **yaml.safe_load(textwrap.dedent(recipe))}
    overlay = overlay_of_its_own(tree, "production-nats-clients-by-name", kustomization)

    policy = by_kind_and_name(tree.objects(overlay))[("NetworkPolicy", "nats-namespace-clients")]

    assert policy["spec"]["ingress"] == [
        {
            "from": [
                {
                    "namespaceSelector": {
                        "matchExpressions": [
                            {
                                "key": "kubernetes.io/metadata.name",
                                "operator": "In",
                                "values": ["team-a", "team-b"],
                            }
                        ]
                    }
                }
            ],
            "ports": [{"protocol": "TCP", "port": 4222}],
        }
    ]
