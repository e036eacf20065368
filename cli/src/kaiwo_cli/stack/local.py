"""``kaiwo up``: the whole operator on one machine against the current kubeconfig.

Order of start-up, each step failing with one clear line:

1. (``--fake``) a fake Kubernetes API server in a child process, for trying things without
   a cluster (:mod:`kaiwo_cli.stack.local_cluster`);
2. the cluster answers (a namespace list within a few seconds), else :class:`StackError`
   (steps 2 and 3: :mod:`kaiwo_cli.stack.cluster_setup`);
3. our CRDs are installed when asked (always on the fake, with open-schema stand-ins for
   Kueue, KubeRay, AppWrapper and Gateway API kinds; the fake also gets two 8-GPU nodes and
   the namespaces ``examples/`` uses, see :mod:`kaiwo_cli.stack.demo_cluster`); on a real
   cluster the kaiwo-scheduler is deployed and named in the KaiwoConfig, or the cluster's
   own scheduler named (``--scheduler``, :mod:`kaiwo_cli.stack.scheduler`);
4. new NKey credentials for every identity in ``<state>/credentials`` (one seed file each,
   0600; the state directory 0700), ``nats-server`` from the wheel on 127.0.0.1 only, with
   JetStream in ``<state>/nats``, each identity's permissions and no anonymous access (TLS
   when given); the administrator identity declares the streams and consumers;
5. recorder, watcher, planner, executor (monitor when a metrics endpoint is given, under the
   project's name or the API reference's, the OpenAI
   gateway when a gateway port is, with the messenger unless switched off: its streams and
   consumer are declared in step 4 and its tenants get keys there; the web console when a
   console port is) as
   supervised child processes, each with its health port (the four core services in one
   process, :mod:`kaiwo_cli.stack.together`, when ``one_process``); start-up waits for every
   ``/readyz`` of the four that carry the operator; each service connects with its own
   identity. The monitor, the gateway and the console are *optional*: one that cannot start (an
   unreachable metrics endpoint, a taken port) is reported in one line
   (:attr:`LocalStack.not_ready`) and left to its supervisor's retries, or left out, while
   the others run;
6. ``<state>/stack.json`` tells every ``kaiwo`` command where NATS, the event store, the
   cluster and the health endpoints are (:mod:`kaiwo_cli.stack.state`).

The state directory is locked (``<state>/up.lock``) from the first step, so a second stack on
it is refused in one line. nats-server is supervised like the services: restarted on the same
port and JetStream directory, with the same back-off. Every child runs in a session of its
own, so a Ctrl-C typed at the terminal reaches ``kaiwo`` alone, which stops them (services
first, NATS last) and restarts none;
:func:`~kaiwo_cli.stack.start_up.start_unless_stopped` obeys it during start-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
from pathlib import Path
from types import TracebackType
from typing import Self

from kaiwo_contracts.events.identity_names import STATE_BUCKETS
from kaiwo_contracts.events.messenger import messenger_topology
from kaiwo_contracts.events.permissions import (
    ADMIN,
    CLI,
    SUBSCRIBER,
    inbox_prefix,
    namespace_subscriber_identity,
    operator_identities,
    tenant_identity,
)
from kaiwo_contracts.events.streams import bus_topology
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_runtime.kv import declare_buckets
from kaiwo_runtime.nats_bus import NatsBus
from kaiwo_runtime.nats_connection import ClientTls, NatsConnection
from kaiwo_runtime.nats_credentials import (
    CredentialsDirectory,
    private_directory,
    write_credentials,
)
from kaiwo_runtime.nats_server import NatsServer, NatsServerError
from kaiwo_sandbox import Sandbox, SandboxOptions

from kaiwo_cli.stack.cluster_setup import default_kubeconfig, prepare_cluster
from kaiwo_cli.stack.cluster_state import bind_state_dir
from kaiwo_cli.stack.local_cluster import LocalCluster
from kaiwo_cli.stack.options import StackError, StackOptions
from kaiwo_cli.stack.ports import (
    Listener,
    listen_for_console,
    listen_on_a_free_port,
    port_is_taken,
)
from kaiwo_cli.stack.processes import (
    FIRST_RESTART_DELAY,
    MAX_RESTART_DELAY,
    STABLE_SECONDS,
    ServiceProcess,
    log,
)
from kaiwo_cli.stack.readiness import wait_for_services
from kaiwo_cli.stack.service_env import service_env
from kaiwo_cli.stack.state import StackLockedError, StackState, StateLock
from kaiwo_cli.stack.together import MEMBERS, TOGETHER_ENV

OPTIONAL_SERVICES: tuple[str, ...] = ("monitor", "gateway", "console")
"""Services the operator runs without: reported when they cannot start, never fatal."""
MONITOR_ENDPOINT_SETTINGS: tuple[str, ...] = (
    "KAIWO_MONITOR_METRICS_ENDPOINT",
    "RESOURCE_MONITORING_METRICS_ENDPOINT",
)
"""The monitor's names for its metrics endpoint, its own first (it decides where both are set)."""

