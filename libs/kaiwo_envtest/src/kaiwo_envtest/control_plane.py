"""A throw-away Kubernetes control plane: etcd, kube-apiserver and, when asked, the
kube-controller-manager, on free loopback ports, in a directory removed when it stops.

``with ControlPlane(ControlPlaneOptions(binaries=find_binaries())) as plane:`` then
``plane.kubeconfig`` authenticates as a cluster administrator. No scheduler and no kubelet run:
Pods stay Pending unless a test writes their status.
"""

from __future__ import annotations

import shutil
import ssl
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Final, Self

import yaml

from kaiwo_envtest.assets import Binaries
from kaiwo_envtest.audit import AuditLog, audit_policy
from kaiwo_envtest.kubeconfig import kubeconfig_document, write_kubeconfig
from kaiwo_envtest.pki import Credentials, Pki, client_credentials, make_pki
from kaiwo_envtest.processes import Component, ControlPlaneError, answers_ok, free_port

ADMIN_USER: Final = "envtest-admin"
ADMINS: Final = ("system:masters",)
CONTROLLER_MANAGER_USER: Final = "system:kube-controller-manager"
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
    ready_timeout: float = 60.0


@dataclass(frozen=True, slots=True)
class Endpoints:
    etcd: int
    etcd_peer: int
    apiserver: int
    controller_manager: int

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.apiserver}"

    @classmethod
    def free(cls) -> Endpoints:
        return cls(
            etcd=free_port(), etcd_peer=free_port(), apiserver=free_port(),
            controller_manager=free_port(),
        )  # fmt: skip


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
        etcd = self._launch(
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
        apiserver = self._launch(
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
        manager = self._launch(
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

    def _launch(self, name: str, command: list[str]) -> Component:
        component = Component.start(name, command, log=self.directory / "logs" / f"{name}.log")
        self.components.append(component)
        return component
