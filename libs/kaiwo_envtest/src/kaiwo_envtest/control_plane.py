"""A throw-away Kubernetes control plane: etcd, kube-apiserver and, when asked, the
kube-controller-manager, the kube-scheduler, kwok (the simulated nodes' kubelets), the Kueue
manager and the KubeRay operator (with the stand-in of the Ray heads it reaches the Ray
clusters through, :mod:`kaiwo_envtest.ray_head`), on free loopback ports, in a directory
removed when it stops (every component's log in ``logs/``).

``with ControlPlane(ControlPlaneOptions(binaries=find_binaries())) as plane:`` then
``plane.kubeconfig`` authenticates as a cluster administrator. Without a scheduler and kwok,
Pods stay Pending unless a test writes their status. With Kueue or KubeRay, the third-party
CRDs of the built stack (``manifests``) are installed before they start.
"""

from __future__ import annotations

import shutil
import ssl
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Self

import yaml

from kaiwo_envtest.assets import Binaries
from kaiwo_envtest.audit import AuditLog, audit_policy
from kaiwo_envtest.kubeconfig import kubeconfig_document, write_kubeconfig
from kaiwo_envtest.kueue import KueueOptions
from kaiwo_envtest.kwok import KwokOptions, kwok_flags, stages
from kaiwo_envtest.pki import Credentials, Pki, client_credentials, make_pki
from kaiwo_envtest.processes import Component, ControlPlaneError, answers_ok, free_port
from kaiwo_envtest.rest import ApiClient
from kaiwo_envtest.scheduler import local_configuration, scheduler_flags
from kaiwo_envtest.third_party import ThirdParty

ADMIN_USER: Final = "envtest-admin"
ADMINS: Final = ("system:masters",)
CONTROLLER_MANAGER_USER: Final = "system:kube-controller-manager"
SCHEDULER_USER: Final = "system:kube-scheduler"
"""Bound to ``system:kube-scheduler`` and ``system:volume-scheduler`` by the API server's own
bootstrap policy."""
SERVICE_RANGE: Final = "10.96.0.0/16"


@dataclass(frozen=True, slots=True)
class ControlPlaneOptions:
    binaries: Binaries
    """Where the executables are (:func:`~kaiwo_envtest.assets.find_binaries`)."""
    controller_manager: bool = False
    audit: bool = False
    """Write an audit log of every write request (:class:`~kaiwo_envtest.audit.AuditLog`)."""
    audit_every_request_of: tuple[str, ...] = ()
    """User groups whose every request, reads included, the audit log records too (e.g.
    ``system:serviceaccounts:kaiwo-system``: which API calls a service account made)."""
    admission_plugins: tuple[str, ...] = ()
    """Admission plugins to turn on besides the API server's defaults (e.g.
    ``OwnerReferencesPermissionEnforcement``, which OpenShift runs)."""
    scheduler_configuration: dict[str, Any] | None = None
    """A KubeSchedulerConfiguration (e.g. the kaiwo-scheduler's): run the kube-scheduler with
    it, adapted for a local process (:mod:`kaiwo_envtest.scheduler`)."""
    kwok: KwokOptions | None = None
    """Run kwok as the kubelet of the nodes its selector matches (:mod:`kaiwo_envtest.kwok`)."""
    kueue: KueueOptions | None = None
    """Run the Kueue manager (:mod:`kaiwo_envtest.kueue`); needs ``manifests``."""
    kuberay: bool = False
    """Run the KubeRay operator; needs ``manifests``."""
    appwrapper: bool = False
    """Run the AppWrapper controller and its webhooks (:mod:`kaiwo_envtest.appwrapper`);
    needs ``manifests``."""
    manifests: Path | None = None
    """The built stack's ``manifests`` (third-party CRDs, Kueue's webhook configurations)."""
    ready_timeout: float = 60.0


@dataclass(frozen=True, slots=True)
class Endpoints:
    etcd: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int
    kwok: int
    kueue_webhook: int
    kueue_health: int
    kuberay_health: int
    ray_head: int
    appwrapper_webhook: int
    appwrapper_health: int

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.apiserver}"

    @classmethod
    def free(cls) -> Endpoints:
        """Ports free now, none given twice (the OS may hand a free port out again before the
        first process binds it)."""
        ports: list[int] = []
        while len(ports) < len(fields(cls)):
            if (port := free_port()) not in ports:
                ports.append(port)
        return cls(*ports)


