"""A Model's ``owner`` and ``loadBalancing.prefixHash`` settings reach what the gateway does:
the owner in the served model (``/v1/models``' ``owned_by``), the ring's replication and the
load bound in every choice of an endpoint. The balancer's own tests give it hand-picked
values; these pin the way from the Model to it."""

from __future__ import annotations

from typing import Any

import aiohttp
from aiohttp import web
from kaiwo_gateway.domain.balancing import Balancer, Choice
from kaiwo_gateway.domain.catalog import PrefixHashSettings
from kaiwo_gateway.domain.routing import Route
from kaiwo_gateway.endpoint_wait import EndpointWaiter, LoadTracking
from kaiwo_gateway.http_api import Gateway, ProxySettings
from kaiwo_gateway.metrics import GatewayMetrics
from kaiwo_runtime.nats_server import free_port

from tests.unit.gateway.model_objects import model_object, pod_object
from tests.unit.gateway.test_catalog_and_routing import catalog_with
from tests.unit.gateway.test_client_gone import NoTokens, serving

PREFIX_HASH = {"meanLoadFactor": 150, "replication": 7, "prefixCharLength": 12}


class RecordingBalancer(Balancer):
    """The real balancer, recording what each choice was asked with."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[dict[str, Any]] = []

    def choose(self, **asked: Any) -> Choice | None:
        self.asked.append(
            {
                key: asked.get(key)
                for key in ("strategy", "replication", "mean_load_factor", "prefix")
            }
        )
        return super().choose(**asked)


def test_the_owner_and_prefix_hash_settings_are_the_served_models() -> None:
    balancing = {"strategy": "PrefixHash", "prefixHash": PREFIX_HASH}
    catalog = catalog_with(
        model_object("set", owner="research-team", loadBalancing=balancing),
        model_object("unset"),
    )

    served = {model.name: model for model in catalog.models()}

    assert (served["set"].owner, served["set"].prefix_hash) == (
        "research-team",
        PrefixHashSettings(mean_load_factor=150, replication=7, prefix_char_length=12),
    )
    # The reference's defaults: 125, 20 and 100.
    assert (served["unset"].owner, served["unset"].prefix_hash) == (
        "",
        PrefixHashSettings(mean_load_factor=125, replication=20, prefix_char_length=100),
    )


async def test_every_choice_of_an_endpoint_is_asked_with_the_models_settings() -> None:
    balancing = {"strategy": "PrefixHash", "prefixHash": PREFIX_HASH}
    catalog = catalog_with(
        model_object("llm", uid="m1", loadBalancing=balancing),
        pod_object("p1", model="llm", model_uid="m1", ip="10.0.0.1"),
    )
    balancer = RecordingBalancer()
    waiter = EndpointWaiter(
        catalog=catalog, balancer=balancer, metrics=GatewayMetrics(), load=LoadTracking()
    )
    [model] = catalog.models()

    choice = await waiter.endpoint_for(
        Route(model=model, adapter=None), prefix="hello", exclude=set(), wait_seconds=0
    )

    assert choice.endpoint.key == "team-a/p1"
    assert balancer.asked == [
        {"strategy": "PrefixHash", "replication": 7, "mean_load_factor": 150, "prefix": "hello"}
    ]


async def test_a_prefix_spilled_off_its_home_endpoint_is_counted_as_such() -> None:
    # Upstream counts the ring's first endpoint ("initial") apart from the one chosen
    # ("final"); here one counter says whether the chosen one was the prefix's home.
    balancing = {"strategy": "PrefixHash", "prefixHash": PREFIX_HASH}
    catalog = catalog_with(
        model_object("llm", uid="m1", loadBalancing=balancing),
        pod_object("p1", model="llm", model_uid="m1", ip="10.0.0.1"),
        pod_object("p2", model="llm", model_uid="m1", ip="10.0.0.2"),
    )
    metrics = GatewayMetrics()
    waiter = EndpointWaiter(
        catalog=catalog, balancer=Balancer(), metrics=metrics, load=LoadTracking()
    )
    [model] = catalog.models()
    route = Route(model=model, adapter=None)

    # Not released: with two endpoints and a factor of 150 the home takes two, then (three
    # in flight, at most ceil(1.5 * 3 / 2) = 3 each) a third, then the fourth spills.
    chosen = [
        (await waiter.endpoint_for(route, prefix="hello", exclude=set(), wait_seconds=0))
        for _ in range(4)
    ]

    home = chosen[0].endpoint.key
    assert [c.endpoint.key == home for c in chosen] == [True, True, True, False]
    exposed = metrics.registry.exposition().decode()
    other = ({"team-a/p1", "team-a/p2"} - {home}).pop()
    assert (
        f'kaiwo_gateway_endpoint_choices_total{{endpoint="{home}",fallback="false",home="true",'
        'model="llm",namespace="team-a",strategy="PrefixHash"} 3.0'
    ) in exposed
    assert (
        f'kaiwo_gateway_endpoint_choices_total{{endpoint="{other}",fallback="false",home="false",'
        'model="llm",namespace="team-a",strategy="PrefixHash"} 1.0'
    ) in exposed


async def test_a_request_is_balanced_on_as_many_characters_as_its_model_says() -> None:
    """``prefixCharLength`` from the Model to the prefix hashed for a request the gateway
    serves: the last user message's first 5 characters, not the default 100."""
    balancing = {"strategy": "PrefixHash", "prefixHash": {**PREFIX_HASH, "prefixCharLength": 5}}

    async def answer(_request: web.Request) -> web.Response:
        return web.json_response({"choices": []})

    upstream = web.Application()
    upstream.router.add_post("/v1/chat/completions", answer)
    upstream_runner = web.AppRunner(upstream, access_log=None)
    await upstream_runner.setup()
    upstream_port = free_port()
    await web.TCPSite(upstream_runner, "127.0.0.1", upstream_port).start()
    balancer = RecordingBalancer()
    catalog = catalog_with(
        model_object("llm", uid="m1", loadBalancing=balancing),
        pod_object("p1", model="llm", model_uid="m1", ip="127.0.0.1", port=str(upstream_port)),
    )
    messages = [
        {"role": "user", "content": "an earlier question"},
        {"role": "assistant", "content": "an answer"},
        {"role": "user", "content": "summarise the thread"},
    ]
    try:
        async with (
            serving(catalog, balancer=balancer) as served,
            aiohttp.ClientSession() as session,
        ):
            response = await session.post(
                f"{served.url}/chat/completions", json={"model": "llm", "messages": messages}
            )
            assert response.status == 200, await response.text()
    finally:
        await upstream_runner.cleanup()

    assert [asked["prefix"] for asked in balancer.asked] == ["summa"]


