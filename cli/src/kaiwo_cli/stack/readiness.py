"""Waiting for a started service: its ``/readyz`` on its health port, polled until it answers.

The four services that carry the operator must become ready (:func:`wait_until_ready`, else
:class:`StackError`, which says why: the checks ``/readyz`` last failed, else the last complaint
the service logged, decision 0240); an optional one is given the same time and then reported
in one line, whichever way it settled (:func:`settle`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Collection, Mapping
from pathlib import Path

import aiohttp
import structlog
from kaiwo_runtime.redaction import redact_secrets

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
        while True:
            # The latest answer only: a service that answered once and then ended says no more.
            answer = (
                await _readiness(http, port or service.health_port) if service.running else None
            )
            if answer is not None and answer[0]:
                return
            if asyncio.get_running_loop().time() > deadline:
                why = (
                    f"not ready: {answer[1]}"
                    if answer is not None
                    else last_complaint(_log_tail(service.log_path), _service_of(name))
                )
                raise StackError(
                    f"{name} did not become ready in {within:.0f} s"
                    + (f": {why}" if why else "")
                    + f" (log: {service.log_path})"
                )
            await asyncio.sleep(POLL_SECONDS)


LOG_TAIL_BYTES = 64 * 1024
"""How much of a service's log is searched for its last complaint: the end of a log that may
be long (the one-process operator's holds four services)."""
COMPLAINING_LEVELS = frozenset({"warning", "error", "critical"})


def last_complaint(log_text: str, service: str) -> str | None:
    """The last thing ``service`` complained of in ``log_text``, in one line: a warning or
    error it logged (its ``why`` or ``error`` when it gave one; the supervisor of the
    one-process operator logs a member that ended so), or a line it printed to stderr
    (``kaiwo-<service>: ...``, what a service prints when it cannot start). None when none.
    Secrets are masked again, for a line that did not come through the logging set-up."""
    prefix = f"kaiwo-{service}: "
    for line in reversed(log_text.splitlines()):
        if line.startswith(prefix):
            return redact_secrets(" ".join(line[len(prefix) :].split()))
        if not line.startswith("{"):
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict) or entry.get("service") != service:
            continue
        if entry.get("level") not in COMPLAINING_LEVELS:
            continue
        detail = entry.get("why") or entry.get("error")
        said = f"{entry.get('event')}: {detail}" if detail else str(entry.get("event"))
        return redact_secrets(" ".join(said.split()))
    return None


def _service_of(process_name: str) -> str:
    """The service a process runs: ``planner`` of ``planner-1`` (what it logs as itself)."""
    base, _, replica = process_name.rpartition("-")
    return base if base and replica.isdigit() else process_name


def _log_tail(path: Path) -> str:
    try:
        with path.open("rb") as log_file:
            log_file.seek(max(0, path.stat().st_size - LOG_TAIL_BYTES))
            return log_file.read().decode(errors="replace")
    except OSError:
        return ""


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
