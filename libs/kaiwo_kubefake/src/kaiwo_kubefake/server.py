"""The fake API server process: an aiohttp app on 127.0.0.1 and a kubeconfig pointing at it."""

from __future__ import annotations

import socket
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml
from aiohttp import web

from kaiwo_kubefake.kinds import ResourceKind
from kaiwo_kubefake.routes import ApiRoutes
from kaiwo_kubefake.storage import ObjectStore
from kaiwo_kubefake.watch_stream import ServerSettings

CONTEXT_NAME = "kaiwo-kubefake"


class FakeKubeServer:
    """A fake Kubernetes API server; ``async with FakeKubeServer() as server: ...``.

    ``server.store`` is the cluster state tests may read and change directly (see
    :class:`~kaiwo_kubefake.storage.ObjectStore`: ``put``, ``set_status``, ``compact``,
    ``write_requests``, ``changes``); ``server.kubeconfig_path`` names a kubeconfig any client
    (kubernetes_asyncio, kubectl) can use. ``discovery_lag`` keeps a new kind out of discovery
    that long after its CRD is Established, as a real server may for a moment.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        history_limit: int = 10_000,
        bookmark_interval: float = 1.0,
        default_watch_timeout: float = 1800.0,
        require_namespaces: bool = True,
        kubeconfig_path: Path | None = None,
        kinds: tuple[ResourceKind, ...] = (),
        discovery_lag: float = 0.0,
    ) -> None:
        self.store = ObjectStore(history_limit=history_limit, require_namespaces=require_namespaces)
        for kind in kinds:
            self.store.kinds.register(kind)
        self._routes = ApiRoutes(
            self.store,
            ServerSettings(
                bookmark_interval=bookmark_interval,
                default_watch_timeout=default_watch_timeout,
                discovery_lag=discovery_lag,
            ),
        )
        self._host, self._requested_port = host, port
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        self._kubeconfig_path = kubeconfig_path

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the fake API server is not started")
        return self._port

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self.port}"

    @property
    def kubeconfig_path(self) -> Path:
        if self._kubeconfig_path is None:
            raise RuntimeError("the fake API server was started without a kubeconfig path")
        return self._kubeconfig_path

    def kubeconfig(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": CONTEXT_NAME, "cluster": {"server": self.url}}],
            "users": [{"name": CONTEXT_NAME, "user": {"token": "kaiwo-kubefake"}}],
            "contexts": [
                {"name": CONTEXT_NAME, "context": {"cluster": CONTEXT_NAME, "user": CONTEXT_NAME}}
            ],
            "current-context": CONTEXT_NAME,
        }

    def write_kubeconfig(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(self.kubeconfig(), sort_keys=False))
        self._kubeconfig_path = path
        return path

    async def start(self) -> None:
        app = web.Application(client_max_size=16 * 1024 * 1024)
        self._routes.install(app)
        self._runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=1.0)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self._host, self._requested_port))
        self._port = sock.getsockname()[1]
        self._routes.server_address = f"{self._host}:{self._port}"
        await web.SockSite(self._runner, sock).start()
        if self._kubeconfig_path is not None:
            self.write_kubeconfig(self._kubeconfig_path)

    async def stop(self) -> None:
        self.store.feed.close_watches()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeKubeServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()
