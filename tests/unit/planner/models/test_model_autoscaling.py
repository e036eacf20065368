"""The autoscaler's decisions in a Model's plan: the scale it carries, while the decision
still applies, how the projection keeps the latest decision per Model, how the cluster's
ceiling on the autoscaler is told on the Model (decision 0115), and how the Model's own
maxReplicas holding the load back is (decision 0172)."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kaiwo_contracts.confinement import refusals
from kaiwo_contracts.crds.kubeai_v1.model import Model
from kaiwo_contracts.events.autoscaling import ScaleDecidedV1
from kaiwo_contracts.plans import ObjectRef, Plan, ScaleIntent
from kaiwo_planner.domain.models.autoscaling import (
    ClusterCeiling,
    ceiling_condition,
    max_replicas_condition,
)
from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.state.projection import Projection
from kaiwo_planner.domain.state.scale_request import ScaleRequest
from kaiwo_planner.domain.status.conditions import ConditionSpec

from tests.planning_calls import planned
from tests.unit.planner.models.building import NAMESPACE, NOW, desired, model, plan_for

BASE: dict[str, Any] = {"url": "hf://org/model", "engine": "VLLM", "resourceProfile": "cpu:1"}
REF = ObjectRef(api_version="kubeai.org/v1", kind="Model", name="llm", namespace="ai", uid="u-1")
LIVE = {"metadata": {"uid": "u-1"}}


def request(
    *,
    generation: int = 1,
    from_replicas: int = 1,
    replicas: int = 3,
    at: datetime = NOW,
    demand: int | None = None,
) -> ScaleRequest:
    return ScaleRequest(
        uid="u-1",
        at=at,
        generation=generation,
        from_replicas=from_replicas,
        replicas=replicas,
        namespace="ai",
        name="llm",
        demand=demand,
    )


def plan_with(owner: dict[str, Any], found: ScaleRequest | None) -> Plan:
    cluster = ClusterState.from_wire(objects=[owner], namespaces=[NAMESPACE])
    if found is not None:
        cluster = dataclasses.replace(cluster, scale_requests={"u-1": found})
    plan = planned(owner=owner, cluster=cluster, now=NOW)
    assert plan is not None
    return plan


def test_a_decision_for_the_model_as_it_is_scales_it_and_the_pods_wait_for_the_spec() -> None:
    plan = plan_with(model({**BASE, "replicas": 1}), request())

    assert plan.scale == ScaleIntent(target=REF, replicas=3, from_replicas=1)
    assert len(desired(plan, "Pod")) == 1  # the Pods follow spec.replicas once it is 3
    assert refusals(plan, owner=LIVE) == ()


@pytest.mark.parametrize(
    ("spec", "found", "wanted"),
    [
        ({"replicas": 1, "maxReplicas": 2}, request(replicas=5), 2),
        ({"replicas": 4, "minReplicas": 2}, request(from_replicas=4, replicas=0), 2),
        ({}, request(from_replicas=0, replicas=1), 1),
    ],
    ids=["capped-at-max", "kept-at-min", "from-zero-when-unset"],
)
def test_the_scale_is_clamped_into_the_bounds(
    spec: dict[str, Any], found: ScaleRequest, wanted: int
) -> None:
    plan = plan_with(model({**BASE, **spec}), found)
    assert plan.scale is not None
    assert plan.scale.replicas == wanted


@pytest.mark.parametrize(
    ("spec", "metadata", "found"),
    [
        ({"replicas": 1}, {"generation": 2}, request(generation=1)),
        ({"replicas": 2}, {}, request(from_replicas=1)),
        ({"replicas": 1, "autoscalingDisabled": True}, {}, request()),
        ({"replicas": 2, "maxReplicas": 2}, {}, request(from_replicas=2, replicas=4)),
        ({"replicas": 1}, {}, None),
    ],
    ids=[
        "the-spec-changed-since",
        "the-replicas-changed-since",
        "autoscaling-disabled",
        "already-at-the-bound",
        "no-decision",
    ],
)
def test_no_scale_when_the_decision_no_longer_applies(
    spec: dict[str, Any], metadata: dict[str, Any], found: ScaleRequest | None
) -> None:
    assert plan_with(model({**BASE, **spec}, **metadata), found).scale is None


def system_config(document: str) -> dict[str, Any]:
    """The Models' system configuration as the platform team writes it."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "kaiwo-models",
            "namespace": "kaiwo-system",
            "uid": "config-uid",
            "labels": {"kaiwo.silogen.ai/system-config": "models"},
        },
        "data": {"models.yaml": document},
    }


