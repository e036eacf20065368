"""The console on the whole running stack (issue 27): ``kaiwo up`` (watcher, planner,
executor, recorder, console) against the real API server with the real Kueue, kube-scheduler
and kwok's nodes (:func:`tests.real_stack.real_stack`). Nothing is published by the test: it
creates KaiwoJobs and reads what the pages, the CLI and the public events show.

One module-scoped operator and one 8-GPU MI300X node and ClusterQueue: ``first`` holds all 8
GPUs for a while, ``second`` waits for them (PENDING, position 1 with an estimate), then runs
once ``first`` is deleted. A browser on the workloads page watches ``second`` go from PENDING
to RUNNING without a reload.

The monitor runs too, reading a real Prometheus that scrapes a small exporter of the GPU
series the test sets (:mod:`tests.prometheus_server`): ``first``'s GPUs idle at 3%, below the
KaiwoConfig's 10%, and the GPU nodes page shows the node's GPUs busy and ``first`` flagged
idle, from the readings the recorder stored and the Pods the watcher observed.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final

import aiohttp
import pytest
import pytest_asyncio
from kaiwo_contracts.events.public import WorkloadEventV2
from kaiwo_contracts.events.streams import PUBLIC_STREAM
from kaiwo_kube import resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_runtime.nats_server import free_port
from kaiwo_sandbox.fleet import NODE_TYPES, NodeSpec

from tests.chromium import Chromium, Page
from tests.integration.gateway.test_gateway import until
from tests.integration.pipeline import cluster_actors as actors
from tests.integration.pipeline.harness import Pipeline, running_pipeline
from tests.integration.test_real_stack import flavor, kaiwo, kaiwo_job, queue, reaches
from tests.prometheus_server import GpuExporter, GpuSeries, running_prometheus
from tests.real_cluster import RealCluster
from tests.real_stack import kwok_fleet

pytestmark = [
    pytest.mark.k8s,
    pytest.mark.nats,
    pytest.mark.slow,
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.timeout(600),
]

NODE: Final = NodeSpec("console-mi300x-1", NODE_TYPES["amd-mi300x"])
QUEUE: Final = "console"
SCREENSHOTS = Path(
    os.environ.get("KAIWO_SCREENSHOTS_DIR", Path(__file__).parents[3] / ".artifacts" / "console")
)


def queue_config(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": actors.KAIWO_API,
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": actors.QUEUE_CONFIG},
        "spec": {
            "resourceFlavors": [
                {
                    "name": "mi300x",
                    "nodeLabels": {"amd.com/gpu.product-name": NODE.type.product},
                }
            ],
            "clusterQueues": [queue(QUEUE, namespace, flavor("mi300x", amd=8))],
        },
    }


MONITORING: Final = {
    "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
    "kind": "KaiwoConfig",
    "metadata": {"name": actors.KAIWO_CONFIG},
    "spec": {"resourceMonitoring": {"lowUtilizationThreshold": 10}},
}
"""Below 10% a workload is underutilized (never terminated: ``terminateUnderutilized`` is
off by default)."""
IDLE_PERCENT: Final = 3.0


class Console:
    def __init__(self, pipeline: Pipeline, url: str, exporter: GpuExporter) -> None:
        self.pipeline = pipeline
        self.url = url.rstrip("/")
        self.exporter = exporter

    async def get(self, path: str) -> tuple[int, str]:
        async with (
            aiohttp.ClientSession() as session,
            session.get(self.url + path, allow_redirects=False) as response,
        ):
            return response.status, await response.text()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def console(
    real_stack: RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Console]:
    port = free_port()
    async with (
        await KubernetesAsyncioAdapter.from_kubeconfig(real_stack.kubeconfig) as admin,
        GpuExporter().serving() as exporter,
        running_prometheus(exporter, tmp_path_factory.mktemp("prometheus")) as prometheus,
        kwok_fleet(admin, [NODE]),
        running_pipeline(
            tmp_path_factory.mktemp("kaiwo"),
            real=real_stack,
            gpu_cluster=False,
            console_port=port,
            metrics_endpoint=prometheus.url,
            service_env={
                "KAIWO_MONITOR_POLLING_INTERVAL_SECONDS": "1",
                "KAIWO_CONSOLE_HISTORY_SECONDS": "1",
            },
        ) as pipeline,
    ):
        await admin.apply(
            queue_config(pipeline.namespace), field_manager="cluster-admin", force=False
        )
        # The pipeline's clean-up removes the KaiwoConfig once the operator stopped.
        await admin.apply(MONITORING, field_manager="cluster-admin", force=True)
        url = pipeline.stack.options.console_url
        assert url is not None
        yield Console(pipeline, url, exporter)


async def test_each_page_a_pending_workload_and_its_move_to_running_in_chromium(
    console: Console, tmp_path: Path
) -> None:
    pipeline, ns = console.pipeline, console.pipeline.namespace
    await pipeline.kube.create(kaiwo_job("first", ns, queue_name=QUEUE, gpus=8, run_seconds=90))
    await reaches(pipeline, "first", ns, "RUNNING")
    # first's 8 GPUs, as the exporter reports them for its Pod: idle at 3%.
    pods = await pipeline.kube.list(
        resources.POD, namespace=ns, label_selector="kaiwo.silogen.ai/name=first"
    )
    (pod,) = [p["metadata"]["name"] for p in pods.items]
    console.exporter.series = [GpuSeries(ns, pod, str(gpu), IDLE_PERCENT) for gpu in range(8)]
    await pipeline.kube.create(kaiwo_job("second", ns, queue_name=QUEUE, gpus=8, run_seconds=5))
    await reaches(pipeline, "second", ns, "PENDING")

    # The CLI on the same cluster: second's place in the ClusterQueue and the estimate's basis.
    state = str(pipeline.stack.options.state_dir)
    status = await kaiwo(state, "status", "second", "-n", ns)
    assert status.exit_code == 0, status.output
    assert f"Estimate:  #1 in {QUEUE} (amd.com/gpu), starts " in status.output
    assert "Basis:     " in status.output
    queues = await kaiwo(state, "queues")
    assert queues.exit_code == 0, queues.output
    assert f"1 in {QUEUE}" in queues.output

    async with (
        Chromium.start(tmp_path / "chromium") as browser,
        browser.new_page() as page,
    ):

        async def main_text() -> str:
            return str(await page.evaluate("document.querySelector('main').innerText"))

        # The queue: second waits at position 1 behind first's 8 of 8 GPUs.
        await page.goto(f"{console.url}/queues")

        async def queued() -> bool:
            text = await main_text()
            return "second" in text and "#1" in text

        await until(queued, within=60)
        assert "8 of 8" in await main_text()
        await page.screenshot(SCREENSHOTS / "real-stack-queues.png")

        await _nodes_page_shows_first_idle(page, console, ns)

        for path, expected in (
            ("/models", "Models"),
            (f"/workloads/{ns}/first", "Timeline"),
        ):
            await page.goto(console.url + path)

            async def shows(expected: str = expected) -> bool:
                return expected in await main_text()

            await until(shows, within=60)
        assert f"observed KaiwoJob {ns}/first" in await main_text()

        async def row() -> str:
            return str(
                await page.evaluate(
                    "[...document.querySelectorAll('#workloads tr')]"
                    ".map(r => r.innerText).find(t => t.includes('second')) || ''"
                )
            )

        await page.goto(f"{console.url}/workloads?namespace={ns}")
        assert "PENDING" in await row()
        await page.evaluate("window.kaiwoMark = 'not reloaded'")
        await page.screenshot(SCREENSHOTS / "real-stack-pending.png")
        # The user frees first's GPUs rather than wait out its 90 s run: second is admitted.
        await pipeline.kube.delete(resources.KAIWO_JOB, "first", namespace=ns)

        async def running() -> bool:
            return "RUNNING" in await row() or "COMPLETE" in await row()

        await until(running, within=180)
        assert await page.evaluate("window.kaiwoMark") == "not reloaded"
        await page.screenshot(SCREENSHOTS / "real-stack-running.png")


async def _nodes_page_shows_first_idle(page: Page, console: Console, ns: str) -> None:
    """The node's 8 GPUs held by first, 8 x 3% = 0.24 of them busy (shown 0.2, 3%), and first
    flagged idle with a link to its page: by the monitor's reading at once, by the planner's
    ResourceUnderutilization verdict soon after."""
    await page.goto(f"{console.url}/nodes")

    async def node_row() -> str:
        return str(
            await page.evaluate(
                f"(document.getElementById('node-{NODE.name}') || {{innerText: ''}}).innerText"
            )
        )

    async def flagged_by_the_planner() -> bool:
        row = await node_row()
        return "0.2 GPUs (3%)" in row and "GpuUtilizationLow" in row

    await until(flagged_by_the_planner, within=120)
    row = await node_row()
    assert "8 / 8" in row
    assert f"{ns}/first" in row
    assert "idle" in row
    link = await page.evaluate(
        f"document.querySelector('#node-{NODE.name} a').getAttribute('href')"
    )
    assert link == f"/workloads/{ns}/first"
    await page.screenshot(SCREENSHOTS / "real-stack-nodes.png")


async def test_the_planner_told_queued_with_the_estimate_on_the_public_stream(
    console: Console,
) -> None:
    """The queued transition (WorkloadEventV2) of the waiting job, as subscribers read it."""
    pipeline, ns = console.pipeline, console.pipeline.namespace
    subscription = await pipeline.js.subscribe(
        f"kaiwo.public.workload.{ns}.kaiwojob.>", stream=PUBLIC_STREAM, ordered_consumer=True
    )
    queued: list[dict[str, Any]] = []

    async def told() -> bool:
        try:
            message = await subscription.next_msg(timeout=1)
        except TimeoutError:
            return bool(queued)
        if (message.headers or {}).get("ce-type") == WorkloadEventV2.EVENT_TYPE:
            queued.append(json.loads(message.data))
        return any(e["workload"]["name"] == "second" for e in queued)

    try:
        await until(told, within=60)
    finally:
        await subscription.unsubscribe()

    second = next(e for e in queued if e["workload"]["name"] == "second")
    assert second["transition"] == "queued"
    estimate = second["estimate"]
    assert (estimate["clusterQueue"], estimate["resource"], estimate["gpus"]) == (
        QUEUE,
        "amd.com/gpu",
        8,
    )
    assert (estimate["position"], estimate["capacityGpus"]) == (1, 8)
    # Nothing has finished in this queue yet and no duration was declared: the basis says so.
    assert estimate["method"] in ("admission rate", "no history")
