"""Just enough of a Kubernetes client for setting a control plane up: server-side apply of
the few kinds the components need installed (namespaces, secrets, CRDs, webhook
configurations, RBAC), reads, and waiting for CRDs to be Established.

The test infrastructure imports nothing of the project's (``.importlinter``), so it talks to
the API server with the standard library: HTTPS with the administrator's client certificate.
"""

from __future__ import annotations

import concurrent.futures
import json
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from kaiwo_envtest.pki import Credentials
from kaiwo_envtest.processes import ControlPlaneError

FIELD_MANAGER: Final = "kaiwo-envtest"
TIMEOUT_SECONDS: Final = 60.0
PARALLEL_APPLIES: Final = 4
ATTEMPTS: Final = 5
RETRIED_CODES: Final = frozenset({429, 500, 503, 504})
"""An API server too busy to finish a request in time (a large CRD's schema on a loaded
machine answers 504 after its 60 s): an apply is idempotent, so it is sent again."""


@dataclass(frozen=True, slots=True)
class Kind:
    plural: str
    namespaced: bool


KINDS: Final[Mapping[tuple[str, str], Kind]] = {
    ("v1", "Namespace"): Kind("namespaces", namespaced=False),
    ("v1", "Secret"): Kind("secrets", namespaced=True),
    ("v1", "ConfigMap"): Kind("configmaps", namespaced=True),
    ("v1", "Node"): Kind("nodes", namespaced=False),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): Kind(
        "customresourcedefinitions", namespaced=False
    ),
    ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"): Kind(
        "mutatingwebhookconfigurations", namespaced=False
    ),
    ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"): Kind(
        "validatingwebhookconfigurations", namespaced=False
    ),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): Kind("clusterroles", namespaced=False),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): Kind(
        "clusterrolebindings", namespaced=False
    ),
}


def object_path(document: Mapping[str, Any]) -> str:
    """The API path of ``document`` (one of :data:`KINDS`)."""
    api_version, kind = str(document.get("apiVersion")), str(document.get("kind"))
    known = KINDS.get((api_version, kind))
    if known is None:
        raise ValueError(f"no path known for {api_version} {kind}")
    prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    metadata = document.get("metadata") or {}
    name = metadata["name"]
    if known.namespaced:
        return f"{prefix}/namespaces/{metadata['namespace']}/{known.plural}/{name}"
    return f"{prefix}/{known.plural}/{name}"


class ApiClient:
    """An administrator's HTTPS client of one API server."""

    def __init__(self, server: str, *, ca: Credentials, admin: Credentials) -> None:
        self.server = server
        self._context = ssl.create_default_context(cafile=str(ca.certificate))
        self._context.load_cert_chain(str(admin.certificate), str(admin.key))

    def apply(self, document: Mapping[str, Any]) -> dict[str, Any]:
        """Server-side apply ``document`` (forced: the control plane's set-up owns it), again
        while the server is too busy to answer (:data:`RETRIED_CODES`, no answer in time)."""
        path = object_path(document)
        query = f"?fieldManager={FIELD_MANAGER}&force=true"
        body = json.dumps(document).encode()
        for attempt in range(1, ATTEMPTS + 1):
            try:
                return self._request(
                    "PATCH", path + query, body=body, content_type="application/apply-patch+yaml"
                )
            except _BusyError:
                if attempt == ATTEMPTS:
                    raise
                time.sleep(attempt)
        raise AssertionError("unreachable")

    def apply_all(self, documents: Iterable[Mapping[str, Any]]) -> None:
        """Apply every document, several at once: the server spends most of a large CRD's
        time on its own (compiling its schema), so one at a time is mostly waiting."""
        with concurrent.futures.ThreadPoolExecutor(max_workers=PARALLEL_APPLIES) as pool:
            for _ in pool.map(self.apply, documents):
                pass

    def get(self, path: str) -> dict[str, Any] | None:
        """The object at ``path``, or None when there is none."""
        try:
            return self._request("GET", path)
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return None
            raise

    def wait_established(self, names: Iterable[str], *, within: float = 60.0) -> None:
        """Wait until every CRD of ``names`` is Established."""
        deadline = time.monotonic() + within
        for name in names:
            while not self._established(name):
                if time.monotonic() > deadline:
                    raise ControlPlaneError(f"CRD {name} was not Established within {within:g} s")
                time.sleep(0.1)

    def _established(self, name: str) -> bool:
        try:
            crd = self.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
        except _BusyError:
            return False  # asked again at the next poll
        conditions = ((crd or {}).get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)

    def _request(
        self, method: str, path: str, *, body: bytes | None = None, content_type: str = ""
    ) -> dict[str, Any]:
        request = urllib.request.Request(  # noqa: S310 - our own API server's https URL
            self.server + path, data=body, method=method
        )
        request.add_header("Accept", "application/json")
        if content_type:
            request.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(  # noqa: S310 - as above
                request, timeout=TIMEOUT_SECONDS, context=self._context
            ) as answer:
                found: dict[str, Any] = json.loads(answer.read() or b"{}")
                return found
        except urllib.error.HTTPError as error:
            if error.code == 404 and method == "GET":
                raise
            detail = error.read().decode(errors="replace")
            failure = _BusyError if error.code in RETRIED_CODES else ControlPlaneError
            raise failure(f"{method} {path}: {error.code} {detail}") from error
        except (TimeoutError, urllib.error.URLError) as error:
            raise _BusyError(f"{method} {path}: no answer ({error})") from error


class _BusyError(ControlPlaneError):
    """The API server did not finish the request in time; it may succeed when sent again."""
