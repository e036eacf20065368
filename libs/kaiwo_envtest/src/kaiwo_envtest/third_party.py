"""The third-party parts of a :class:`~kaiwo_envtest.control_plane.ControlPlane`: the built
stack's CRDs, the Kueue manager (its webhook certificates, configuration and webhooks) and the
KubeRay operator, started on the plane's free ports and stopped with it."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import yaml

from kaiwo_envtest import appwrapper as appwrapper_setup
from kaiwo_envtest import kueue as kueue_setup
from kaiwo_envtest.assets import Binaries
from kaiwo_envtest.crds import is_kueue, load_crds, one_version
from kaiwo_envtest.kueue import KueueOptions
from kaiwo_envtest.processes import Component, ControlPlaneError, answers_ok
from kaiwo_envtest.rest import ApiClient
from kaiwo_envtest.rotated_webhooks import WebhookCertificates, webhook_certificates

if TYPE_CHECKING:
    from kaiwo_envtest.control_plane import ControlPlane

KUEUE_OPERATOR_VERSION: Final = "v1beta1"
"""The Kueue version the CRDs serve alone when no Kueue manager runs to convert."""


class ThirdParty:
    """Installs and starts the third-party parts on ``plane`` through ``api``."""

    def __init__(self, plane: ControlPlane, api: ApiClient) -> None:
        self._plane = plane
        self._api = api

    def _manifests(self) -> Path:
        if self._plane.options.manifests is None:
            raise ControlPlaneError("Kueue and KubeRay need the built stack's manifests")
        return self._plane.options.manifests

    def install_crds(self) -> None:
        """The stack's CRDs, Kueue's converting through the Kueue manager when it runs (else
        serving the operator's version only: nothing could convert)."""
        crds = load_crds(self._manifests() / "crds")
        if self._plane.options.kueue is not None:
            url = f"https://127.0.0.1:{self._plane.endpoints.kueue_webhook}/convert"
            crds = kueue_setup.converted_crds(crds, url=url, ca=self._kueue_ca())
        else:
            crds = [one_version(c, KUEUE_OPERATOR_VERSION) if is_kueue(c) else c for c in crds]
        self._api.apply_all(crds)
        self._api.wait_established(
            (crd["metadata"]["name"] for crd in crds), within=self._plane.options.ready_timeout
        )

    def _kueue_certificates(self) -> WebhookCertificates:
        return kueue_setup.webhook_certificates(self._plane.directory / "kueue-pki")

    def _kueue_ca(self) -> bytes:
        return self._kueue_certificates().ca.certificate.read_bytes()

    def start_kueue(
        self, binaries: Binaries, options: KueueOptions
    ) -> tuple[Component, Callable[[], bool]]:
        executable = binaries.path("kueue")
        certificates = self._kueue_certificates()
        self._api.apply(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": kueue_setup.NAMESPACE},
            }
        )
        self._api.apply(certificates.secret(kueue_setup.WEBHOOKS))
        cert_dir = certificates.install_into(self._plane.directory / "kueue-certs")
        configuration = self._plane.directory / "kueue.yaml"
        document = kueue_setup.kueue_configuration(
            options,
            webhook_port=self._plane.endpoints.kueue_webhook,
            health_port=self._plane.endpoints.kueue_health,
            cert_dir=cert_dir,
        )
        configuration.write_text(yaml.safe_dump(document, sort_keys=False))
        kueue = self._plane.launch(
            "kueue",
            [
                str(executable),
                *kueue_setup.kueue_flags(
                    configuration=configuration, kubeconfig=self._plane.kubeconfig_for("kueue")
                ),
            ],
        )
        readyz = f"http://127.0.0.1:{self._plane.endpoints.kueue_health}/readyz"
        return kueue, lambda: answers_ok(readyz)

    def install_kueue_webhooks(self) -> None:
        """Kueue's webhook configurations, once it serves them (before, every pod and Job
        the API server admits would fail on the webhooks' ``failurePolicy: Fail``)."""
        self._api.apply_all(
            kueue_setup.webhook_configurations(
                self._webhook_manifests("kueue"),
                base_url=f"https://127.0.0.1:{self._plane.endpoints.kueue_webhook}",
                ca=self._kueue_ca(),
            )
        )

    def _webhook_manifests(self, within: str) -> list[dict[str, Any]]:
        manifests = self._manifests() / within / "webhook-manifests.yaml"
        return [d for d in yaml.safe_load_all(manifests.read_text()) if d]

    def start_kuberay(self, binaries: Binaries) -> tuple[Component, Callable[[], bool]]:
        """The KubeRay operator, reaching the Ray clusters' processes through the stand-in
        of :mod:`kaiwo_envtest.ray_head` (its HTTP proxy), which starts first."""
        head = self._plane.endpoints.ray_head
        self._plane.launch(
            "ray-head", [sys.executable, "-m", "kaiwo_envtest.ray_head", f"--port={head}"]
        )
        executable = binaries.path("kuberay")
        port = self._plane.endpoints.kuberay_health
        kuberay = self._plane.launch(
            "kuberay",
            [
                str(executable),
                f"--kubeconfig={self._plane.kubeconfig_for('kuberay')}",
                "--metrics-addr=0",
                f"--health-probe-bind-address=127.0.0.1:{port}",
                "--enable-leader-election=false",
            ],
            environment={
                "HTTP_PROXY": f"http://127.0.0.1:{head}",
                "NO_PROXY": "127.0.0.1,localhost",
            },
        )
        ready = (f"http://127.0.0.1:{head}/ready", f"http://127.0.0.1:{port}/readyz")
        return kuberay, lambda: all(answers_ok(url) for url in ready)

    def _appwrapper_certificates(self) -> WebhookCertificates:
        return webhook_certificates(
            self._plane.directory / "appwrapper-pki", appwrapper_setup.WEBHOOKS
        )

    def start_appwrapper(self, binaries: Binaries) -> tuple[Component, Callable[[], bool]]:
        """The AppWrapper controller, its rotator handed certificates in its Secret (the
        namespace made for it) and in its certificate directory."""
        webhooks = appwrapper_setup.WEBHOOKS
        certificates = self._appwrapper_certificates()
        self._api.apply(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": webhooks.namespace}}
        )
        self._api.apply(certificates.secret(webhooks))
        cert_dir = certificates.install_into(self._plane.directory / "appwrapper-certs")
        port = self._plane.endpoints.appwrapper_health
        controller = self._plane.launch(
            "appwrapper",
            [
                str(binaries.path("appwrapper")),
                *appwrapper_setup.appwrapper_flags(
                    kubeconfig=self._plane.kubeconfig_for("appwrapper"),
                    webhook_port=self._plane.endpoints.appwrapper_webhook,
                    health_port=port,
                    cert_dir=cert_dir,
                ),
            ],
        )
        return controller, lambda: answers_ok(f"http://127.0.0.1:{port}/readyz")

    def install_appwrapper_webhooks(self) -> None:
        """The AppWrapper webhooks, once the controller serves them (``failurePolicy: Fail``)."""
        self._api.apply_all(
            appwrapper_setup.webhook_configurations(
                self._webhook_manifests("appwrapper"),
                base_url=f"https://127.0.0.1:{self._plane.endpoints.appwrapper_webhook}",
                ca=self._appwrapper_certificates().ca.certificate.read_bytes(),
            )
        )