class ControlPlane:
    """Start with ``with ControlPlane(options) as plane`` (or :meth:`start`/:meth:`stop`).

    The components are killed when the thread that started them ends (so none outlives a
    killed test run): start it from a thread that lives as long as the control plane should.
    """

    def __init__(self, options: ControlPlaneOptions) -> None:
        self.options = options
        self.directory = Path(tempfile.mkdtemp(prefix="kaiwo-envtest-"))
        self.endpoints = Endpoints.free()
        self.components: list[Component] = []
        self._pki: Pki | None = None

    # ------------------------------------------------------------------ what tests use

    @property
    def kubeconfig(self) -> Path:
        """An administrator's kubeconfig (user ``envtest-admin`` in ``system:masters``)."""
        return self.directory / "kubeconfig"

    @property
    def server(self) -> str:
        return self.endpoints.server

    @property
    def audit_log(self) -> AuditLog | None:
        return AuditLog(self.directory / "audit.log") if self.options.audit else None

    def kubeconfig_for(self, user: str, groups: Sequence[str] = ADMINS) -> Path:
        """A kubeconfig of its own for ``user`` (by default an administrator too), so that
        the audit log tells this client's writes from the others'."""
        credentials = client_credentials(self._issued_pki(), name=user, user=user, groups=groups)
        return self._write_kubeconfig(self.directory / f"{user}.kubeconfig", user, credentials)

    # ------------------------------------------------------------------ life

    @contextmanager
    def scheduler_stopped(self) -> Iterator[None]:
        """The kube-scheduler stopped for the block, and a new one started after it (back
        when this returns). The new one lists the cluster afresh, as a scheduler moved to
        another node does: a scheduler merely paused would place pods by what its cache
        held before the pause, changes it has not read yet included."""
        configuration = self.options.scheduler_configuration
        if configuration is None:
            raise ControlPlaneError("this control plane runs no kube-scheduler")
        [scheduler] = [c for c in self.components if c.name == "kube-scheduler"]
        scheduler.stop()
        self.components.remove(scheduler)
        try:
            yield
        finally:
            self._wait_ready([self._start_scheduler(self.options.binaries, configuration)])

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        binaries = self.options.binaries
        self._pki = make_pki(self.directory / "pki")
        admin = client_credentials(self._pki, name="admin", user=ADMIN_USER, groups=ADMINS)
        self._write_kubeconfig(self.kubeconfig, ADMIN_USER, admin)
        self._start_etcd(binaries)
        self._start_apiserver(binaries, admin)
        if self.options.controller_manager:
            self._start_controller_manager(binaries)
        options = self.options
        # Launched together, then waited for: each spends its first seconds on its own.
        starting: list[tuple[Component, Callable[[], bool]]] = []
        if options.scheduler_configuration is not None:
            starting.append(self._start_scheduler(binaries, options.scheduler_configuration))
        if options.kwok is not None:
            starting.append(self._start_kwok(binaries, options.kwok))
        if options.kueue is not None or options.kuberay or options.appwrapper:
            api = ApiClient(self.server, ca=self._issued_pki().ca, admin=admin)
            third_party = ThirdParty(self, api)
            third_party.install_crds()
            if options.kuberay:
                starting.append(third_party.start_kuberay(binaries))
            if options.appwrapper:
                starting.append(third_party.start_appwrapper(binaries))
            if options.kueue is not None:
                kueue = third_party.start_kueue(binaries, options.kueue)
                self._wait_ready([kueue])
                third_party.install_kueue_webhooks()
        self._wait_ready(starting)
        if options.appwrapper:
            third_party.install_appwrapper_webhooks()

    def stop(self) -> None:
        """Stop every component, the last started first, and remove the directory."""
        for component in reversed(self.components):
            component.stop()
        self.components.clear()
        shutil.rmtree(self.directory, ignore_errors=True)

    # ------------------------------------------------------------------ steps

    def _issued_pki(self) -> Pki:
        if self._pki is None:
            raise ControlPlaneError("the control plane has not been started")
        return self._pki

    def _write_kubeconfig(self, path: Path, user: str, credentials: Credentials) -> Path:
        document = kubeconfig_document(
            server=self.server,
            certificate_authority=self._issued_pki().ca.certificate,
            user=user,
            credentials=credentials,
        )
        return write_kubeconfig(path, document)

    def _start_etcd(self, binaries: Binaries) -> None:
        client = f"http://127.0.0.1:{self.endpoints.etcd}"
        peer = f"http://127.0.0.1:{self.endpoints.etcd_peer}"
        etcd = self.launch(
            "etcd",
            [
                str(binaries.path("etcd")),
                f"--data-dir={self.directory / 'etcd'}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=default={peer}",
                # A throw-away store: what a crash would lose is never needed again, and
                # fsync on every write is most of etcd's time on a shared disk.
                "--unsafe-no-fsync",
            ],
        )
        etcd.wait_until(lambda: answers_ok(f"{client}/health"), within=self.options.ready_timeout)

    def _start_apiserver(self, binaries: Binaries, admin: Credentials) -> None:
        pki = self._issued_pki()
        apiserver = self.launch(
            "kube-apiserver", [str(binaries.path("kube-apiserver")), *self._apiserver_flags(pki)]
        )
        context = ssl.create_default_context(cafile=str(pki.ca.certificate))
        context.load_cert_chain(str(admin.certificate), str(admin.key))
        ready = f"{self.server}/readyz"
        apiserver.wait_until(
            lambda: answers_ok(ready, context=context), within=self.options.ready_timeout
        )

    def _apiserver_flags(self, pki: Pki) -> list[str]:
        flags = [
            f"--etcd-servers=http://127.0.0.1:{self.endpoints.etcd}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.endpoints.apiserver}",
            f"--tls-cert-file={pki.serving.certificate}",
            f"--tls-private-key-file={pki.serving.key}",
            f"--client-ca-file={pki.ca.certificate}",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={pki.service_account_public_key}",
            f"--service-account-signing-key-file={pki.service_account_key}",
            "--authorization-mode=RBAC",
            f"--service-cluster-ip-range={SERVICE_RANGE}",
            "--allow-privileged=true",
            f"--cert-dir={self.directory / 'apiserver-certs'}",
            "--enable-priority-and-fairness=false",
        ]
        if self.options.admission_plugins:
            flags.append(f"--enable-admission-plugins={','.join(self.options.admission_plugins)}")
        if self.options.audit:
            policy = self.directory / "audit-policy.yaml"
            document = audit_policy(self.options.audit_every_request_of)
            policy.write_text(yaml.safe_dump(document, sort_keys=False))
            flags += [
                f"--audit-policy-file={policy}",
                f"--audit-log-path={self.directory / 'audit.log'}",
                "--audit-log-format=json",
            ]
        return flags

    def _start_controller_manager(self, binaries: Binaries) -> None:
        executable = binaries.path("kube-controller-manager")
        pki = self._issued_pki()
        kubeconfig = str(self.kubeconfig_for(CONTROLLER_MANAGER_USER, groups=()))
        manager = self.launch(
            "kube-controller-manager",
            [
                str(executable),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.endpoints.controller_manager}",
                f"--cert-dir={self.directory / 'controller-manager-certs'}",
                f"--service-account-private-key-file={pki.service_account_key}",
                f"--root-ca-file={pki.ca.certificate}",
                "--use-service-account-credentials=true",
                f"--service-cluster-ip-range={SERVICE_RANGE}",
                "--leader-elect=false",
            ],
        )
        # Its serving certificate is self-signed; /healthz is open to anyone.
        unverified = ssl._create_unverified_context()  # noqa: S323
        healthz = f"https://127.0.0.1:{self.endpoints.controller_manager}/healthz"
        manager.wait_until(
            lambda: answers_ok(healthz, context=unverified), within=self.options.ready_timeout
        )

    def _wait_ready(self, starting: Sequence[tuple[Component, Callable[[], bool]]]) -> None:
        for component, ready in starting:
            component.wait_until(ready, within=self.options.ready_timeout)

    def _start_scheduler(
        self, binaries: Binaries, configuration: dict[str, Any]
    ) -> tuple[Component, Callable[[], bool]]:
        executable = binaries.path("kube-scheduler")
        kubeconfig = self.kubeconfig_for(SCHEDULER_USER, groups=())
        path = self.directory / "scheduler.yaml"
        local = local_configuration(configuration, kubeconfig=kubeconfig)
        path.write_text(yaml.safe_dump(local, sort_keys=False))
        port = self.endpoints.scheduler
        scheduler = self.launch(
            "kube-scheduler",
            [
                str(executable),
                *scheduler_flags(
                    configuration=path,
                    kubeconfig=kubeconfig,
                    port=port,
                    cert_dir=self.directory / "scheduler-certs",
                ),
            ],
        )
        unverified = ssl._create_unverified_context()  # noqa: S323 - self-signed, open /healthz
        healthz = f"https://127.0.0.1:{port}/healthz"
        return scheduler, lambda: answers_ok(healthz, context=unverified)

    def _start_kwok(
        self, binaries: Binaries, options: KwokOptions
    ) -> tuple[Component, Callable[[], bool]]:
        executable = binaries.path("kwok")
        configuration = self.directory / "kwok.yaml"
        configuration.write_text(yaml.safe_dump_all(stages(options), sort_keys=False))
        port = self.endpoints.kwok
        kwok = self.launch(
            "kwok",
            [
                str(executable),
                *kwok_flags(
                    kubeconfig=self.kubeconfig_for("kwok"),
                    configuration=configuration,
                    port=port,
                    options=options,
                ),
            ],
        )
        healthz = f"http://127.0.0.1:{port}/healthz"
        return kwok, lambda: answers_ok(healthz)

    def launch(
        self, name: str, command: list[str], *, environment: dict[str, str] | None = None
    ) -> Component:
        """Start component ``name``; it is stopped with the control plane."""
        component = Component.start(
            name, command, log=self.directory / "logs" / f"{name}.log", environment=environment
        )
        self.components.append(component)
        return component
