"""``GET /api/v1/namespaces/NS/pods/NAME/log``, answered as a real API server answers it.

The API server keeps no logs: it checks the request against the pod (which container; a pod
not on a node yet has an empty log), finds the kubelet of the pod's node from the Node's
``status.addresses`` (preferring Hostname, InternalDNS, InternalIP, ExternalDNS, ExternalIP, the
kube-apiserver default) and ``status.daemonEndpoints.kubeletEndpoint.Port`` (10250 when unset),
and streams what the kubelet answers at ``https://ADDRESS:PORT/containerLogs/NS/NAME/CONTAINER``.
Without a kubelet CA configured it does not verify the kubelet's certificate; neither does the
fake. Whatever plays the kubelet (the sandbox) serves that path; the fake imports nothing of it.

Errors have the real server's codes and words (checked against kube-apiserver 1.36): a kubelet's
400 keeps its text, its 404 becomes "the server could not find the requested resource", any
other failure is a 500.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import quote

import aiohttp
from aiohttp import web

from kaiwo_kubefake.errors import ApiError, bad_request

PREFERRED_ADDRESS_TYPES: Final = (
    "Hostname",
    "InternalDNS",
    "InternalIP",
    "ExternalDNS",
    "ExternalIP",
)
DEFAULT_KUBELET_PORT: Final = 10250
PASSED_ON: Final = (
    "follow",
    "limitBytes",
    "previous",
    "sinceSeconds",
    "sinceTime",
    "tailLines",
    "timestamps",
)
NUMBERS: Final = ("limitBytes", "sinceSeconds", "tailLines")
CHUNK: Final = 16 * 1024


def chosen_container(pod: Mapping[str, Any], requested: str | None) -> str:
    """The container the request means, or a 400 in the API server's words."""
    spec = pod.get("spec") or {}
    name = (pod.get("metadata") or {}).get("name", "")
    containers = [str(c.get("name")) for c in spec.get("containers") or ()]
    init_containers = [str(c.get("name")) for c in spec.get("initContainers") or ()]
    if requested:
        if requested not in containers + init_containers:
            raise bad_request(f"container {requested} is not valid for pod {name}")
        return requested
    if len(containers) == 1:
        return containers[0]
    choices = " ".join(containers)
    message = f"a container name must be specified for pod {name}, choose one of: [{choices}]"
    if init_containers:
        message += f" or one of the init containers: [{' '.join(init_containers)}]"
    raise bad_request(message)


def check_numbers(query: Mapping[str, str]) -> None:
    """``tailLines``, ``sinceSeconds`` and ``limitBytes`` are whole numbers (Go's words)."""
    for name in NUMBERS:
        text = query.get(name)
        if text is None:
            continue
        try:
            int(text)
        except ValueError:
            raise bad_request(f'strconv.ParseInt: parsing "{text}": invalid syntax') from None


def kubelet_location(node: Mapping[str, Any]) -> tuple[str, int]:
    """The kubelet's address and port from a Node's status, or the API server's 500."""
    status = node.get("status") or {}
    addresses = [a for a in status.get("addresses") or () if isinstance(a, Mapping)]
    for kind in PREFERRED_ADDRESS_TYPES:
        for address in addresses:
            if address.get("type") == kind and address.get("address"):
                endpoint = (status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}
                port = int(endpoint.get("Port") or 0)
                return str(address["address"]), port if port > 0 else DEFAULT_KUBELET_PORT
    known = " ".join(f"{{{a.get('type')} {a.get('address')}}}" for a in addresses)
    raise ApiError(
        code=500, reason="", message=f"no preferred addresses found; known addresses: [{known}]"
    )


def kubelet_url(
    address: str, port: int, *, namespace: str, pod: str, container: str, query: Mapping[str, str]
) -> str:
    host = f"[{address}]" if ":" in address else address
    path = "/".join(quote(part, safe="") for part in ("containerLogs", namespace, pod, container))
    passed = "&".join(
        f"{name}={quote(query[name], safe='')}" for name in PASSED_ON if name in query
    )
    return f"https://{host}:{port}/{path}" + (f"?{passed}" if passed else "")


def kubelet_refusal(code: int, text: str, *, pod: str) -> ApiError:
    """What the API server makes of a kubelet's non-2xx answer."""
    if code == 400:
        return bad_request(text)
    if code == 404:
        return ApiError(
            code=404,
            reason="NotFound",
            message=f"the server could not find the requested resource ( pods/log {pod})",
            details={"name": pod, "kind": "pods/log"},
        )
    return ApiError(
        code=500,
        reason="InternalError",
        message=f"Internal error occurred: {text}",
        details={"causes": [{"message": text}]},
    )


async def stream_from_kubelet(request: web.Request, url: str, *, pod: str) -> web.StreamResponse:
    """Pass the kubelet's answer on as it comes (``follow`` streams until the kubelet ends)."""
    timeout = aiohttp.ClientTimeout(total=None, connect=10, sock_connect=10)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        try:
            upstream = await session.get(url, ssl=False)
        except (aiohttp.ClientError, OSError) as error:
            raise ApiError(code=500, reason="", message=f'Get "{url}": {error}') from None
        async with upstream:
            if not 200 <= upstream.status < 300:
                text = (await upstream.read())[:CHUNK].decode("utf-8", errors="replace")
                raise kubelet_refusal(upstream.status, text, pod=pod)
            response = web.StreamResponse(headers={"Content-Type": "text/plain"})
            response.enable_chunked_encoding()
            await response.prepare(request)
            try:
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
                await response.write_eof()
            except (ConnectionResetError, aiohttp.ClientError):
                pass  # the client or the kubelet went away: the log ends there
            return response
