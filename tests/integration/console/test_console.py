"""The console end to end: a real nats-server with every identity's key, the watcher's
observations published as the watcher, a SQLite event store holding recorded history, the
console process's ``serve``, and HTTP clients.

Callers (:class:`TableAccess`; the API server's answers are tested on a real one in
``test_console_real_cluster.py``): ``operator`` may list workloads in team-a and team-b and
list nodes, ``alice`` team-a only.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from kaiwo_console.__main__ import serve
from kaiwo_console.settings import ConsoleSettings
from kaiwo_contracts.access import Caller
from kaiwo_contracts.events.autoscaling import ActiveRequestsV1, ModelLoad, ScaleDecidedV1
from kaiwo_contracts.events.monitor import UtilizationV1
from kaiwo_contracts.events.observed import ObservedObjectV1
from kaiwo_contracts.events.permissions import ADMIN, WATCHER, operator_identities
from kaiwo_contracts.events.streams import bus_topology
from kaiwo_contracts.plans import ObjectRef
from kaiwo_eventstore import NewEvent, open_event_store
from kaiwo_runtime.nats_bus import NatsBus
from kaiwo_runtime.nats_credentials import write_credentials
from kaiwo_runtime.nats_server import NatsServer, free_port

from tests.chromium import Chromium, Page
from tests.integration.gateway.table_access import TableAccess
from tests.integration.gateway.test_gateway import connect, observe, until
from tests.unit.console.objects import (
    cluster_queue,
    gpu_node,
    gpu_pod,
    kaiwojob,
    kueue_workload,
    local_queue,
)

pytestmark = [pytest.mark.nats, pytest.mark.asyncio(loop_scope="module")]

NOW = datetime.now(UTC).replace(microsecond=0)
CALLERS = {"operator-token": Caller(name="operator"), "alice-token": Caller(name="alice")}
WORKLOAD_NAMESPACES = {
    "operator": frozenset({"team-a", "team-b"}),
    "alice": frozenset({"team-a"}),
}
CLUSTER_SCOPE = {"operator": frozenset({""})}
OPERATOR = {"Authorization": "Bearer operator-token"}
ALICE = {"Authorization": "Bearer alice-token"}


@dataclass
class Stack:
    watcher: NatsBus
    url: str
    store_url: str
    versions: dict[str, int] = field(default_factory=dict)

    async def observe(self, obj: dict[str, Any], event: str = "ADDED") -> None:
        await observe(self.watcher, self.versions, obj, event)

    async def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
        async with (
            aiohttp.ClientSession() as session,
            session.get(self.url + path, headers=headers or {}, allow_redirects=False) as response,
        ):
            return response.status, await response.text()


def recorded(obj: dict[str, Any], position: int, at: datetime) -> NewEvent:
    """``obj`` as the recorder stores an observation of it."""
    metadata = obj["metadata"]
    payload = ObservedObjectV1(
        kind=obj["kind"],
        api_version=obj["apiVersion"],
        namespace=metadata.get("namespace"),
        name=metadata["name"],
        uid=metadata["uid"],
        resource_version=str(position),
        event_type="MODIFIED",
        object=obj,
    )
    return NewEvent(
        event_id=f"{metadata['uid']}:{position}",
        stream_id=f"workload/{metadata['uid']}",
        type=ObservedObjectV1.EVENT_TYPE,
        time=at,
        source="/kaiwo/watcher",
        correlation_id=metadata["uid"],
        data=payload.model_dump(mode="json", by_alias=True),
        subject=f"{metadata.get('namespace')}/{metadata['name']}",
    )


def utilization(
    name: str, ratio: float, at: datetime, *, below_since: datetime | None = None
) -> NewEvent:
    """The monitor's reading of team-a's ``name`` (``below_since``: the open stretch below
    the 20% threshold)."""
    uid = f"uid-team-a-{name}"
    payload = UtilizationV1(
        workload=ObjectRef(
            api_version="kaiwo.silogen.ai/v1alpha1",
            kind="KaiwoJob",
            name=name,
            namespace="team-a",
            uid=uid,
        ),
        vendor="amd",
        gpu_count=16,
        pod_count=2,
        utilization_ratio=ratio,
        window_start=at - timedelta(minutes=1),
        window_end=at,
        low_utilization_threshold_ratio=0.2,
        underutilized_since=below_since,
    )
    return NewEvent(
        event_id=f"{uid}:utilization:{at.isoformat()}",
        stream_id=f"workload/{uid}",
        type=UtilizationV1.EVENT_TYPE,
        time=at,
        source="/kaiwo/monitor",
        correlation_id=uid,
        data=payload.model_dump(mode="json", by_alias=True),
        subject=f"team-a/{name}",
    )


LLAMA = ObjectRef(
    api_version="kubeai.org/v1", kind="Model", name="llama", namespace="team-a", uid="uid-llama"
)


def load_report(active: int, at: datetime) -> NewEvent:
    payload = ActiveRequestsV1(
        gateway="gateway-0",
        interval_seconds=3600,
        models=(ModelLoad(model=LLAMA, active_requests=active, waiting_requests=1),),
    )
    return NewEvent(
        event_id=f"gateway-0:{at.isoformat()}",
        stream_id="gateway/gateway-0",
        type=ActiveRequestsV1.EVENT_TYPE,
        time=at,
        source="/kaiwo/gateway",
        correlation_id="gateway-0",
        data=payload.model_dump(mode="json", by_alias=True),
    )


def scale_decision(before: int, after: int, at: datetime) -> NewEvent:
    payload = ScaleDecidedV1(
        model=LLAMA,
        generation=1,
        from_replicas=before,
        replicas=after,
        active_requests=6,
        average_active_requests=6,
        window_seconds=60,
        samples=12,
        target_requests=4,
        scale_down_delay_seconds=30,
        reason="6.0 requests on average over 60 s, target 4 per replica",
    )
    return NewEvent(
        event_id=f"uid-llama:scale:{at.isoformat()}",
        stream_id="model/uid-llama",
        type=ScaleDecidedV1.EVENT_TYPE,
        time=at,
        source="/kaiwo/gateway",
        correlation_id="uid-llama",
        data=payload.model_dump(mode="json", by_alias=True),
    )


def llama_model() -> dict[str, Any]:
    return {
        "apiVersion": "kubeai.org/v1",
        "kind": "Model",
        "metadata": {"name": "llama", "namespace": "team-a", "uid": "uid-llama"},
        "spec": {"engine": "VLLM", "replicas": 2, "minReplicas": 1, "maxReplicas": 3},
        "status": {"replicas": {"all": 1, "ready": 1}},
    }


TRAIN_PODS = (
    gpu_pod("train-0", "team-a", "mi300x-1", gpus=8, workload="train"),
    gpu_pod("train-1", "team-a", "mi300x-2", gpus=8, workload="train"),
)
SLEEPY_POD = gpu_pod("sleepy-0", "team-a", "mi300x-3", gpus=4, workload="sleepy")
UNDERUTILIZED = [
    {
        "type": "ResourceUnderutilization",
        "status": "True",
        "reason": "GpuUtilizationLow",
        "message": "GPU utilization has been below 20% of the 4 requested GPU(s)",
    }
]
PREEMPTED = [
    {
        "type": "WorkloadTerminatedEarly",
        "status": "True",
        "reason": "GpuIdlePreemption",
        "message": "GPUs idle below 20% for 30m",
    }
]


async def record_history(url: str) -> None:
    """Five finished 60-minute runs in the research queue, admitted after waits of 10 to 50
    minutes; eval's own observations, and its Kueue Workload waiting."""
    store = await open_event_store(url)
    try:
        events = []
        for index in range(5):
            start = NOW - timedelta(hours=8 - index)
            created = start - timedelta(minutes=10 * (index + 1))
            name = f"old-{index}"
            events.append(
                recorded(
                    kueue_workload(
                        name, admitted_to="research", admitted_at=start, created=created
                    ),
                    index * 2,
                    start,
                )
            )
            events.append(
                recorded(
                    kueue_workload(
                        name,
                        admitted_to="research",
                        admitted_at=start,
                        finished_at=start + timedelta(hours=1),
                        created=created,
                    ),
                    index * 2 + 1,
                    start + timedelta(hours=1),
                )
            )
        eval_waits = kueue_workload("eval", gpus=8, created=NOW - timedelta(minutes=4))
        events.append(recorded(eval_waits, 102, NOW - timedelta(minutes=4)))
        events.append(recorded(kaiwojob("eval", phase="NEW"), 100, NOW - timedelta(minutes=5)))
        events.append(recorded(kaiwojob("eval", phase="PENDING"), 101, NOW - timedelta(minutes=4)))
        # train's Pods on two GPU nodes, then its GPUs as the monitor read them: 90%, 10%,
        # 40% (a minute apart).
        for position, pod in enumerate(TRAIN_PODS, start=200):
            events.append(recorded(pod, position, NOW - timedelta(minutes=5)))
        for index, ratio in enumerate((0.9, 0.1, 0.4)):
            events.append(utilization("train", ratio, NOW - timedelta(minutes=3 - index)))
        # The gateway: 6 requests in flight for llama, then the autoscaler's 1 -> 2.
        for seconds, active in ((60, 2), (40, 5), (20, 6)):
            events.append(load_report(active, NOW - timedelta(seconds=seconds)))
        events.append(scale_decision(1, 2, NOW - timedelta(seconds=10)))
        await store.append(events)
    finally:
        await store.close()


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    directory: Path = tmp_path_factory.mktemp("console")
    credentials = write_credentials(directory / "credentials", operator_identities(bus_topology()))
    store_url = f"sqlite:///{directory / 'events.db'}"
    await record_history(store_url)
    port = free_port()
    async with NatsServer(config=credentials.server_config.read_text()) as server:
        admin = await connect(server, credentials, ADMIN)
        await admin.ensure_streams()
        watcher = await connect(server, credentials, WATCHER)
        stack = Stack(watcher=watcher, url=f"http://127.0.0.1:{port}", store_url=store_url)
        for obj in (
            cluster_queue("research", amd=16),
            local_queue("team-a", "research", "research"),
            kaiwojob("train", phase="RUNNING"),
            kueue_workload(
                "train",
                gpus=16,
                admitted_to="research",
                admitted_at=NOW - timedelta(minutes=30),
            ),
            kaiwojob("eval", phase="PENDING"),
            kueue_workload("eval", gpus=8, created=NOW - timedelta(minutes=4)),
            kaiwojob("other", "team-b", phase="RUNNING", queue="team-b"),
            {
                **kaiwojob("idle", phase="TERMINATED", conditions=PREEMPTED),
                "status": {
                    "status": "TERMINATED",
                    "conditions": PREEMPTED,
                    "preemptedFor": {"kind": "KaiwoJob", "namespace": "team-a", "name": "eval"},
                },
            },
            llama_model(),
            gpu_node("mi300x-1"),
            gpu_node("mi300x-2"),
            gpu_node("mi300x-3"),
            *TRAIN_PODS,
            kaiwojob("sleepy", phase="RUNNING", gpus=4, queue=None, conditions=UNDERUTILIZED),
            SLEEPY_POD,
        ):
            await stack.observe(obj)
        settings = ConsoleSettings(
            nats_url=server.url,
            nats_credentials_file=credentials.seed("console"),
            console_host="127.0.0.1",
            console_port=port,
            health_host="127.0.0.1",
            health_port=free_port(),
            eventstore_url=store_url,
            console_history_seconds=0.2,
        )
        stop = asyncio.Event()
        access = (
            TableAccess(tokens=CALLERS, namespaces=WORKLOAD_NAMESPACES),
            TableAccess(tokens=CALLERS, namespaces=CLUSTER_SCOPE),
        )
        console = asyncio.create_task(serve(settings, stop, access=access))

        async def answering() -> bool:
            assert not console.done(), console.exception()
            try:
                status, _ = await stack.get("/login")
            except aiohttp.ClientConnectionError:
                return False
            return status == 200

        await until(answering)
        try:
            yield stack
        finally:
            stop.set()
            await console
            await watcher.close()
            await admin.close()


