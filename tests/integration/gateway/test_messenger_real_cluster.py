"""The messenger on the real API server, as ``kaiwo up`` runs it (decisions 0049, 0057).

``kaiwo up`` with a gateway switches the messenger on: it declares the messenger's streams
and consumer with the administrator's key and issues the test namespace a tenant key
(``--tenant``). A Model at zero replicas is created on the real API server; the watcher
observes it; a tenant publishes requests with its own key; the messenger's requests wait for
an endpoint, the autoscaler scales the Model from zero through the planner (the scale
subresource), the test plays the kubelet (the Model's Pod turns Ready at 127.0.0.1, where a
stand-in vLLM answers), the watcher observes the Pod, and every request is answered on the
tenant's responses subject with its ids.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

import nats
import nats.errors
import pytest
import pytest_asyncio
from kaiwo_contracts.events.messenger import (
    RESPONSE_STREAM,
    request_subject,
    response_subject,
    tenant_key_name,
)
from kaiwo_contracts.events.permissions import inbox_prefix
from nats.aio.client import Client
from nats.aio.msg import Msg

from tests.integration.gateway.test_autoscaling_end_to_end import (
    CHAT,
    SCALE_WITHIN,
    Served,
    decisions,
    listed,
    serving_models,
)
from tests.integration.pipeline.harness import eventually
from tests.integration.pipeline.model_actors import (
    a_model,
    model,
)
from tests.real_cluster import RealCluster

pytestmark = [
    pytest.mark.nats,
    pytest.mark.slow,
    pytest.mark.k8s,
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.timeout(300),
]

REQUESTS = 3


@dataclass
class Tenant:
    served: Served
    client: Client

    @property
    def namespace(self) -> str:
        return self.served.pipeline.namespace


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def tenant(
    real_cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Tenant]:
    async with serving_models(
        real_cluster, tmp_path_factory.mktemp("kaiwo"), messenger_tenant=True
    ) as served:
        stack = served.pipeline.stack
        assert stack.nats is not None and stack.credentials is not None
        key = tenant_key_name(served.pipeline.namespace)
        client = await nats.connect(
            stack.nats.url,
            nkeys_seed=str(stack.credentials.seed(key)),
            inbox_prefix=inbox_prefix(key),
        )
        try:
            yield Tenant(served, client)
        finally:
            await client.close()


async def answers(tenant: Tenant, count: int) -> list[Msg]:
    """``count`` answers, read through the tenant's own durable consumer."""
    subscription = await tenant.client.jetstream().pull_subscribe(
        response_subject(tenant.namespace),
        durable=tenant_key_name(tenant.namespace),
        stream=RESPONSE_STREAM,
    )
    found: list[Msg] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SCALE_WITHIN
    while len(found) < count:
        assert loop.time() < deadline, f"{len(found)} of {count} answers"
        with contextlib.suppress(nats.errors.TimeoutError, TimeoutError):
            for message in await subscription.fetch(count - len(found), timeout=1):
                await message.ack()
                found.append(message)
    await subscription.unsubscribe()
    return found


async def test_requests_for_a_model_at_zero_on_the_api_server_are_answered(
    tenant: Tenant,
) -> None:
    pipeline = tenant.served.pipeline
    await pipeline.kube.create(
        a_model(
            CHAT,
            pipeline.namespace,
            url="hf://org/chat",
            engine="VLLM",
            features=["TextGeneration"],
            resourceProfile="cpu:1",
            minReplicas=0,
            maxReplicas=2,
            targetRequests=10,
        )
    )
    # The gateway serves the Model once the watcher has observed it (before that a request
    # would be answered 404, as for any Model the catalog does not hold).
    await eventually(lambda: listed(tenant.served, CHAT), what="the gateway serves chat", within=60)
    js = tenant.client.jetstream()
    for number in range(REQUESTS):
        body = {"model": CHAT, "prompt": f"prompt {number}"}
        await js.publish(
            request_subject(tenant.namespace),
            json.dumps(
                {"metadata": {"row": number}, "path": "/v1/completions", "body": body}
            ).encode(),
            headers={"Nats-Msg-Id": f"row-{number}", "X-Batch": "real"},
        )

    found = await answers(tenant, REQUESTS)

    by_row = {json.loads(m.data)["metadata"]["row"]: m for m in found}
    assert sorted(by_row) == list(range(REQUESTS))
    for row, message in by_row.items():
        answer = json.loads(message.data)
        assert answer["status_code"] == 200
        assert answer["body"]["choices"][0]["text"] == "vllm|chat|"
        assert message.headers is not None
        assert message.headers["Kaiwo-Request-Id"] == f"row-{row}"
        assert message.headers["X-Batch"] == "real"
    [first, *_] = await decisions(tenant.served)
    # From zero to one: at once when a request waits for an endpoint ("request"), or by the
    # tick that sampled the requests in hand first ("load"); the same decision either way,
    # published once.
    assert (first.from_replicas, first.replicas) == (0, 1)
    assert first.cause in {"request", "load"}
    # The scale decision reached the API server: the Model has its replica.
    assert (await model(pipeline, CHAT))["spec"]["replicas"] >= 1
