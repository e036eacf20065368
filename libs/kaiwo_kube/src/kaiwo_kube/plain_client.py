"""A plain aiohttp stand-in for kubernetes_asyncio's ApiClient, for commands that must start
fast.

Importing ``kubernetes_asyncio.client`` loads every API class and model of the Kubernetes API
(hundreds of modules): most of a ``kaiwo list``'s start-up. :class:`KubernetesAsyncioAdapter`
uses only ``call_api`` with raw paths, so when the kubeconfig needs nothing but TLS
certificates or a bearer token, this client serves the same calls over an aiohttp session and
the adapter is the same in every other respect. Anything else in a kubeconfig (an ``exec``
credential plugin, an ``auth-provider``, a proxy or TLS server name, basic auth) makes
:func:`plain_client_from_kubeconfig` answer None: the caller uses the real ApiClient.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import ssl
import tempfile
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yaml

SUPPORTED_USER_FIELDS = frozenset(
    {
        "client-certificate",
        "client-certificate-data",
        "client-key",
        "client-key-data",
        "token",
        "tokenFile",
    }
)
SUPPORTED_CLUSTER_FIELDS = frozenset(
    {"server", "certificate-authority", "certificate-authority-data", "insecure-skip-tls-verify"}
)


@dataclass(frozen=True, slots=True)
class PlainCredentials:
    """What a request needs from a simple kubeconfig: where, how to trust it, who we are."""

    server: str
    ca_file: Path | None = None
    ca_data: bytes | None = None
    insecure: bool = False
    certificate: bytes | None = None
    key: bytes | None = None
    token: str | None = None


def read_plain_credentials(path: Path, *, context: str | None = None) -> PlainCredentials | None:
    """The credentials of ``context`` (default: the current one) in the kubeconfig at ``path``,
    or None when it needs more than certificates or a token (or cannot be read here: the
    real loader then says what is wrong)."""
    try:
        config = yaml.safe_load(path.read_text())
        base = path.parent
        name = context or config["current-context"]
        entry = _named(config.get("contexts"), name)["context"]
        cluster = _named(config.get("clusters"), entry["cluster"])["cluster"]
        user = _named(config.get("users"), entry["user"]).get("user") or {}
    except (OSError, yaml.YAMLError, KeyError, TypeError, LookupError):
        return None
    if set(user) - SUPPORTED_USER_FIELDS or set(cluster) - SUPPORTED_CLUSTER_FIELDS:
        return None
    try:
        token = user.get("token") or (
            _file(base, user["tokenFile"]).read_text().strip() if user.get("tokenFile") else None
        )
        return PlainCredentials(
            server=str(cluster["server"]).rstrip("/"),
            ca_file=_file(base, cluster["certificate-authority"])
            if cluster.get("certificate-authority")
            else None,
            ca_data=base64.b64decode(cluster["certificate-authority-data"])
            if cluster.get("certificate-authority-data")
            else None,
            insecure=bool(cluster.get("insecure-skip-tls-verify")),
            certificate=_bytes(base, user, "client-certificate"),
            key=_bytes(base, user, "client-key"),
            token=token,
        )
    except (OSError, ValueError, KeyError):
        return None


def _named(entries: Any, name: str) -> Mapping[str, Any]:
    for entry in entries or []:
        if entry.get("name") == name:
            return dict(entry)
    raise LookupError(name)


def _file(base: Path, name: str) -> Path:
    return (base / Path(name).expanduser()).resolve()


def _bytes(base: Path, user: Mapping[str, Any], field: str) -> bytes | None:
    if user.get(f"{field}-data"):
        return base64.b64decode(user[f"{field}-data"])
    if user.get(field):
        return _file(base, user[field]).read_bytes()
    return None


def ssl_context(credentials: PlainCredentials) -> ssl.SSLContext | bool:
    """TLS as the kubeconfig says (certificates in memory go through a private temporary
    file: the ssl module loads a key pair only from files)."""
    if not credentials.server.startswith("https"):
        return False
    context = ssl.create_default_context(
        cafile=str(credentials.ca_file) if credentials.ca_file else None,
        cadata=credentials.ca_data.decode() if credentials.ca_data else None,
    )
    if credentials.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if credentials.certificate and credentials.key:
        with tempfile.TemporaryDirectory(prefix="kaiwo-tls-") as scratch:
            pair = Path(scratch) / "client.pem"
            descriptor = os.open(pair, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "wb") as output:
                output.write(credentials.certificate.rstrip(b"\n") + b"\n" + credentials.key)
            context.load_cert_chain(str(pair))
    return context


def environment_proxy(server: str) -> str | None:
    """The proxy ``HTTPS_PROXY``/``NO_PROXY`` name for the server, read once (see the
    transport's ``_resolve_environment_proxy_once``)."""
    address = urllib.parse.urlsplit(server)
    if urllib.request.proxy_bypass(address.hostname or ""):
        return None
    proxies = urllib.request.getproxies_environment()
    return proxies.get(address.scheme or "https") or proxies.get("all") or None


class PlainApiClient:
    """``call_api`` as :class:`KubernetesAsyncioAdapter` calls it, over one aiohttp session."""

    def __init__(self, credentials: PlainCredentials) -> None:
        self.credentials = credentials
        self.user_agent = "kaiwo"
        self._ssl = ssl_context(credentials)
        self._proxy = environment_proxy(credentials.server)
        self._session: aiohttp.ClientSession | None = None

    async def call_api(
        self,
        path: str,
        method: str,
        *,
        query_params: list[tuple[str, str]],
        header_params: Mapping[str, str],
        body: Any,
        auth_settings: list[str],  # noqa: ARG002 (the ApiClient's signature; a token is sent)
        _preload_content: bool,
        _request_timeout: float | aiohttp.ClientTimeout,
    ) -> aiohttp.ClientResponse:
        if self._session is None:
            self._session = aiohttp.ClientSession(trust_env=False)
        headers = {**header_params, "User-Agent": self.user_agent}
        if self.credentials.token:
            headers["Authorization"] = f"Bearer {self.credentials.token}"
        data = None if body is None else body if isinstance(body, str | bytes) else json.dumps(body)
        timeout = (
            _request_timeout
            if isinstance(_request_timeout, aiohttp.ClientTimeout)
            else aiohttp.ClientTimeout(total=_request_timeout)
        )
        return await self._session.request(
            method,
            f"{self.credentials.server}{path}",
            params=query_params,
            headers=headers,
            data=data,
            ssl=self._ssl,
            proxy=self._proxy,
            timeout=timeout,
        )

    async def close(self) -> None:
        if self._session is not None:
            with contextlib.suppress(aiohttp.ClientError):
                await self._session.close()
            self._session = None
