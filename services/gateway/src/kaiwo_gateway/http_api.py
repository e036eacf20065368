"""The OpenAI-compatible HTTP API (aiohttp): ``/openai/v1/models`` and the proxied routes.

Every request first names its caller (decision 0040): a bearer token the API server
authenticates (TokenReview; 401 without one), or, only where anonymous access is switched
on, any request from a loopback address (the anonymous caller, for every namespace). A
caller may use the Models of the namespaces where a SubjectAccessReview allows it ``get`` on
``models.kubeai.org``: ``/models`` lists only those, and a request for any other Model is
answered as for one that does not exist (404), before it is counted, so it never scales a
Model. Each caller has at most ``limits.requests`` requests in flight holding at most
``limits.body_bytes`` of bodies (429 past either).

A proxied request's body is read decoded (aiohttp's server undoes a ``gzip`` or ``deflate``
``Content-Encoding``, which is not forwarded; 400 when it does not decode, 415 for a coding
it does not decode) up to its route's limit (413 past it; larger for audio), checked for
depth and size before it is parsed (400), kept whole (a retry needs it again), routed by its
``model`` (``<model>`` or ``<model>_<adapter>``, narrowed by ``X-Label-Selector`` headers),
given an endpoint by the Model's strategy, and forwarded to ``/v1/<route>`` of that endpoint.
The response is copied chunk by chunk as it arrives (server-sent events are not buffered), its
bytes untouched (no decompression). Credentials, hop-by-hop and forwarding headers stay
behind, ``Set-Cookie`` does not come back (:mod:`kaiwo_gateway.domain.headers`); W3C
``traceparent``/``tracestate`` reach the backend.

When a connection to an endpoint fails before a byte was sent (refused, or not accepted
within ``connect_timeout_seconds``), the request goes to another endpoint (up to ``attempts``
in all); any later failure is the client's to see. Without a ready endpoint the request waits
up to ``endpoint_wait_seconds`` for one, then gets a 503; one whose client hangs up meanwhile
stops waiting (and counting) within half a second. So does one whose client hangs up while a
model server answers it: its connection to the server is closed, as upstream's reverse proxy
cancels it, and the server stops generating for nobody (decision 0238). A request is counted
per Model while it is routed and answered (:class:`RequestCounts`, what the load reports
say); the first one to wait for an endpoint of a Model makes the replica report at once, so a
Model at zero replicas is scaled up without waiting for the next report (scale from zero). A
Model at zero replicas with ``autoscalingDisabled`` is never scaled by a request: 503 at
once, saying so.

Errors are OpenAI's JSON, ``{"error": {"message", "type", "param", "code"}}``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import aiohttp
import structlog
from aiohttp import web
from kaiwo_contracts.access import is_loopback_address
from multidict import CIMultiDictProxy

from kaiwo_gateway.access import Access, AccessBusyError, AccessUnavailableError
from kaiwo_gateway.domain.access import Caller, CallerLimits, Limits
from kaiwo_gateway.domain.balancing import Balancer, Choice
from kaiwo_gateway.domain.bodies import (
    BodyLimits,
)
from kaiwo_gateway.domain.catalog import Catalog
from kaiwo_gateway.domain.load import model_ref
from kaiwo_gateway.domain.routing import (
    Ambiguous,
    Route,
    Unknown,
    balancing_prefix,
    candidate_namespaces,
    find_route,
)
from kaiwo_gateway.domain.selectors import LabelSelector, SelectorError, parse_selectors
from kaiwo_gateway.domain.sent_json import with_member
from kaiwo_gateway.endpoint_wait import (
    CLIENT_CHECK_SECONDS,
    ClientGoneError,
    EndpointWaiter,
    LoadTracking,
)
from kaiwo_gateway.metrics import GatewayMetrics
from kaiwo_gateway.openai_errors import (
    OpenAIError,
    RefusedError,
    access_unavailable,
    bad_request,
    model_server_failed,
    unauthenticated,
)
from kaiwo_gateway.relay import NOT_CONNECTED, forwarded_headers, relay
from kaiwo_gateway.request_bodies import (
    Slot,
    multipart_without_model,
    parsed_json,
    read_body,
    refuse_declared_size,
    refuse_undecoded_coding,
)

log = structlog.get_logger("kaiwo.gateway")

API_PREFIX = "/openai"
PROXIED_ROUTES = (
    "chat/completions",
    "completions",
    "embeddings",
    "rerank",
    "audio/transcriptions",
)
"""What is proxied to a model server, as upstream's (``rerank`` since KubeAI's PR 609); nothing
else (an engine's ``/v1/load_lora_adapter`` must not be reachable)."""
PROXY_HEADER = ("X-Proxy", "lingo")
"""On every answer of a proxied route, as upstream sets it (its historical name)."""
LABEL_SELECTOR_HEADER = "X-Label-Selector"
DEFAULT_FEATURE = "TextGeneration"
AnonymousAccess = Literal["off", "loopback"]
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ProxySettings:
    endpoint_wait_seconds: float = 60.0
    connect_timeout_seconds: float = 5.0
    attempts: int = 4


@dataclass(frozen=True, slots=True)
class CallerPolicy:
    """Who may call without a token, and what each caller may hold (decision 0040)."""

    anonymous: AnonymousAccess = "off"
    """``loopback``: every request from a loopback address is served as the anonymous
    caller, for every namespace the gateway serves (``kaiwo up`` on a laptop)."""
    limits: Limits = field(default_factory=Limits)
    bodies: BodyLimits = field(default_factory=BodyLimits)


@dataclass(frozen=True, slots=True)
class _Parsed:
    route: Route
    body: bytes
    content_type: str | None
    prefix: str


class Gateway:
    """The request path: lookup, balancing, forwarding; and the waiters for endpoints."""

    def __init__(
        self,
        *,
        catalog: Catalog,
        balancer: Balancer,
        metrics: GatewayMetrics,
        settings: ProxySettings,
        access: Access,
        policy: CallerPolicy | None = None,
        load: LoadTracking | None = None,
    ) -> None:
        self.catalog = catalog
        self.balancer = balancer
        self.metrics = metrics
        self.settings = settings
        self.access = access
        self.policy = policy or CallerPolicy()
        self.limits = CallerLimits(limits=self.policy.limits)
        self.load = load or LoadTracking()
        self.waiter = EndpointWaiter(
            catalog=catalog, balancer=balancer, metrics=metrics, load=self.load
        )
        self._session: aiohttp.ClientSession | None = None
        self._counted_endpoints: set[tuple[str, str]] = set()

    # ------------------------------------------------------------------ lifecycle

    def catalog_changed(self) -> None:
        """Wake every request waiting for an endpoint (the catalog has news), and count each
        served Model's endpoints; a Model no longer served (deleted, its spec invalid) loses
        its series rather than keep its last count (its Pods go after it)."""
        self.waiter.wake()
        counted: set[tuple[str, str]] = set()
        for model in self.catalog.models():
            self.metrics.endpoints.labels(namespace=model.namespace, model=model.name).set(
                len(self.catalog.endpoints(model))
            )
            counted.add((model.namespace, model.name))
        for namespace, name in self._counted_endpoints - counted:
            self.metrics.endpoints.remove(namespace, name)
        self._counted_endpoints = counted

    def application(self) -> web.Application:
        bodies = self.policy.bodies
        # Bodies are read by read_body, chunk by chunk; this bounds what aiohttp itself reads.
        app = web.Application(client_max_size=max(bodies.json_bytes, bodies.audio_bytes))
        app.router.add_get(f"{API_PREFIX}/v1/models", self.list_models)
        for route in PROXIED_ROUTES:
            app.router.add_post(f"{API_PREFIX}/v1/{route}", self.proxy)
        app.on_response_prepare.append(_mark_proxied)
        app.on_startup.append(self._open)
        app.on_cleanup.append(self._close)
        return app

    async def _open(self, _app: web.Application) -> None:
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=None),
            timeout=aiohttp.ClientTimeout(
                total=None, sock_connect=self.settings.connect_timeout_seconds
            ),
            auto_decompress=False,
            skip_auto_headers=("User-Agent", "Accept-Encoding", "Content-Type"),
        )

    async def _close(self, _app: web.Application) -> None:
        if self._session is not None:
            await self._session.close()

    # ------------------------------------------------------------------ /v1/models

    async def list_models(self, request: web.Request) -> web.Response:
        try:
            caller = await self._caller(request)
            selector = _selector(request.headers)
            wanted = set(request.query.getall("feature", [DEFAULT_FEATURE]))
            models = [
                model
                for model in self.catalog.models()
                if selector.matches(model.labels) and wanted.intersection(model.features)
            ]
            usable = await self._usable(caller, {model.namespace for model in models})
        except OpenAIError as error:
            return self._refused(error)
        data: list[dict[str, Any]] = [
            {
                "id": f"{model.name}{suffix}",
                "created": model.created,
                "object": "model",
                "owned_by": model.owner,
                "features": list(model.features),
            }
            for model in models
            if model.namespace in usable
            for suffix in ("", *(f"_{adapter}" for adapter in model.adapters))
        ]
        return web.json_response({"object": "list", "data": data})

    # ------------------------------------------------------------------ callers

    async def _caller(self, request: web.Request) -> Caller:
        """Who sends ``request``: where anonymous access is on, every caller from a
        loopback address, as the anonymous caller (whatever ``Authorization`` it sends: the
        OpenAI client always sends its ``api_key``); else the owner of its bearer token;
        401 otherwise."""
        if self.policy.anonymous == "loopback" and is_loopback_address(request.remote):
            return Caller.anonymous_on_loopback(str(request.remote))
        authorization = request.headers.get("Authorization")
        if authorization is None:
            raise unauthenticated("no bearer token: send Authorization: Bearer <token>")
        scheme, _, token = authorization.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise unauthenticated("the Authorization header must be: Bearer <token>")
        try:
            caller = await self.access.authenticate(token)
        except AccessBusyError as error:
            raise RefusedError(
                429, str(error), reason="busy", code="too_many_token_checks"
            ) from None
        except AccessUnavailableError:
            raise access_unavailable() from None
        if caller is None:
            raise unauthenticated("the bearer token is not valid (expired, revoked or unknown)")
        return caller

    async def _usable(self, caller: Caller, namespaces: Collection[str]) -> set[str]:
        """The namespaces among ``namespaces`` whose Models ``caller`` may use."""
        if caller.anonymous:
            return set(namespaces)
        ordered = sorted(namespaces)
        try:
            answers = await asyncio.gather(
                *(self.access.may_use(caller, namespace) for namespace in ordered)
            )
        except AccessUnavailableError:
            raise access_unavailable() from None
        return {namespace for namespace, allowed in zip(ordered, answers, strict=True) if allowed}

    def _enter(self, caller: Caller) -> Slot:
        if not self.limits.enter(caller.limit_key):
            raise RefusedError(
                429,
                f"too many requests in flight: at most {self.policy.limits.requests} per "
                "caller; try again when some finish",
                reason="too_many_requests",
                code="too_many_requests_in_flight",
            )
        return Slot(caller=caller, limits=self.limits)

    def _refused(self, error: OpenAIError) -> web.Response:
        if isinstance(error, RefusedError):
            self.metrics.refused.labels(reason=error.reason).inc()
        return error.response()

    # ------------------------------------------------------------------ proxied routes

    async def proxy(self, request: web.Request) -> web.StreamResponse:
        started = time.perf_counter()
        route_name = request.path.removeprefix(f"{API_PREFIX}/v1/")
        namespace = model_name = ""
        status = 500
        slot: Slot | None = None
        try:
            caller = await self._caller(request)
            slot = self._enter(caller)
            parsed = await self._parse(request, route_name, slot)
            model = parsed.route.model
            namespace, model_name = model.namespace, model.name
            key = model_ref(uid=model.uid, namespace=namespace, name=model_name)
            in_flight = self.metrics.in_flight.labels(namespace=namespace, model=model_name)
            in_flight.inc()
            self.load.counts.started(key)
            try:
                response = await self._forward(request, parsed, path=f"/v1/{route_name}")
            finally:
                self.load.counts.finished(key)
                in_flight.dec()
            status = response.status
            return response
        except OpenAIError as error:
            status = error.status
            return self._refused(error)
        finally:
            if slot is not None:
                slot.release()
            labels = {"route": route_name, "namespace": namespace, "model": model_name}
            self.metrics.requests.labels(**labels, code=str(status)).inc()
            self.metrics.latency.labels(**labels).observe(time.perf_counter() - started)

    async def _parse(self, request: web.Request, route_name: str, slot: Slot) -> _Parsed:
        selector = _selector(request.headers)
        content_type = request.headers.get("Content-Type")
        limit = self.policy.bodies.bytes_for(route_name)
        refuse_undecoded_coding(request)
        refuse_declared_size(request, limit)
        requested: object
        if content_type and content_type.lower().startswith("multipart/form-data"):
            fields, body, content_type = await multipart_without_model(request, slot, limit)
            requested = fields.get("model", "")
            document: Mapping[str, Any] = {}
        else:
            raw = await read_body(request, slot, limit)
            parsed = parsed_json(raw, self.policy.bodies)
            document = parsed
            requested = parsed.get("model")
            body = raw
        if not isinstance(requested, str) or not requested:
            raise bad_request(
                "bad request: reading model from body: missing 'model' field", param="model"
            )
        usable = await self._usable(
            slot.caller, candidate_namespaces(self.catalog, requested, selector)
        )
        found = find_route(self.catalog, requested, selector, namespaces=usable)
        if isinstance(found, Unknown):
            raise OpenAIError(
                404,
                found.message,
                kind="invalid_request_error",
                code="model_not_found",
                param="model",
            )
        if isinstance(found, Ambiguous):
            raise bad_request(found.message, param="model")
        if found.adapter is not None and document:
            # Only the name changes: a body encoded again is not what the client sent.
            body = with_member(body, "model", found.backend_model)
        prefix = balancing_prefix(found.model, f"/v1/{route_name}", document)
        return _Parsed(route=found, body=body, content_type=content_type, prefix=prefix)

    async def _forward(
        self, request: web.Request, parsed: _Parsed, *, path: str
    ) -> web.StreamResponse:
        assert self._session is not None
        model = parsed.route.model
        headers = forwarded_headers(request.headers, parsed.content_type)
        tried: set[str] = set()
        for _attempt in range(self.settings.attempts):
            choice = await self._endpoint(request, parsed, exclude=tried)
            endpoint = choice.endpoint
            try:
                upstream = await _while_connected(
                    request,
                    self._session.post(
                        f"http://{endpoint.address}{path}", data=parsed.body, headers=headers
                    ),
                )
            except ClientGoneError:
                self.balancer.release(group=model.uid, endpoint=endpoint.key)
                raise
            except NOT_CONNECTED as error:
                # Refused, or not accepted within the connect timeout: nothing was sent.
                self.balancer.release(group=model.uid, endpoint=endpoint.key)
                tried.add(endpoint.key)
                self.metrics.retries.labels(namespace=model.namespace, model=model.name).inc()
                log.info(
                    "endpoint did not accept the connection",
                    model_uid=model.uid,
                    endpoint=endpoint.key,
                    failure=type(error).__name__,
                    error=str(error),
                )
                continue
            except aiohttp.ClientError as error:
                # Bytes may have reached the server (work done): not sent again.
                self.balancer.release(group=model.uid, endpoint=endpoint.key)
                log.warning(
                    "the model server failed",
                    model_uid=model.uid,
                    endpoint=endpoint.key,
                    error=str(error),
                )
                raise OpenAIError(502, model_server_failed(error), kind="server_error") from error
            try:
                return await _while_connected(request, relay(request, upstream))
            except Exception:
                if _client_gone(request):  # a write to the closed connection failed first
                    raise _client_gone_error() from None
                raise
            finally:
                # Closes the connection to the server unless its answer was read to the end.
                upstream.release()
                self.balancer.release(group=model.uid, endpoint=endpoint.key)
        raise OpenAIError(
            502,
            f"Bad Gateway: no endpoint of model {model.name!r} accepted a connection "
            f"({len(tried)} tried)",
            kind="server_error",
        )

    async def _endpoint(
        self, request: web.Request, parsed: _Parsed, *, exclude: set[str]
    ) -> Choice:
        return await self.waiter.endpoint_for(
            parsed.route,
            prefix=parsed.prefix,
            exclude=exclude,
            wait_seconds=self.settings.endpoint_wait_seconds,
            client_gone=lambda: _client_gone(request),
        )


