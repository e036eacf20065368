"""The stand-in of a Ray cluster's head (decisions 0186, 0187), asked as KubeRay asks it:
through it as an HTTP proxy, with the Ray cluster's own addresses in the request line."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kaiwo_envtest.ray_head import RayJob, deployed, job_info, server
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


class Clock:
    """A settable ``time.time()``."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock(1_700_000_000.0)


@pytest.fixture
def proxy(clock: Clock) -> Iterator[int]:
    port = free_port()
    stand_in = server(port, job_seconds=20, clock=clock)
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
    assert ask(proxy, "PUT", f"{DASHBOARD}/api/jobs/", {})[0] == 502
    assert ask(proxy, "GET", f"{DASHBOARD}/api/jobs/")[0] == 502
    assert ask(proxy, "GET", f"{DASHBOARD}/api/jobs/a/logs")[0] == 502
    assert ask(proxy, "GET", "http://10.0.0.7:8000/api/jobs/a")[0] == 502
    assert ask(proxy, "POST", f"{DASHBOARD}/api/jobs/a")[0] == 502
    assert ask(proxy, "PUT", f"{DASHBOARD}/api/serve/applications/", ["not", "a config"]) == (
        400,
        b"the Serve config is not a JSON object",
    )
    assert ask(proxy, "GET", "/ready") == (200, b"ready")


def test_a_job_runs_for_its_time_then_succeeds() -> None:
    job = RayJob("train-x7k2p", started=1_700_000_000.0)
    running = {
        "type": "SUBMISSION",
        "submission_id": "train-x7k2p",
        "entrypoint": "",
        "status": "RUNNING",
        "message": "Job is currently running.",
        "start_time": 1_700_000_000_000,
    }
    assert job_info(job, now=1_700_000_019.9, job_seconds=20) == running
    assert job_info(job, now=1_700_000_020.0, job_seconds=20) == {
        **running,
        "status": "SUCCEEDED",
        "message": "Job finished successfully.",
        "end_time": 1_700_000_020_000,
    }


def test_a_job_stopped_while_it_runs_stays_stopped() -> None:
    job = RayJob("train-x7k2p", started=1_700_000_000.0, stopped=1_700_000_005.5)
    assert job_info(job, now=1_700_000_030.0, job_seconds=20) | {"start_time": 0} == {
        "type": "SUBMISSION",
        "submission_id": "train-x7k2p",
        "entrypoint": "",
        "status": "STOPPED",
        "message": "Job was intentionally stopped.",
        "start_time": 0,
        "end_time": 1_700_000_005_500,
    }


def test_a_job_is_submitted_when_first_asked_for_on_each_cluster(proxy: int, clock: Clock) -> None:
    """The first question stands for ``ray job submit`` from the submitter pod kwok runs
    without running it; the same id on another cluster is another job."""

    def status(dashboard: str, job: str) -> tuple[str, int]:
        code, body = ask(proxy, "GET", f"{dashboard}/api/jobs/{job}")
        assert code == 200
        info = json.loads(body)
        return info["status"], info["start_time"]

    started = 1_700_000_000_000
    assert status(DASHBOARD, "train-1") == ("RUNNING", started)
    clock.now += 15
    assert status(DASHBOARD, "train-1") == ("RUNNING", started)
    assert status(OTHER_DASHBOARD, "train-1") == ("RUNNING", started + 15_000)
    clock.now += 5
    assert status(DASHBOARD, "train-1") == ("SUCCEEDED", started)
    assert status(OTHER_DASHBOARD, "train-1") == ("RUNNING", started + 15_000)


def test_a_running_job_is_stopped_and_a_finished_or_unknown_one_is_not(
    proxy: int, clock: Clock
) -> None:
    assert ask(proxy, "POST", f"{DASHBOARD}/api/jobs/unknown/stop") == (200, b'{"stopped": false}')
    ask(proxy, "GET", f"{DASHBOARD}/api/jobs/train-1")
    ask(proxy, "GET", f"{DASHBOARD}/api/jobs/train-2")
    clock.now += 3
    assert ask(proxy, "POST", f"{DASHBOARD}/api/jobs/train-1/stop") == (200, b'{"stopped": true}')
    clock.now += 30
    assert json.loads(ask(proxy, "GET", f"{DASHBOARD}/api/jobs/train-1")[1])["status"] == "STOPPED"
    assert ask(proxy, "POST", f"{DASHBOARD}/api/jobs/train-2/stop") == (200, b'{"stopped": false}')
    assert json.loads(ask(proxy, "GET", f"{DASHBOARD}/api/jobs/train-2")[1])["status"] == (
        "SUCCEEDED"
    )
