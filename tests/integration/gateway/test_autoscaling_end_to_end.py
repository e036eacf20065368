"""Scale from zero and request-based autoscaling, end to end on the real API server.

The operator runs as ``kaiwo up`` runs it (watcher, planner, executor, recorder and the
gateway, each its own process) with short autoscaler settings: reports and ticks every
0.5 s, a window of 2 s, so four samples. The test plays the kubelet (every Pod of a Model
runs and turns Ready at 127.0.0.1) and a stand-in OpenAI server plays vLLM there: the
platform team's configuration points the Pods' ``model-pod-port`` at it.

In order: a request for a Model at zero replicas scales it to one through the scale
subresource and is answered; sustained load (three requests held open at a time, target one
per replica) scales it to its maximum of three, and back to zero after the scale-down delay
once the load stops; the next request scales it up from zero again; a Model at zero with
autoscaling disabled is refused at once, and so is one the operator cannot serve, naming why;
the load held back by a Model's ``maxReplicas`` is told on it, and told again as it rises and
falls; ``kaiwo events explain`` names the decisions and ``kaiwo events replay`` reproduces
every plan.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import aiohttp
import openai
import pytest
import pytest_asyncio
from click.testing import CliRunner
from kaiwo_cli.main import app
from kaiwo_contracts.events.autoscaling import ScaleDecidedV1
from kaiwo_contracts.events.envelope import Envelope
from kaiwo_contracts.events.streams import GATEWAY_STREAM
from kaiwo_kube import KubernetesPort, NotFound, resources
from kaiwo_runtime.nats_server import free_port

from tests.integration.pipeline.harness import (
    OPERATOR_USER,
    Pending,
    Pipeline,
    eventually,
    running_pipeline,
)
from tests.integration.pipeline.model_actors import (
    MODELS_CONFIG_NAME,
    OPERATOR_NAMESPACE,
    a_model,
    apply_models_config,
    condition,
    is_ready,
    model,
    model_pods,
    run_pods,
)
from tests.real_cluster import RealCluster

pytestmark = [
    pytest.mark.nats,
    pytest.mark.slow,
    pytest.mark.k8s,
    pytest.mark.asyncio(loop_scope="module"),
    # Scaling up and back down are two waits of up to SCALE_WITHIN each on a loaded machine.
    pytest.mark.timeout(300),
]

STANDIN = Path(__file__).with_name("standin_openai.py")
AUTOSCALER_ENV: Final = {
    "KAIWO_AUTOSCALER_INTERVAL_SECONDS": "0.5",
    "KAIWO_AUTOSCALER_WINDOW_SECONDS": "2",
    "KAIWO_GATEWAY_ENDPOINT_WAIT_SECONDS": "60",
    # Nothing here is killed: a lease that a stalled event loop cannot lose (the harness's 2 s
    # suit its fault tests) keeps the planner and the executor from restarting under load.
    "KAIWO_LEASE_SECONDS": "10",
}
CHAT: Final = "chat"
SCALE_WITHIN: Final = 90.0
"""Longest wait for the operator to scale (the machine is shared and loaded)."""


@dataclass
class Served:
    pipeline: Pipeline
    base_url: str

    def client(self) -> openai.AsyncOpenAI:
        return openai.AsyncOpenAI(
            base_url=self.base_url, api_key="unused", max_retries=0, timeout=120
        )

    async def gateway_metrics(self) -> dict[str, float]:
        """The gateway's ``kaiwo_*`` samples: ``name{labels}`` -> value."""
        port = self.pipeline.stack.services["gateway"].health_port
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{port}/metrics") as response,
        ):
            text = await response.text()
        return {
            name: float(value)
            for line in text.splitlines()
            if line.startswith("kaiwo_")
            for name, _, value in [line.rpartition(" ")]
        }


def sample(samples: dict[str, float], name: str, **labels: str) -> float:
    """The sum of ``name``'s samples carrying ``labels``."""
    return sum(
        value
        for key, value in samples.items()
        if key.partition("{")[0] == name
        and all(f'{label}="{wanted}"' in key for label, wanted in labels.items())
    )


async def start_standin(port: int) -> asyncio.subprocess.Process:
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(STANDIN), "vllm", str(port), stdout=asyncio.subprocess.PIPE
    )
    assert process.stdout is not None
    line = await asyncio.wait_for(process.stdout.readline(), 20)
    assert line.strip() == b"ready", "the stand-in did not start"
    return process