SERVICES: tuple[tuple[str, str], ...] = (
    ("recorder", "kaiwo_recorder"),
    ("watcher", "kaiwo_watcher"),
    ("planner", "kaiwo_planner"),
    ("executor", "kaiwo_executor"),
)


TOGETHER = "operator"
"""The process of the core services with ``one_process``."""


class LocalStack:
    """Start with ``async with LocalStack(options) as stack``; everything stops on exit."""

    def __init__(self, options: StackOptions) -> None:
        self.options = options
        self.nats: NatsServer | None = None
        self.services: dict[str, ServiceProcess] = {}
        self.member_ports: dict[str, int] = {}
        """With ``one_process``: the health port of each service inside ``operator``."""
        self.kubeconfig: Path | None = options.kubeconfig
        self.credentials: CredentialsDirectory | None = None
        self._local_cluster = LocalCluster(options)
        self._supervisors: list[asyncio.Task[None]] = []
        self.sandbox: Sandbox | None = None
        self._sandbox_kube: KubernetesAsyncioAdapter | None = None
        self._lock = StateLock(options.state_dir)
        self.nats_restarts = 0
        self._health_listeners: dict[str, Listener] = {}
        """Each service's health socket (by process name, or member name inside
        ``operator``), held while the stack runs: see :func:`listen_on_a_free_port`."""
        self.scheduler_note = ""
        """What ``kaiwo up`` did about the scheduler, for its summary."""
        self.prerequisites_note = ""
        """Which third-party APIs the cluster serves or lacks, for its summary."""
        self.not_ready: dict[str, str] = {}
        """Optional services that are not running ready after start-up, and why (one line)."""
        self._stopping = False
        self.cluster_uid: str | None = None
        """The cluster's identity (the uid of its kube-system), known once it answered."""
        self.cluster_note: str | None = None
        """One line when the state directory held another cluster's state (set aside)."""
        self._console_listener: Listener | None = None
        self.console_note: str | None = None
        """One line when the console's port was taken and it listens on another."""

    @property
    def metrics_endpoint(self) -> str | None:
        """Where the monitor reads GPU metrics: the option, else the sandbox's endpoint."""
        if self.options.metrics_endpoint:
            return self.options.metrics_endpoint
        return self.sandbox.metrics_url if self.sandbox is not None else None

    @property
    def runs_monitor(self) -> bool:
        """Whether the stack runs the monitor: a metrics endpoint given as the option, by the
        sandbox, or in the monitor's own settings under either of its names (decision 0046),
        so that a monitor configured only by the API reference's
        ``RESOURCE_MONITORING_METRICS_ENDPOINT`` runs as configured."""
        if self.metrics_endpoint:
            return True
        env = {**self.options.service_env, **self.options.env_by_service.get("monitor", {})}
        return any(env.get(name) for name in MONITOR_ENDPOINT_SETTINGS)

    async def __aenter__(self) -> Self:
        try:
            await self.start()
        except BaseException:
            await self.stop()
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.stop()

    @property
    def health_ports(self) -> dict[str, int]:
        """Each service's health port by name, inside the one process too."""
        ports = {name: s.health_port for name, s in self.services.items() if name != TOGETHER}
        return {**self.member_ports, **ports}

    def process_ids(self) -> dict[str, int]:
        """The running child processes by name (services, NATS, the fake API server)."""
        found = {name: s.pid for name, s in self.services.items() if s.pid is not None}
        if self.nats is not None and self.nats.pid is not None:
            found["nats-server"] = self.nats.pid
        if self._local_cluster.pid is not None:
            found["fake-apiserver"] = self._local_cluster.pid
        return found

    async def start(self) -> None:
        # Credentials, the event store and whole objects live here: the owner's only.
        private_directory(self.options.state_dir)
        # Before anything else: a second stack here would share NATS's JetStream directory.
        try:
            self._lock.acquire()
        except StackLockedError as error:
            raise StackError(str(error)) from None
        if self.options.fake_cluster:
            self.kubeconfig = await self._local_cluster.start()
        prepared = await prepare_cluster(self.options, self.kubeconfig)
        self.cluster_uid, self.scheduler_note = prepared.uid, prepared.scheduler_note
        self.prerequisites_note = prepared.prerequisites_note
        # Before NATS opens its directory: the state there must be this cluster's.
        self.cluster_note = bind_state_dir(self.options.state_dir, self.cluster_uid)
        if self.cluster_note is not None:
            log.warning("state of another cluster set aside", note=self.cluster_note)
        if self.options.fake_cluster and self.options.sandbox is not None:
            await self._start_sandbox(self.options.sandbox)
        await self._start_nats()
        self._supervisors.append(asyncio.create_task(self._supervise_nats()))
        self._listen_for_console()
        await self._start_services()
        await self._wait_ready()
        self.state().write(self.options.state_dir)

    def nats_connection(self, identity: str) -> NatsConnection:
        """How a client of this stack connects as ``identity`` (``admin`` for tests and
        repairs, ``cli`` for ``kaiwo events tail``, or a service's name)."""
        assert self.nats is not None and self.credentials is not None
        tls = self.options.nats_tls
        return NatsConnection(
            url=self.nats.url,
            credentials_file=self.credentials.seed(identity),
            tls=ClientTls(ca_file=tls.ca_file) if tls is not None else None,
            inbox_prefix=inbox_prefix(identity),
            name=f"kaiwo-{identity}",
        )

    def state(self) -> StackState:
        """What ``kaiwo events`` reads to find this stack."""
        assert self.nats is not None and self.credentials is not None
        tls = self.options.nats_tls
        return StackState(
            nats_url=self.nats.url,
            cli_credentials_file=self.credentials.seed(CLI),
            event_store_url=self.options.event_store_url,
            nats_tls_ca_file=tls.ca_file if tls is not None else None,
            subscriber_credentials_file=self.credentials.seed(SUBSCRIBER),
            kubeconfig=self._recorded_kubeconfig(),
            health_urls={
                name: f"http://127.0.0.1:{port}/readyz" for name, port in self.health_ports.items()
            },
            pid=os.getpid(),
            cluster_uid=self.cluster_uid,
        )

    def _recorded_kubeconfig(self) -> Path | None:
        """The kubeconfig file the services use, absolute, so that commands run from any
        directory or shell talk to the same cluster."""
        if self.kubeconfig is not None:
            return self.kubeconfig.resolve()
        return default_kubeconfig()

    async def stop(self) -> None:
        self._stopping = True  # no supervisor restarts anything from here on
        # All at once: each finishes its current message and exits; none waits for another.
        await asyncio.gather(*(service.stop() for service in self.services.values()))
        for task in self._supervisors:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._supervisors.clear()
        if self.nats is not None:
            await self.nats.stop()
            self.nats = None
        if self.sandbox is not None:
            await self.sandbox.stop()
            self.sandbox = None
        if self._sandbox_kube is not None:
            await self._sandbox_kube.close()
            self._sandbox_kube = None
        await self._local_cluster.stop()
        if self._console_listener is not None:
            self._console_listener.close()
            self._console_listener = None
        for listener in self._health_listeners.values():
            listener.close()
        self._health_listeners.clear()
        self._lock.release()

    # ------------------------------------------------------------------ steps

    def _listen_for_console(self) -> None:
        """Claim the console's port before the console starts (see
        :mod:`kaiwo_cli.stack.ports`); from here on ``options.console_port`` is
        the port it listens on."""
        if self.options.console_port is None:
            return
        listener = listen_for_console(self.options.console_port)
        self._console_listener = listener
        self.console_note = listener.note
        if listener.note is not None:
            log.warning("console port taken", note=listener.note)
        self.options = dataclasses.replace(self.options, console_port=listener.port)

    async def _start_sandbox(self, options: SandboxOptions) -> None:
        self._sandbox_kube = await KubernetesAsyncioAdapter.from_environment(
            self.kubeconfig, user_agent="kaiwo-sandbox"
        )
        self.sandbox = Sandbox(self._sandbox_kube, options)
        await self.sandbox.start()

    async def _supervise_nats(self) -> None:
        """Start nats-server again when it exits, on the same port and JetStream directory,
        with the back-off of the services (:class:`ServiceProcess`); clients reconnect."""
        delay = FIRST_RESTART_DELAY
        loop = asyncio.get_running_loop()
        while self.nats is not None:
            started = loop.time()
            code = await self.nats.wait()
            if self.nats is None or self._stopping:
                return
            if loop.time() - started >= STABLE_SECONDS:
                delay = FIRST_RESTART_DELAY
            self.nats_restarts += 1
            log.warning("nats-server exited; restarting", code=code, delay=delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, MAX_RESTART_DELAY)
            if self.nats is not None and not self._stopping:
                try:
                    await self.nats.start()
                except NatsServerError as error:
                    log.error("nats-server did not start again", error=str(error))

    async def _start_nats(self) -> None:
        topology = bus_topology(partitions=self.options.partitions)
        # New keys at every start: the previous run's stop working (rotation for free).
        tenants = tuple(tenant_identity(ns) for ns in self.options.messenger_tenants)
        tenants += tuple(
            namespace_subscriber_identity(ns) for ns in self.options.subscriber_namespaces
        )
        self.credentials = write_credentials(
            self.options.credentials_dir,
            (*operator_identities(topology), *tenants),
            tls=self.options.nats_tls,
        )
        self.nats = NatsServer(
            port=self.options.nats_port,
            store_dir=self.options.state_dir / "nats",
            config=self.credentials.server_config.read_text(),
            tls=self.options.nats_tls is not None,
            own_session=True,
            cpus=self.options.nats_cpus,
            gc_percent=self.options.nats_gc_percent,
        )
        await self.nats.start()
        bus = await NatsBus.connect(self.nats_connection(ADMIN), topology=topology)
        try:
            await bus.ensure_streams()
            # The state buckets as the administrator, so that no service key makes one
            # first (decision 0222); the leases' duration is each test stack's own, so the
            # services make the lease bucket, checked when opened.
            await declare_buckets(bus.client, dict.fromkeys(STATE_BUCKETS))
            if self.options.messenger_on:
                await bus.declare(messenger_topology())
        finally:
            await bus.close()

    def _service_env(self, health_port: int, health_fd: int | None = None) -> dict[str, str]:
        assert self.nats is not None
        listener = self._console_listener
        return service_env(
            self.options,
            nats_url=self.nats.url,
            kubeconfig=self.kubeconfig,
            metrics_endpoint=self.metrics_endpoint,
            health_port=health_port,
            health_fd=health_fd,
            console_fd=None if listener is None else listener.fd,
        )

    async def _start_services(self) -> None:
        services = list(SERVICES)
        if self.runs_monitor:
            services.append(("monitor", "kaiwo_monitor"))
        gateway_port = self.options.gateway_port
        if gateway_port is not None and port_is_taken(gateway_port):
            self.not_ready["gateway"] = (
                f"left out: port {gateway_port} of 127.0.0.1 is taken "
                "(--gateway-port chooses another; 0: no gateway)"
            )
        elif gateway_port is not None:
            services.append(("gateway", "kaiwo_gateway"))
        if self.options.console_port is not None:
            services.append(("console", "kaiwo_console"))
        assert self.credentials is not None
        together = {}
        member_fds: dict[str, tuple[int, ...]] = {}
        for name, module in services:
            count = self.options.replicas.get(name, 1)
            for replica in range(count):
                process_name = name if count == 1 else f"{name}-{replica}"
                health = self._health_listeners[process_name] = listen_on_a_free_port()
                port = health.port
                env = {
                    **self._service_env(port, health.fd),
                    **self.options.env_by_service.get(name, {}),
                }
                env["KAIWO_NATS_CREDENTIALS_FILE"] = str(self.credentials.seed(name))
                env["KAIWO_REPLICA"] = str(replica)
                if self.options.one_process and name in MEMBERS:
                    together[name] = env
                    self.member_ports[name] = port
                    member_fds[name] = self._inherited_fds(process_name)
                    continue
                await self._start_process(
                    process_name, module, env, port, fds=self._inherited_fds(process_name)
                )
        if together:
            # Its own port is never served: each member answers on its own.
            await self._start_process(
                TOGETHER,
                "kaiwo_cli.stack.together",
                {TOGETHER_ENV: json.dumps(together)},
                self.member_ports["planner"],
                fds=tuple(fd for fds in member_fds.values() for fd in fds),
            )

    async def _start_process(
        self,
        process_name: str,
        module: str,
        env: dict[str, str],
        port: int,
        *,
        fds: tuple[int, ...],
    ) -> None:
        service = ServiceProcess(
            name=process_name,
            module=module,
            env=env,
            log_path=self.options.state_dir / "logs" / f"{process_name}.log",
            health_port=port,
            pass_fds=fds,
        )
        self.services[process_name] = service  # before it runs: stop() must see it
        await service.start()
        self._supervisors.append(asyncio.create_task(service.supervise()))

    def _inherited_fds(self, process_name: str) -> tuple[int, ...]:
        """The sockets ``process_name`` serves, bound here: its health socket, and the
        console's listening socket for the console."""
        health = self._health_listeners.get(process_name)
        fds: tuple[int, ...] = () if health is None else (health.fd,)
        if _base_name(process_name) == "console" and self._console_listener is not None:
            fds += (self._console_listener.fd,)
        return fds

    async def _wait_ready(self) -> None:
        self.not_ready.update(
            await wait_for_services(
                self.services,
                self.member_ports,
                together=TOGETHER,
                optional=[n for n in self.services if _base_name(n) in OPTIONAL_SERVICES],
                within=self.options.ready_timeout,
            )
        )


DEFAULT_CONSOLE_PORT = 8090


def _base_name(process_name: str) -> str:
    """``planner`` of ``planner-1``."""
    base, _, replica = process_name.rpartition("-")
    return base if base and replica.isdigit() else process_name