def plan_in(owner: dict[str, Any], found: ScaleRequest, *extra: dict[str, Any]) -> Plan:
    cluster = ClusterState.from_wire(objects=[owner, *extra], namespaces=[NAMESPACE])
    cluster = dataclasses.replace(cluster, scale_requests={"u-1": found})
    plan = planned(owner=owner, cluster=cluster, now=NOW)
    assert plan is not None
    return plan


def test_a_model_without_max_replicas_is_bounded_by_the_clusters_ceiling() -> None:
    # The attack: the gateway's key decides 0 -> 100 for a Model without maxReplicas.
    unbounded = model({**BASE, "replicas": 0})
    greedy = request(from_replicas=0, replicas=100)

    by_default = plan_in(unbounded, greedy)
    assert by_default.scale == ScaleIntent(target=REF, replicas=8, from_replicas=0)

    lowered = plan_in(unbounded, greedy, system_config("modelAutoscaling: {maxReplicas: 3}"))
    assert lowered.scale == ScaleIntent(target=REF, replicas=3, from_replicas=0)
    # A Model's own maxReplicas may lower it further, never raise it; its minReplicas (which
    # its user wrote) still holds.
    own = plan_in(model({**BASE, "replicas": 0, "maxReplicas": 20}), greedy)
    assert own.scale is not None and own.scale.replicas == 8
    floor = plan_in(
        model({**BASE, "replicas": 0, "minReplicas": 5}),
        greedy,
        system_config("modelAutoscaling: {maxReplicas: 3}"),
    )
    assert floor.scale is not None and floor.scale.replicas == 5


def test_a_model_being_deleted_is_not_scaled() -> None:
    deleting = model(
        {**BASE, "replicas": 1},
        deletionTimestamp="2026-01-01T11:00:00Z",
        finalizers=["kubeai.org/cache-eviction"],
    )
    assert plan_with(deleting, request()).scale is None


def test_the_projection_keeps_the_latest_decision_per_model_and_snapshots_it() -> None:
    projection = Projection()
    first = request()
    assert projection.apply_scale_request(first, sequence=5) is True
    assert projection.cluster_state().scale_requests == {"u-1": first}
    # Redelivered, or restated by the next tick or a new leader: nothing to plan again.
    assert projection.apply_scale_request(first, sequence=5) is False
    restated = dataclasses.replace(first, at=NOW + timedelta(seconds=10))
    assert projection.apply_scale_request(restated, sequence=6) is False
    newer = request(from_replicas=3, replicas=1, at=NOW + timedelta(seconds=20))
    assert projection.apply_scale_request(newer, sequence=7) is True

    restored = Projection.from_document(projection.to_document())
    assert restored.scale_requests.last_sequence == 7
    assert restored.cluster_state().scale_requests == {"u-1": newer}


def test_decisions_not_followed_for_an_hour_are_forgotten() -> None:
    projection = Projection()
    projection.apply_scale_request(request(), sequence=1)
    later = dataclasses.replace(request(), uid="u-2", at=NOW + timedelta(hours=1, seconds=1))
    projection.apply_scale_request(later, sequence=2)
    assert set(projection.cluster_state().scale_requests) == {"u-2"}


def test_a_request_is_read_from_the_decision_event() -> None:
    event = ScaleDecidedV1(
        model=REF,
        generation=4,
        from_replicas=0,
        replicas=1,
        cause="request",
        active_requests=1,
        average_active_requests=0,
        window_seconds=600,
        samples=60,
        target_requests=100,
        scale_down_delay_seconds=30,
        reason="scale from zero: 1 request waits for a ready endpoint",
    )
    at = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    assert ScaleRequest.of(event, at=at) == ScaleRequest(
        uid="u-1", at=at, generation=4, from_replicas=0, replicas=1, namespace="ai", name="llm"
    )


def test_a_decision_borrowing_a_models_uid_under_another_name_is_not_its() -> None:
    owner = model({**BASE, "replicas": 0})
    for borrowed in (
        dataclasses.replace(request(from_replicas=0), namespace="team-b"),
        dataclasses.replace(request(from_replicas=0), name="other"),
    ):
        assert plan_with(owner, borrowed).scale is None


# ---------------------------------------------------------------- the ceiling, told on the Model