def models_serving_at(port: int) -> str:
    """The platform team's configuration: every model-server Pod serves on ``port``."""
    patches = [
        {"op": "replace", "path": "/metadata/annotations/model-pod-port", "value": str(port)}
    ]
    return json.dumps({"modelServerPods": {"jsonPatches": patches}})


async def kubelet(kube: KubernetesPort, namespace: str, stop: asyncio.Event) -> None:
    """Every Pod of a Model runs and turns Ready at 127.0.0.1 (the stand-in), until ``stop``."""
    while not stop.is_set():
        await run_pods(kube, namespace, CHAT, pod_ip="127.0.0.1")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 0.2)


@contextlib.asynccontextmanager
async def serving_models(
    real_cluster: RealCluster, scratch: Path, **pipeline_options: Any
) -> AsyncIterator[Served]:
    """The pipeline with the gateway and the autoscaler, every Model's pods played Ready at
    the stand-in server (the one copy of this set-up: the messenger's tests use it too)."""
    port = free_port()
    standin = await start_standin(port)
    gateway_port = free_port()
    try:
        async with running_pipeline(
            scratch,
            real=real_cluster,
            gpu_cluster=False,
            gateway_port=gateway_port,
            service_env=AUTOSCALER_ENV,
            **pipeline_options,
        ) as pipeline:
            await apply_models_config(pipeline.kube, models_yaml=models_serving_at(port))
            stop = asyncio.Event()
            playing = asyncio.create_task(kubelet(pipeline.kube, pipeline.namespace, stop))
            try:
                yield Served(pipeline, f"http://127.0.0.1:{gateway_port}/openai/v1")
            finally:
                stop.set()
                await playing
                with contextlib.suppress(NotFound):
                    await pipeline.kube.delete(
                        resources.CONFIG_MAP, MODELS_CONFIG_NAME, namespace=OPERATOR_NAMESPACE
                    )
    finally:
        standin.terminate()
        await standin.wait()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def served(
    real_cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Served]:
    async with serving_models(real_cluster, tmp_path_factory.mktemp("kaiwo")) as found:
        yield found


async def listed(served: Served, name: str) -> bool | Pending:
    try:
        models = await served.client().models.list()
    except openai.APIConnectionError as error:
        return Pending(f"the gateway does not answer: {error}")
    names = [entry.id for entry in models.data]
    return True if name in names else Pending(f"the gateway lists {names}")


async def replicas_are(served: Served, wanted: int) -> dict[str, Any] | Pending:
    found = await model(served.pipeline, CHAT)
    replicas = found["spec"].get("replicas")
    return found if replicas == wanted else Pending(f"spec.replicas is {replicas}")


async def decisions(served: Served) -> list[ScaleDecidedV1]:
    """The autoscaler's decisions stored in KAIWO_GATEWAY, in order."""
    found = []
    info = await served.pipeline.js.stream_info(GATEWAY_STREAM)
    for sequence in range(info.state.first_seq, info.state.last_seq + 1):
        with contextlib.suppress(Exception):  # a message gone with the stream's limits
            stored = await served.pipeline.js.get_msg(GATEWAY_STREAM, sequence)
            if stored.subject.startswith("kaiwo.gateway.scale."):
                envelope = Envelope[ScaleDecidedV1].from_nats(stored.headers, stored.data)
                found.append(envelope.data)
    return found