async def test_without_a_token_the_console_asks_to_sign_in(stack: Stack) -> None:
    status, html = await stack.get("/workloads")

    assert status == 401
    assert "Sign in" in html
    assert "train" not in html


async def test_a_tenant_sees_only_the_workloads_of_their_namespaces(stack: Stack) -> None:
    _, everything = await stack.get("/workloads", OPERATOR)
    status, alices = await stack.get("/workloads", ALICE)
    hidden, _ = await stack.get("/workloads/team-b/other", ALICE)

    assert status == 200
    assert all(name in everything for name in (">train<", ">eval<", ">other<"))
    assert ">train<" in alices and ">eval<" in alices
    assert ">other<" not in alices
    assert hidden == 404


async def test_the_queue_shows_the_pending_workload_with_its_position_and_estimate(
    stack: Stack,
) -> None:
    async def estimated_from_runs() -> bool:
        _, html = await stack.get("/queues", ALICE)
        return "from recorded run times: 5 runs" in html

    await until(estimated_from_runs)
    _, html = await stack.get("/queues", ALICE)

    # train holds all 16 GPUs until 30 minutes after NOW (runs took 60): eval starts then.
    assert f"#1 · starts ~{NOW + timedelta(minutes=30):%H:%M} UTC" in html
    assert "16 of 16" in html


