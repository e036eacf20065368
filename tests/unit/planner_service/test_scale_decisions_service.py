"""The planner service takes in the autoscaler's decisions like the monitor's findings: the
Model is planned again with the scale, the plan records ``scaleSequence``, the decision is
in the snapshot, and a decision restated changes nothing."""

from __future__ import annotations

from typing import Any

from kaiwo_contracts.events.autoscaling import ScaleDecidedV1
from kaiwo_contracts.events.envelope import Envelope
from kaiwo_contracts.events.streams import GATEWAY_STREAM
from kaiwo_contracts.events.subjects import scale_subject
from kaiwo_contracts.plans import ObjectRef, ScaleIntent

MODEL = ObjectRef(api_version="kubeai.org/v1", kind="Model", name="llm", namespace="ai", uid="m-1")


def llm(replicas: int | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"url": "hf://org/model", "engine": "VLLM", "resourceProfile": "cpu:1"}
    if replicas is not None:
        spec["replicas"] = replicas
    return {
        "apiVersion": "kubeai.org/v1",
        "kind": "Model",
        "metadata": {"name": "llm", "namespace": "ai", "uid": "m-1", "generation": 3},
        "spec": spec,
    }


async def decide(
    harness: Any, *, from_replicas: int, replicas: int, event_id: str, model: ObjectRef = MODEL
) -> None:
    decision = ScaleDecidedV1(
        model=model,
        generation=3,
        from_replicas=from_replicas,
        replicas=replicas,
        cause="request",
        active_requests=1,
        average_active_requests=0,
        window_seconds=600,
        samples=60,
        target_requests=100,
        scale_down_delay_seconds=30,
        reason="scale from zero: 1 request waits for a ready endpoint",
    )
    envelope = Envelope.new(
        data=decision,
        source="/kaiwo/gateway",
        time=harness.clock(),
        correlationid=model.uid or "",
        subject=f"ai/{model.name}",
        id=event_id,
    )
    subject = scale_subject(namespace=model.namespace or "", uid=model.uid or "")
    await harness.watcher.publish(envelope, subject)


async def test_a_decision_plans_the_model_with_its_scale_and_records_the_sequence(
    harness: Any,
) -> None:
    service = harness.service(plan_fn=None)
    await service.start()
    await harness.observe(llm(0), "10", "ADDED")
    await harness.drain(service)
    before = [p for p in harness.plans() if p.data.plan.owner.kind == "Model"]
    assert [p.data.plan.scale for p in before] == [None]

    harness.clock.advance(5)
    await decide(harness, from_replicas=0, replicas=1, event_id="decision-1")
    await harness.drain(service)

    models = [p for p in harness.plans() if p.data.plan.owner.kind == "Model"]
    scaled = models[-1]
    assert len(models) == 2
    assert scaled.data.trigger == "scale"
    assert scaled.causationid == "decision-1"
    assert scaled.data.plan.scale == ScaleIntent(target=MODEL, replicas=1, from_replicas=0)
    assert scaled.data.scale_sequence == 1
    assert scaled.data.planned_at == harness.clock()
    [stored] = harness.server.stream_messages(GATEWAY_STREAM)
    assert stored.sequence == 1

    # The next tick restates it (same generation, from and to): no new plan.
    harness.clock.advance(10)
    await decide(harness, from_replicas=0, replicas=1, event_id="decision-2")
    await harness.drain(service)
    assert len([p for p in harness.plans() if p.data.plan.owner.kind == "Model"]) == 2

    # Carried out: the Model comes back at generation 4 with one replica, and its plan has
    # a Pod and no scale any more.
    carried_out = llm(1)
    carried_out["metadata"]["generation"] = 4
    await harness.observe(carried_out, "11")
    await harness.drain(service)
    last = [p for p in harness.plans() if p.data.plan.owner.kind == "Model"][-1]
    assert last.data.plan.scale is None
    assert [d["kind"] for d in last.data.plan.desired].count("Pod") == 1


async def test_the_decision_survives_a_restart_in_the_snapshot(harness: Any) -> None:
    service = harness.service(plan_fn=None)
    await service.start()
    await harness.observe(llm(None), "10", "ADDED")
    await decide(harness, from_replicas=0, replicas=1, event_id="decision-1")
    await harness.drain(service)
    await service.save_snapshot()

    restarted = harness.service(plan_fn=None)
    await restarted.start()
    assert restarted.projection.scale_requests.last_sequence == 1
    request = restarted.projection.scale_requests.get("m-1")
    assert request is not None
    assert (request.from_replicas, request.replicas, request.generation) == (0, 1, 3)


async def test_a_decision_for_a_model_that_does_not_exist_is_refused_and_counted(
    harness: Any,
) -> None:
    service = harness.service(plan_fn=None)
    await service.start()
    await harness.observe(llm(None), "10", "ADDED")
    await harness.drain(service)
    plans_before = len(harness.plans())

    ghost = MODEL.model_copy(update={"name": "ghost", "uid": "no-such-model"})
    await decide(harness, from_replicas=0, replicas=4, event_id="forged-1", model=ghost)
    # The uid of a Model, but in another namespace than the decision claims.
    elsewhere = MODEL.model_copy(update={"namespace": "team-b"})
    await decide(harness, from_replicas=0, replicas=4, event_id="forged-2", model=elsewhere)
    await harness.drain(service)

    assert len(harness.plans()) == plans_before
    refused = service.metrics.registry.registry.get_sample_value(
        "kaiwo_planner_scale_decisions_total", {"outcome": "refused"}
    )
    assert refused == 2
    # Nor does the borrowed uid scale the real Model later, when it is planned again.
    await harness.observe(llm(0), "11")
    await harness.drain(service)
    assert [p.data.plan.scale for p in harness.plans()[plans_before:]] == [None]
