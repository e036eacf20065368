"""The kubeconfig the control plane writes, and the certificates behind it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml
from kaiwo_envtest import (
    Credentials,
    client_credentials,
    kubeconfig_document,
    make_pki,
    subject,
    write_kubeconfig,
)


def test_the_kubeconfig_names_server_authority_and_client_certificate(tmp_path: Path) -> None:
    document = kubeconfig_document(
        server="https://127.0.0.1:6443",
        certificate_authority=Path("/pki/ca.crt"),
        user="envtest-admin",
        credentials=Credentials(certificate=Path("/pki/a.crt"), key=Path("/pki/a.key")),
    )
    expected = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "envtest",
                "cluster": {
                    "server": "https://127.0.0.1:6443",
                    "certificate-authority": "/pki/ca.crt",
                },
            }
        ],
        "users": [
            {
                "name": "envtest-admin",
                "user": {"client-certificate": "/pki/a.crt", "client-key": "/pki/a.key"},
            }
        ],
        "contexts": [
            {"name": "envtest", "context": {"cluster": "envtest", "user": "envtest-admin"}}
        ],
        "current-context": "envtest",
    }
    assert document == expected
    path = write_kubeconfig(tmp_path / "sub" / "kubeconfig", document)
    assert yaml.safe_load(path.read_text()) == expected
    assert path.stat().st_mode & 0o777 == 0o600


def test_the_subject_carries_groups_as_organisations() -> None:
    assert subject("envtest-admin", ["system:masters"]) == "/O=system:masters/CN=envtest-admin"
    assert subject("kaiwo", ["a", "b"]) == "/O=a/O=b/CN=kaiwo"
    assert subject("system:kube-controller-manager") == "/CN=system:kube-controller-manager"


def openssl(*arguments: str) -> str:
    done = subprocess.run(["openssl", *arguments], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_client_certificates_are_signed_by_the_ca(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    client = client_credentials(pki, name="kaiwo", user="kaiwo-operator", groups=["ops"])
    ca = str(pki.ca.certificate)
    assert openssl("verify", "-CAfile", ca, str(client.certificate)).endswith(": OK")
    assert openssl("verify", "-CAfile", ca, str(pki.serving.certificate)).endswith(": OK")
    assert openssl("x509", "-in", str(client.certificate), "-noout", "-subject") == (
        "subject=O = ops, CN = kaiwo-operator"
    )
    serving = openssl(
        "x509", "-in", str(pki.serving.certificate), "-noout", "-ext", "subjectAltName"
    )
    assert "IP Address:127.0.0.1, DNS:localhost" in serving
