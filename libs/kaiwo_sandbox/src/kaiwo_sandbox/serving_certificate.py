"""A throw-away self-signed certificate for the simulated kubelets' HTTPS endpoint.

An API server reaches kubelets over HTTPS only. Without ``--kubelet-certificate-authority``
(envtest's and the fake's case) it does not verify the kubelet's certificate, so any
certificate will do: one EC P-256 key made by the ``openssl`` command (as
``kaiwo_envtest``'s PKI does; no Python cryptography package is needed), loaded and deleted.
"""

from __future__ import annotations

import shutil
import ssl
import subprocess
import tempfile
from pathlib import Path
from typing import Final

DAYS: Final = "30"


class CertificateError(RuntimeError):
    """No certificate could be made; the message says why, in one line."""


def self_signed_server_context(common_name: str) -> ssl.SSLContext:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise CertificateError("the openssl command is not installed")
    with tempfile.TemporaryDirectory(prefix="kaiwo-sandbox-tls-") as directory:
        certificate, key = Path(directory) / "tls.crt", Path(directory) / "tls.key"
        made = subprocess.run(  # noqa: S603 (a fixed command line)
            [
                openssl,
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-subj",
                f"/CN={common_name}",
                "-days",
                DAYS,
                "-keyout",
                str(key),
                "-out",
                str(certificate),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if made.returncode != 0:
            reason = " ".join(made.stderr.split())[-200:]
            raise CertificateError(f"openssl could not make a certificate: {reason}")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(certificate, key)
        return context