DEFAULT_ORIGIN = (
    "the default of modelAutoscaling.maxReplicas "
    "(no ConfigMap labelled kaiwo.silogen.ai/system-config=models sets it)"
)
EIGHT = ClusterCeiling(8, DEFAULT_ORIGIN)
WARNED = {
    "type": "LimitedByClusterCeiling",
    "status": "True",
    "reason": "MaxReplicasAboveClusterCeiling",
}


def limited(
    spec: dict[str, Any],
    found: ScaleRequest | None = None,
    *,
    previous: dict[str, Any] | None = None,
    ceiling: ClusterCeiling = EIGHT,
) -> ConditionSpec | None:
    owner = Model.model_validate(model({**BASE, **spec}))
    return ceiling_condition(owner, REF, found, ceiling=ceiling, previous=previous or {})


def test_a_max_replicas_above_the_ceiling_is_told_with_the_field_its_value_and_the_ceiling() -> (
    None
):
    assert limited({"maxReplicas": 20}) == ConditionSpec(
        "LimitedByClusterCeiling",
        "True",
        "MaxReplicasAboveClusterCeiling",
        "spec.maxReplicas is 20, but the autoscaler sets at most 8 replicas on any Model, the "
        "cluster's ceiling: the default of modelAutoscaling.maxReplicas (no ConfigMap labelled "
        "kaiwo.silogen.ai/system-config=models sets it)",
    )
    # minReplicas above the ceiling still holds: the most the autoscaler sets is then 10.
    assert limited({"minReplicas": 10, "maxReplicas": 20}) == ConditionSpec(
        "LimitedByClusterCeiling",
        "True",
        "MaxReplicasAboveClusterCeiling",
        "spec.maxReplicas is 20, but the autoscaler sets at most 8 replicas on any Model, the "
        "cluster's ceiling: the default of modelAutoscaling.maxReplicas (no ConfigMap labelled "
        "kaiwo.silogen.ai/system-config=models sets it) (spec.minReplicas, 10, still holds)",
    )


@pytest.mark.parametrize(
    ("spec", "found"),
    [
        ({"maxReplicas": 8}, request(replicas=100)),
        ({"maxReplicas": 3}, None),
        ({"minReplicas": 10, "maxReplicas": 10}, None),
        ({"maxReplicas": 20, "autoscalingDisabled": True}, None),
        ({}, None),
        ({}, request(replicas=8)),
        ({"minReplicas": 12}, request(replicas=12)),
        ({"autoscalingDisabled": True}, request(replicas=100)),
        ({}, dataclasses.replace(request(replicas=100), name="other")),
    ],
    ids=[
        "max-at-the-ceiling",
        "max-below",
        "min-and-max-above",
        "autoscaling-disabled",
        "unset-without-a-decision",
        "unset-decision-at-the-ceiling",
        "unset-decision-at-min-above-the-ceiling",
        "unset-autoscaling-disabled",
        "a-decision-for-another-model",
    ],
)
def test_a_model_the_ceiling_does_not_hold_below_its_bounds_is_told_nothing(
    spec: dict[str, Any], found: ScaleRequest | None
) -> None:
    assert limited(spec, found) is None


def test_a_decision_cut_to_the_ceiling_is_told_when_max_replicas_is_unset() -> None:
    assert limited({}, request(from_replicas=8, replicas=12)) == ConditionSpec(
        "LimitedByClusterCeiling",
        "True",
        "ScaleCutToClusterCeiling",
        "The autoscaler asked for 12 replicas and spec.maxReplicas is not set, but the "
        "autoscaler sets at most 8 replicas on any Model, the cluster's ceiling: the default "
        "of modelAutoscaling.maxReplicas (no ConfigMap labelled "
        "kaiwo.silogen.ai/system-config=models sets it)",
    )
    # A decision made from an earlier generation still counts: the cut scale itself moved it.
    after_the_scale = limited(
        {"replicas": 8}, request(generation=1, replicas=12), ceiling=ClusterCeiling(8, "x")
    )
    assert after_the_scale is not None and after_the_scale.reason == "ScaleCutToClusterCeiling"


def test_once_told_the_condition_turns_false_and_stays() -> None:
    was_limited = {"conditions": [{**WARNED, "message": "..."}]}
    assert limited({"maxReplicas": 8}, previous=was_limited) == ConditionSpec(
        "LimitedByClusterCeiling",
        "False",
        "WithinClusterCeiling",
        "The cluster's ceiling of 8 replicas (the default of modelAutoscaling.maxReplicas (no "
        "ConfigMap labelled kaiwo.silogen.ai/system-config=models sets it)) does not limit "
        "this Model",
    )
    assert limited(
        {"maxReplicas": 20, "autoscalingDisabled": True}, previous=was_limited
    ) == ConditionSpec(
        "LimitedByClusterCeiling",
        "False",
        "AutoscalingDisabled",
        "spec.autoscalingDisabled: the autoscaler does not scale this Model",
    )


