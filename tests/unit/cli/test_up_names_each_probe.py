"""``kaiwo up``'s summary names where each service answers ``/healthz``, ``/readyz`` and
``/metrics``, as the README says (it named ``/metrics`` alone): each address it prints is
served by the service's health server."""

from __future__ import annotations

import re

import aiohttp
from kaiwo_cli.commands.up import _probes
from kaiwo_runtime.health import HealthServer
from kaiwo_runtime.metrics import MetricsRegistry


def test_the_summary_names_the_three_paths_of_a_port() -> None:
    assert _probes(8081) == "http://127.0.0.1:8081/{healthz,readyz,metrics}"


async def test_each_address_printed_is_answered_by_the_health_server() -> None:
    async with HealthServer(metrics=MetricsRegistry(), host="127.0.0.1", port=0) as server:
        printed = _probes(server.port)
        base, paths = re.fullmatch(r"(http://[^{]+)\{(.+)\}", printed).groups()  # type: ignore[union-attr]
        async with aiohttp.ClientSession() as session:
            for path in paths.split(","):
                async with session.get(base + path) as answer:
                    assert answer.status == 200, path
