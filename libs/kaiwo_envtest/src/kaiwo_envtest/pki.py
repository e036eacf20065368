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

DAYS: Final = 7
EC_KEY: Final = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
RSA_KEY: Final = ("-newkey", "rsa:2048", "-nodes")
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
    ca = certificate_authority(directory, "ca", common_name="kaiwo-envtest-ca")
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


def certificate_authority(
    directory: Path,
    name: str,
    *,
    common_name: str,
    dns_names: Sequence[str] = (),
    days: int = DAYS,
    rsa: bool = False,
) -> Credentials:
    """A self-signed CA ``name`` in ``directory`` (``dns_names`` as subject alternative names,
    for verifiers that check a CA's name too); with ``rsa``, an RSA key in the traditional
    PKCS#1 form (for readers that take no other, such as Kueue's certificate rotator)."""
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "openssl.cnf"
    if not config.exists():
        config.write_text(MINIMAL_CONFIG)
    ca = _credentials(directory, name)
    names = [f"subjectAltName={_alternative_names(dns_names, ())}"] if dns_names else []
    added = [arg for extension in names for arg in ("-addext", extension)]
    _openssl(
        "req", "-x509", "-config", str(config), *(RSA_KEY if rsa else EC_KEY), "-days", str(days),
        "-keyout", str(ca.key), "-out", str(ca.certificate), "-subj", f"/CN={common_name}",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature", *added,
    )  # fmt: skip
    if rsa:
        _openssl("rsa", "-in", str(ca.key), "-out", str(ca.key), "-traditional")
    return ca


def serving_credentials(
    directory: Path,
    ca: Credentials,
    *,
    name: str,
    dns_names: Sequence[str] = (),
    ip_addresses: Sequence[str] = ("127.0.0.1",),
    days: int = DAYS,
) -> Credentials:
    """A server certificate signed by ``ca`` for ``dns_names`` and ``ip_addresses``."""
    return _signed(
        directory,
        ca,
        name=name,
        subject_line=f"/CN={(dns_names or ip_addresses)[0]}",
        extensions=(
            f"subjectAltName={_alternative_names(dns_names, ip_addresses)}",
            "extendedKeyUsage=serverAuth",
        ),
        days=days,
    )


def _alternative_names(dns_names: Sequence[str], ip_addresses: Sequence[str]) -> str:
    return ",".join([*(f"DNS:{n}" for n in dns_names), *(f"IP:{a}" for a in ip_addresses)])


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
    days: int = DAYS,
) -> Credentials:
    made = _credentials(directory, name)
    added = [arg for extension in extensions for arg in ("-addext", extension)]
    _openssl(
        "req", "-x509", "-config", str(directory / "openssl.cnf"), *EC_KEY, "-days", str(days),
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
