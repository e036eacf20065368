"""The OpenAI-compatible HTTP API (aiohttp): ``/openai/v1/models`` and the proxied routes.

Every request first names its caller (decision 0040): a bearer token the API server
authenticates (TokenReview; 401 without one), or, only where anonymous access is switched
on, any request from a loopback address (the anonymous caller, for every namespace). A
caller may use the Models of the namespaces where a SubjectAccessReview allows it ``get`` on
``models.kubeai.org``: ``/models`` lists only those, and a request for any other Model is
answered as for one that does not exist (404), before it is counted, so it never scales a
Model. Each caller has at most ``limits.requests`` requests in flight holding at most
``limits.body_bytes`` of bodies (429 past either).

A proxied request's body is read up to its route's limit (413 past it; larger for audio),
checked for depth and size before it is parsed (400), kept whole (a retry needs it again),
routed by its ``model`` (``<model>`` or ``<model>_<adapter>``, narrowed by
``X-Label-Selector`` headers), given an endpoint by the Model's strategy, and forwarded to
``/v1/<route>`` of that endpoint. The response is copied chunk by chunk as it arrives
(server-sent events are not buffered), its bytes untouched (no decompression). Credentials,
hop-by-hop and forwarding headers stay behind, ``Set-Cookie`` does not come back
(:mod:`kaiwo_gateway.domain.headers`); W3C ``traceparent``/``tracestate`` reach the backend.

When a connection to an endpoint fails before a byte was sent, the request goes to another
endpoint (up to ``attempts`` in all); any later failure is the client's to see. Without a ready
endpoint the request waits up to ``endpoint_wait_seconds`` for one, then gets a 503. A request
is counted per Model while it is routed and answered (:class:`RequestCounts`, what the load
reports say); the first one to wait for an endpoint of a Model makes the replica report at
once, so a Model at zero replicas is scaled up without waiting for the next report (scale from
zero). A Model at zero replicas with ``autoscalingDisabled`` is never scaled by a request: 503
at once, saying so.

Errors are OpenAI's JSON, ``{"error": {"message", "type", "param", "code"}}``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import aiohttp
import structlog
from aiohttp import web
from kaiwo_contracts.access import is_loopback_address
from kaiwo_contracts.plans import ObjectRef
from multidict import CIMultiDict, CIMultiDictProxy

from kaiwo_gateway.access import Access, AccessBusyError, AccessUnavailableError
from kaiwo_gateway.domain.access import Caller, CallerLimits, Limits
from kaiwo_gateway.domain.autoscaling import ScalingSpec, replicas_for_a_request
from kaiwo_gateway.domain.balancing import Balancer, Choice
from kaiwo_gateway.domain.bodies import (
    BodyLimits,
)
from kaiwo_gateway.domain.catalog import Catalog, Endpoint, ServedModel
from kaiwo_gateway.domain.headers import request_headers_for_backend, response_headers_for_caller
from kaiwo_gateway.domain.load import RequestCounts, model_ref
from kaiwo_gateway.domain.routing import (
    Ambiguous,
    Route,
    Unknown,
    candidate_namespaces,
    find_route,
    prompt_prefix,
)
from kaiwo_gateway.domain.selectors import LabelSelector, SelectorError, parse_selectors
from kaiwo_gateway.metrics import GatewayMetrics
from kaiwo_gateway.openai_errors import OpenAIError, RefusedError, bad_request, unauthenticated
from kaiwo_gateway.request_bodies import (
    Slot,
    multipart_without_model,
    parsed_json,
    read_body,
    refuse_declared_size,
)

log = structlog.get_logger("kaiwo.gateway")

API_PREFIX = "/openai"
PROXIED_ROUTES = ("chat/completions", "completions", "embeddings", "audio/transcriptions")
LABEL_SELECTOR_HEADER = "X-Label-Selector"
DEFAULT_FEATURE = "TextGeneration"
AnonymousAccess = Literal["off", "loopback"]


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


@dataclass
class _Wait:
    """A request waiting for a ready endpoint of its Model."""

    model: ObjectRef
    started: float
    from_zero: bool
    outcome: str = "timeout"


@dataclass
class LoadTracking:
    """This replica's requests per Model, and what to do when one first waits."""

    counts: RequestCounts = field(default_factory=RequestCounts)
    on_first_wait: Callable[[], None] = lambda: None


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
        self._changed = asyncio.Event()
        self._session: aiohttp.ClientSession | None = None

    # ------------------------------------------------------------------ lifecycle

    def catalog_changed(self) -> None:
        """Wake every request waiting for an endpoint (the catalog has news)."""
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()
        for model in self.catalog.models():
            self.metrics.endpoints.labels(namespace=model.namespace, model=model.name).set(
                len(self.catalog.endpoints(model))
            )

    def application(self) -> web.Application:
        bodies = self.policy.bodies
        # Bodies are read by read_body, chunk by chunk; this bounds what aiohttp itself reads.
        app = web.Application(client_max_size=max(bodies.json_bytes, bodies.audio_bytes))
        app.router.add_get(f"{API_PREFIX}/v1/models", self.list_models)
        for route in PROXIED_ROUTES:
            app.router.add_post(f"{API_PREFIX}/v1/{route}", self.proxy)
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
        except AccessUnavailableError as error:
            raise RefusedError(
                503, str(error), reason="unavailable", code="access_check_unavailable"
            ) from None
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
        except AccessUnavailableError as error:
            raise RefusedError(
                503, str(error), reason="unavailable", code="access_check_unavailable"
            ) from None
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
            body = json.dumps({**document, "model": found.backend_model}).encode()
        settings = found.model.prefix_hash
        prefix = (
            prompt_prefix(f"/v1/{route_name}", document, settings.prefix_char_length)
            if found.model.strategy == "PrefixHash"
            else ""
        )
        return _Parsed(route=found, body=body, content_type=content_type, prefix=prefix)

    async def _forward(
        self, request: web.Request, parsed: _Parsed, *, path: str
    ) -> web.StreamResponse:
        assert self._session is not None
        model = parsed.route.model
        headers = _forwarded_headers(request.headers, parsed.content_type)
        tried: set[str] = set()
        for _attempt in range(self.settings.attempts):
            choice = await self._endpoint(parsed, exclude=tried)
            endpoint = choice.endpoint
            try:
                upstream = await self._session.post(
                    f"http://{endpoint.address}{path}", data=parsed.body, headers=headers
                )
            except aiohttp.ClientConnectorError as error:
                self.balancer.release(group=model.uid, endpoint=endpoint.key)
                tried.add(endpoint.key)
                self.metrics.retries.labels(namespace=model.namespace, model=model.name).inc()
                log.info("endpoint refused the connection", endpoint=endpoint.key, error=str(error))
                continue
            except aiohttp.ClientError as error:
                # Bytes may have reached the server (work done): not sent again.
                self.balancer.release(group=model.uid, endpoint=endpoint.key)
                raise OpenAIError(
                    502, f"Bad Gateway: the model server failed: {error}", kind="server_error"
                ) from error
            try:
                return await _relay(request, upstream)
            finally:
                upstream.release()
                self.balancer.release(group=model.uid, endpoint=endpoint.key)
        raise OpenAIError(
            502,
            f"Bad Gateway: no endpoint of model {model.name!r} accepted a connection "
            f"({len(tried)} tried)",
            kind="server_error",
        )

    async def _endpoint(self, parsed: _Parsed, *, exclude: set[str]) -> Choice:
        return await self.endpoint_for(
            parsed.route,
            prefix=parsed.prefix,
            exclude=exclude,
            wait_seconds=self.settings.endpoint_wait_seconds,
        )

    async def endpoint_for(
        self, route: Route, *, prefix: str, exclude: set[str], wait_seconds: float
    ) -> Choice:
        """The endpoint for this attempt, waiting up to ``wait_seconds`` for one while the
        Model has none ready (the wait is counted, so it scales the Model from zero); the
        messenger's requests come here too. The caller releases the choice
        (``balancer.release``)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_seconds
        wait: _Wait | None = None
        try:
            while True:
                changed = self._changed
                endpoints = self.catalog.endpoints(route.model)
                choice = self._choose(route, endpoints, prefix, exclude)
                if choice is not None:
                    if wait is not None:
                        wait.outcome = "ready"
                    return choice
                if exclude and any(e.key in exclude for e in endpoints):
                    raise OpenAIError(
                        502,
                        f"Bad Gateway: no endpoint of model {route.model.name!r} accepted a "
                        f"connection ({len(exclude)} tried)",
                        kind="server_error",
                    )
                current = self.catalog.model(route.model.uid) or route.model
                if wait is None:
                    wait = self._start_waiting(current, at=loop.time())
                remaining = deadline - loop.time()
                if remaining <= 0:
                    raise _no_endpoint(route, current, wait_seconds, wait)
                try:
                    await asyncio.wait_for(changed.wait(), remaining)
                except TimeoutError:
                    continue
        finally:
            if wait is not None:
                self._stop_waiting(wait, at=loop.time())

    def _start_waiting(self, model: ServedModel, *, at: float) -> _Wait:
        """Count the request as waiting (the first one reports at once); a Model at zero
        replicas whose autoscaling is disabled is refused instead: no request scales it."""
        key = model_ref(uid=model.uid, namespace=model.namespace, name=model.name)
        if _never_scaled_by_requests(model.scaling):
            self.metrics.endpoint_waits.labels(
                namespace=model.namespace,
                model=model.name,
                outcome="not_scalable",
                from_zero="true",
            ).inc()
            raise OpenAIError(
                503,
                f"model {model.name!r} has 0 replicas and autoscalingDisabled is set, so no "
                "request scales it up: scale it (kubectl scale model/"
                f"{model.name} -n {model.namespace} --replicas=1) or enable autoscaling",
                kind="server_error",
                code="model_scaled_to_zero",
            )
        from_zero = replicas_for_a_request(model.scaling) is not None
        if self.load.counts.wait_started(key):
            self.load.on_first_wait()
        return _Wait(model=key, started=at, from_zero=from_zero)

    def _stop_waiting(self, wait: _Wait, *, at: float) -> None:
        self.load.counts.wait_ended(wait.model)
        labels = {"namespace": wait.model.namespace, "model": wait.model.name}
        from_zero = "true" if wait.from_zero else "false"
        self.metrics.endpoint_waits.labels(
            **labels, outcome=wait.outcome, from_zero=from_zero
        ).inc()
        self.metrics.endpoint_wait.labels(**labels, from_zero=from_zero).observe(at - wait.started)

    def _choose(
        self, route: Route, endpoints: tuple[Endpoint, ...], prefix: str, exclude: set[str]
    ) -> Choice | None:
        model = route.model
        choice = self.balancer.choose(
            group=model.uid,
            endpoints=endpoints,
            strategy=model.strategy,
            adapter=route.adapter,
            prefix=prefix,
            replication=model.prefix_hash.replication,
            mean_load_factor=model.prefix_hash.mean_load_factor,
            exclude=exclude,
        )
        if choice is not None:
            self.metrics.endpoint_choices.labels(
                namespace=model.namespace,
                model=model.name,
                endpoint=choice.endpoint.key,
                strategy=model.strategy,
                fallback="true" if choice.fallback else "false",
            ).inc()
        return choice


def _never_scaled_by_requests(scaling: ScalingSpec) -> bool:
    return scaling.autoscaling_disabled and (scaling.replicas or 0) == 0


def _no_endpoint(route: Route, model: ServedModel, waited: float, wait: _Wait) -> OpenAIError:
    adapter = f" with adapter {route.adapter!r}" if route.adapter else ""
    why = (
        " (the model was at 0 replicas: one was asked for and is not ready yet; "
        "model servers may take minutes to start, try again)"
        if wait.from_zero
        else ""
    )
    return OpenAIError(
        503,
        f"no ready endpoint of model {model.name!r}{adapter} within {waited:g}s{why}",
        kind="server_error",
        code="no_ready_endpoint",
    )


def _selector(headers: CIMultiDictProxy[str]) -> LabelSelector:
    try:
        return parse_selectors(headers.getall(LABEL_SELECTOR_HEADER, []))
    except SelectorError as error:
        raise bad_request(str(error)) from error


def _forwarded_headers(
    headers: CIMultiDictProxy[str], content_type: str | None
) -> CIMultiDict[str]:
    forwarded = CIMultiDict(request_headers_for_backend(headers.items()))
    forwarded.popall("Content-Type", None)
    forwarded["Content-Type"] = content_type or "application/json"
    return forwarded


async def _relay(request: web.Request, upstream: aiohttp.ClientResponse) -> web.StreamResponse:
    response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
    for key, value in response_headers_for_caller(upstream.headers.items()):
        response.headers.add(key, value)
    await response.prepare(request)
    async for chunk in upstream.content.iter_any():
        await response.write(chunk)
    await response.write_eof()
    return response