async def test_a_workload_page_shows_its_summary_and_its_recorded_timeline(stack: Stack) -> None:
    status, html = await stack.get("/workloads/team-a/eval", ALICE)

    assert status == 200
    assert "alice@example.com" in html
    assert "observed KaiwoJob team-a/eval" in html
    assert "<svg id=phases" in html


async def test_a_workload_page_draws_its_gpu_utilization_from_the_monitors_readings(
    stack: Stack,
) -> None:
    _, html = await stack.get("/workloads/team-a/train", ALICE)

    assert "<svg id=utilization" in html
    assert "3 readings; last 40% at" in html


async def test_a_preempted_workload_says_why_and_for_whom(stack: Stack) -> None:
    _, html = await stack.get("/workloads/team-a/idle", ALICE)

    assert "<b>GpuIdlePreemption</b> for <b id=beneficiary>KaiwoJob team-a/eval</b>" in html


async def test_the_models_page_shows_requests_in_flight_and_the_autoscalers_decisions(
    stack: Stack,
) -> None:
    async def reported() -> bool:
        _, html = await stack.get("/models", ALICE)
        return "<td class=inflight>6 (1 waiting)</td>" in html

    await until(reported)
    _, html = await stack.get("/models", ALICE)

    assert "1 → 2 (load, average 6.0): 6.0 requests on average over 60 s" in html
    assert "<svg class=load" in html


