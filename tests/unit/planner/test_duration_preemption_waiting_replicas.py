"""Duration preemption takes a running service's replicas waiting at Kueue's gate for
waiting, as GPU idle preemption does (decisions 0236, 0256). Expected victims written by
hand."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kaiwo_contracts.plans import ObjectRef
from kaiwo_planner.domain.planning import plan_object
from kaiwo_planner.domain.scheduling.preemption_candidates import preemption_victims
from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.state.context_keeper import PlanningContextKeeper
from kaiwo_planner.domain.state.planning_context import PlanningContext

from tests.unit.planner import test_planning as planning
from tests.unit.planner.conftest import build_node
from tests.unit.planner.test_preemption_candidates import (
    KAIWO,
    RUNNING,
    config,
    kaiwo_job,
    key,
    projection_of,
)

AT = datetime(2026, 1, 1, 12, 30, tzinfo=UTC)


def service(**spec: Any) -> dict[str, Any]:
    """A READY KaiwoService of 2 replicas x 4 GPUs, started at 11:00."""
    return {
        "apiVersion": KAIWO,
        "kind": "KaiwoService",
        "metadata": {
            "name": "serve",
            "namespace": "team",
            "uid": "uid-serve",
            "creationTimestamp": "2026-01-01T10:00:00Z",
        },
        "spec": {"image": "vllm", "replicas": 2, "gpusPerReplica": 4, **spec},
        "status": {"status": "READY", "startTime": "2026-01-01T11:00:00Z"},
    }


def pod_and_workload(
    name: str, *, admitted: bool, owner: str = "uid-serve", namespace: str = "team"
) -> list[dict[str, Any]]:
    """A pod of the service ``owner`` (uid) and the Workload Kueue made for it at 11:30
    (admitted, or gated)."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "labels": {"kaiwo.silogen.ai/run-id": owner},
        },
    }
    conditions = [{"type": "Admitted", "status": "True"}] if admitted else []
    workload = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {
            "name": f"pod-{name}",
            "namespace": namespace,
            "uid": f"uid-{name}-workload",
            "creationTimestamp": "2026-01-01T11:30:00Z",
            "ownerReferences": [{"kind": "Pod", "name": name, "uid": f"uid-{name}"}],
        },
        "status": {"conditions": conditions},
    }
    return [pod, workload]


def victims(serve: dict[str, Any]) -> tuple[ObjectRef, ...]:
    projection = projection_of(
        config("gpu-queue"),
        kaiwo_job("runs", RUNNING, duration="1h"),  # 4 GPUs, expired at 12:00
        serve,
        *pod_and_workload("serve-a", admitted=True),
        *pod_and_workload("serve-b", admitted=False),
    )
    return preemption_victims(PlanningContextKeeper().context(projection), now=AT)


def test_a_service_scaled_up_past_its_quota_has_an_expired_workload_of_its_queue_stopped() -> None:
    """One replica of two waits at the gate since 11:30: it waits for 4 GPUs of the queue,
    which the expired ``runs`` holds."""
    assert victims(service()) == (ObjectRef.of_key(key("runs")),)


def test_an_expired_service_waiting_for_a_replica_is_not_stopped_for_itself() -> None:
    """``serve`` itself ran past its 30 minutes (at 11:30, before ``runs``): stopping it frees
    nothing for its own waiting replica."""
    assert victims(service(duration="30m")) == (ObjectRef.of_key(key("runs")),)


def test_the_waiting_service_has_the_victim_planned_and_is_planned_when_its_wait_counts() -> None:
    """One planner for all plans a victim with its beneficiary (decision 0030): the READY
    service's own plan names ``runs`` once its replica waited past the threshold (5 minutes
    by default); before, it asks to be planned again when it has (11:30 + 5 min + 1 s)."""
    spec = {"user": "bo@example.com", "image": "vllm:1", "replicas": 2, "gpusPerReplica": 4}
    serve = planning.kaiwo_service(
        spec, status={"status": "READY", "startTime": "2026-01-01T11:00:00Z"}
    )
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "chat",
            "namespace": "team-a",
            "uid": "deploy-uid",
            "generation": 1,
            "ownerReferences": [{"uid": "svc-uid", "controller": True}],
        },
        "spec": {"replicas": 2},
        "status": {"observedGeneration": 1, "availableReplicas": 1, "readyReplicas": 1},
    }
    runs = planning.kaiwo_job(
        {"user": "ann@example.com", "image": "rocm/pytorch", "gpus": 4, "duration": "30m"},
        name="runs",
        uid="runs-uid",
        status={"status": "RUNNING", "startTime": "2026-01-01T11:00:00Z"},
    )
    pods = [
        obj
        for name, admitted in (("chat-a", True), ("chat-b", False))
        for obj in pod_and_workload(name, admitted=admitted, owner="svc-uid", namespace="team-a")
    ]
    state = ClusterState.from_wire(
        nodes=[build_node("mi300x-0", gpu="mi300x"), build_node("mi300x-1", gpu="mi300x")],
        objects=[planning.queue_config({"name": "kaiwo"}), serve, deployment, runs, *pods],
        namespaces=["team-a"],
    )
    context = PlanningContext.of(state)

    early = plan_object(owner=serve, context=context, now=datetime(2026, 1, 1, 11, 32, tzinfo=UTC))
    assert early.also_replan == ()
    assert early.replan_at == datetime(2026, 1, 1, 11, 35, 1, tzinfo=UTC)

    pressed = plan_object(owner=serve, context=context, now=planning.NOW)
    assert pressed.also_replan == (
        ObjectRef(
            api_version=KAIWO, kind="KaiwoJob", name="runs", namespace="team-a", uid="runs-uid"
        ),
    )
