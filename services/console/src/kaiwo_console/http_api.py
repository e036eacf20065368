"""The console's HTTP side: read-only pages, their live updates, and who may see what.

Every page is a GET; nothing here writes to the cluster or the bus. A request is served
for a caller (decision 0051), exactly as the gateway decides one (decision 0040):

* where anonymous access is on (``kaiwo up``, the demo), every request from a loopback
  address is the anonymous caller, who sees every namespace;
* otherwise a bearer token (``Authorization: Bearer``, or the ``kaiwo-token`` cookie the
  sign-in form sets, HttpOnly and SameSite=Strict) is reviewed by the API server
  (TokenReview), and the caller sees the namespaces where a SubjectAccessReview lets them
  ``list`` KaiwoJobs; GPU nodes need ``list`` on nodes. No token: the sign-in page (401).

``/events`` is a server-sent event stream of the state's version; the page's script fetches
itself again (``X-Console-Fragment: 1``: only ``<main>``) when it changes.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Final, Literal

import structlog
from aiohttp import web
from kaiwo_contracts.access import Caller, is_loopback_address
from kaiwo_contracts.queue_estimates.eta import EtaSettings
from kaiwo_runtime.kubernetes_access import Access, AccessBusyError, AccessUnavailableError

from kaiwo_console.domain.cluster import (
    WORKLOAD_KINDS,
    ClusterState,
    Visible,
    everything,
    meta,
    only,
)
from kaiwo_console.domain.history import QueueRecords
from kaiwo_console.domain.model_load import ModelLoads
from kaiwo_console.domain.model_rows import model_rows
from kaiwo_console.domain.nodes import NodeRecords, node_views
from kaiwo_console.domain.pages import frame
from kaiwo_console.domain.pages import models as model_page
from kaiwo_console.domain.pages import nodes as node_page
from kaiwo_console.domain.pages import queues as queue_page
from kaiwo_console.domain.pages import workloads as workload_pages
from kaiwo_console.domain.queues import EstimateMemo, pending_estimates, queue_views
from kaiwo_console.domain.workload_rows import (
    WorkloadFilter,
    children,
    condition_rows,
    ending_of,
    summary_facts,
    workload_rows,
)
from kaiwo_console.metrics import ConsoleMetrics

log = structlog.get_logger("kaiwo.console.http")

TOKEN_COOKIE: Final = "kaiwo-token"  # noqa: S105 - the name of the cookie, not a secret
FRAGMENT_HEADER: Final = "X-Console-Fragment"
HEARTBEAT_SECONDS: Final = 15.0
SECURITY_HEADERS: Final = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; "
        "img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
AnonymousAccess = Literal["off", "loopback"]
Rendered = tuple[str, str, int]
"""A page's title, its ``<main>`` and its status."""


@dataclass(frozen=True, slots=True)
class Viewer:
    caller: Caller
    visible: Visible
    sees_nodes: bool

    @property
    def label(self) -> str:
        return "anonymous (loopback)" if self.caller.anonymous else self.caller.name