async def test_a_request_for_a_model_at_zero_scales_it_up_and_is_answered(served: Served) -> None:
    pipeline = served.pipeline
    audit = pipeline.audit_log
    assert audit is not None
    await pipeline.kube.create(
        a_model(
            CHAT,
            pipeline.namespace,
            url="hf://org/chat",
            engine="VLLM",
            features=["TextGeneration"],
            resourceProfile="cpu:1",
            minReplicas=0,
            maxReplicas=3,
            targetRequests=1,
            scaleDownDelaySeconds=2,
        )
    )
    await eventually(lambda: listed(served, CHAT), what="the gateway serves chat", within=60)
    assert await model_pods(pipeline.kube, pipeline.namespace, CHAT) == []
    mark = audit.mark()

    started = time.monotonic()
    answer = await served.client().completions.create(model=CHAT, prompt="hello")
    print(f"\nscale from zero: answered {time.monotonic() - started:.2f} s after the request")

    assert answer.choices[0].text == "vllm|chat|"
    [first, *_] = await decisions(served)
    assert (first.from_replicas, first.replicas, first.cause) == (0, 1, "request")
    assert first.reason == "scale from zero: 1 request waits for a ready endpoint"
    scaled = [
        e
        for e in audit.events(since=mark)
        if e.user == OPERATOR_USER
        and (e.resource, e.subresource, e.name) == ("models", "scale", CHAT)
    ]
    assert [(e.verb, e.code) for e in scaled][:1] == [("patch", 200)]
    metrics = await served.gateway_metrics()
    waits = {"model": CHAT, "from_zero": "true", "outcome": "ready"}
    assert sample(metrics, "kaiwo_gateway_endpoint_waits_total", **waits) == 1
    assert sample(metrics, "kaiwo_gateway_endpoint_wait_seconds_count", model=CHAT) == 1
    request = {"model": CHAT, "cause": "request", "direction": "up"}
    assert sample(metrics, "kaiwo_autoscaler_decisions_total", **request) == 1
    assert sample(metrics, "kaiwo_gateway_load_reports_total", trigger="waiting") >= 1
    assert sample(metrics, "kaiwo_autoscaler_leading") == 1


async def test_sustained_load_scales_up_to_the_maximum_and_down_after_the_delay(
    served: Served,
) -> None:
    pipeline = served.pipeline
    stop = asyncio.Event()
    answered = 0

    async def worker() -> None:
        nonlocal answered
        client = served.client()
        while not stop.is_set():
            await client.completions.create(model=CHAT, prompt="hold 1")
            answered += 1

    workers = [asyncio.create_task(worker()) for _ in range(3)]
    try:
        await eventually(
            lambda: replicas_are(served, 3), what="chat scaled to 3 under load", within=SCALE_WITHIN
        )

        async def serving_three() -> bool | Pending:
            pods = await model_pods(pipeline.kube, pipeline.namespace, CHAT)
            ready = [pod for pod in pods if is_ready(pod)]
            return True if len(ready) == 3 else Pending(f"{len(ready)} of {len(pods)} ready")

        await eventually(serving_three, what="three Pods of chat ready", within=SCALE_WITHIN)
    finally:
        stop.set()
        await asyncio.gather(*workers)
    assert answered >= 3

    down = await eventually(
        lambda: replicas_are(served, 0), what="chat back at zero", within=SCALE_WITHIN
    )
    assert down["spec"]["minReplicas"] == 0
    found = await decisions(served)
    ups = [d for d in found if d.cause == "load" and d.replicas > d.from_replicas]
    downs = [d for d in found if d.replicas < d.from_replicas]
    assert ups and max(d.replicas for d in ups) == 3
    assert downs and downs[-1].replicas == 0
    assert all(d.reason.startswith("scale down from") for d in downs)


async def test_a_request_for_a_model_scaled_back_to_zero_scales_it_up_again(
    served: Served,
) -> None:
    """The autoscaler took chat back to zero (the test before): ``spec.replicas`` is now 0,
    not absent as before its first request, and autoscaling/v1 shows a Scale at 0 without
    replicas. The next request scales it up again and is answered (it waited its 60 s and
    got a 503 while the executor's scale from 0 was refused: Invalid, at every request)."""
    pipeline = served.pipeline
    audit = pipeline.audit_log
    assert audit is not None
    at_zero = await model(pipeline, CHAT)
    assert at_zero["spec"]["replicas"] == 0
    await eventually(lambda: _no_pods(pipeline), what="chat's Pods gone", within=SCALE_WITHIN)
    mark = audit.mark()

    answer = await served.client().completions.create(model=CHAT, prompt="hello again")

    assert answer.choices[0].text == "vllm|chat|"
    generation = at_zero["metadata"]["generation"]
    again = [d for d in await decisions(served) if d.generation == generation]
    assert [(d.from_replicas, d.replicas, d.cause) for d in again] == [(0, 1, "request")]
    scaled = [
        (e.verb, e.code)
        for e in audit.events(since=mark)
        if e.user == OPERATOR_USER
        and (e.resource, e.subresource, e.name) == ("models", "scale", CHAT)
    ]
    assert scaled[:1] == [("patch", 200)]
    assert (await model(pipeline, CHAT))["spec"]["replicas"] >= 1


