"""A stand-in for what KubeRay asks of a Ray cluster's head, whose processes kwok does not run.

Under kwok a Ray cluster's pods run, but no Ray process answers in them: KubeRay asks the
head's dashboard for a RayService's Serve applications and a RayJob's job, gets no answer, and
a Ray service never serves nor a Ray job runs (decisions 0186, 0187).

KubeRay reaches a cluster at addresses only the cluster's network knows: the dashboard at
``http://<head service>.<namespace>.svc.cluster.local:8265`` and the Serve proxy's health at
``http://<head pod IP>:8000/-/healthz``, each through Go's default HTTP transport, which takes
``HTTP_PROXY`` from its environment. The control plane starts this server and gives its
address to KubeRay as that proxy; loopback addresses (the API server's) are never proxied.
It answers each request as the Ray head would:

* ``PUT /api/serve/applications/`` on a dashboard: the Serve config KubeRay submits, kept per
  cluster (the dashboard's host); every application deploys at once and is ``RUNNING`` with
  its deployments ``HEALTHY``, except one whose ``import_path`` names a module under
  :data:`MISSING_MODULE`, which cannot be imported: ``DEPLOY_FAILED`` with Python's message,
  as Ray Serve says it;
* ``GET /api/serve/applications/`` on a dashboard: those applications;
* ``GET /-/healthz`` on a Serve proxy: healthy;
* ``POST /api/jobs/`` on a dashboard: a Ray job submitted with its entrypoint, as KubeRay
  submits a RayJob in ``HTTPMode``; ``500`` for a submission id the cluster has already;
* ``GET /api/jobs/<submission id>`` on a dashboard: the Ray job, ``RUNNING`` from its
  submission and ``SUCCEEDED`` ``job_seconds`` later, or ``FAILED`` at once when its
  entrypoint imports :data:`MISSING_MODULE` (a module or one in it), with the message and
  error type Ray gives a failed entrypoint command. A job not submitted is ``404`` the first
  time it is asked for, as on a Ray head: in ``HTTPMode`` that makes KubeRay submit it. In
  ``K8sJobMode`` KubeRay's submitter pod (``ray job submit``) submits it, which kwok runs
  without running anything: the second question stands for that submission, and the job's
  entrypoint is not known;
* ``POST /api/jobs/<submission id>/stop``: the job ``STOPPED``, as KubeRay stops the job of a
  RayJob deleted while it runs;
* ``POST /standin/jobs/<submission id>/finish`` on a dashboard, the stand-in's own: the job, if
  it runs, ``SUCCEEDED`` now rather than when its ``job_seconds`` are up; the answer is the
  job as ``GET`` gives it then (``404`` for a job not known). A test ends a Ray job here once
  what it waits for has happened, instead of sitting out the run every job has.

Anything else is ``502 Bad Gateway``, what a proxy says of an address it cannot reach, so
KubeRay sees what it saw before the stand-in. Run it with
``python -m kaiwo_envtest.ray_head --port N [--job-seconds S]``; ``GET /ready`` on it answers
once it serves.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import secrets
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

SERVE_APPLICATIONS: Final = "/api/serve/applications/"
PROXY_HEALTH: Final = "/-/healthz"
DASHBOARD_PORT: Final = 8265
SERVE_PORT: Final = 8000
MISSING_MODULE: Final = "not_installed"
"""An application importing this module, or one in it, fails to deploy; a Ray job whose
entrypoint names it fails."""
_MISSING_IN_ENTRYPOINT: Final = re.compile(rf"(?<![\w.]){MISSING_MODULE}(?![\w])")
ENTRYPOINT_FAILED: Final = "JOB_ENTRYPOINT_COMMAND_ERROR"
"""Ray's ``error_type`` of a job whose entrypoint command exited with an error."""
JOBS: Final = "/api/jobs/"
FINISH: Final = re.compile(r"/standin/jobs/([^/]+)/finish")
"""The stand-in's own path that ends a running job now (module docstring, :func:`finish_path`)."""
JOB_SECONDS: Final = 20.0
"""How long a Ray job runs unless a test ends it sooner (:data:`FINISH`). KubeRay counts a
RayJob finished once both its job and its submitter pod ended, and fails it when the job is
still running 30 s after the submitter ended: kwok ends the submitter after its run time (3 s
in the tests), so a job of 20 s completes, and runs long enough for a test to act on it while
it runs."""


@dataclass(frozen=True, slots=True)
class RayJob:
    """A Ray job the dashboard knows: when it started (``time.time()``), its entrypoint
    (empty when KubeRay's submitter pod submitted it, see the module docstring), when it was
    stopped, if it was, and when a test made it finish (:data:`FINISH`), if one did."""

    submission_id: str
    started: float
    entrypoint: str = ""
    stopped: float | None = None
    finished: float | None = None


def finish_path(submission_id: str) -> str:
    """The path on a dashboard that makes the job ``submission_id`` finish now (:data:`FINISH`)."""
    return f"/standin/jobs/{submission_id}/finish"


def _fails(job: RayJob) -> bool:
    return bool(_MISSING_IN_ENTRYPOINT.search(job.entrypoint))


