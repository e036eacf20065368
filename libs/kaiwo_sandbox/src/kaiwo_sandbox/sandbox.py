"""The sandbox: registers the fleet's nodes, serves GPU metrics and runs every simulated
controller in rounds (``tick`` apart) until stopped.

``async with Sandbox(kube, SandboxOptions()) as sandbox:`` — ``sandbox.metrics_url`` is the
Prometheus-compatible endpoint for the monitor; ``sandbox.kubelet_port`` is where the nodes'
kubelets answer an API server's ``pods/log`` requests (HTTPS on ``kubelet_host``), recorded in
every node's status. A round that fails (the API server restarting,
an object deleted under it) is logged and the next round starts from a fresh list.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Final, Self

import aiohttp
from aiohttp import web
from kaiwo_kube import AlreadyExists, KubeError, resources

from kaiwo_sandbox.cluster_port import SandboxCluster
from kaiwo_sandbox.fleet import DEFAULT_FLEET, SIMULATED_LABEL, NodeSpec, kubelet_endpoint_status
from kaiwo_sandbox.gpu_metrics import metrics_app
from kaiwo_sandbox.kubelet import Kubelet, Scheduler, WorkloadControllers
from kaiwo_sandbox.kubelet_endpoint import ContainerLogEndpoint
from kaiwo_sandbox.kueue import KueueController
from kaiwo_sandbox.lifecycle import Timing, format_time
from kaiwo_sandbox.scheduling import node_room
from kaiwo_sandbox.scope import NamespaceScope
from kaiwo_sandbox.serving_certificate import CertificateError, self_signed_server_context
from kaiwo_sandbox.volumes import VolumeBinder

FIELD_MANAGER: Final = "kubelet-sandbox"
NODE_LEASE_NAMESPACE: Final = "kube-node-lease"
LEASE_SECONDS: Final = 40
HEARTBEAT_SECONDS: Final = 10.0
log = logging.getLogger("kaiwo_sandbox")


@dataclass(frozen=True, slots=True)
class SandboxOptions:
    fleet: tuple[NodeSpec, ...] = DEFAULT_FLEET
    timing: Timing = field(default_factory=Timing)
    tick: float = 0.5
    """Seconds between rounds."""
    play_controllers: bool = True
    """Play the Job and Deployment controllers and the scheduler (an API server without a
    controller manager: the fake)."""
    kwok: bool = False
    """A real Kueue and kube-scheduler run, and kwok is the nodes' kubelet (``kaiwo demo
    --cluster kwok``): the sandbox only registers the nodes, binds volumes and serves GPU
    metrics and container logs; it simulates no Kueue, scheduler, kubelet or Lease."""
    namespaces: tuple[str, ...] = ()
    """Namespaces to create at start."""
    only_namespaces: tuple[str, ...] = ()
    """Act only on objects in these namespaces (empty: all); for a shared API server."""
    metrics_host: str = "127.0.0.1"
    metrics_port: int = 0
    kubelet_host: str = "127.0.0.1"
    """Where the simulated kubelets serve container logs (HTTPS); the API server connects
    to it, so it must be an address the API server reaches."""
    kubelet_port: int = 0


class Sandbox:
    def __init__(
        self,
        kube: SandboxCluster,
        options: SandboxOptions,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        if options.only_namespaces:
            kube = NamespaceScope(kube, options.only_namespaces)
        self.kube = kube
        self.options = options
        self.clock = clock
        self.pods: list[dict[str, Any]] = []
        self.rounds = 0
        self._kueue = KueueController(kube, timing=options.timing)
        self._controllers = WorkloadControllers(kube, timing=options.timing)
        self._scheduler = Scheduler(kube, bind=options.play_controllers)
        self._kubelet = Kubelet(kube, timing=options.timing)
        self._volumes = VolumeBinder(kube, provision=not options.play_controllers)
        self._last_heartbeat: datetime | None = None
        self._task: asyncio.Task[None] | None = None
        self._runner: web.AppRunner | None = None
        self._metrics_port: int | None = None
        self._kubelet_runner: web.AppRunner | None = None
        self.kubelet_port: int | None = None
        """The kubelets' log endpoint's port (None: not serving, e.g. without openssl)."""

    @property
    def metrics_url(self) -> str:
        assert self._metrics_port is not None, "the sandbox is not started"
        return f"http://{self.options.metrics_host}:{self._metrics_port}"

    async def start_metrics(self) -> None:
        """Serve GPU metrics (before the monitor starts, which needs the URL)."""
        if self._runner is not None:
            return
        self._runner = web.AppRunner(metrics_app(lambda: self.pods, self.clock))
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.options.metrics_host, self.options.metrics_port))
        self._metrics_port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock).start()

    async def start_kubelet_endpoint(self) -> None:
        """Serve container logs where the nodes' status will say their kubelets are. Without
        a certificate (no openssl) the sandbox runs on, and log requests fail."""
        if self._kubelet_runner is not None:
            return
        try:
            tls = self_signed_server_context("kaiwo-sandbox-kubelet")
        except CertificateError as error:
            log.warning("no container logs (kubectl logs, kaiwo logs): %s", error)
            return
        endpoint = ContainerLogEndpoint(
            self.kube, timing=self.options.timing, clock=self.clock, poll_seconds=self.options.tick
        )
        self._kubelet_runner = web.AppRunner(endpoint.application(), shutdown_timeout=1.0)
        await self._kubelet_runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.options.kubelet_host, self.options.kubelet_port))
        self.kubelet_port = sock.getsockname()[1]
        await web.SockSite(self._kubelet_runner, sock, ssl_context=tls).start()

    def _kubelet_status(self) -> dict[str, Any]:
        if self.kubelet_port is None:
            return {}
        return kubelet_endpoint_status(self.options.kubelet_host, self.kubelet_port)

    async def register_nodes(self) -> None:
        """The fleet's nodes and the namespaces asked for. An existing node is left alone but
        for where its kubelet answers, which is this sandbox's endpoint now."""
        for namespace in self.options.namespaces:
            with contextlib.suppress(AlreadyExists):
                await self.kube.create(
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
                    field_manager=FIELD_MANAGER,
                )
        for node in self.options.fleet:
            try:
                # With its capacity, as a kubelet registers it: kwok keeps what it finds.
                registered = {**node.manifest(), "status": {"capacity": node.capacity()}}
                await self.kube.create(registered, field_manager=FIELD_MANAGER)
                status = node.status(now=format_time(self.clock()), kubelet=self._kubelet_status())
            except AlreadyExists:
                status = self._kubelet_status()
            if status:
                await self.kube.patch_status(
                    resources.NODE,
                    node.name,
                    status,
                    field_manager=FIELD_MANAGER,
                    method="merge",
                )

    async def start(self) -> None:
        await self.start_metrics()
        await self.start_kubelet_endpoint()
        await self.register_nodes()
        self._task = asyncio.create_task(self._loop(), name="kaiwo-sandbox")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._kubelet_runner is not None:
            await self._kubelet_runner.cleanup()
            self._kubelet_runner = None
            self.kubelet_port = None

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

    async def run_round(self) -> None:
        """Every controller once, in the order a cluster would act."""
        now = self.clock()
        await self._volumes.reconcile()
        if self.options.kwok:
            self.pods = (await self.kube.list(resources.POD)).items
            self.rounds += 1
            return
        await self._kueue.reconcile(now)
        # Only this sandbox's nodes: another sandbox on a shared API server serves its own
        # nodes' kubelet endpoint, and may have stopped.
        own = {node.name for node in self.options.fleet}
        nodes = [
            node_room(n)
            for n in (await self.kube.list(resources.NODE, label_selector=SIMULATED_LABEL)).items
            if n["metadata"]["name"] in own and not (n.get("spec") or {}).get("unschedulable")
        ]
        pods = (await self.kube.list(resources.POD)).items
        if self.options.play_controllers:
            await self._controllers.reconcile(nodes=nodes, pods=pods, now=now)
        await self._scheduler.reconcile(nodes=nodes, pods=pods)
        await self._kubelet.reconcile(pods=pods, now=now)
        await self._heartbeat(now)
        self.pods = pods
        self.rounds += 1

    async def _heartbeat(self, now: datetime) -> None:
        """Renew each node's Lease, as kubelets do, so a node lifecycle controller (on a real
        API server) keeps the nodes Ready."""
        last = self._last_heartbeat
        if last is not None and (now - last).total_seconds() < HEARTBEAT_SECONDS:
            return
        self._last_heartbeat = now
        names = {node.name for node in self.options.fleet}
        for node in (await self.kube.list(resources.NODE, label_selector=SIMULATED_LABEL)).items:
            metadata = node["metadata"]
            if metadata["name"] not in names:
                continue
            await self.kube.apply(
                {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {
                        "name": metadata["name"],
                        "namespace": NODE_LEASE_NAMESPACE,
                        "labels": {SIMULATED_LABEL: "true"},
                        "ownerReferences": [
                            {
                                "apiVersion": "v1",
                                "kind": "Node",
                                "name": metadata["name"],
                                "uid": metadata["uid"],
                            }
                        ],
                    },
                    "spec": {
                        "holderIdentity": metadata["name"],
                        "leaseDurationSeconds": LEASE_SECONDS,
                        "renewTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                    },
                },
                field_manager=FIELD_MANAGER,
            )

    async def _loop(self) -> None:
        while True:
            try:
                await self.run_round()
            except asyncio.CancelledError:
                raise
            except (KubeError, OSError, aiohttp.ClientError) as error:
                # The API server starting or going away: the next round lists afresh.
                log.warning("a sandbox round failed: %s", " ".join(str(error).split()))
            except Exception:  # a bug: say where, and keep the demo going
                log.warning("a sandbox round failed", exc_info=True)
            await asyncio.sleep(self.options.tick)