async def _no_pods(pipeline: Pipeline) -> bool | Pending:
    pods = await model_pods(pipeline.kube, pipeline.namespace, CHAT)
    return True if not pods else Pending(f"{len(pods)} Pods")


async def test_a_model_at_zero_with_autoscaling_disabled_is_refused_at_once(
    served: Served,
) -> None:
    pipeline = served.pipeline
    await pipeline.kube.create(
        a_model(
            "fixed",
            pipeline.namespace,
            url="hf://org/fixed",
            engine="VLLM",
            features=["TextGeneration"],
            resourceProfile="cpu:1",
            replicas=0,
            autoscalingDisabled=True,
        )
    )
    await eventually(lambda: listed(served, "fixed"), what="the gateway serves fixed", within=60)

    with pytest.raises(openai.APIStatusError) as refused:
        await served.client().completions.create(model="fixed", prompt="hello")

    assert refused.value.status_code == 503
    body = refused.value.body
    assert isinstance(body, dict)
    assert body["code"] == "model_scaled_to_zero"
    assert "autoscalingDisabled" in body["message"]
    assert (await model(pipeline, "fixed"))["spec"]["replicas"] == 0


async def test_a_model_the_operator_cannot_serve_is_refused_at_once_and_not_scaled(
    served: Served,
) -> None:
    """Its resource profile does not exist: the operator makes no Pod and says so on the
    Model (Configured=False). A request was held 60 s, scaled the Model to 1 for nothing and
    was told "model servers may take minutes to start, try again"."""
    pipeline = served.pipeline
    name = "broken"
    await pipeline.kube.create(
        a_model(
            name,
            pipeline.namespace,
            url="hf://org/broken",
            engine="VLLM",
            features=["TextGeneration"],
            resourceProfile="nope:1",
            minReplicas=0,
        )
    )
    await eventually(lambda: listed(served, name), what="the gateway serves broken", within=60)

    async def told() -> dict[str, Any] | Pending:
        found = await model(pipeline, name)
        configured = condition(found, "Configured")
        if configured and configured["status"] == "False":
            return found
        return Pending(f"Configured: {configured}")

    await eventually(told, what="broken is Configured=False", within=60)
    await asyncio.sleep(1)  # the gateway reads the status the watcher publishes

    started = time.monotonic()
    with pytest.raises(openai.APIStatusError) as refused:
        await served.client().completions.create(model=name, prompt="hello")
    waited = time.monotonic() - started

    assert refused.value.status_code == 503
    body = refused.value.body
    assert isinstance(body, dict)
    assert body["code"] == "model_not_configured"
    assert 'resource profile not found: "nope"' in body["message"]
    assert waited < 30, f"refused after {waited:.1f} s"
    # Not scaled up: its replicas are unset or the 0 its bounds write down (decision 0223).
    assert (await model(pipeline, name))["spec"].get("replicas", 0) == 0
    assert not [d for d in await decisions(served) if d.model.name == name]


@contextlib.asynccontextmanager
async def pods_played(pipeline: Pipeline, name: str) -> AsyncIterator[None]:
    """Every Pod of Model ``name`` runs and turns Ready at the stand-in while inside (the
    ``served`` kubelet plays ``chat``'s only)."""
    stop = asyncio.Event()

    async def play() -> None:
        while not stop.is_set():
            await run_pods(pipeline.kube, pipeline.namespace, name, pod_ip="127.0.0.1")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.2)

    playing = asyncio.create_task(play())
    try:
        yield
    finally:
        stop.set()
        await playing


@contextlib.asynccontextmanager
async def requests_held(served: Served, name: str, clients: int) -> AsyncIterator[None]:
    """``clients`` clients each asking Model ``name`` again and again for an answer held 1 s
    by the stand-in, while inside: that many requests active at a time."""
    stop = asyncio.Event()

    async def ask() -> None:
        client = served.client()
        while not stop.is_set():
            await client.completions.create(model=name, prompt="hold 1")

    asking = [asyncio.create_task(ask()) for _ in range(clients)]
    try:
        yield
    finally:
        stop.set()
        await asyncio.gather(*asking)


