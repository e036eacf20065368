"""Kubeconfig files for the throw-away control plane: one cluster, one user, one context."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import yaml

from kaiwo_envtest.pki import Credentials

CONTEXT: Final = "envtest"


def kubeconfig_document(
    *, server: str, certificate_authority: Path, user: str, credentials: Credentials
) -> dict[str, Any]:
    """The kubeconfig naming ``server`` (trusted through ``certificate_authority``) and
    authenticating as ``user`` with a client certificate; file paths stay paths."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": CONTEXT,
                "cluster": {
                    "server": server,
                    "certificate-authority": str(certificate_authority),
                },
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate": str(credentials.certificate),
                    "client-key": str(credentials.key),
                },
            }
        ],
        "contexts": [{"name": CONTEXT, "context": {"cluster": CONTEXT, "user": user}}],
        "current-context": CONTEXT,
    }


def write_kubeconfig(path: Path, document: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    path.chmod(0o600)
    return path
