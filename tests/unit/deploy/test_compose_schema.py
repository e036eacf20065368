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
SCHEMA: Final = ROOT / "tests" / "fixtures" / "compose" / "compose_spec.json"


def schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(SCHEMA.read_text())
    # The vendored version predates the top-level project name (see the fixture's README).
    loaded["properties"]["name"] = {"type": "string"}
    return loaded


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return loaded


def test_the_compose_file_follows_the_compose_specification() -> None:
    jsonschema.validate(compose(), schema(), cls=jsonschema.Draft201909Validator)


def test_it_runs_every_service_and_provisions_nats_first() -> None:
    services = compose()["services"]
    assert sorted(services) == [
        "executor",
        "monitor",
        "nats",
        "nats-provision",
        "planner",
        "postgres",
        "recorder",
        "watcher",
    ]


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
