"""A stand-in for what KubeRay asks of a Ray cluster's processes, which kwok does not run.

Under kwok a Ray cluster's pods run, but no Ray process answers in them: KubeRay's RayService
controller asks the head's dashboard for the Serve applications, gets no answer, and writes
nothing more of the RayService's status, so a Ray service never serves (decision 0186).

KubeRay reaches a cluster at addresses only the cluster's network knows: the dashboard at
``http://<head service>.<namespace>.svc.cluster.local:8265`` and the Serve proxy's health at
``http://<head pod IP>:8000/-/healthz``, each through Go's default HTTP transport, which takes
``HTTP_PROXY`` from its environment. The control plane starts this server and gives its
address to KubeRay as that proxy; loopback addresses (the API server's) are never proxied.
It answers each request as the Ray cluster would:

* ``PUT /api/serve/applications/`` on a dashboard: the Serve config KubeRay submits, kept per
  cluster (the dashboard's host); every application deploys at once and is ``RUNNING`` with
  its deployments ``HEALTHY``, except one whose ``import_path`` names a module under
  :data:`MISSING_MODULE`, which cannot be imported: ``DEPLOY_FAILED`` with Python's message,
  as Ray Serve says it;
* ``GET /api/serve/applications/`` on a dashboard: those applications;
* ``GET /-/healthz`` on a Serve proxy: healthy.

Anything else is ``502 Bad Gateway``, what a proxy says of an address it cannot reach, so
KubeRay sees what it saw before the stand-in (a Ray job's status, which KubeRay asks of the
dashboard too, is still never known). Run it with
``python -m kaiwo_envtest.ray_serve --port N``; ``GET /ready`` on it answers once it serves.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import urllib.parse
from collections.abc import Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final

SERVE_APPLICATIONS: Final = "/api/serve/applications/"
PROXY_HEALTH: Final = "/-/healthz"
DASHBOARD_PORT: Final = 8265
SERVE_PORT: Final = 8000
MISSING_MODULE: Final = "not_installed"
"""An application importing this module, or one in it, fails to deploy."""


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
    """The Serve details of each cluster, by its dashboard's host."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._details: dict[str, dict[str, Any]] = {}

    def submit(self, host: str, config: Mapping[str, Any]) -> None:
        with self._lock:
            self._details[host] = deployed(config)

    def details(self, host: str) -> dict[str, Any]:
        with self._lock:
            return self._details.get(host) or {"deploy_mode": "MULTI_APP", "applications": {}}


class _Handler(BaseHTTPRequestHandler):
    clusters: _Clusters

    def do_GET(self) -> None:
        target = urllib.parse.urlsplit(self.path)
        if not target.hostname and target.path == "/ready":
            self._answer(HTTPStatus.OK, b"ready")
        elif target.port == SERVE_PORT and target.path == PROXY_HEALTH:
            self._answer(HTTPStatus.OK, b"success")
        elif target.port == DASHBOARD_PORT and target.path == SERVE_APPLICATIONS:
            details = self.clusters.details(str(target.hostname))
            self._answer(HTTPStatus.OK, json.dumps(details).encode(), "application/json")
        else:
            self._unreachable()

    def do_PUT(self) -> None:
        target = urllib.parse.urlsplit(self.path)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if target.port != DASHBOARD_PORT or target.path != SERVE_APPLICATIONS:
            self._unreachable()
            return
        try:
            config = json.loads(body or b"{}")
        except ValueError:
            config = None
        if not isinstance(config, dict):
            self._answer(HTTPStatus.BAD_REQUEST, b"the Serve config is not a JSON object")
            return
        self.clusters.submit(str(target.hostname), config)
        self._answer(HTTPStatus.OK, b"")

    def _unreachable(self) -> None:
        self._answer(HTTPStatus.BAD_GATEWAY, b"the Ray stand-in answers only Serve")

    def _answer(self, status: HTTPStatus, body: bytes, content_type: str = "text/plain") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        sys.stdout.write(f"{self.address_string()} {format % args}\n")
        sys.stdout.flush()


def server(port: int) -> ThreadingHTTPServer:
    """The stand-in on ``127.0.0.1:port``, not serving yet."""
    handler = type("Handler", (_Handler,), {"clusters": _Clusters()})
    return ThreadingHTTPServer(("127.0.0.1", port), handler)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    arguments = parser.parse_args()
    with server(arguments.port) as stand_in:
        stand_in.serve_forever()


if __name__ == "__main__":
    main()
