"""The stand-in of a Ray cluster's head (decisions 0186, 0187), asked as KubeRay asks it:
through it as an HTTP proxy, with the Ray cluster's own addresses in the request line."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kaiwo_envtest.ray_head import RayJob, deployed, finish_path, job_info, server
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
    assert ask(proxy, "POST", "http://10.0.0.7:8000/api/jobs/", {})[0] == 502
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


def submitted_by_the_submitter_pod(proxy: int, dashboard: str, job: str) -> None:
    """KubeRay's first question, before its submitter pod submitted the job: unknown."""
    assert ask(proxy, "GET", f"{dashboard}/api/jobs/{job}") == (
        404,
        f"Job {job} does not exist".encode(),
    )


def test_a_job_is_submitted_when_asked_for_again_on_each_cluster(proxy: int, clock: Clock) -> None:
    """Unknown the first time, the next question stands for ``ray job submit`` from the
    submitter pod kwok runs without running it; the same id on another cluster is another
    job."""

    def status(dashboard: str, job: str) -> tuple[str, int]:
        code, body = ask(proxy, "GET", f"{dashboard}/api/jobs/{job}")
        assert code == 200
        info = json.loads(body)
        return info["status"], info["start_time"]

    started = 1_700_000_000_000
    submitted_by_the_submitter_pod(proxy, DASHBOARD, "train-1")
    submitted_by_the_submitter_pod(proxy, OTHER_DASHBOARD, "train-1")
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
    for job in ("train-1", "train-2"):
        submitted_by_the_submitter_pod(proxy, DASHBOARD, job)
        assert ask(proxy, "GET", f"{DASHBOARD}/api/jobs/{job}")[0] == 200
    clock.now += 3
    assert ask(proxy, "POST", f"{DASHBOARD}/api/jobs/train-1/stop") == (200, b'{"stopped": true}')
    clock.now += 30
    assert json.loads(ask(proxy, "GET", f"{DASHBOARD}/api/jobs/train-1")[1])["status"] == "STOPPED"
    assert ask(proxy, "POST", f"{DASHBOARD}/api/jobs/train-2/stop") == (200, b'{"stopped": false}')
    assert json.loads(ask(proxy, "GET", f"{DASHBOARD}/api/jobs/train-2")[1])["status"] == (
        "SUCCEEDED"
    )


def test_a_job_submitted_over_http_runs_its_entrypoint_and_its_id_is_taken(
    proxy: int, clock: Clock
) -> None:
    """As KubeRay submits a RayJob in ``HTTPMode``: the job is known at once, with its
    entrypoint; its id cannot be submitted again on that cluster, as on a Ray head."""
    submission = {"entrypoint": "python train.py", "submission_id": "train-1"}
    assert ask(proxy, "POST", f"{DASHBOARD}/api/jobs/", submission) == (
        200,
        b'{"job_id": "train-1", "submission_id": "train-1"}',
    )
    code, body = ask(proxy, "GET", f"{DASHBOARD}/api/jobs/train-1")
    assert code == 200
    assert json.loads(body) == {
        "type": "SUBMISSION",
        "submission_id": "train-1",
        "entrypoint": "python train.py",
        "status": "RUNNING",
        "message": "Job is currently running.",
        "start_time": 1_700_000_000_000,
    }
    assert ask(proxy, "POST", f"{DASHBOARD}/api/jobs/", submission) == (
        500,
        b"Job with submission_id train-1 already exists. Please use a different submission_id.",
    )
    assert ask(proxy, "POST", f"{OTHER_DASHBOARD}/api/jobs/", submission)[0] == 200
    assert ask(proxy, "POST", f"{DASHBOARD}/api/jobs/", ["not", "a job"]) == (
        400,
        b"the job submission is not a JSON object",
    )


def test_a_job_given_no_submission_id_gets_one_of_rays_form(proxy: int) -> None:
    code, body = ask(proxy, "POST", f"{DASHBOARD}/api/jobs/", {"entrypoint": "python t.py"})
    assert code == 200
    answer = json.loads(body)
    assert answer["job_id"] == answer["submission_id"]
    assert answer["job_id"].startswith("raysubmit_")
    code, body = ask(proxy, "GET", f"{DASHBOARD}/api/jobs/{answer['job_id']}")
    assert (code, json.loads(body)["entrypoint"]) == (200, "python t.py")


