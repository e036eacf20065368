"""A throw-away PKI made with the ``openssl`` command: a CA, the API server's serving
certificate, client certificates (user = CN, groups = O) and the service-account key pair.

EC P-256 keys throughout: a key costs milliseconds, where RSA 2048 costs a noticeable part
of a second on a small machine.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

DAYS: Final = "7"
EC_KEY: Final = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
# openssl's own default configuration would add CA:TRUE to every certificate it makes.
MINIMAL_CONFIG: Final = "[req]\ndistinguished_name=dn\n[dn]\n"


@dataclass(frozen=True, slots=True)
class Credentials:
    """A certificate and its private key (PEM files)."""

    certificate: Path
    key: Path


@dataclass(frozen=True, slots=True)
class Pki:
    directory: Path
    ca: Credentials
    serving: Credentials
    service_account_key: Path
    service_account_public_key: Path

    @property
    def config(self) -> Path:
        return self.directory / "openssl.cnf"


def subject(user: str, groups: Sequence[str] = ()) -> str:
    """The certificate subject the API server reads as user ``user`` in ``groups``."""
    return "".join(f"/O={group}" for group in groups) + f"/CN={user}"


def make_pki(directory: Path) -> Pki:
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "openssl.cnf"
    config.write_text(MINIMAL_CONFIG)
    ca = _credentials(directory, "ca")
    _openssl(
        "req", "-x509", "-config", str(config), *EC_KEY, "-days", DAYS,
        "-keyout", str(ca.key), "-out", str(ca.certificate), "-subj", "/CN=kaiwo-envtest-ca",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature",
    )  # fmt: skip
    serving = _signed(
        directory,
        ca,
        name="apiserver",
        subject_line="/CN=kube-apiserver",
        extensions=("subjectAltName=IP:127.0.0.1,DNS:localhost", "extendedKeyUsage=serverAuth"),
    )
    service_key = directory / "service-account.key"
    service_public = directory / "service-account.pub"
    _openssl(
        "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:prime256v1",
        "-out", str(service_key),
    )  # fmt: skip
    _openssl("pkey", "-in", str(service_key), "-pubout", "-out", str(service_public))
    return Pki(
        directory=directory,
        ca=ca,
        serving=serving,
        service_account_key=service_key,
        service_account_public_key=service_public,
    )


def client_credentials(
    pki: Pki, *, name: str, user: str, groups: Sequence[str] = ()
) -> Credentials:
    """A client certificate for ``user`` in ``groups``, signed by the PKI's CA."""
    return _signed(
        pki.directory,
        pki.ca,
        name=name,
        subject_line=subject(user, groups),
        extensions=("extendedKeyUsage=clientAuth",),
    )


def _signed(
    directory: Path,
    ca: Credentials,
    *,
    name: str,
    subject_line: str,
    extensions: Sequence[str],
) -> Credentials:
    made = _credentials(directory, name)
    added = [arg for extension in extensions for arg in ("-addext", extension)]
    _openssl(
        "req", "-x509", "-config", str(directory / "openssl.cnf"), *EC_KEY, "-days", DAYS,
        "-keyout", str(made.key), "-out", str(made.certificate), "-subj", subject_line,
        "-CA", str(ca.certificate), "-CAkey", str(ca.key),
        "-addext", "basicConstraints=critical,CA:FALSE", *added,
    )  # fmt: skip
    return made


def _credentials(directory: Path, name: str) -> Credentials:
    return Credentials(certificate=directory / f"{name}.crt", key=directory / f"{name}.key")


def _openssl(*arguments: str) -> None:
    done = subprocess.run(  # noqa: S603 - fixed arguments, no shell
        ["openssl", *arguments],  # noqa: S607 - openssl from PATH, as the reference script
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"openssl {arguments[0]} failed: {done.stderr.strip()}")