def _client_gone(request: web.Request) -> bool:
    """The client's connection is closed (aiohttp drops the transport when it is lost)."""
    transport = request.transport
    return transport is None or transport.is_closing()


def _client_gone_error() -> ClientGoneError:
    return ClientGoneError(499, "the client closed the connection", kind="client_gone")


async def _while_connected(request: web.Request, work: Awaitable[T]) -> T:
    """``work`` (a request to a model server, or the relay of its answer), cancelled once the
    client of ``request`` has hung up, looked at every :data:`CLIENT_CHECK_SECONDS`:
    :class:`ClientGoneError` then. aiohttp does not cancel the handler of a lost connection
    (decision 0174), and a cancelled request to a server closes its connection, which is how
    a model server learns to stop generating (upstream's reverse proxy cancels it so)."""
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait((task,), timeout=CLIENT_CHECK_SECONDS)
            if done:
                return task.result()
            if _client_gone(request):
                raise _client_gone_error()
    finally:
        if not task.done():
            task.cancel()
            # Abandoned: whatever it ends with (cancelled, or a failure on its way) is nobody's.
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


def _selector(headers: CIMultiDictProxy[str]) -> LabelSelector:
    try:
        return parse_selectors(headers.getall(LABEL_SELECTOR_HEADER, []))
    except SelectorError as error:
        # Named: the refusal is about a header, which no body field says.
        raise bad_request(
            f"{LABEL_SELECTOR_HEADER}: {error}", param=LABEL_SELECTOR_HEADER
        ) from error


async def _mark_proxied(request: web.Request, response: web.StreamResponse) -> None:
    """:data:`PROXY_HEADER` on the answers of the proxied routes, errors included."""
    if request.path.removeprefix(f"{API_PREFIX}/v1/") in PROXIED_ROUTES:
        response.headers[PROXY_HEADER[0]] = PROXY_HEADER[1]
