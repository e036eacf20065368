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
import math
import os
import ssl
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
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
    token_file: Path | None = None
    """Read again while the client runs: a service account's projected token is rotated in
    place by the kubelet (hourly), and a token read once would expire."""


SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
TOKEN_REREAD_SECONDS = 60.0
"""As client-go does for a token file: rotation is hours apart, a minute is quick enough."""


def in_cluster_credentials(
    environ: Mapping[str, str], *, account: Path = SERVICE_ACCOUNT
) -> PlainCredentials | None:
    """The pod's own service account, as the kubelet mounts it, or None outside a pod."""
    host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get("KUBERNETES_SERVICE_PORT")
    if not host or not port or not (account / "token").is_file():
        return None
    address = f"[{host}]" if ":" in host else host  # an IPv6 service address
    return PlainCredentials(
        server=f"https://{address}:{port}",
        ca_file=account / "ca.crt",
        token_file=account / "token",
    )


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
        token_file = _file(base, user["tokenFile"]) if user.get("tokenFile") else None
        if token_file is not None and not token_file.is_file():
            return None
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
            token=user.get("token") or None,
            token_file=None if user.get("token") else token_file,
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

    def __init__(
        self, credentials: PlainCredentials, *, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self.credentials = credentials
        self.user_agent = "kaiwo"
        self._ssl = ssl_context(credentials)
        self._proxy = environment_proxy(credentials.server)
        self._session: aiohttp.ClientSession | None = None
        self._monotonic = monotonic
        self._token, self._token_read_at = credentials.token, -math.inf

    def _bearer_token(self) -> str | None:
        source = self.credentials.token_file
        if source is not None and self._monotonic() - self._token_read_at >= TOKEN_REREAD_SECONDS:
            with contextlib.suppress(OSError):  # mid-rotation: the last token serves a while
                self._token = source.read_text().strip() or self._token
            self._token_read_at = self._monotonic()
        return self._token

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
        token = self._bearer_token()
        if token:
            headers["Authorization"] = f"Bearer {token}"
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
