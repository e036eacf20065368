"""Waiting for a started service: its ``/readyz`` on its health port, polled until it answers.

The four services that carry the operator must become ready (:func:`wait_until_ready`, else
:class:`StackError`); an optional one is given the same time and then reported in one line,
whichever way it settled (:func:`settle`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping

import aiohttp
import structlog

from kaiwo_cli.stack.options import StackError
from kaiwo_cli.stack.processes import ServiceProcess

POLL_SECONDS = 0.1

log = structlog.get_logger("kaiwo.stack")


async def wait_for_services(
    services: Mapping[str, ServiceProcess],
    member_ports: Mapping[str, int],
    *,
    together: str,
    optional: Collection[str],
    within: float,
) -> dict[str, str]:
    """Wait for every service that carries the operator (:class:`StackError` when one is not
    ready in time), those inside the ``together`` process on their own ports; then give each
    optional one the same time. Returns the optional ones not ready, and why."""
    for name, service in services.items():
        if name not in optional and name != together:
            await wait_until_ready(name, service, within=within)
    for name, port in member_ports.items():
        await wait_until_ready(name, services[together], within=within, port=port)
    not_ready = {}
    for name in optional:
        reason = await settle(services[name], within=within)
        if reason is not None:
            not_ready[name] = reason
            log.warning("service not ready; the others run without it", service=name)
    return not_ready


async def settle(service: ServiceProcess, *, within: float) -> str | None:
    """Wait until optional ``service`` is ready (None), or says why it is not, or has exited
    (why, in one line): whichever comes first."""
    deadline = asyncio.get_running_loop().time() + within
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as http:
        while True:
            if service.restarts or service.last_exit is not None:
                return (
                    f"exited with code {service.last_exit}; restarted with back-off "
                    f"(log: {service.log_path})"
                )
            answer = await _readiness(http, service.health_port)
            if answer is not None:
                ready, reason = answer
                return None if ready else f"running, not ready: {reason}"
            if asyncio.get_running_loop().time() > deadline:
                return f"no /readyz answer in {within:.0f} s (log: {service.log_path})"
            await asyncio.sleep(POLL_SECONDS)


async def wait_until_ready(
    name: str, service: ServiceProcess, *, within: float, port: int | None = None
) -> None:
    """Wait until ``service`` answers ``/readyz`` (after a start or a restart); on ``port``
    for one of the services inside ``kaiwo_cli.stack.together``'s process."""
    deadline = asyncio.get_running_loop().time() + within
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as http:
        while not (service.running and await _ready(http, port or service.health_port)):
            if asyncio.get_running_loop().time() > deadline:
                raise StackError(
                    f"{name} did not become ready in {within:.0f} s (log: {service.log_path})"
                )
            await asyncio.sleep(POLL_SECONDS)


async def _readiness(http: aiohttp.ClientSession, port: int) -> tuple[bool, str] | None:
    """``/readyz``'s answer: ready, and the checks that failed; None when it does not answer."""
    try:
        async with http.get(f"http://127.0.0.1:{port}/readyz") as response:
            body = await response.json(content_type=None)
            ready = response.status == 200
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return None
    checks = body.get("checks", {}) if isinstance(body, dict) else {}
    failing = "; ".join(f"{name}: {result}" for name, result in checks.items() if result != "ok")
    return ready, failing or "not ready"


async def _ready(http: aiohttp.ClientSession, port: int) -> bool:
    try:
        async with http.get(f"http://127.0.0.1:{port}/readyz") as response:
            return response.status == 200
    except (aiohttp.ClientError, TimeoutError):
        return False