def test_a_model_no_longer_served_loses_its_endpoints_series() -> None:
    # Kubernetes deletes a Model's Pods after the Model: the count must not stay at the
    # Model's last one (it stayed at 1 for good, for a Model that no longer exists).
    catalog = catalog_with(
        model_object("chat", uid="m-chat"),
        pod_object("p1", model="chat", model_uid="m-chat"),
        model_object("other", uid="m-other"),
    )
    metrics = GatewayMetrics()
    gateway = Gateway(
        catalog=catalog,
        balancer=Balancer(),
        metrics=metrics,
        settings=ProxySettings(),
        access=NoTokens(),
    )

    def endpoints() -> list[str]:
        return [
            line
            for line in metrics.registry.exposition().decode().splitlines()
            if line.startswith("kaiwo_gateway_endpoints{")
        ]

    gateway.catalog_changed()
    assert endpoints() == [
        'kaiwo_gateway_endpoints{model="chat",namespace="team-a"} 1.0',
        'kaiwo_gateway_endpoints{model="other",namespace="team-a"} 0.0',
    ]

    catalog.apply(
        kind="Model", event="DELETED", obj=model_object("chat", uid="m-chat", version="5")
    )
    gateway.catalog_changed()
    catalog.apply(
        kind="Pod",
        event="DELETED",
        obj=pod_object("p1", model="chat", model_uid="m-chat", version="6"),
    )
    gateway.catalog_changed()

    assert endpoints() == ['kaiwo_gateway_endpoints{model="other",namespace="team-a"} 0.0']
