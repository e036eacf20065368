"""Requests to the API server over a kubernetes_asyncio ApiClient (or the
:class:`~kaiwo_kube.plain_client.PlainApiClient`), with raw paths and JSON bodies, answers
decoded and non-2xx answers raised as the typed errors of :mod:`kaiwo_kube.errors`; and the
resource type of an apiVersion/kind, from the catalogue or the server's discovery."""

from __future__ import annotations

import urllib.parse
import urllib.request
from typing import TYPE_CHECKING, Any

import aiohttp

from kaiwo_kube.errors import NotFound, Retryable, error_from_status
from kaiwo_kube.plain_client import PlainApiClient
from kaiwo_kube.resources import ResourceType, known_type
from kaiwo_kube.responses import decode_body

if TYPE_CHECKING:
    from kubernetes_asyncio import client as k8s_client

JSON = "application/json"
Query = list[tuple[str, str]]


def _resolve_environment_proxy_once(api_client: k8s_client.ApiClient) -> None:
    """Read ``HTTPS_PROXY``/``NO_PROXY`` once, not on every request.

    kubernetes_asyncio opens its aiohttp session with ``trust_env=True``, which makes every
    request look up the proxy variables and parse ``~/.netrc`` in a worker thread: half of
    the executor's CPU under load. The API server's address does not change, so the proxy
    from the environment (if any, and unless the kubeconfig names one) is fixed here and the
    per-request lookup turned off. ``.netrc`` never held Kubernetes credentials.
    """
    rest = api_client.rest_client
    address = urllib.parse.urlsplit(str(api_client.configuration.host))
    if not rest.proxy and not urllib.request.proxy_bypass(address.hostname or ""):
        proxies = urllib.request.getproxies_environment()
        rest.proxy = proxies.get(address.scheme or "https") or proxies.get("all") or ""
    # aiohttp has no public setter; the flag is only read per request.
    rest.pool_manager._trust_env = False


class ApiTransport:
    """One API server connection: open a request, read its JSON answer or raise its error."""

    def __init__(
        self, api_client: k8s_client.ApiClient | PlainApiClient, *, request_timeout: float
    ) -> None:
        self.api_client = api_client
        self.request_timeout = request_timeout
        if not isinstance(api_client, PlainApiClient):  # which reads the environment itself
            _resolve_environment_proxy_once(api_client)

    async def close(self) -> None:
        await self.api_client.close()

    async def open(
        self,
        method: str,
        path: str,
        *,
        query: Query | None = None,
        body: Any = None,
        content_type: str = JSON,
        request_timeout: float | aiohttp.ClientTimeout | None = None,
        accept: str = JSON,
    ) -> aiohttp.ClientResponse:
        try:
            response: aiohttp.ClientResponse = await self.api_client.call_api(
                path,
                method,
                query_params=query or [],
                header_params={"Content-Type": content_type, "Accept": accept},
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=request_timeout or self.request_timeout,
            )
        except (aiohttp.ClientError, TimeoutError, OSError) as error:
            raise Retryable(f"{method} {path}: {error}", code=0) from error
        return response

    async def fail(self, response: aiohttp.ClientResponse) -> None:
        """Raise the typed error for a non-2xx answer (and release the response)."""
        try:
            data = await response.read()
        finally:
            response.release()
        raise error_from_status(
            code=response.status,
            status=decode_body(data),
            retry_after_header=response.headers.get("Retry-After"),
        )

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Query | None = None,
        body: Any = None,
        content_type: str = JSON,
    ) -> dict[str, Any]:
        response = await self.open(method, path, query=query, body=body, content_type=content_type)
        if not 200 <= response.status < 300:
            await self.fail(response)
        try:
            data = await response.read()
        except (aiohttp.ClientError, TimeoutError) as error:
            raise Retryable(f"{method} {path}: {error}", code=0) from error
        finally:
            response.release()
        decoded = decode_body(data)
        return decoded if isinstance(decoded, dict) else {}


class KindDiscovery:
    """Resource types by apiVersion/kind: the catalogue first, then the server's discovery
    (remembered until :meth:`forget`, e.g. after a CRD changed)."""

    def __init__(self, transport: ApiTransport) -> None:
        self._transport = transport
        self._found: dict[tuple[str, str], ResourceType] = {}

    def forget(self) -> None:
        self._found.clear()

    async def resolve(self, api_version: str, kind: str) -> ResourceType:
        """The resource type of an apiVersion/kind: the catalogue first, then discovery."""
        known = known_type(api_version, kind) or self._found.get((api_version, kind))
        if known is not None:
            return known
        group, _, version = api_version.rpartition("/")
        for entry in await self.listed(group, version):
            if entry.get("kind") == kind and "/" not in entry.get("name", ""):
                found = ResourceType(
                    group=group,
                    version=version,
                    plural=entry["name"],
                    kind=kind,
                    namespaced=bool(entry.get("namespaced")),
                )
                self._found[(api_version, kind)] = found
                return found
        raise NotFound(f"the server does not serve {kind} in {api_version}", code=404)

    async def listed(self, group: str, version: str) -> list[dict[str, Any]]:
        """What discovery lists now for a group/version (nothing when it serves none)."""
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        try:
            listing = await self._transport.request("GET", path)
        except NotFound:
            return []
        return list(listing.get("resources") or [])

    async def type_of(self, obj: dict[str, Any], resource: ResourceType | None) -> ResourceType:
        if resource is not None:
            return resource
        return await self.resolve(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