async def load_above_max_events(pipeline: Pipeline, name: str) -> list[tuple[str, str, str]]:
    """The Events ``LoadAboveMaxReplicas`` on Model ``name``: type, reason, message."""
    listed = await pipeline.kube.list(resources.EVENT, namespace=pipeline.namespace)
    return [
        (str(e.get("type")), str(e.get("reason")), str(e.get("message")))
        for e in listed.items
        if (e.get("involvedObject") or {}).get("name") == name
        and e.get("reason") == "LoadAboveMaxReplicas"
    ]


def demand_in(message: str) -> int:
    """The replicas a ``LoadAboveMaxReplicas`` message says the load asks for."""
    return int(message.removeprefix("The load asks for ").split(" ")[0])


def capped_model(name: str, namespace: str, *, max_replicas: int) -> dict[str, Any]:
    """A Model from 1 replica up to ``max_replicas``, one active request per replica wanted,
    scaled down 2 s after the load falls."""
    return a_model(
        name,
        namespace,
        url=f"hf://org/{name}",
        engine="VLLM",
        features=["TextGeneration"],
        resourceProfile="cpu:1",
        minReplicas=1,
        maxReplicas=max_replicas,
        targetRequests=1,
        scaleDownDelaySeconds=2,
    )


async def test_load_above_a_models_max_replicas_is_told_on_it_once(served: Served) -> None:
    """Five requests held at a time, one per replica wanted, ``maxReplicas: 2``: the Model
    stops at 2 (as before) and now says so, with the load and the cap, and one Normal Event
    while the load stays; once the load is gone and it is scaled down, the condition turns
    False and nothing more is told (decision 0172)."""
    pipeline = served.pipeline
    name = "capped"
    await pipeline.kube.create(capped_model(name, pipeline.namespace, max_replicas=2))

    async def held(status: str) -> dict[str, Any] | Pending:
        found = await model(pipeline, name)
        limited = condition(found, "LimitedByMaxReplicas")
        if limited is not None and limited["status"] == status:
            return limited
        mine = [
            (d.from_replicas, d.replicas, d.cause, d.average_active_requests)
            for d in await decisions(served)
            if d.model.name == name
        ]
        return Pending(
            f"LimitedByMaxReplicas: {limited}; spec.replicas {found['spec'].get('replicas')}, "
            f"decisions {mine}, conditions {(found.get('status') or {}).get('conditions')}"
        )

    try:
        async with pods_played(pipeline, name):
            await eventually(
                lambda: listed(served, name), what="the gateway serves capped", within=60
            )
            async with requests_held(served, name, 5):
                limited = await eventually(
                    lambda: held("True"), what="capped held back", within=SCALE_WITHIN
                )
                assert limited["reason"] == "LoadAboveMaxReplicas"
                message = limited["message"]
                assert message.startswith("The load asks for ")
                assert message.endswith(
                    " replicas at spec.targetRequests 1 per replica, but spec.maxReplicas is 2: "
                    "2 replicas serve more than their target each; raise spec.maxReplicas to "
                    "scale further"
                )
                assert 3 <= demand_in(message) <= 5
                assert (await model(pipeline, name))["spec"]["replicas"] == 2
                await asyncio.sleep(4)  # more ticks and plans under the same load
            # One Event; its message is the crossing's, which the condition's may have moved on
            # from (the demand rising as the window fills is restated, decision 0175).
            [(kind, reason, crossing)] = await load_above_max_events(pipeline, name)
            assert (kind, reason) == ("Normal", "LoadAboveMaxReplicas")
            assert 3 <= demand_in(crossing) <= 5

            within = await eventually(
                lambda: held("False"), what="capped no longer held back", within=SCALE_WITHIN
            )
            assert within["reason"] == "LoadWithinMaxReplicas"
            print(f"\nheld back: {message}; then: {within['message']}")

            async def back_to_one() -> bool | Pending:
                replicas = (await model(pipeline, name))["spec"].get("replicas")
                return True if replicas == 1 else Pending(f"spec.replicas {replicas}")

            await eventually(back_to_one, what="capped back at 1", within=SCALE_WITHIN)
            assert [reason for _, reason, _ in await load_above_max_events(pipeline, name)] == [
                "LoadAboveMaxReplicas"
            ]
    finally:
        with contextlib.suppress(NotFound):
            await pipeline.kube.delete(resources.KUBEAI_MODEL, name, namespace=pipeline.namespace)


