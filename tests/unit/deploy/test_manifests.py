"""Every manifest under deploy/ parses, and the pieces the bus's security relies on are there:
NATS reachable on loopback (compose) or by the operator's pods only (Kubernetes), a server
configuration with the users, and each service with its own key and nobody else's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from kaiwo_contracts.events.permissions import ADMIN, CONSOLE, GATEWAY, SERVICES

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"
CREDENTIALS_FILE = "/var/run/secrets/kaiwo/nats/nkey"


def documents(path: Path) -> list[dict[str, Any]]:
    return [document for document in yaml.safe_load_all(path.read_text()) if document]


def kubernetes_objects() -> list[dict[str, Any]]:
    found = []
    for path in sorted((DEPLOY / "k8s" / "base").glob("*.yaml")):
        if path.name != "kustomization.yaml":
            found += documents(path)
    return found


def one(kind: str, name: str) -> dict[str, Any]:
    [found] = [
        obj
        for obj in kubernetes_objects()
        if obj["kind"] == kind and obj["metadata"]["name"] == name
    ]
    return found


def env_of(container: dict[str, Any]) -> dict[str, str]:
    return {item["name"]: item.get("value", "") for item in container.get("env", [])}


# The Helm chart's templates are Go templates, not YAML: helm lint checks them
# (tests/integration/deploy/test_helm_chart.py).
@pytest.mark.parametrize(
    "path",
    sorted(path for path in DEPLOY.rglob("*.yaml") if "templates" not in path.parts),
    ids=lambda path: str(path.relative_to(DEPLOY)),
)
def test_every_manifest_parses(path: Path) -> None:
    for document in documents(path):
        assert isinstance(document, dict)


def test_compose_publishes_nats_on_loopback_only_and_configures_its_users() -> None:
    [compose] = documents(DEPLOY / "compose" / "compose.yaml")
    nats = compose["services"]["nats"]

    assert nats["ports"] == ["${KAIWO_NATS_BIND:-127.0.0.1}:${KAIWO_NATS_PORT:-14222}:4222"]
    assert nats["command"][-2:] == ["-c", "/etc/nats/kaiwo.conf"]
    assert "./nats-credentials/nats-server.conf:/etc/nats/kaiwo.conf:ro" in nats["volumes"]
    # PostgreSQL for the CLI on the host, on loopback too; the recorder waits until it answers.
    postgres = compose["services"]["postgres"]
    assert postgres["ports"] == ["${KAIWO_PG_BIND:-127.0.0.1}:${KAIWO_PG_PORT:-15432}:5432"]
    assert postgres["healthcheck"]["test"][:2] == ["CMD", "pg_isready"]
    recorder = compose["services"]["recorder"]
    assert recorder["depends_on"]["postgres"] == {"condition": "service_healthy"}


def test_compose_gives_the_console_the_event_stores_read_only_role() -> None:
    [compose] = documents(DEPLOY / "compose" / "compose.yaml")
    services = compose["services"]
    console = services["console"]["environment"]["KAIWO_EVENTSTORE_URL"]
    recorder = services["recorder"]["environment"]["KAIWO_EVENTSTORE_URL"]

    assert console.startswith("postgresql://kaiwo_reader:")
    assert recorder.startswith("postgresql://kaiwo:")
    # Made with the database, by the dev overlay's script (one script for both).
    postgres = services["postgres"]
    assert "../k8s/overlays/dev/postgresql-init:/docker-entrypoint-initdb.d:ro" in (
        postgres["volumes"]
    )
    assert "KAIWO_READER_PASSWORD" in postgres["environment"]
    assert (DEPLOY / "k8s" / "overlays" / "dev" / "postgresql-init" / "kaiwo-reader.sh").is_file()


def test_compose_gives_each_service_its_own_key_and_provisions_as_the_administrator() -> None:
    [compose] = documents(DEPLOY / "compose" / "compose.yaml")
    services = compose["services"]
    expected = {
        "nats-provision": ADMIN,
        "recorder": "recorder",
        "watcher": "watcher",
        "planner": "planner",
        "executor": "executor",
        "gateway": "gateway",
        "monitor": "monitor",
    }

    for name, identity in expected.items():
        service = services[name]
        assert service["secrets"] == [{"source": f"nats-{identity}", "target": "nats-nkey"}]
        assert service["environment"]["KAIWO_NATS_CREDENTIALS_FILE"] == "/run/secrets/nats-nkey"
        assert compose["secrets"][f"nats-{identity}"] == {
            "file": f"./nats-credentials/{identity}.nk"
        }
    assert services["nats-provision"]["command"] == ["kaiwo", "nats", "provision"]
    assert services["gateway"]["ports"] == ["127.0.0.1:${KAIWO_GATEWAY_PORT:-18000}:8000"]
    assert services["monitor"]["command"] == ["python", "-m", "kaiwo_monitor"]
    assert "KAIWO_MONITOR_METRICS_ENDPOINT" in services["monitor"]["environment"]
    for name in ("recorder", "watcher", "planner", "executor", "gateway", "monitor"):
        assert services[name]["depends_on"]["nats-provision"] == {
            "condition": "service_completed_successfully"
        }


def test_each_deployment_mounts_its_own_nats_key_only() -> None:
    # The kaiwo-scheduler is a kube-scheduler: no NATS client.
    deployments = [
        obj
        for obj in kubernetes_objects()
        if obj["kind"] == "Deployment" and obj["metadata"]["name"] != "kaiwo-scheduler"
    ]

    assert sorted(d["metadata"]["name"] for d in deployments) == sorted(
        f"kaiwo-{service}" for service in (*SERVICES, GATEWAY, CONSOLE)
    )
    for deployment in deployments:
        service = deployment["metadata"]["name"].removeprefix("kaiwo-")
        pod = deployment["spec"]["template"]["spec"]
        [container] = pod["containers"]
        secrets = [volume["secret"] for volume in pod["volumes"] if "secret" in volume]
        assert secrets == [{"secretName": f"kaiwo-nats-{service}", "defaultMode": 0o440}]
        assert env_of(container)["KAIWO_NATS_CREDENTIALS_FILE"] == CREDENTIALS_FILE
        assert env_of(container)["KAIWO_NATS_DECLARE_STREAMS"] == "false"
        assert container["volumeMounts"] == [
            {"name": "nats-key", "mountPath": "/var/run/secrets/kaiwo/nats", "readOnly": True}
        ]
        assert pod["securityContext"]["fsGroup"] == 65532


def test_nats_exposes_the_client_port_alone_to_the_operator_s_pods() -> None:
    service = one("Service", "nats")
    [container] = one("StatefulSet", "nats")["spec"]["template"]["spec"]["containers"]
    policy = one("NetworkPolicy", "nats-clients")

    assert service["spec"]["ports"] == [{"name": "client", "port": 4222}]
    assert container["ports"] == [{"containerPort": 4222, "name": "client"}]
    assert "-m" not in container["args"]
    assert container["args"][-2:] == ["-c", "/etc/nats/kaiwo/nats-server.conf"]
    assert policy["spec"]["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "nats"}}
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    assert policy["spec"]["ingress"] == [
        {
            "from": [{"podSelector": {"matchLabels": {"app.kubernetes.io/part-of": "kaiwo"}}}],
            "ports": [{"protocol": "TCP", "port": 4222}],
        }
    ]


def test_the_provisioning_job_is_the_only_holder_of_the_administrator_key() -> None:
    job = one("Job", "kaiwo-nats-provision")
    pod = job["spec"]["template"]["spec"]
    [container] = pod["containers"]

    assert container["command"] == ["kaiwo", "nats", "provision"]
    assert env_of(container)["KAIWO_NATS_CREDENTIALS_FILE"] == CREDENTIALS_FILE
    assert pod["volumes"] == [
        {"name": "nats-key", "secret": {"secretName": "kaiwo-nats-admin", "defaultMode": 0o440}}
    ]
    assert job["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/part-of"] == "kaiwo"
    holders = [
        obj["metadata"]["name"]
        for obj in kubernetes_objects()
        if "kaiwo-nats-admin" in yaml.safe_dump(obj)
    ]
    assert holders == ["kaiwo-nats-provision"]


def test_kustomize_generates_the_config_and_one_secret_per_identity() -> None:
    [kustomization] = documents(DEPLOY / "k8s" / "base" / "kustomization.yaml")

    assert kustomization["configMapGenerator"] == [
        {
            "name": "kaiwo-nats-config",
            "files": ["nats-server.conf=nats-credentials/nats-server.conf"],
        }
    ]
    assert kustomization["secretGenerator"] == [
        {"name": f"kaiwo-nats-{identity}", "files": [f"nkey=nats-credentials/{identity}.nk"]}
        for identity in (
            ADMIN,
            "watcher",
            "planner",
            "executor",
            "monitor",
            "recorder",
            GATEWAY,
            CONSOLE,
        )
    ]


def test_the_gateway_serves_the_openai_api_on_port_80_bound_to_its_review_role_only() -> None:
    service = one("Service", "kaiwo-gateway")
    deployment = one("Deployment", "kaiwo-gateway")
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]

    assert service["spec"]["ports"] == [{"name": "http", "port": 80, "targetPort": "openai"}]
    assert {"containerPort": 8000, "name": "openai"} in container["ports"]
    assert env_of(container)["KAIWO_GATEWAY_PORT"] == "8000"
    assert container["command"] == ["python", "-m", "kaiwo_gateway"]
    assert deployment["metadata"]["labels"]["app.kubernetes.io/part-of"] == "kaiwo"
    gateway_roles = [
        obj
        for obj in kubernetes_objects()
        if obj["kind"] in ("RoleBinding", "ClusterRoleBinding")
        and any(s.get("name") == "kaiwo-gateway" for s in obj.get("subjects") or ())
    ]
    assert [(b["kind"], b["roleRef"]["name"]) for b in gateway_roles] == [
        ("ClusterRoleBinding", "kaiwo-gateway")
    ]
    assert "KAIWO_GATEWAY_ANONYMOUS" not in env_of(container)  # tokens required (decision 0040)


def test_planners_and_executors_run_active_active_on_one_partition_count_everywhere() -> None:
    # Decision 0030: 2+ active replicas need partitions, and every service and the
    # provisioning Job must agree on them (the streams' transform, the executor's consumers
    # and the permissions all follow from the one number).
    deployments = [o for o in kubernetes_objects() if o["kind"] == "Deployment"]
    job = one("Job", "kaiwo-nats-provision")
    for workload in (*deployments, job):
        [container] = workload["spec"]["template"]["spec"]["containers"]
        assert env_of(container)["KAIWO_BUS_PARTITIONS"] == "12", workload["metadata"]["name"]
    for name in ("kaiwo-planner", "kaiwo-executor"):
        assert one("Deployment", name)["spec"]["replicas"] >= 2
    values = yaml.safe_load((DEPLOY / "helm" / "kaiwo" / "values.yaml").read_text())
    assert values["bus"]["partitions"] == 12
    assert values["replicas"]["planner"] >= 2 and values["replicas"]["executor"] >= 2
    makefile = (DEPLOY.parent / "Makefile").read_text()
    assert makefile.count("--http 127.0.0.1:8222 --partitions 12") == 2