def model_condition(plan: Plan, condition_type: str) -> dict[str, Any] | None:
    assert plan.status is not None
    return next((c for c in plan.status["conditions"] if c["type"] == condition_type), None)


@pytest.mark.parametrize(
    ("extra", "ceiling", "origin"),
    [
        ((), 8, DEFAULT_ORIGIN),
        (
            (system_config("modelAutoscaling: {maxReplicas: 6}"),),
            6,
            "modelAutoscaling.maxReplicas in ConfigMap kaiwo-system/kaiwo-models",
        ),
        (
            (system_config("modelRollouts: {surge: 2}"),),
            8,
            "the default of modelAutoscaling.maxReplicas, which ConfigMap "
            "kaiwo-system/kaiwo-models does not set",
        ),
    ],
    ids=["no-configmap", "set-in-the-configmap", "configmap-without-it"],
)
def test_the_plan_warns_once_naming_where_the_ceiling_comes_from(
    extra: tuple[dict[str, Any], ...], ceiling: int, origin: str
) -> None:
    message = (
        f"spec.maxReplicas is 20, but the autoscaler sets at most {ceiling} replicas on any "
        f"Model, the cluster's ceiling: {origin}"
    )
    owner = model({**BASE, "replicas": 1, "maxReplicas": 20})
    first = plan_for(owner, *extra)

    assert model_condition(first, "LimitedByClusterCeiling") == {
        **WARNED,
        "message": message,
        "observedGeneration": 1,
        "lastTransitionTime": "2026-01-01T12:00:00Z",
    }
    assert ("Warning", "MaxReplicasAboveClusterCeiling", message) in [
        (e.type, e.reason, e.message) for e in first.events
    ]

    # Settled: with that status back on the Model, the next round tells nothing and writes
    # the same status.
    settled = {**owner, "status": first.status}
    again = plan_for(settled, *extra, now=NOW + timedelta(minutes=5))
    assert again.events == ()
    assert again.status == first.status


def test_a_cut_decision_is_told_once_and_quietly_undone() -> None:
    cut = "ScaleCutToClusterCeiling"
    owner = model({**BASE, "replicas": 1})
    first = plan_in(owner, request(from_replicas=1, replicas=12))
    assert first.scale == ScaleIntent(target=REF, replicas=8, from_replicas=1)
    assert [(e.type, e.reason) for e in first.events if e.reason == cut] == [("Warning", cut)]

    # The scale carried out (generation 2, 8 replicas); the decision is restated from there.
    scaled = model({**BASE, "replicas": 8}, generation=2, status=first.status)
    for restated in (
        request(from_replicas=1, replicas=12),
        request(generation=2, from_replicas=8, replicas=12),
    ):
        later = plan_in(scaled, restated)
        assert later.scale is None
        assert [e.reason for e in later.events if e.reason == cut] == []
        condition = model_condition(later, "LimitedByClusterCeiling")
        assert condition is not None and (condition["status"], condition["reason"]) == ("True", cut)

    # The load drops: the condition turns False, and nobody is warned of that.
    calmer = plan_in(scaled, request(generation=2, from_replicas=8, replicas=5))
    condition = model_condition(calmer, "LimitedByClusterCeiling")
    assert condition is not None
    assert (condition["status"], condition["reason"]) == ("False", "WithinClusterCeiling")
    assert [e.reason for e in calmer.events if "Ceiling" in e.reason] == []


def test_a_model_being_deleted_or_never_limited_has_no_such_condition() -> None:
    unbounded = plan_with(model({**BASE, "replicas": 1}), None)
    assert model_condition(unbounded, "LimitedByClusterCeiling") is None
    deleting = model(
        {**BASE, "replicas": 1, "maxReplicas": 20},
        deletionTimestamp="2026-01-01T11:00:00Z",
        finalizers=["kubeai.org/cache-eviction"],
    )
    assert model_condition(plan_with(deleting, None), "LimitedByClusterCeiling") is None


# ------------------------------------------------- the Model's own maxReplicas, told on it