async def test_the_load_rising_while_held_at_max_replicas_is_told_with_its_demand(
    served: Served,
) -> None:
    """A Model at ``minReplicas: 1, maxReplicas: 1``, one request per replica wanted: two
    requests held at a time hold it back, 2 asked; six at a time, the condition says 6 (it
    said 2 for as long as the hold lasted before, decision 0175); back to two, it says the
    fall to half of 6 or below (2 or 3, as the window empties). One Normal Event in all, the
    first hold's."""
    pipeline = served.pipeline
    name = "rising"
    await pipeline.kube.create(capped_model(name, pipeline.namespace, max_replicas=1))

    async def demand_told(accepted: set[int]) -> dict[str, Any] | Pending:
        found = await model(pipeline, name)
        limited = condition(found, "LimitedByMaxReplicas") or {}
        message = str(limited.get("message", ""))
        if limited.get("status") == "True" and demand_in(message) in accepted:
            return limited
        mine = [
            (d.from_replicas, d.replicas, d.average_active_requests)
            for d in await decisions(served)
            if d.model.name == name
        ]
        return Pending(f"LimitedByMaxReplicas: {limited or None}; decisions {mine}")

    try:
        async with pods_played(pipeline, name):
            await eventually(lambda: listed(served, name), what="the gateway serves it", within=60)
            async with requests_held(served, name, 2):
                first = await eventually(
                    lambda: demand_told({2}), what="held back, 2 asked", within=SCALE_WITHIN
                )
                async with requests_held(served, name, 4):
                    await eventually(
                        lambda: demand_told({6}), what="6 asked told", within=SCALE_WITHIN
                    )
                fell = await eventually(
                    lambda: demand_told({2, 3}), what="the fall told", within=SCALE_WITHIN
                )
        assert first["message"] == (
            "The load asks for 2 replicas at spec.targetRequests 1 per replica, but "
            "spec.maxReplicas is 1: 1 replica serves more than its target; raise "
            "spec.maxReplicas to scale further"
        )
        assert fell["lastTransitionTime"] == first["lastTransitionTime"]
        assert await load_above_max_events(pipeline, name) == [
            ("Normal", "LoadAboveMaxReplicas", first["message"])
        ]
        assert (await model(pipeline, name))["spec"]["replicas"] == 1
        mine = [d for d in await decisions(served) if d.model.name == name]
        told = [demand_in_average(d) for d in mine if d.from_replicas == d.replicas]
        print(
            f"\ntold while held at 1: {told}; every decision: "
            f"{[(d.from_replicas, d.replicas, d.cause, d.average_active_requests) for d in mine]}"
        )
        assert told[0] == 2 and 6 in told and told[-1] in (2, 3)
    finally:
        with contextlib.suppress(NotFound):
            await pipeline.kube.delete(resources.KUBEAI_MODEL, name, namespace=pipeline.namespace)


def demand_in_average(decision: ScaleDecidedV1) -> int:
    """The replicas a decision found the load asking for (as the planner reads it)."""
    return math.ceil(decision.average_active_requests / decision.target_requests)


