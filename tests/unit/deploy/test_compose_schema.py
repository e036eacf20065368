"""deploy/compose/compose.yaml against the Compose Specification's JSON schema (vendored in
tests/fixtures/compose with its source): what `docker compose config` would check first, here
without Docker."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Final

import jsonschema
import pytest
import yaml

ROOT: Final = Path(__file__).resolve().parents[3]
COMPOSE: Final = ROOT / "deploy" / "compose" / "compose.yaml"
EXTERNAL_SCHEDULER: Final = ROOT / "deploy" / "compose" / "external-scheduler.yaml"
K8S_SCHEDULER: Final = ROOT / "deploy" / "k8s" / "scheduler" / "scheduler.yaml"
SCHEMA: Final = ROOT / "tests" / "fixtures" / "compose" / "compose_spec.json"


def schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(SCHEMA.read_text())
    # The vendored version predates the top-level project name (see the fixture's README).
    loaded["properties"]["name"] = {"type": "string"}
    return loaded


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return loaded


def merged(base: Any, override: Any) -> Any:
    """``docker compose -f base -f override``, for the attributes the override file uses:
    mappings merge key by key, anything else (a command, a list of profiles) is replaced."""
    if isinstance(base, dict) and isinstance(override, dict):
        return {
            key: merged(base[key], value) if key in base else value
            for key, value in {**base, **override}.items()
        }
    return override


def with_external_scheduler() -> dict[str, Any]:
    result: dict[str, Any] = merged(compose(), yaml.safe_load(EXTERNAL_SCHEDULER.read_text()))
    return result


def test_the_compose_file_follows_the_compose_specification() -> None:
    jsonschema.validate(compose(), schema(), cls=jsonschema.Draft201909Validator)


def test_with_the_external_scheduler_override_too() -> None:
    override = yaml.safe_load(EXTERNAL_SCHEDULER.read_text())
    jsonschema.validate(override, schema(), cls=jsonschema.Draft201909Validator)
    jsonschema.validate(with_external_scheduler(), schema(), cls=jsonschema.Draft201909Validator)


def test_it_runs_every_service_and_provisions_nats_first() -> None:
    services = compose()["services"]
    assert sorted(services) == [
        "console",
        "executor",
        "gateway",
        "kaiwo-scheduler",
        "monitor",
        "nats",
        "nats-provision",
        "planner",
        "postgres",
        "recorder",
        "scheduler-name",
        "watcher",
    ]


def test_the_kaiwo_scheduler_runs_the_cluster_s_image_and_configuration_unprivileged() -> None:
    service = compose()["services"]["kaiwo-scheduler"]
    [deployment] = [
        d for d in yaml.safe_load_all(K8S_SCHEDULER.read_text()) if d["kind"] == "Deployment"
    ]
    [container] = deployment["spec"]["template"]["spec"]["containers"]

    assert service["image"] == container["image"]  # the same pinned official image
    assert service["command"] == [
        "kube-scheduler",
        "--config=/etc/kaiwo-scheduler/config.yaml",
        "--leader-elect-resource-namespace=${KAIWO_SCHEDULER_LEASE_NAMESPACE:-default}",
        "--authentication-skip-lookup=true",
        "--cert-dir=/tmp/certs",
        "--v=2",
    ]
    assert service["volumes"] == [
        "${KUBECONFIG:-~/.kube/config}:/kube/config:ro",  # as the services reach the cluster
        "./kaiwo-scheduler.yaml:/etc/kaiwo-scheduler/config.yaml:ro",
    ]
    assert compose()["x-service"]["volumes"] == [service["volumes"][0]]
    assert service["read_only"] is True
    assert service["cap_drop"] == ["ALL"]
    assert service["security_opt"] == ["no-new-privileges:true"]
    assert service["tmpfs"] == ["/tmp"]
    assert "ports" not in service and "privileged" not in service
    assert "profiles" not in service  # on by default


def test_the_kaiwoconfig_names_the_kaiwo_scheduler_unless_the_cluster_brings_its_own() -> None:
    name = ["kaiwo", "scheduler", "name"]
    connection = ["--kubeconfig", "/kube/config"]
    assert compose()["services"]["scheduler-name"]["command"] == [
        *name,
        "kaiwo-scheduler",
        *connection,
    ]

    external = with_external_scheduler()["services"]
    assert external["kaiwo-scheduler"]["profiles"] == ["kaiwo-scheduler"]  # never asked for
    assert external["scheduler-name"]["command"] == [*name, "default-scheduler", *connection]
    assert external["kaiwo-scheduler"]["image"] == compose()["services"]["kaiwo-scheduler"]["image"]


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("services", "nats", "ports"), "127.0.0.1:14222:4222"),  # must be a list
        (("services", "recorder", "depends_on", "postgres", "condition"), "service_ready"),
        (("services", "monitor", "restart_policy"), "always"),  # no such attribute
    ],
)
def test_the_schema_refuses_what_compose_would_refuse(path: tuple[str, ...], value: str) -> None:
    broken = copy.deepcopy(compose())
    node = broken
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema(), cls=jsonschema.Draft201909Validator)
