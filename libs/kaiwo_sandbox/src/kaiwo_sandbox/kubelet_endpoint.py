"""The simulated kubelets' log endpoint, where an API server sends ``pods/log`` requests.

A real API server answers ``GET /api/v1/namespaces/NS/pods/NAME/log`` by asking the kubelet of
the pod's node, at the node's ``status.addresses`` and
``status.daemonEndpoints.kubeletEndpoint.Port``, over HTTPS:
``GET /containerLogs/NS/NAME/CONTAINER`` with ``follow``, ``tailLines``, ``timestamps``,
``sinceSeconds``, ``limitBytes`` and ``previous`` passed on. The sandbox registers its nodes
with this endpoint's address, so ``kubectl logs`` and ``kaiwo logs`` reach it through the API
server like on a cluster (the fake API server proxies the same way).

It keeps no log: each request reads the pod (and a KaiwoJob's ``duration``) through the
Kubernetes port and derives the lines (:mod:`kaiwo_sandbox.container_logs`); ``follow`` asks
again every ``poll_seconds`` and ends when the container does. Errors are the kubelet's: plain
text, which the API server wraps in a Status with the same code.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

from aiohttp import web
from kaiwo_kube import KubeError, NotFound, ObjectGetter, resources

from kaiwo_sandbox.container_logs import (
    WORKLOAD_NAME_LABEL,
    LogLine,
    container_log,
    container_run,
)
from kaiwo_sandbox.durations import duration_seconds
from kaiwo_sandbox.lifecycle import WORKLOAD_TYPE_LABEL, Timing, run_plan

ROUTE: Final = "/containerLogs/{namespace}/{pod}/{container}"


class LogRequestError(Exception):
    """A request the kubelet refuses: the HTTP code and its plain-text reason."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class ContainerLogEndpoint:
    def __init__(
        self,
        kube: ObjectGetter,
        *,
        timing: Timing,
        clock: Callable[[], datetime],
        poll_seconds: float = 0.5,
    ) -> None:
        self.kube = kube
        self.timing = timing
        self.clock = clock
        self.poll_seconds = poll_seconds

    def application(self) -> web.Application:
        app = web.Application()
        app.router.add_get(ROUTE, self._container_logs)
        return app

    async def _container_logs(self, request: web.Request) -> web.StreamResponse:
        namespace = request.match_info["namespace"]
        pod_name = request.match_info["pod"]
        container = request.match_info["container"]
        try:
            options = LogOptions.parse(request.query)
            if options.previous:
                raise LogRequestError(
                    400,
                    f'previous terminated container "{container}" in pod "{pod_name}" not found',
                )
            pod = await self._pod(namespace, pod_name)
            _check_container(pod, container)
            lines, finished = await self._lines(pod, container)
        except LogRequestError as error:
            return web.Response(status=error.code, text=error.message, content_type="text/plain")
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        budget = _Budget(options.limit_bytes)
        shown = options.first_shown(lines, now=self.clock())
        with contextlib.suppress(ConnectionResetError):
            await _write(response, lines[shown:], timestamps=options.timestamps, budget=budget)
            written = len(lines)
            while options.follow and not finished and not budget.spent:
                await asyncio.sleep(self.poll_seconds)
                try:
                    pod = await self._pod(namespace, pod_name)
                    lines, finished = await self._lines(pod, container)
                except LogRequestError:
                    break  # the pod went away: its log ends
                await _write(
                    response, lines[written:], timestamps=options.timestamps, budget=budget
                )
                written = max(written, len(lines))
            await response.write_eof()
        return response

    async def _pod(self, namespace: str, name: str) -> dict[str, Any]:
        try:
            return await self.kube.get(resources.POD, name, namespace=namespace)
        except NotFound:
            raise LogRequestError(404, f'pod "{namespace}/{name}" not found') from None

    async def _lines(self, pod: dict[str, Any], container: str) -> tuple[list[LogLine], bool]:
        """The container's lines now, and whether it has ended (its log is complete)."""
        run = container_run(pod, container)
        if run is None:
            name = pod["metadata"]["name"]
            raise LogRequestError(
                400,
                f'container "{container}" in pod "{name}" is waiting to start: ContainerCreating',
            )
        plan = run_plan(pod, timing=self.timing, duration_seconds=await self._duration(pod))
        lines = container_log(
            pod, container, run=run, plan=plan, timing=self.timing, now=self.clock()
        )
        return list(lines), run.finished is not None

    async def _duration(self, pod: Mapping[str, Any]) -> float | None:
        """A KaiwoJob's ``spec.duration`` cuts its pods' run short (as the kubelet loop
        reads it)."""
        metadata = pod.get("metadata") or {}
        labels = metadata.get("labels") or {}
        if labels.get(WORKLOAD_TYPE_LABEL) != "job" or not labels.get(WORKLOAD_NAME_LABEL):
            return None
        try:
            job = await self.kube.get(
                resources.KAIWO_JOB, labels[WORKLOAD_NAME_LABEL], namespace=metadata["namespace"]
            )
        except KubeError:
            return None
        return duration_seconds((job.get("spec") or {}).get("duration"))