def a_decision(*, cause: str, average: float, target: int) -> ScaleDecidedV1:
    return ScaleDecidedV1(
        model=REF,
        generation=2,
        from_replicas=1,
        replicas=2,
        cause=cause,  # type: ignore[arg-type]
        active_requests=average,
        average_active_requests=average,
        window_seconds=2,
        samples=4,
        target_requests=target,
        scale_down_delay_seconds=30,
        reason="scale up from 1 to 2",
    )


def test_the_load_a_decision_asked_for_is_kept_with_it() -> None:
    at = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    # 5 requests at 1 each: 5 replicas, although maxReplicas 2 made the decision 2.
    assert ScaleRequest.of(a_decision(cause="load", average=5, target=1), at=at).demand == 5
    # 2.5 requests at 2 each: 1.25, so 2.
    assert ScaleRequest.of(a_decision(cause="load", average=2.5, target=2), at=at).demand == 2
    # Scale from zero for a waiting request says nothing of the load.
    assert ScaleRequest.of(a_decision(cause="request", average=0, target=1), at=at).demand is None

    kept = request(demand=5)
    assert kept.to_document()["demand"] == 5
    assert ScaleRequest.from_document(kept.to_document()) == kept
    # A decision kept before the field was: no demand, and the document is as it was.
    older = request()
    assert "demand" not in older.to_document()
    assert ScaleRequest.from_document(older.to_document()).demand is None
    # A restated decision with another demand plans differently (the condition's message).
    assert request(demand=5).decides_differently_from(request(demand=6))
    assert not request(demand=5).decides_differently_from(request(demand=5))


def held_back(
    spec: dict[str, Any],
    found: ScaleRequest | None,
    *,
    previous: dict[str, Any] | None = None,
    ceiling: int = 8,
) -> ConditionSpec | None:
    owner = Model.model_validate(model({**BASE, **spec}))
    return max_replicas_condition(owner, REF, found, ceiling=ceiling, previous=previous or {})


def test_load_above_the_models_max_replicas_is_told_with_the_demand_and_the_cap() -> None:
    assert held_back(
        {"replicas": 2, "maxReplicas": 2}, request(from_replicas=1, replicas=2, demand=5)
    ) == ConditionSpec(
        "LimitedByMaxReplicas",
        "True",
        "LoadAboveMaxReplicas",
        "The load asks for 5 replicas at spec.targetRequests 100 per replica, but "
        "spec.maxReplicas is 2: 2 replicas serve more than their target each; raise "
        "spec.maxReplicas to scale further",
    )


def test_a_single_replica_held_back_is_told_in_the_singular() -> None:
    told = held_back(
        {"replicas": 1, "maxReplicas": 1}, request(from_replicas=1, replicas=1, demand=3)
    )
    assert told is not None
    assert told.message == (
        "The load asks for 3 replicas at spec.targetRequests 100 per replica, but "
        "spec.maxReplicas is 1: 1 replica serves more than its target; raise "
        "spec.maxReplicas to scale further"
    )


@pytest.mark.parametrize(
    ("spec", "found"),
    [
        ({"maxReplicas": 2}, request(replicas=2, demand=2)),
        ({"maxReplicas": 2}, request(replicas=2)),
        ({"maxReplicas": 2}, None),
        ({}, request(replicas=5, demand=5)),
        ({"maxReplicas": 20}, request(replicas=20, demand=30)),
        ({"maxReplicas": 2, "autoscalingDisabled": True}, request(replicas=2, demand=5)),
        ({"maxReplicas": 2}, dataclasses.replace(request(replicas=2, demand=5), name="other")),
    ],
    ids=[
        "demand-at-max",
        "decision-for-a-waiting-request",
        "no-decision",
        "max-unset",
        "max-above-the-ceiling-which-0115-tells",
        "autoscaling-disabled",
        "a-decision-for-another-model",
    ],
)
def test_a_model_its_max_replicas_does_not_hold_back_is_told_nothing(
    spec: dict[str, Any], found: ScaleRequest | None
) -> None:
    assert held_back(spec, found) is None