def _end(job: RayJob, job_seconds: float) -> float:
    """When ``job`` succeeds, unless it was stopped first: its run is up, or a test made it
    finish sooner."""
    ends = job.started + job_seconds
    return ends if job.finished is None else min(ends, job.finished)


def runs(job: RayJob, *, now: float, job_seconds: float) -> bool:
    """Whether ``job`` is ``RUNNING`` at ``now``: neither failed, stopped nor finished."""
    return not _fails(job) and job.stopped is None and now < _end(job, job_seconds)


def job_info(job: RayJob, *, now: float, job_seconds: float) -> dict[str, Any]:
    """The dashboard's answer for ``job`` at ``now``: ``RUNNING``, then ``SUCCEEDED`` once it
    ran ``job_seconds`` or from when a test made it finish, or ``STOPPED`` from when it was
    stopped while it ran; ``FAILED`` from the start when its entrypoint imports
    :data:`MISSING_MODULE`."""
    info: dict[str, Any] = {
        "type": "SUBMISSION",
        "submission_id": job.submission_id,
        "entrypoint": job.entrypoint,
        "status": "RUNNING",
        "message": "Job is currently running.",
        "start_time": _milliseconds(job.started),
    }
    finished = _end(job, job_seconds)
    if _fails(job):
        info.update(
            status="FAILED",
            error_type=ENTRYPOINT_FAILED,
            message="Job entrypoint command failed with exit code 1, last available logs "
            "(truncated to 20,000 chars):\n"
            f"ModuleNotFoundError: No module named '{MISSING_MODULE}'\n",
            end_time=_milliseconds(job.started),
        )
    elif job.stopped is not None and job.stopped < finished:
        info.update(status="STOPPED", message="Job was intentionally stopped.")
        info["end_time"] = _milliseconds(job.stopped)
    elif now >= finished:
        info.update(status="SUCCEEDED", message="Job finished successfully.")
        info["end_time"] = _milliseconds(finished)
    return info


def _milliseconds(moment: float) -> int:
    return round(moment * 1000)


def deployed(config: Mapping[str, Any]) -> dict[str, Any]:
    """The Serve details the dashboard gives for the submitted ``config``."""
    applications = {}
    for application in config.get("applications") or []:
        name = str(application.get("name") or "default")
        module = str(application.get("import_path") or "").partition(":")[0]
        details: dict[str, Any] = {
            "name": name,
            "route_prefix": application.get("route_prefix") or "/",
            "status": "RUNNING",
            "message": "",
            "deployments": {
                str(deployment.get("name")): {
                    "name": str(deployment.get("name")),
                    "status": "HEALTHY",
                    "message": "",
                }
                for deployment in application.get("deployments") or []
            },
        }
        if module == MISSING_MODULE or module.startswith(f"{MISSING_MODULE}."):
            details["status"] = "DEPLOY_FAILED"
            details["message"] = f"ModuleNotFoundError: No module named '{module}'"
            details["deployments"] = {}
        applications[name] = details
    return {"deploy_mode": "MULTI_APP", "applications": applications}


class _Clusters:
    """The Serve details and the Ray jobs of each cluster, by its dashboard's host."""

    def __init__(self, *, job_seconds: float, clock: Callable[[], float]) -> None:
        self._lock = threading.Lock()
        self._details: dict[str, dict[str, Any]] = {}
        self._jobs: dict[tuple[str, str], RayJob] = {}
        self._asked: set[tuple[str, str]] = set()
        self.job_seconds = job_seconds
        self.clock = clock

    def deploy(self, host: str, config: Mapping[str, Any]) -> None:
        with self._lock:
            self._details[host] = deployed(config)

    def details(self, host: str) -> dict[str, Any]:
        with self._lock:
            return self._details.get(host) or {"deploy_mode": "MULTI_APP", "applications": {}}

    def submit_job(self, host: str, request: Mapping[str, Any]) -> str | None:
        """Submit the job ``request`` asks for; its submission id, or None when the cluster
        has a job of that id already."""
        submission_id = str(request.get("submission_id") or f"raysubmit_{secrets.token_hex(8)}")
        job = RayJob(submission_id, self.clock(), entrypoint=str(request.get("entrypoint") or ""))
        with self._lock:
            if self._jobs.setdefault((host, submission_id), job) is not job:
                return None
        return submission_id

    def job(self, host: str, submission_id: str) -> dict[str, Any] | None:
        """The job; None the first time a job not submitted is asked for, after which it
        counts as submitted by KubeRay's submitter pod (module docstring)."""
        now = self.clock()
        key = (host, submission_id)
        with self._lock:
            job = self._jobs.get(key)
            if job is None:
                if key not in self._asked:
                    self._asked.add(key)
                    return None
                job = self._jobs[key] = RayJob(submission_id, now)
        return job_info(job, now=now, job_seconds=self.job_seconds)

    def stop(self, host: str, submission_id: str) -> bool:
        """Stop the job if it runs; whether it was running."""
        now = self.clock()
        with self._lock:
            job = self._jobs.get((host, submission_id))
            if job is None:
                return False
            running = runs(job, now=now, job_seconds=self.job_seconds)
            if running:
                self._jobs[(host, submission_id)] = dataclasses.replace(job, stopped=now)
            return running

    def finish(self, host: str, submission_id: str) -> dict[str, Any] | None:
        """Make the job succeed now if it runs; the job then, or None for one not known."""
        now = self.clock()
        with self._lock:
            job = self._jobs.get((host, submission_id))
            if job is None:
                return None
            if runs(job, now=now, job_seconds=self.job_seconds):
                job = self._jobs[(host, submission_id)] = dataclasses.replace(job, finished=now)
        return job_info(job, now=now, job_seconds=self.job_seconds)


