"""``/healthz``, ``/readyz`` and ``/metrics`` over aiohttp, for every service.

* ``/healthz`` answers 200 while the event loop runs: if the loop is blocked or dead, the
  request times out and Kubernetes restarts the pod.
* ``/readyz`` runs the readiness checks given (for example "NATS connected", "streams
  exist") concurrently, each with a time limit; 200 when all pass, 503 with the failures.
* ``/metrics`` serves the registry in the Prometheus text format.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Awaitable, Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Self

from aiohttp import web

from kaiwo_runtime.metrics import EXPOSITION_CONTENT_TYPE, MetricsRegistry

if TYPE_CHECKING:
    from kaiwo_runtime.settings import ServiceSettings

ReadinessCheck = Callable[[], Awaitable[bool]]
"""Returns True when ready; False or an exception means not ready."""


class HealthServer:
    """The probe and metrics endpoint of one process; an async context manager."""

    def __init__(
        self,
        *,
        metrics: MetricsRegistry,
        checks: Mapping[str, ReadinessCheck] | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        listen_fd: int | None = None,
        check_timeout: float = 2.0,
    ) -> None:
        """``listen_fd``: a socket listening already, served instead of binding ``host`` and
        ``port`` (it stays open: each start serves a copy, so a service started again in the
        same process serves it again)."""
        self._metrics = metrics
        self._checks = dict(checks or {})
        self._host = host
        self._requested_port = port
        self._listen_fd = listen_fd
        self._check_timeout = check_timeout
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    @classmethod
    def of_service(
        cls,
        settings: ServiceSettings,
        *,
        metrics: MetricsRegistry,
        checks: Mapping[str, ReadinessCheck] | None = None,
    ) -> HealthServer:
        """A service's endpoint where its settings put it: ``health_host`` and
        ``health_port``, or the socket ``health_listen_fd`` it inherited."""
        return cls(
            metrics=metrics,
            checks=checks,
            host=settings.health_host,
            port=settings.health_port,
            listen_fd=settings.health_listen_fd,
        )

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the health server is not running")
        return self._port

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self._host in ("0.0.0.0", "") else self._host  # noqa: S104
        return f"http://{host}:{self.port}"

    def application(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        app.router.add_get("/metrics", self._metrics_page)
        return app

    async def start(self) -> None:
        runner = web.AppRunner(self.application(), access_log=None)
        await runner.setup()
        site: web.BaseSite
        if self._listen_fd is None:
            site = web.TCPSite(runner, self._host, self._requested_port)
        else:
            site = web.SockSite(runner, socket.socket(fileno=os.dup(self._listen_fd)))
        await site.start()
        self._runner = runner
        self._port = int(runner.addresses[0][1])

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        self._port = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()

    # ------------------------------------------------------------------ handlers

    async def _healthz(self, _request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def _readyz(self, _request: web.Request) -> web.Response:
        names = list(self._checks)
        outcomes = await asyncio.gather(*(self._run_check(name) for name in names))
        results = dict(zip(names, outcomes, strict=True))
        ready = all(outcome == "ok" for outcome in results.values())
        return web.json_response(
            {"status": "ready" if ready else "not ready", "checks": results},
            status=200 if ready else 503,
        )

    async def _run_check(self, name: str) -> str:
        try:
            passed = await asyncio.wait_for(self._checks[name](), self._check_timeout)
        except TimeoutError:
            return f"timed out after {self._check_timeout}s"
        except Exception as error:  # a failing check means "not ready", never a 500
            return f"{type(error).__name__}: {error}"
        return "ok" if passed else "failed"

    async def _metrics_page(self, _request: web.Request) -> web.Response:
        response = web.Response(body=self._metrics.exposition())
        response.headers["Content-Type"] = EXPOSITION_CONTENT_TYPE
        return response