class RefusedError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Console:
    state: ClusterState
    records: QueueRecords
    workloads_access: Access
    nodes_access: Access
    metrics: ConsoleMetrics
    clock: Callable[[], datetime]
    timeline: Callable[[str], Awaitable[workload_pages.WorkloadHistory]]
    """A workload's uid -> its recorded timeline and GPU utilization (the event store)."""
    anonymous: AnonymousAccess = "off"
    eta: EtaSettings | None = None
    loads: ModelLoads = field(default_factory=ModelLoads)
    """The gateway's requests in flight and autoscaler decisions per Model."""
    nodes: NodeRecords = field(default_factory=NodeRecords)
    """The monitor's latest reading per workload and each node's GPUs busy over time."""

    estimates_max_age_seconds: float = 30.0
    """How long a queue's estimates serve every page and reader while nothing they read
    changed (estimates are absolute times: a few seconds old, they say the same)."""

    def __post_init__(self) -> None:
        self._changed = asyncio.Condition()
        self._closing = False
        self._history_version = 0
        self.memo = EstimateMemo(max_age_seconds=self.estimates_max_age_seconds)

    # ------------------------------------------------------------------ change notices

    def state_changed(self) -> None:
        asyncio.get_event_loop().create_task(self._notify())

    def history_changed(self) -> None:
        self._history_version += 1
        asyncio.get_event_loop().create_task(self._notify())

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    @property
    def version(self) -> str:
        return f"{self.state.version}.{self._history_version}"

    # ------------------------------------------------------------------ the application

    def application(self) -> web.Application:
        app = web.Application(middlewares=[self._headers])
        app.router.add_get("/", self._home)
        app.router.add_get("/console.js", self._script)
        app.router.add_get("/login", self._login_page)
        app.router.add_post("/login", self._login)
        app.router.add_get("/events", self._events)
        app.router.add_get("/workloads", self._workloads)
        app.router.add_get("/workloads/{namespace}/{name}", self._workload)
        app.router.add_get("/queues", self._queues)
        app.router.add_get("/nodes", self._nodes)
        app.router.add_get("/models", self._models)
        app.on_shutdown.append(self._end_live_updates)
        return app

    async def _end_live_updates(self, _app: web.Application) -> None:
        """End every live-update stream as the console stops. aiohttp waits up to 60 s for
        its handlers to return, and a stream returns only once a write fails: with a page
        open, never. A pod would outlast Kubernetes' 30 s grace and be killed; each page's
        ``EventSource`` connects again, to a console that runs."""
        self._closing = True
        await self._notify()

    @web.middleware
    async def _headers(
        self,
        request: web.Request,
        handler: Callable[[web.Request], object],
    ) -> web.StreamResponse:
        response = await handler(request)  # type: ignore[misc]
        assert isinstance(response, web.StreamResponse)
        if not response.prepared:
            response.headers.update(SECURITY_HEADERS)
        return response

    async def _home(self, _request: web.Request) -> web.Response:
        raise web.HTTPFound("/workloads")

    async def _script(self, _request: web.Request) -> web.Response:
        return web.Response(text=frame.SCRIPT, content_type="application/javascript")

    async def _login_page(self, _request: web.Request) -> web.Response:
        return self._html("Sign in", "/login", frame.login_body(), who="", status=200)

    async def _login(self, request: web.Request) -> web.Response:
        form = await request.post()
        token = str(form.get("token") or "").strip()
        if not token:
            return self._html(
                "Sign in", "/login", frame.login_body("No token."), who="", status=400
            )
        response = web.HTTPSeeOther("/workloads")
        response.set_cookie(
            TOKEN_COOKIE,
            token,
            httponly=True,
            samesite="Strict",
            secure=request.secure,
            path="/",
        )
        raise response

    # ------------------------------------------------------------------ who is asking

    async def viewer(self, request: web.Request) -> Viewer:
        if self.anonymous == "loopback" and is_loopback_address(request.remote):
            anonymous = Caller.anonymous_on_loopback(str(request.remote))
            return Viewer(anonymous, everything, sees_nodes=True)
        token = _token(request)
        if not token:
            raise RefusedError(401, "Sign in with a Kubernetes token.")
        try:
            caller = await self.workloads_access.authenticate(token)
            if caller is None:
                raise RefusedError(401, "The API server does not know this token.")
            namespaces = self.state.namespaces()
            allowed = await asyncio.gather(
                *(self.workloads_access.may_use(caller, ns) for ns in namespaces)
            )
            sees_nodes = await self.nodes_access.may_use(caller, "")
        except AccessBusyError as error:
            raise RefusedError(429, str(error)) from error
        except AccessUnavailableError as error:
            raise RefusedError(503, str(error)) from error
        visible = only(ns for ns, yes in zip(namespaces, allowed, strict=True) if yes)
        return Viewer(caller, visible, sees_nodes=sees_nodes)

    async def _serve(
        self, request: web.Request, name: str, render: Callable[[Viewer], Awaitable[Rendered]]
    ) -> web.Response:
        try:
            viewer = await self.viewer(request)
        except RefusedError as refused:
            self.metrics.pages.labels(page=name, status=str(refused.status)).inc()
            body = frame.login_body(str(refused))
            return self._html("Sign in", request.path, body, who="", status=refused.status)
        title, html, status_code = await render(viewer)
        self.metrics.pages.labels(page=name, status=str(status_code)).inc()
        if request.headers.get(FRAGMENT_HEADER) == "1":
            return web.Response(text=html, content_type="text/html", status=status_code)
        return self._html(title, request.path, html, who=viewer.label, status=status_code)

    def _html(self, title: str, path: str, body: str, *, who: str, status: int) -> web.Response:
        return web.Response(
            text=frame.page(title, path, body, who=who), content_type="text/html", status=status
        )

    # ------------------------------------------------------------------ pages

    async def _workloads(self, request: web.Request) -> web.Response:
        chosen = WorkloadFilter(
            **{
                name: request.query.get(name, "")
                for name in ("namespace", "user", "queue", "kind", "phase")
            }
        )

        async def render(viewer: Viewer) -> Rendered:
            now = self.clock()
            rows = workload_rows(self.state, viewer.visible, chosen)
            estimates = pending_estimates(
                self.state, self.records, now=now, settings=self.eta, memo=self.memo
            )
            return (
                "Workloads",
                workload_pages.workloads_body(rows, chosen, now=now, estimates=estimates),
                200,
            )

        return await self._serve(request, "workloads", render)

    async def _workload(self, request: web.Request) -> web.Response:
        namespace, name = request.match_info["namespace"], request.match_info["name"]

        async def render(viewer: Viewer) -> Rendered:
            found = None
            if viewer.visible(namespace):
                found = next(
                    (
                        (kind, obj)
                        for kind in WORKLOAD_KINDS
                        if (obj := self.state.get(kind, namespace, name)) is not None
                    ),
                    None,
                )
            if found is None:
                # The same answer whether it does not exist or the caller may not see it.
                return "Not found", "<h2>No such workload.</h2>", 404
            kind, obj = found
            now = self.clock()
            (row,) = [
                r
                for r in workload_rows(
                    self.state, viewer.visible, WorkloadFilter(namespace=namespace)
                )
                if r.name == name and r.kind == kind
            ]
            history = await self.timeline(str(meta(obj).get("uid") or ""))
            ending = ending_of(obj)
            estimate = pending_estimates(
                self.state, self.records, now=now, settings=self.eta, memo=self.memo
            ).get((namespace, name))
            body = workload_pages.workload_body(
                row,
                summary=summary_facts(kind, obj),
                conditions=condition_rows(obj),
                children=children(self.state, obj),
                timeline=history.timeline,
                estimate=estimate,
                now=now,
                utilization=history.utilization,
                ending=None if ending is None else workload_pages.Ending(*ending),
            )
            return f"{namespace}/{name}", body, 200

        return await self._serve(request, "workload", render)

    async def _queues(self, request: web.Request) -> web.Response:
        async def render(viewer: Viewer) -> Rendered:
            now = self.clock()
            views = queue_views(
                self.state,
                self.records,
                now=now,
                visible=viewer.visible,
                settings=self.eta,
                memo=self.memo,
                plots=True,
            )
            return "Queues", queue_page.queues_body(views, now=now), 200

        return await self._serve(request, "queues", render)

    async def _nodes(self, request: web.Request) -> web.Response:
        async def render(viewer: Viewer) -> Rendered:
            if not viewer.sees_nodes:
                return "GPU nodes", "<h2>You may not list nodes.</h2>", 403
            views = node_views(self.state, self.nodes, visible=viewer.visible, now=self.clock())
            return "GPU nodes", node_page.nodes_body(views), 200

        return await self._serve(request, "nodes", render)

    async def _models(self, request: web.Request) -> web.Response:
        async def render(viewer: Viewer) -> Rendered:
            now = self.clock()
            rows = model_rows(self.state, viewer.visible)
            loads = {
                (r.namespace, r.name): model_page.ModelLoad(
                    in_flight=self.loads.in_flight((r.namespace, r.name), now=now),
                    points=self.loads.points((r.namespace, r.name)),
                    decisions=self.loads.decisions_of((r.namespace, r.name)),
                )
                for r in rows
            }
            return "Models", model_page.models_body(rows, loads=loads), 200

        return await self._serve(request, "models", render)

    # ------------------------------------------------------------------ live updates

    async def _events(self, request: web.Request) -> web.StreamResponse:
        try:
            await self.viewer(request)
        except RefusedError as refused:
            return web.Response(status=refused.status, text=str(refused))
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-store",
                "X-Accel-Buffering": "no",
            }
        )
        await response.prepare(request)
        sent = ""
        with contextlib.suppress(ConnectionResetError):  # the page went away
            while not self._closing:
                if self.version != sent:
                    sent = self.version
                    await response.write(f"data: {sent}\n\n".encode())
                else:
                    await response.write(b": still here\n\n")
                async with self._changed:
                    if self._closing:
                        break
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._changed.wait(), timeout=HEARTBEAT_SECONDS)
        return response


def _token(request: web.Request) -> str:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return request.cookies.get(TOKEN_COOKIE, "")