def _check_container(pod: Mapping[str, Any], container: str) -> None:
    spec = pod.get("spec") or {}
    names = [
        c.get("name") for c in (spec.get("containers") or []) + (spec.get("initContainers") or [])
    ]
    if container not in names:
        name = (pod.get("metadata") or {}).get("name")
        raise LogRequestError(404, f'container "{container}" not found in pod "{name}"')


@dataclass(frozen=True, slots=True)
class LogOptions:
    """The query of a ``containerLogs`` request."""

    follow: bool = False
    tail_lines: int | None = None
    timestamps: bool = False
    since_seconds: int | None = None
    limit_bytes: int | None = None
    previous: bool = False

    @classmethod
    def parse(cls, query: Mapping[str, str]) -> LogOptions:
        return cls(
            follow=_flag(query.get("follow")),
            tail_lines=_count(query, "tailLines"),
            timestamps=_flag(query.get("timestamps")),
            since_seconds=_count(query, "sinceSeconds"),
            limit_bytes=_count(query, "limitBytes"),
            previous=_flag(query.get("previous")),
        )

    def first_shown(self, lines: list[LogLine], *, now: datetime) -> int:
        """The index of the first line to send: ``sinceSeconds``, then ``tailLines``."""
        first = 0
        if self.since_seconds is not None:
            since = now - timedelta(seconds=self.since_seconds)
            first = next((i for i, line in enumerate(lines) if line.at >= since), len(lines))
        if self.tail_lines is not None:
            first = max(first, len(lines) - self.tail_lines)
        return first


def _flag(value: str | None) -> bool:
    return value is not None and value.lower() in ("1", "true")


def _count(query: Mapping[str, str], name: str) -> int | None:
    text = query.get(name)
    if text is None or text == "":
        return None
    try:
        value = int(text)
    except ValueError:
        raise LogRequestError(400, f"{name}: {text!r} is not a whole number") from None
    if value < 0:
        raise LogRequestError(400, f"{name}: {text!r} is negative")
    return value


class _Budget:
    """What ``limitBytes`` still allows (None: no limit)."""

    def __init__(self, limit: int | None) -> None:
        self.left = limit

    @property
    def spent(self) -> bool:
        return self.left is not None and self.left <= 0

    def take(self, data: bytes) -> bytes:
        if self.left is None:
            return data
        taken = data[: self.left]
        self.left -= len(taken)
        return taken


async def _write(
    response: web.StreamResponse, lines: list[LogLine], *, timestamps: bool, budget: _Budget
) -> None:
    if not lines or budget.spent:
        return
    text = "".join(
        f"{rfc3339_nano(line.at)} {line.text}\n" if timestamps else f"{line.text}\n"
        for line in lines
    )
    await response.write(budget.take(text.encode()))


def rfc3339_nano(moment: datetime) -> str:
    """Go's RFC 3339 with nanoseconds, as the kubelet writes them (trailing zeros dropped)."""
    fraction = f"{moment.microsecond:06d}000".rstrip("0")
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + (f".{fraction}" if fraction else "") + "Z"