async def test_gpu_nodes_need_the_right_to_list_nodes(stack: Stack) -> None:
    refused, _ = await stack.get("/nodes", ALICE)
    allowed, _ = await stack.get("/nodes", OPERATOR)

    assert (refused, allowed) == (403, 200)


async def test_gpu_nodes_show_gpus_busy_their_day_and_the_idle_workloads_on_them(
    stack: Stack,
) -> None:
    """sleepy (4 GPUs on mi300x-3) read now at 2%, below its threshold since a minute ago
    and flagged by the planner; train's two Pods (8 GPUs on each of mi300x-1 and -2) read
    90%, 10%, 40% over the recorded minutes."""
    now = datetime.now(UTC)
    store = await open_event_store(stack.store_url)
    try:
        await store.append(
            [utilization("sleepy", 0.02, now, below_since=now - timedelta(minutes=1))]
        )
    finally:
        await store.close()

    def node_row(html: str, node: str) -> str:
        return html.split(f'<tr id="node-{node}">')[1].split("</tr>", maxsplit=1)[0]

    async def read() -> bool:
        _, html = await stack.get("/nodes", OPERATOR)
        return "0.1 GPUs (1%)" in node_row(html, "mi300x-3")

    await until(read)
    _, html = await stack.get("/nodes", OPERATOR)

    sleepy = node_row(html, "mi300x-3")  # 4 x 0.02 = 0.08 of 8 GPUs
    assert "<td>4 / 8<br>" in sleepy
    assert '<a href="/workloads/team-a/sleepy">team-a/sleepy</a>' in sleepy
    assert '<b class="why idle">idle</b>' in sleepy
    assert "GpuUtilizationLow: GPU utilization has been below 20%" in sleepy
    for node in ("mi300x-1", "mi300x-2"):
        train = node_row(html, node)
        assert '<a href="/workloads/team-a/train">team-a/train</a>' in train
        assert "idle</b>" not in train
        # Placed 5 minutes before NOW with no reading (a gap at x 0), then 8 x 90%, 10%,
        # 40% of 8 GPUs a minute apart: 4 minutes over 240 px, 30 px high.
        assert '<polyline points="120.0,3.0 180.0,27.0 240.0,18.0"' in train


