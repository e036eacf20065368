"""What ``kaiwo up`` is asked to start (:class:`StackOptions`), and the one-line error it
fails with (:class:`StackError`); see :mod:`kaiwo_cli.stack.local`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from kaiwo_contracts.events.messenger import tenant_key_name
from kaiwo_contracts.events.permissions import namespace_subscriber_name
from kaiwo_runtime.nats_credentials import ServerTls
from kaiwo_sandbox import SandboxOptions

from kaiwo_cli.stack.scheduler import SchedulerMode


class StackError(RuntimeError):
    """The stack cannot start; the message is one line for the user."""


@dataclass(frozen=True, slots=True)
class StackOptions:
    state_dir: Path
    kubeconfig: Path | None = None
    fake_cluster: bool = False
    seed_fake_cluster: bool = True
    """Give the fake cluster the demo nodes and namespaces (tests set up their own)."""
    install_crds: bool = False
    scheduler: SchedulerMode = "install"
    """``install`` the kaiwo-scheduler and name it in the KaiwoConfig; name the cluster's own
    (``external``: ``default-scheduler``); or leave both as they are (``existing``). On the
    fake cluster nothing is installed: the sandbox schedules every pod."""
    nats_port: int | None = None
    nats_tls: ServerTls | None = None
    """Serve NATS over TLS with this certificate; clients verify it against ``ca_file``."""
    nats_cpus: int | None = 1
    """The nats-server's ``GOMAXPROCS`` (None: one per core). One: on a machine whose cores
    the control plane and the services share, more processors mostly add the Go scheduler's
    hand-offs between them (decision 0082)."""
    nats_gc_percent: int | None = 50
    """The nats-server's ``GOGC`` (None: Go's default, 100). 50: its RSS after the pipeline
    bench 96 → 85 MB, its CPU within the noise (decision 0093)."""
    store_url: str | None = None
    metrics_endpoint: str | None = None
    gateway_port: int | None = None
    """Start the OpenAI gateway on this port of 127.0.0.1 (None: no gateway)."""
    gateway_anonymous: bool = True
    """Serve every caller on this machine without a token, for every namespace
    (``KAIWO_GATEWAY_ANONYMOUS=loopback``); False: callers send Kubernetes bearer tokens,
    checked with the stack's kubeconfig (decision 0040)."""
    console_port: int | None = None
    """Start the web console on this port of 127.0.0.1 (None: no console)."""
    console_anonymous: bool = True
    """Show every namespace to every caller on this machine without a token
    (``KAIWO_CONSOLE_ANONYMOUS=loopback``); False: callers sign in with Kubernetes tokens,
    checked with the stack's kubeconfig (decision 0051)."""
    local_cluster: Literal["fake", "envtest", "kwok"] = "fake"
    """With ``fake_cluster``: the fake API server; a real kube-apiserver and
    kube-controller-manager from the built stack (``python -m kaiwo_envtest``); or ``kwok``,
    those with the real kube-scheduler (the kaiwo-scheduler's profile), Kueue, KubeRay and kwok
    as the sandbox nodes' kubelet (the sandbox then plays none of them, see
    :attr:`SandboxOptions.kwok`)."""
    envtest_assets: Path | None = None
    """A directory of the control plane's binaries; default ``$KAIWO_ENVTEST_ASSETS``, else the
    stack ``make stack`` built."""
    sandbox: SandboxOptions | None = None
    """With ``fake_cluster``: run the sandbox's simulated controllers (Kueue, kubelet, volumes,
    GPU metrics for the monitor) beside the fake API server, see :mod:`kaiwo_sandbox`."""
    ready_timeout: float = 60.0
    service_env: Mapping[str, str] = field(default_factory=dict)
    """Extra ``KAIWO_*`` settings for every service (timeouts, batch sizes, log level)."""
    env_by_service: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Settings for one service only, by service name, over ``service_env``: e.g. a
    ``KAIWO_KUBECONFIG`` of its own, so that each service authenticates as itself."""
    partitions: int = 1
    """``KAIWO_BUS_PARTITIONS`` of every service: more than 1 runs the planner's and the
    executor's replicas active-active (decision 0030)."""
    replicas: Mapping[str, int] = field(default_factory=dict)
    """Processes per service name (default 1); replica ``i`` of ``planner`` is named
    ``planner-<i>`` in :attr:`LocalStack.services`. More than one planner or executor is
    active only with ``partitions`` > 1 (else the others wait as standbys)."""
    one_process: bool = False
    """Run the four core services (recorder, watcher, planner, executor) in one process,
    :mod:`kaiwo_cli.stack.together`, named ``operator`` in :attr:`LocalStack.services`: one
    interpreter's memory instead of four, on one core (decision 0075). Each keeps its own
    NATS identity, settings and health port; one replica each."""
    messenger: bool = True
    """With the gateway: also serve requests that arrive through JetStream
    (``KAIWO_MESSENGER_ENABLED``), the messenger's streams and consumer declared here by the
    administrator identity (decision 0057). Without a gateway nothing is declared."""
    messenger_tenants: tuple[str, ...] = ()
    """Namespaces given a messenger tenant key (``tenant-<namespace>`` in the credentials
    directory, new at every start like the others): it may send requests to that
    namespace's Models and read their answers, nothing else."""

    subscriber_namespaces: tuple[str, ...] = ()
    """Namespaces given a subscriber key of their own (``subscriber-<namespace>`` in the
    credentials directory, new at every start): it reads that namespace's public workload
    events and nothing else (decision 0164)."""

    def __post_init__(self) -> None:
        if self.partitions < 1 or any(count < 1 for count in self.replicas.values()):
            raise ValueError("partitions and replicas must be >= 1")
        if self.one_process and any(count > 1 for count in self.replicas.values()):
            raise ValueError("one process runs one replica of each service")
        for namespace in self.messenger_tenants:
            tenant_key_name(namespace)  # NotATenantError (a ValueError) names the namespace
        for namespace in self.subscriber_namespaces:
            namespace_subscriber_name(namespace)  # the same

    @property
    def messenger_on(self) -> bool:
        return self.messenger and self.gateway_port is not None

    @property
    def event_store_url(self) -> str:
        return self.store_url or f"sqlite:///{self.state_dir.resolve() / 'events.db'}"

    @property
    def console_url(self) -> str | None:
        return None if self.console_port is None else f"http://127.0.0.1:{self.console_port}/"

    @property
    def credentials_dir(self) -> Path:
        return self.state_dir.resolve() / "credentials"