def test_once_held_back_the_condition_turns_false() -> None:
    was = {
        "conditions": [
            {
                "type": "LimitedByMaxReplicas",
                "status": "True",
                "reason": "LoadAboveMaxReplicas",
                "message": "...",
            }
        ]
    }
    assert held_back(
        {"maxReplicas": 2}, request(from_replicas=2, replicas=1, demand=1), previous=was
    ) == ConditionSpec(
        "LimitedByMaxReplicas",
        "False",
        "LoadWithinMaxReplicas",
        "The load the autoscaler last decided on is within spec.maxReplicas (2)",
    )
    # The user raised the cap: within it, whatever the last decision said.
    assert held_back(
        {"maxReplicas": 6}, request(replicas=2, demand=5), previous=was
    ) == ConditionSpec(
        "LimitedByMaxReplicas",
        "False",
        "LoadWithinMaxReplicas",
        "The load the autoscaler last decided on is within spec.maxReplicas (6)",
    )
    assert held_back(
        {"maxReplicas": 2, "autoscalingDisabled": True}, request(demand=5), previous=was
    ) == ConditionSpec(
        "LimitedByMaxReplicas",
        "False",
        "AutoscalingDisabled",
        "spec.autoscalingDisabled: the autoscaler does not scale this Model",
    )


def test_held_back_is_told_once_written_once_and_quietly_undone() -> None:
    reason = "LoadAboveMaxReplicas"
    message = (
        "The load asks for 5 replicas at spec.targetRequests 1 per replica, but "
        "spec.maxReplicas is 2: 2 replicas serve more than their target each; raise "
        "spec.maxReplicas to scale further"
    )
    owner = model({**BASE, "replicas": 1, "maxReplicas": 2, "targetRequests": 1})
    first = plan_in(owner, request(from_replicas=1, replicas=2, demand=5))
    assert first.scale == ScaleIntent(target=REF, replicas=2, from_replicas=1)
    assert model_condition(first, "LimitedByMaxReplicas") == {
        "type": "LimitedByMaxReplicas",
        "status": "True",
        "reason": reason,
        "message": message,
        "observedGeneration": 1,
        "lastTransitionTime": "2026-01-01T12:00:00Z",
    }
    assert [(e.type, e.reason, e.message) for e in first.events if e.reason == reason] == [
        ("Normal", reason, message)
    ]

    # The scale carried out (generation 2, 2 replicas), the status back on the Model; the
    # gateway publishes nothing new while the load stays: no Event, the same status (no
    # write).
    scaled = model(
        {**BASE, "replicas": 2, "maxReplicas": 2, "targetRequests": 1},
        generation=2,
        status=first.status,
    )
    settled = plan_in(scaled, request(from_replicas=1, replicas=2, demand=5))
    assert [e.reason for e in settled.events if e.reason == reason] == []
    condition = model_condition(settled, "LimitedByMaxReplicas")
    assert condition is not None
    assert (condition["status"], condition["message"], condition["lastTransitionTime"]) == (
        "True",
        message,
        "2026-01-01T12:00:00Z",
    )
    again = plan_in(
        {**scaled, "status": settled.status}, request(from_replicas=1, replicas=2, demand=5)
    )
    assert again.events == ()
    assert again.status == settled.status

    # The load falls and the Model is scaled down: False, and nobody is told.
    calmer = plan_in(scaled, request(generation=2, from_replicas=2, replicas=1, demand=1))
    condition = model_condition(calmer, "LimitedByMaxReplicas")
    assert condition is not None
    assert (condition["status"], condition["reason"]) == ("False", "LoadWithinMaxReplicas")
    assert [e.reason for e in calmer.events if "MaxReplicas" in e.reason] == []


def test_a_demand_restated_while_held_back_changes_the_message_and_tells_no_event() -> None:
    """The gateway restates the demand while the Model stays held back (decision 0175): the
    condition's message follows it, its transition time stays, and the Event told when it
    turned True is not told again (one per hold, not per restatement)."""
    reason = "LoadAboveMaxReplicas"
    owner = model({**BASE, "replicas": 1, "maxReplicas": 2, "targetRequests": 1})
    first = plan_in(owner, request(from_replicas=1, replicas=2, demand=5))
    scaled = model(
        {**BASE, "replicas": 2, "maxReplicas": 2, "targetRequests": 1},
        generation=2,
        status=first.status,
    )

    rising = plan_in(scaled, request(generation=2, from_replicas=2, replicas=2, demand=9))
    assert rising.scale is None
    assert [e.reason for e in rising.events if e.reason == reason] == []
    condition = model_condition(rising, "LimitedByMaxReplicas")
    assert condition is not None
    assert (condition["status"], condition["message"], condition["lastTransitionTime"]) == (
        "True",
        "The load asks for 9 replicas at spec.targetRequests 1 per replica, but "
        "spec.maxReplicas is 2: 2 replicas serve more than their target each; raise "
        "spec.maxReplicas to scale further",
        "2026-01-01T12:00:00Z",
    )