class _Handler(BaseHTTPRequestHandler):
    clusters: _Clusters

    def do_GET(self) -> None:
        target = urllib.parse.urlsplit(self.path)
        if not target.hostname and target.path == "/ready":
            self._answer(HTTPStatus.OK, b"ready")
        elif target.port == SERVE_PORT and target.path == PROXY_HEALTH:
            self._answer(HTTPStatus.OK, b"success")
        elif target.port == DASHBOARD_PORT and target.path == SERVE_APPLICATIONS:
            self._json(self.clusters.details(str(target.hostname)))
        elif target.port == DASHBOARD_PORT and (submission_id := _job_of(target.path)):
            info = self.clusters.job(str(target.hostname), submission_id)
            if info is None:
                self._answer(HTTPStatus.NOT_FOUND, f"Job {submission_id} does not exist".encode())
            else:
                self._json(info)
        else:
            self._unreachable()

    def do_POST(self) -> None:
        target = urllib.parse.urlsplit(self.path)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        stopped = target.path.removesuffix("/stop")
        if target.port != DASHBOARD_PORT:
            self._unreachable()
        elif target.path == JOBS:
            self._submit(str(target.hostname), body)
        elif stopped != target.path and (job := _job_of(stopped)):
            self._json({"stopped": self.clusters.stop(str(target.hostname), job)})
        elif finish := FINISH.fullmatch(target.path):
            self._finish(str(target.hostname), finish.group(1))
        else:
            self._unreachable()

    def _finish(self, host: str, submission_id: str) -> None:
        info = self.clusters.finish(host, submission_id)
        if info is None:
            self._answer(HTTPStatus.NOT_FOUND, f"Job {submission_id} does not exist".encode())
        else:
            self._json(info)

    def _submit(self, host: str, body: bytes) -> None:
        request = _json_object(body)
        if request is None:
            self._answer(HTTPStatus.BAD_REQUEST, b"the job submission is not a JSON object")
            return
        submission_id = self.clusters.submit_job(host, request)
        if submission_id is None:
            self._answer(
                HTTPStatus.INTERNAL_SERVER_ERROR,
                f"Job with submission_id {request.get('submission_id')} already exists. "
                "Please use a different submission_id.".encode(),
            )
            return
        self._json({"job_id": submission_id, "submission_id": submission_id})

    def do_PUT(self) -> None:
        target = urllib.parse.urlsplit(self.path)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if target.port != DASHBOARD_PORT or target.path != SERVE_APPLICATIONS:
            self._unreachable()
            return
        config = _json_object(body)
        if config is None:
            self._answer(HTTPStatus.BAD_REQUEST, b"the Serve config is not a JSON object")
            return
        self.clusters.deploy(str(target.hostname), config)
        self._answer(HTTPStatus.OK, b"")

    def _unreachable(self) -> None:
        self._answer(HTTPStatus.BAD_GATEWAY, b"the Ray stand-in answers only Serve and jobs")

    def _json(self, answer: Mapping[str, Any]) -> None:
        self._answer(HTTPStatus.OK, json.dumps(answer).encode(), "application/json")

    def _answer(self, status: HTTPStatus, body: bytes, content_type: str = "text/plain") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        sys.stdout.write(f"{self.address_string()} {format % args}\n")
        sys.stdout.flush()


def _json_object(body: bytes) -> dict[str, Any] | None:
    try:
        found = json.loads(body or b"{}")
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def _job_of(path: str) -> str:
    """The submission id ``path`` asks for under :data:`JOBS` ("" when it names none)."""
    submission_id = path.removeprefix(JOBS)
    return submission_id if submission_id != path and "/" not in submission_id else ""


def server(
    port: int, *, job_seconds: float = JOB_SECONDS, clock: Callable[[], float] = time.time
) -> ThreadingHTTPServer:
    """The stand-in on ``127.0.0.1:port``, not serving yet."""
    clusters = _Clusters(job_seconds=job_seconds, clock=clock)
    handler = type("Handler", (_Handler,), {"clusters": clusters})
    return ThreadingHTTPServer(("127.0.0.1", port), handler)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--job-seconds", type=float, default=JOB_SECONDS)
    arguments = parser.parse_args()
    with server(arguments.port, job_seconds=arguments.job_seconds) as stand_in:
        stand_in.serve_forever()


if __name__ == "__main__":
    main()
