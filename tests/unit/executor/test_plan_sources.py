"""Plans bound to what they were made from: the executor compares every source of a plan with
the live object before it carries the plan out (decision 0038). Fake API server, in-memory
bus; the real ones: tests/integration/security/test_forged_messages.py."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from kaiwo_contracts.events.envelope import Envelope
from kaiwo_contracts.events.observed import ObservedObjectV1
from kaiwo_contracts.events.plans import PlanDecidedV1
from kaiwo_contracts.events.results import PlanRefusedV1
from kaiwo_contracts.events.streams import bus_topology
from kaiwo_contracts.events.subjects import observed_subject, plan_subject
from kaiwo_contracts.plan_sources import source_of
from kaiwo_contracts.plans import ObjectRef, Plan
from kaiwo_executor.api_retries import RetryPolicy
from kaiwo_executor.service import ExecutorService
from kaiwo_kube import resources
from kaiwo_kubefake import ResourceKind
from kaiwo_runtime.dead_letters import DLQ_REASON
from kaiwo_runtime.memory_bus import MemoryBus
from kaiwo_runtime.memory_jetstream import MemoryJetStream

from tests.unit.executor.conftest import (
    KAIWO_JOB,
    KAIWO_QUEUE_CONFIG,
    FlakyKube,
    Harness,
    owner_harness,
)

PLANNED = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
KAIWO_CONFIG = ResourceKind(
    group="config.kaiwo.silogen.ai",
    version="v1alpha1",
    plural="kaiwoconfigs",
    kind="KaiwoConfig",
    namespaced=False,
)


@pytest.fixture
async def configured(tmp_path: Path) -> AsyncIterator[Harness]:
    """The KaiwoJob ``train`` and the KaiwoConfig ``kaiwo`` its plans read."""
    job = {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoJob",
        "metadata": {"name": "train", "namespace": "team-a"},
        "spec": {"image": "busybox:1.36"},
    }
    kinds = (KAIWO_JOB, KAIWO_QUEUE_CONFIG, KAIWO_CONFIG)
    async for found in owner_harness(tmp_path, kinds=kinds, owner=job):
        found.fake.store.put(
            KAIWO_CONFIG,
            {
                "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
                "kind": "KaiwoConfig",
                "metadata": {"name": "kaiwo"},
                "spec": {"scheduling": {"kubeSchedulerName": "kaiwo-scheduler"}},
            },
        )
        yield found


async def _service(harness: Harness, kube: Any = None) -> tuple[MemoryBus, ExecutorService]:
    async def no_sleep(_seconds: float) -> None:
        return None

    bus = MemoryBus(server=MemoryJetStream(), topology=bus_topology())
    await bus.ensure_streams()
    service = ExecutorService(
        bus,
        kube or harness.kube,
        harness.kv,
        lambda: PLANNED,
        retry=RetryPolicy(attempts=2, initial_delay=0.0, max_delay=0.0),
        sleep=no_sleep,
    )
    return bus, service


async def _publish(bus: MemoryBus, harness: Harness, plan: Plan, *, plan_id: str) -> None:
    envelope = Envelope.new(
        data=PlanDecidedV1.of(plan, planned_at=PLANNED),
        source="/kaiwo/planner",
        time=PLANNED,
        correlationid=harness.owner.uid or "",
        id=plan_id,
    )
    subject = plan_subject(kind="KaiwoJob", namespace="team-a", uid=harness.owner.uid or "")
    await bus.publish(envelope, subject)


def _refusals(bus: MemoryBus) -> list[tuple[str, Envelope[PlanRefusedV1]]]:
    return [
        (stored.subject, Envelope[PlanRefusedV1].from_nats(stored.headers, stored.body))
        for stored in bus.server.stream_messages("KAIWO_RES")
        if stored.subject.startswith("kaiwo.res.refused.")
    ]


def _counter(service: ExecutorService, name: str, **labels: str) -> float:
    value = service.metrics.registry.registry.get_sample_value(name, labels)
    return value or 0.0


def _tampered(harness: Harness, **spec: Any) -> dict[str, Any]:
    """The owner as a forged observation has it: its real identity, another spec."""
    stored = harness.find(harness.owner.api_version, harness.owner.kind, harness.owner.name)
    assert stored is not None
    forged = copy.deepcopy(stored)
    forged["spec"] = {**forged["spec"], **spec}
    return forged


async def test_a_plan_made_from_a_forged_owner_is_refused_and_the_owner_observed_again(
    harness: Harness,
) -> None:
    bus, service = await _service(harness)
    forged = _tampered(harness, image="evil/miner", serviceAccountName="cluster-admin")
    plan = harness.plan([harness.job()]).model_copy(update={"sources": (source_of(forged),)})
    await _publish(bus, harness, plan, plan_id="forged-plan")

    await service.step()

    assert harness.find("batch/v1", "Job", "train") is None
    [dead] = bus.server.stream_messages("KAIWO_DLQ")
    version = source_of(forged).resource_version
    assert dead.headers[DLQ_REASON] == (
        "rejected: PoisonMessage: plan refused: KaiwoJob/team-a/train as the plan was made "
        f"from it (resourceVersion {version}) is not what the API server holds "
        f"(resourceVersion {version})"
    )
    [(subject, refusal)] = _refusals(bus)
    assert subject == f"kaiwo.res.refused.kaiwojob.team-a.{harness.owner.uid}"
    assert refusal.causationid == "forged-plan"
    assert refusal.data.plan_id == "forged-plan"
    assert refusal.data.reobserve == (harness.owner,)
    assert (
        _counter(
            service,
            "kaiwo_executor_source_mismatches_total",
            source_kind="KaiwoJob",
            verdict="refused",
        )
        == 1
    )
    assert _counter(service, "kaiwo_executor_plans_refused_total", owner_kind="KaiwoJob") == 1
    [event] = harness.events(reason="PlanRefused")
    assert event["type"] == "Warning"


async def test_a_plan_made_from_an_older_version_of_its_owner_is_dropped_quietly(
    harness: Harness,
) -> None:
    bus, service = await _service(harness)
    made_from = harness.owner_source()
    await harness.kube.merge_patch(
        resources.KAIWO_JOB, "train", {"spec": {"image": "busybox:1.37"}}, namespace="team-a"
    )
    plan = harness.plan([harness.job()]).model_copy(update={"sources": (made_from,)})
    await _publish(bus, harness, plan, plan_id="late-plan")

    await service.step()

    assert harness.find("batch/v1", "Job", "train") is None
    assert bus.server.stream_messages("KAIWO_DLQ") == []
    assert bus.server.stream_messages("KAIWO_RES") == []
    assert harness.events(reason="PlanRefused") == []
    assert _counter(service, "kaiwo_executor_plans_total", outcome="stale") == 1
    assert (
        _counter(
            service,
            "kaiwo_executor_source_mismatches_total",
            source_kind="KaiwoJob",
            verdict="stale",
        )
        == 1
    )


async def test_a_plan_that_does_not_name_its_owner_as_its_source_is_refused(
    harness: Harness,
) -> None:
    bus, service = await _service(harness)
    plan = harness.plan([harness.job()]).model_copy(update={"sources": ()})
    await _publish(bus, harness, plan, plan_id="unbound-plan")

    await service.step()

    assert harness.find("batch/v1", "Job", "train") is None
    [dead] = bus.server.stream_messages("KAIWO_DLQ")
    assert dead.headers[DLQ_REASON] == (
        "rejected: PoisonMessage: plan refused: the plan does not name its owner "
        "KaiwoJob/team-a/train as its source"
    )


async def test_a_plan_made_from_a_forged_kaiwoconfig_is_refused(configured: Harness) -> None:
    harness = configured
    bus, service = await _service(harness)
    config = harness.find(
        "config.kaiwo.silogen.ai/v1alpha1", "KaiwoConfig", "kaiwo", namespace=None
    )
    assert config is not None
    forged = copy.deepcopy(config)
    forged["spec"]["scheduling"]["kubeSchedulerName"] = "attacker-scheduler"
    plan = harness.plan([harness.job()])
    plan = plan.model_copy(update={"sources": (*plan.sources, source_of(forged))})
    await _publish(bus, harness, plan, plan_id="forged-config-plan")

    await service.step()

    assert harness.find("batch/v1", "Job", "train") is None
    [(_subject, refusal)] = _refusals(bus)
    assert refusal.data.reobserve == (
        ObjectRef(
            api_version="config.kaiwo.silogen.ai/v1alpha1",
            kind="KaiwoConfig",
            name="kaiwo",
            uid=config["metadata"]["uid"],
        ),
    )
    # The real configuration: carried out.
    honest = harness.plan([harness.job()])
    honest = honest.model_copy(update={"sources": (*honest.sources, source_of(config))})
    await _publish(bus, harness, honest, plan_id="honest-plan")
    await service.step()
    assert harness.find("batch/v1", "Job", "train") is not None


async def test_the_owner_read_serves_its_plans_and_is_read_again_when_it_changed(
    harness: Harness, flaky: FlakyKube
) -> None:
    bus, service = await _service(harness, flaky)
    for number in range(3):
        await _publish(bus, harness, harness.plan([harness.job()]), plan_id=f"plan-{number}")
    await service.step()
    # Three plans, one read of the owner (the Job is read once, before its first write, to
    # never adopt one that is not the owner's).
    assert flaky.reads["KaiwoJob"] == 1

    await harness.kube.merge_patch(
        resources.KAIWO_JOB, "train", {"spec": {"image": "busybox:1.37"}}, namespace="team-a"
    )
    await _publish(bus, harness, harness.plan([harness.job()]), plan_id="plan-after-change")
    await service.step()
    # The remembered copy no longer matches the plan: read again, once, and admitted.
    assert flaky.reads["KaiwoJob"] == 2
    assert _counter(service, "kaiwo_executor_plans_total", outcome="applied") == 4


async def test_a_plan_for_an_owner_deleted_meanwhile_is_dropped_without_a_dead_letter(
    harness: Harness,
) -> None:
    bus, service = await _service(harness)
    await _publish(bus, harness, harness.plan([harness.job()]), plan_id="while-it-lived")
    await service.step()
    stored = harness.find(harness.owner.api_version, harness.owner.kind, harness.owner.name)
    assert stored is not None
    # The planner saw it being deleted and planned that version; it is gone when the plan comes.
    deleting = copy.deepcopy(stored)
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T12:00:00Z"
    await harness.kube.delete(resources.KAIWO_JOB, "train", namespace="team-a")
    late = harness.plan([harness.job()]).model_copy(update={"sources": (source_of(deleting),)})
    await _publish(bus, harness, late, plan_id="after-it-went")

    await service.step()

    assert bus.server.stream_messages("KAIWO_DLQ") == []
    assert _counter(service, "kaiwo_executor_plans_total", outcome="owner_deleted") == 1
    [(_, refusal)] = _refusals(bus)  # for the record, and the watcher observes it again
    assert refusal.data.plan_id == "after-it-went"


async def test_after_a_restart_a_plan_for_an_owner_carried_out_before_and_gone_is_dropped(
    harness: Harness,
) -> None:
    """The restarted executor never read the owner, but its memo says it carried out a plan
    for that uid: the owner existed, so a plan that comes after its deletion is no claim
    about an object that never was (seen in CI: a Model deleted with a plan on its way)."""
    bus, service = await _service(harness)
    await _publish(bus, harness, harness.plan([harness.job()]), plan_id="while-it-lived")
    await service.step()
    stored = harness.find(harness.owner.api_version, harness.owner.kind, harness.owner.name)
    assert stored is not None
    deleting = copy.deepcopy(stored)
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T12:00:00Z"
    await harness.kube.delete(resources.KAIWO_JOB, "train", namespace="team-a")
    bus, restarted = await _service(harness)  # a new process: nothing read, the memo kept
    late = harness.plan([harness.job()]).model_copy(update={"sources": (source_of(deleting),)})
    await _publish(bus, harness, late, plan_id="after-it-went")

    await restarted.step()

    assert bus.server.stream_messages("KAIWO_DLQ") == []
    assert _counter(restarted, "kaiwo_executor_plans_total", outcome="owner_deleted") == 1


async def test_a_plan_for_an_owner_never_seen_is_still_dead_lettered(harness: Harness) -> None:
    bus, service = await _service(harness)
    ghost = harness.owner.model_copy(update={"name": "ghost", "uid": "never-existed"})
    plan = harness.plan([]).model_copy(update={"owner": ghost, "sources": ()})
    envelope = Envelope.new(
        data=PlanDecidedV1.of(plan, planned_at=PLANNED),
        source="/kaiwo/planner",
        time=PLANNED,
        correlationid="never-existed",
        id="ghost-plan",
    )
    await bus.publish(
        envelope, plan_subject(kind="KaiwoJob", namespace="team-a", uid="never-existed")
    )

    await service.step()

    [dead] = bus.server.stream_messages("KAIWO_DLQ")
    assert "does not exist" in dead.headers[DLQ_REASON]
    assert _counter(service, "kaiwo_executor_plans_total", outcome="owner_deleted") == 0


async def test_a_plan_for_an_owner_deleted_before_any_plan_of_it_ran_is_dropped(
    harness: Harness,
) -> None:
    """No executor ever read the owner or carried out a plan of it: it was deleted while its
    first plan was on its way (seen in CI: a Model deleted seconds after its creation). The
    watcher observed it, and only the watcher's key publishes observations: no ghost."""
    bus, service = await _service(harness)
    owner = harness.owner
    assert owner.uid is not None
    observed = ObservedObjectV1(
        kind=owner.kind,
        api_version=owner.api_version,
        namespace=owner.namespace,
        name=owner.name,
        uid=owner.uid,
        resource_version="7",
        event_type="ADDED",
        object={"apiVersion": owner.api_version, "kind": owner.kind, "metadata": {}},
    )
    await bus.publish(
        Envelope.new(data=observed, source="/kaiwo/watcher", time=PLANNED, correlationid=owner.uid),
        observed_subject(kind=owner.kind, namespace=owner.namespace, uid=owner.uid),
    )
    await harness.kube.delete(resources.KAIWO_JOB, "train", namespace="team-a")
    await _publish(bus, harness, harness.plan([harness.job()]), plan_id="first-and-late")

    await service.step()

    assert bus.server.stream_messages("KAIWO_DLQ") == []
    assert _counter(service, "kaiwo_executor_plans_total", outcome="owner_deleted") == 1
    assert harness.find("batch/v1", "Job", "train") is None
