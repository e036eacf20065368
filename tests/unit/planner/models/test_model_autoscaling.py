"""The autoscaler's decisions in a Model's plan: the scale it carries, while the decision
still applies, and how the projection keeps the latest decision per Model."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kaiwo_contracts.confinement import refusals
from kaiwo_contracts.events.autoscaling import ScaleDecidedV1
from kaiwo_contracts.plans import ObjectRef, Plan, ScaleIntent
from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.state.projection import Projection
from kaiwo_planner.domain.state.scale_request import ScaleRequest

from tests.planning_calls import planned
from tests.unit.planner.models.building import NAMESPACE, NOW, desired, model

BASE: dict[str, Any] = {"url": "hf://org/model", "engine": "VLLM", "resourceProfile": "cpu:1"}
REF = ObjectRef(api_version="kubeai.org/v1", kind="Model", name="llm", namespace="ai", uid="u-1")
LIVE = {"metadata": {"uid": "u-1"}}


def request(
    *, generation: int = 1, from_replicas: int = 1, replicas: int = 3, at: datetime = NOW
) -> ScaleRequest:
    return ScaleRequest(
        uid="u-1",
        at=at,
        generation=generation,
        from_replicas=from_replicas,
        replicas=replicas,
        namespace="ai",
        name="llm",
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
