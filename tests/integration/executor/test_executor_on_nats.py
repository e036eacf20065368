"""The executor on a real nats-server: a plan from JetStream becomes objects and a result.

Also checks that the memo lives in the JetStream key-value bucket: a second executor (new
connection, same bucket) given the same plan under a new id writes nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kaiwo_contracts.crds.kaiwo_v1alpha1 import KaiwoJob
from kaiwo_contracts.crds.schema import custom_resource_definitions
from kaiwo_contracts.events.envelope import Envelope
from kaiwo_contracts.events.plans import PlanDecidedV1
from kaiwo_contracts.events.results import ApplyResultV1
from kaiwo_contracts.events.streams import bus_topology
from kaiwo_contracts.events.subjects import plan_subject
from kaiwo_contracts.plan_sources import source_of
from kaiwo_contracts.plans import ObjectRef, Plan, PruneRule
from kaiwo_executor.service import BUCKET, ExecutorService
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_kubefake import FakeKubeServer
from kaiwo_runtime.kv import NatsKeyValue
from kaiwo_runtime.nats_bus import NatsBus
from kaiwo_runtime.nats_server import NatsServer

from tests.waiting import eventually

pytestmark = pytest.mark.nats

NOW = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
LABEL = "kaiwo.silogen.ai/owner-uid"
KAIWO = "kaiwo.silogen.ai/v1alpha1"


async def _owner(kube: KubernetesAsyncioAdapter) -> dict[str, Any]:
    """The KaiwoJob the plan is for, created: the executor admits plans of existing owners,
    made from what the API server holds (decision 0038)."""
    await kube.ensure_crds(custom_resource_definitions([KaiwoJob]), field_manager="test")
    return await kube.create(
        {
            "apiVersion": KAIWO,
            "kind": "KaiwoJob",
            "metadata": {"name": "train", "namespace": "default"},
            "spec": {"image": "busybox"},
        }
    )


def _plan(stored_owner: dict[str, Any]) -> Plan:
    owner_uid = stored_owner["metadata"]["uid"]
    owner = ObjectRef(
        api_version=KAIWO, kind="KaiwoJob", name="train", namespace="default", uid=owner_uid
    )
    controller = {"apiVersion": KAIWO, "kind": "KaiwoJob", "name": "train", "uid": owner_uid}
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "train-entrypoint",
            "namespace": "default",
            "labels": {LABEL: owner_uid},
            "ownerReferences": [{**controller, "controller": True}],
        },
        "data": {"entrypoint.sh": "python train.py"},
    }
    return Plan(
        owner=owner,
        desired=(config_map,),
        prune=(PruneRule(api_version="v1", kind="ConfigMap"),),
        prune_selector={LABEL: owner_uid},
        sources=(source_of(stored_owner),),
    )


async def _wait_for_results(bus: NatsBus, count: int) -> list[Envelope[ApplyResultV1]]:
    js = bus.client.jetstream()

    async def all_stored() -> bool:
        return (await js.stream_info("KAIWO_RES")).state.messages >= count

    await eventually(all_stored, what=f"{count} results stored")
    results = []
    for sequence in range(1, count + 1):
        stored = await bus.read_stored("KAIWO_RES", sequence)
        assert stored is not None
        results.append(Envelope[ApplyResultV1].from_nats(stored.headers, stored.body))
    return results


async def test_a_plan_published_on_jetstream_is_applied_and_answered(tmp_path: Path) -> None:
    topology = bus_topology()
    async with contextlib.AsyncExitStack() as stack:
        server = await stack.enter_async_context(NatsServer())
        fake = await stack.enter_async_context(FakeKubeServer(kubeconfig_path=tmp_path / "kc"))
        kube = await KubernetesAsyncioAdapter.from_kubeconfig(fake.kubeconfig_path)
        stack.push_async_callback(kube.close)
        bus = await NatsBus.connect(server.url, topology=topology, name="executor-test")
        stack.push_async_callback(bus.close)
        await bus.ensure_streams()
        kv = await NatsKeyValue.open(bus.client, BUCKET)
        service = ExecutorService(bus, kube, kv, lambda: NOW, poll_timeout=0.2)

        stored_owner = await _owner(kube)
        owner_uid = stored_owner["metadata"]["uid"]
        plan = PlanDecidedV1.of(_plan(stored_owner), planned_at=NOW)
        envelope = Envelope.new(
            data=plan,
            source="/kaiwo/planner",
            time=NOW,
            correlationid=owner_uid,
            causationid=f"{owner_uid}:7",
        )
        subject = plan_subject(kind="KaiwoJob", namespace="default", uid=owner_uid)
        await bus.publish(envelope, subject)

        stop = asyncio.Event()
        running = asyncio.create_task(service.run(stop))
        [result] = await _wait_for_results(bus, 1)
        stop.set()
        await asyncio.wait_for(running, 10)

        assert result.causationid == envelope.id
        assert result.correlationid == owner_uid
        assert result.data.outcome == "applied"
        assert [(a.target.display(), a.outcome) for a in result.data.actions] == [
            ("ConfigMap/default/train-entrypoint", "applied")
        ]
        stored = fake.store.find(
            fake.store.kinds.by_kind(api_version="v1", kind="ConfigMap"),
            namespace="default",
            name="train-entrypoint",
        )
        assert stored is not None
        assert stored["data"] == {"entrypoint.sh": "python train.py"}

        # A second executor on a new connection: the bucket says the plan is done.
        other_bus = await NatsBus.connect(server.url, topology=topology, name="executor-two")
        stack.push_async_callback(other_bus.close)
        other_kv = await NatsKeyValue.open(other_bus.client, BUCKET)
        other = ExecutorService(other_bus, kube, other_kv, lambda: NOW, poll_timeout=0.2)
        writes = sum(fake.store.write_requests.values())
        await bus.publish(envelope.model_copy(update={"id": "replayed-plan"}), subject)
        # Run until the answer is out: a pull the first executor left open when it stopped
        # (its connection is still up here) may take the message, which then comes back to
        # this executor after the ack wait.
        other_stop = asyncio.Event()
        other_running = asyncio.create_task(other.run(other_stop))
        [_, second] = await _wait_for_results(bus, 2)
        other_stop.set()
        await asyncio.wait_for(other_running, 10)
        assert second.causationid == "replayed-plan"
        assert [(a.target.display(), a.outcome) for a in second.data.actions] == [
            ("ConfigMap/default/train-entrypoint", "unchanged")
        ]
        assert sum(fake.store.write_requests.values()) == writes