async def test_a_change_reaches_an_open_page_through_server_sent_events(stack: Stack) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.get(stack.url + "/events", headers=ALICE) as events,
    ):
        first = await _next_version(events)
        await stack.observe(kaiwojob("eval", phase="RUNNING"), "MODIFIED")
        second = await asyncio.wait_for(_next_version(events), 60)

    _, fragment = await stack.get(
        "/workloads?namespace=team-a", {**ALICE, "X-Console-Fragment": "1"}
    )
    assert second != first
    assert not fragment.startswith("<!doctype")
    assert "RUNNING</span>" in fragment.split(">eval<")[1].split("</tr>")[0]


async def _next_version(events: aiohttp.ClientResponse) -> str:
    while True:
        line = (await events.content.readline()).decode().strip()
        if line.startswith("data: "):
            return line.removeprefix("data: ")


# --------------------------------------------------------------------------- in Chromium

SCREENSHOTS = Path(
    os.environ.get("KAIWO_SCREENSHOTS_DIR", Path(__file__).parents[3] / ".artifacts" / "console")
)
"""Where the browser tests leave their screenshots (CI keeps the folder as artifacts)."""


async def test_in_chromium_each_page_shows_what_the_reader_may_see(
    stack: Stack, tmp_path: Path
) -> None:
    async with Chromium.start(tmp_path / "chromium") as browser:
        async with browser.new_page(headers=OPERATOR) as page:
            for path, name, expected in (
                ("/workloads", "workloads", "train"),
                ("/queues", "queues", "research"),
                ("/nodes", "nodes", "team-a/sleepy"),
                ("/models", "models", "llama"),
                ("/workloads/team-a/eval", "workload", "Timeline"),
                ("/workloads/team-a/train", "workload-utilization", "3 readings"),
                ("/workloads/team-a/idle", "workload-preempted", "GpuIdlePreemption"),
            ):
                await page.goto(stack.url + path)
                text = await page.evaluate("document.querySelector('main').innerText")
                assert expected in text, (path, text)
                await page.screenshot(SCREENSHOTS / f"{name}.png")
                if name == "queues":
                    await _assert_queue_plots(page)
        async with browser.new_page(headers=ALICE) as page:
            await page.goto(stack.url + "/workloads")
            text = await page.evaluate("document.querySelector('main').innerText")
            assert "train" in text
            assert "other" not in text
            assert "team-b" not in text
            await page.goto(stack.url + "/workloads/team-b/other")
            assert "No such workload." in await page.evaluate("document.body.innerText")


async def _assert_queue_plots(page: Page) -> None:
    """One ClusterQueue: one depth line (eval waits now, and each old run waited alone) and
    one wait chart with a dot per recorded admission (10 to 50 minutes' waits)."""
    counts = await page.evaluate(
        "({depth: document.querySelectorAll('svg.depth').length,"
        " lines: document.querySelectorAll('svg.depth polyline').length,"
        " waits: document.querySelectorAll('svg.waits').length,"
        " dots: document.querySelectorAll('svg.waits circle').length})"
    )
    text = await page.evaluate("document.querySelector('main').innerText")

    assert counts == {"depth": 1, "lines": 1, "waits": 1, "dots": 5}
    assert "Waiting over the same hours (now 1, most 1)" in text
    assert "Wait before admission (5 admitted, median 30m, longest 50m)" in text


async def test_in_chromium_a_workload_moves_from_pending_to_running_without_a_reload(
    stack: Stack, tmp_path: Path
) -> None:
    await stack.observe(kaiwojob("watch-me", phase="PENDING"))
    async with (
        Chromium.start(tmp_path / "chromium") as browser,
        browser.new_page(headers=ALICE) as page,
    ):

        async def row() -> str:
            return str(
                await page.evaluate(
                    "[...document.querySelectorAll('#workloads tr')]"
                    ".map(r => r.innerText).find(t => t.includes('watch-me')) || ''"
                )
            )

        await page.goto(stack.url + "/workloads?namespace=team-a")
        assert "PENDING" in await row()
        # A mark on the window survives only if the page is never loaded again.
        await page.evaluate("window.kaiwoMark = 'not reloaded'")
        await page.screenshot(SCREENSHOTS / "live-before.png")

        await stack.observe(kaiwojob("watch-me", phase="RUNNING"), "MODIFIED")

        async def running() -> bool:
            return "RUNNING" in await row()

        await until(running)
        assert await page.evaluate("window.kaiwoMark") == "not reloaded"
        await page.screenshot(SCREENSHOTS / "live-after.png")
