"""The stand-in of a Ray cluster's processes (decision 0186), asked as KubeRay asks it:
through it as an HTTP proxy, with the Ray cluster's own addresses in the request line."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kaiwo_envtest.ray_serve import deployed, server
from kaiwo_runtime.nats_server import free_port

DASHBOARD = "http://chat-x7k2p-head-svc.team.svc.cluster.local:8265"
OTHER_DASHBOARD = "http://other-a1b2c-head-svc.team.svc.cluster.local:8265"
SERVE_CONFIG = {
    "applications": [
        {
            "name": "chat",
            "import_path": "chat:app",
            "route_prefix": "/",
            "deployments": [{"name": "Chat"}],
        },
        {"name": "broken", "import_path": "not_installed.models:app", "route_prefix": "/b"},
    ]
}


@pytest.fixture
def proxy() -> Iterator[int]:
    port = free_port()
    stand_in = server(port)
    thread = threading.Thread(target=stand_in.serve_forever, daemon=True)
    thread.start()
    try:
        yield port
    finally:
        stand_in.shutdown()
        stand_in.server_close()


def ask(port: int, method: str, url: str, body: Any = None) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        payload = None if body is None else json.dumps(body).encode()
        connection.request(method, url, body=payload)
        answer = connection.getresponse()
        return answer.status, answer.read()
    finally:
        connection.close()


def test_each_application_deploys_unless_its_module_cannot_be_imported() -> None:
    assert deployed(SERVE_CONFIG) == {
        "deploy_mode": "MULTI_APP",
        "applications": {
            "chat": {
                "name": "chat",
                "route_prefix": "/",
                "status": "RUNNING",
                "message": "",
                "deployments": {"Chat": {"name": "Chat", "status": "HEALTHY", "message": ""}},
            },
            "broken": {
                "name": "broken",
                "route_prefix": "/b",
                "status": "DEPLOY_FAILED",
                "message": "ModuleNotFoundError: No module named 'not_installed.models'",
                "deployments": {},
            },
        },
    }


def test_a_module_whose_name_only_starts_like_the_missing_one_deploys() -> None:
    config = {"applications": [{"name": "x", "import_path": "not_installed_really:app"}]}
    assert deployed(config)["applications"]["x"]["status"] == "RUNNING"


def test_the_dashboard_gives_each_cluster_the_config_submitted_to_it(proxy: int) -> None:
    applications = f"{DASHBOARD}/api/serve/applications/"
    assert ask(proxy, "GET", f"{applications}?api_type=declarative") == (
        200,
        b'{"deploy_mode": "MULTI_APP", "applications": {}}',
    )
    assert ask(proxy, "PUT", applications, SERVE_CONFIG) == (200, b"")

    status, body = ask(proxy, "GET", f"{applications}?api_type=declarative")
    assert status == 200
    assert json.loads(body) == deployed(SERVE_CONFIG)
    _, other = ask(proxy, "GET", f"{OTHER_DASHBOARD}/api/serve/applications/")
    assert json.loads(other)["applications"] == {}


def test_a_serve_proxy_is_healthy_and_the_rest_is_unreachable(proxy: int) -> None:
    assert ask(proxy, "GET", "http://10.0.0.7:8000/-/healthz") == (200, b"success")
    # A Ray job's status: unknown, as with no stand-in (KubeRay keeps asking).
    status, _ = ask(proxy, "GET", f"{DASHBOARD}/api/jobs/raysubmit_1")
    assert status == 502
    assert ask(proxy, "PUT", f"{DASHBOARD}/api/jobs/", {})[0] == 502
    assert ask(proxy, "PUT", f"{DASHBOARD}/api/serve/applications/", ["not", "a config"]) == (
        400,
        b"the Serve config is not a JSON object",
    )
    assert ask(proxy, "GET", "/ready") == (200, b"ready")