async def test_requests_whose_clients_hang_up_while_waiting_stop_counting_at_once(
    served: Served,
) -> None:
    """Three clients with a 1 s timeout ask for a Model at zero whose Pods never turn Ready:
    the first request scales it to one, as any would; once the clients have hung up, the load
    is gone within a couple of reports, not when each wait ends (60 s here), and the Model goes
    back to zero after its delay (decision 0174)."""
    pipeline = served.pipeline
    name = "abandoned"
    await pipeline.kube.create(
        a_model(
            name,
            pipeline.namespace,
            url="hf://org/abandoned",
            engine="VLLM",
            features=["TextGeneration"],
            resourceProfile="cpu:1",
            minReplicas=0,
            maxReplicas=3,
            targetRequests=1,
            scaleDownDelaySeconds=2,
        )
    )
    try:
        await eventually(lambda: listed(served, name), what="the gateway serves it", within=60)

        async def gives_up(session: aiohttp.ClientSession) -> None:
            body = {"model": name, "prompt": "hello"}
            with pytest.raises(TimeoutError):
                await session.post(f"{served.base_url}/completions", json=body)

        timeout = aiohttp.ClientTimeout(total=1)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            await asyncio.gather(*(gives_up(session) for _ in range(3)))
        hung_up = time.monotonic()

        async def no_load() -> bool | Pending:
            metrics = await served.gateway_metrics()
            active = sample(metrics, "kaiwo_autoscaler_active_requests", model=name)
            gone = sample(metrics, "kaiwo_gateway_endpoint_waits_total", model=name)
            return True if active == 0 and gone == 3 else Pending(f"{active} active, {gone}")

        await eventually(no_load, what="no load left", within=SCALE_WITHIN)
        dropped = time.monotonic() - hung_up
        at_zero = await eventually(
            lambda: replicas_are_of(served, name, 0), what="back at zero", within=SCALE_WITHIN
        )
        down = time.monotonic() - hung_up
        mine = [d for d in await decisions(served) if d.model.name == name]
        scales = [(d.from_replicas, d.replicas, d.cause) for d in mine]
        print(
            f"\nclients gone: no load {dropped:.1f} s later, at zero {down:.1f} s later: {scales}"
        )

        assert dropped < 10, f"the load stayed {dropped:.1f} s after the clients hung up"
        assert at_zero["spec"]["minReplicas"] == 0
        metrics = await served.gateway_metrics()
        waits = {"model": name, "from_zero": "true"}
        assert sample(metrics, "kaiwo_gateway_endpoint_waits_total", **waits) == 3
        assert (
            sample(metrics, "kaiwo_gateway_endpoint_waits_total", outcome="client_gone", **waits)
            == 3
        )
        assert sample(metrics, "kaiwo_gateway_requests_total", model=name, code="499") == 3
        assert (mine[0].from_replicas, mine[0].replicas, mine[0].cause) == (0, 1, "request")
        assert mine[-1].replicas == 0
    finally:
        with contextlib.suppress(NotFound):
            await pipeline.kube.delete(resources.KUBEAI_MODEL, name, namespace=pipeline.namespace)


async def replicas_are_of(served: Served, name: str, wanted: int) -> dict[str, Any] | Pending:
    found = await model(served.pipeline, name)
    replicas = found["spec"].get("replicas")
    return found if replicas == wanted else Pending(f"spec.replicas is {replicas}")


async def kaiwo(*arguments: str) -> Any:
    env = {**os.environ, "COLUMNS": "400"}
    return await asyncio.to_thread(CliRunner().invoke, app, list(arguments), env=env)


async def test_explain_names_the_scale_decisions_and_replay_reproduces_every_plan(
    served: Served,
) -> None:
    pipeline = served.pipeline
    store = ("--store", pipeline.store_url)
    workload = f"Model/{pipeline.namespace}/{CHAT}"
    wanted = (
        "scale decided: 0 -> 1 replicas (scale from zero: 1 request waits",
        "-> 3 replicas (scale up from",
        "-> 0 replicas (scale down from",
        "window 2s of 4 samples",
        "(scale): ",
        "scale 0 -> 1 replicas",
    )

    async def explained() -> str | Pending:
        # The recorder takes in the last decisions and plans a moment after they were made.
        result = await kaiwo("events", "explain", workload, *store)
        assert result.exit_code == 0, result.output
        missing = [text for text in wanted if text not in result.output]
        return result.output if not missing else Pending(f"not yet explained: {missing}")

    await eventually(explained, what="explain names every scale decision", within=60)

    async def reproduced() -> Any:
        # The recorder takes each stream in through a consumer of its own: the last plans
        # can be in the store a moment before the observations they were made from, and
        # replayed then, they differ. Replay reads the store as it is; once it holds every
        # observation, every plan is reproduced.
        result = await kaiwo(
            "events", "replay", "--workload", f"{pipeline.namespace}/{CHAT}", *store
        )
        last = result.stdout.strip().splitlines()[-1:]
        return result if result.exit_code == 0 else Pending(f"replay: {last}")

    replayed = await eventually(reproduced, what="replay reproduces every plan", within=60)
    summary = replayed.stdout.strip().splitlines()[-1]
    plans = int(summary.split(" plans")[0])
    assert summary.startswith(f"{plans} plans, {plans} reproduced, 0 differ, 0 skipped")
    assert "(scale, obs" in replayed.output