@pytest.mark.parametrize(
    "entrypoint",
    [
        "python -c 'import not_installed'",
        "python -m not_installed.train --epochs 2",
        "python -c 'from not_installed import model'",
    ],
)
def test_a_job_whose_entrypoint_imports_the_missing_module_fails_at_once(entrypoint: str) -> None:
    job = RayJob("train-1", started=1_700_000_000.0, entrypoint=entrypoint)
    assert job_info(job, now=1_700_000_001.0, job_seconds=20) == {
        "type": "SUBMISSION",
        "submission_id": "train-1",
        "entrypoint": entrypoint,
        "status": "FAILED",
        "error_type": "JOB_ENTRYPOINT_COMMAND_ERROR",
        "message": "Job entrypoint command failed with exit code 1, last available logs "
        "(truncated to 20,000 chars):\nModuleNotFoundError: No module named 'not_installed'\n",
        "start_time": 1_700_000_000_000,
        "end_time": 1_700_000_000_000,
    }


@pytest.mark.parametrize(
    "entrypoint",
    ["python -m not_installed_really", "python -m models.not_installed", "python train.py"],
)
def test_an_entrypoint_naming_another_module_runs(entrypoint: str) -> None:
    job = RayJob("train-1", started=1_700_000_000.0, entrypoint=entrypoint)
    assert job_info(job, now=1_700_000_001.0, job_seconds=20)["status"] == "RUNNING"


def test_a_job_a_test_made_finish_succeeded_then() -> None:
    job = RayJob("train-x7k2p", started=1_700_000_000.0, finished=1_700_000_004.0)
    assert job_info(job, now=1_700_000_004.0, job_seconds=20) == {
        "type": "SUBMISSION",
        "submission_id": "train-x7k2p",
        "entrypoint": "",
        "status": "SUCCEEDED",
        "message": "Job finished successfully.",
        "start_time": 1_700_000_000_000,
        "end_time": 1_700_000_004_000,
    }


def test_a_test_finishes_a_running_job_now_and_leaves_an_ended_or_unknown_one(
    proxy: int, clock: Clock
) -> None:
    """``POST /standin/jobs/<id>/finish`` on a dashboard: a running job succeeds at once, on
    that cluster only; one that ended stays as it ended; one not known is ``404``."""

    def finish(dashboard: str, job: str) -> tuple[int, Any]:
        code, body = ask(proxy, "POST", f"{dashboard}{finish_path(job)}")
        return code, json.loads(body) if code == 200 else body

    def status(dashboard: str, job: str) -> tuple[str, int | None]:
        info = json.loads(ask(proxy, "GET", f"{dashboard}/api/jobs/{job}")[1])
        return info["status"], info.get("end_time")

    started = 1_700_000_000_000
    assert finish(DASHBOARD, "train-1") == (404, b"Job train-1 does not exist")
    for dashboard, job in ((DASHBOARD, "train-1"), (OTHER_DASHBOARD, "train-1")):
        submitted_by_the_submitter_pod(proxy, dashboard, job)
        assert status(dashboard, job) == ("RUNNING", None)
    broken = {"entrypoint": "python -m not_installed", "submission_id": "broken"}
    assert ask(proxy, "POST", f"{DASHBOARD}/api/jobs/", broken)[0] == 200
    assert ask(proxy, "POST", f"{DASHBOARD}/api/jobs/", {"submission_id": "stopped"})[0] == 200
    clock.now += 3
    assert ask(proxy, "POST", f"{DASHBOARD}/api/jobs/stopped/stop") == (200, b'{"stopped": true}')

    code, finished = finish(DASHBOARD, "train-1")
    assert (code, finished["status"], finished["end_time"]) == (200, "SUCCEEDED", started + 3000)
    clock.now += 1
    assert finish(DASHBOARD, "stopped")[1]["status"] == "STOPPED"
    assert finish(DASHBOARD, "broken")[1]["status"] == "FAILED"
    assert finish(DASHBOARD, "train-1")[1]["end_time"] == started + 3000
    assert ask(proxy, "POST", f"{DASHBOARD}/api/jobs/train-1/stop") == (200, b'{"stopped": false}')
    clock.now += 30
    assert status(DASHBOARD, "train-1") == ("SUCCEEDED", started + 3000)
    assert status(DASHBOARD, "stopped") == ("STOPPED", started + 3000)
    assert status(OTHER_DASHBOARD, "train-1") == ("SUCCEEDED", started + 20_000)
    assert ask(proxy, "GET", f"{DASHBOARD}/standin/jobs/train-1/finish")[0] == 502
    assert ask(proxy, "POST", "http://10.0.0.7:8000/standin/jobs/train-1/finish")[0] == 502
