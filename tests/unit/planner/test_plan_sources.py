"""Every plan names what it was computed from: its owner and the configuration objects it read,
with their versions and a digest of what people wrote (decision 0038). The digest itself is
checked against hand-written documents in tests/unit/contracts/test_plan_sources.py."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from kaiwo_contracts.plan_sources import source_digest
from kaiwo_contracts.plans import ObjectRef, Plan, PlanSource
from kaiwo_planner.domain.planning import plan_object
from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.state.planning_context import PlanningContext
from kaiwo_planner.domain.status.planned_status import owner_with_status

from tests.planning_calls import planned

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
KAIWO = "kaiwo.silogen.ai/v1alpha1"
CONFIG = "config.kaiwo.silogen.ai/v1alpha1"


def obj(api_version: str, kind: str, name: str, uid: str, **fields: Any) -> dict[str, Any]:
    namespace = fields.pop("namespace", None)
    metadata: dict[str, Any] = {"name": name, "uid": uid, "resourceVersion": "5"}
    metadata |= {"generation": 1, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, **fields}


JOB = obj(KAIWO, "KaiwoJob", "train", "job-uid", namespace="team-a", spec={"image": "busybox"})
KAIWO_CONFIG = obj(CONFIG, "KaiwoConfig", "kaiwo", "config-uid", spec={})
TEAM_A_CONFIG = obj(
    CONFIG,
    "AIMNamespaceConfig",
    "default",
    "aim-uid",
    namespace="team-a",
    spec={"images": {"imagePullSecrets": ["registry"]}},
)
TEAM_B_CONFIG = obj(CONFIG, "AIMNamespaceConfig", "default", "aim-b-uid", namespace="team-b")
QUEUE_CONFIG = obj(KAIWO, "KaiwoQueueConfig", "kaiwo", "kqc-uid", spec={"clusterQueues": []})
MODELS_CONFIG = obj(
    "v1",
    "ConfigMap",
    "kaiwo-models",
    "models-config-uid",
    namespace="kaiwo-system",
    data={"models.yaml": "modelRollouts: {surge: 2}"},
)
MODELS_CONFIG["metadata"]["labels"] = {"kaiwo.silogen.ai/system-config": "models"}
MODEL = obj(
    "kubeai.org/v1",
    "Model",
    "llm",
    "model-uid",
    namespace="team-a",
    spec={"url": "hf://o/m", "engine": "VLLM", "resourceProfile": "cpu:1"},
)


def named(found: dict[str, Any]) -> PlanSource:
    """What a plan names for ``found`` (uid, generation 1, resourceVersion 5 as built)."""
    metadata = found["metadata"]
    return PlanSource(
        ref=ObjectRef(
            api_version=found["apiVersion"],
            kind=found["kind"],
            name=metadata["name"],
            namespace=metadata.get("namespace"),
            uid=metadata["uid"],
        ),
        generation=1,
        resource_version="5",
        digest=source_digest(found),
    )


def cluster(*objects: dict[str, Any]) -> ClusterState:
    return ClusterState.from_wire(objects=list(objects), namespaces=["team-a", "team-b"])


def plan_of(owner: dict[str, Any], *objects: dict[str, Any]) -> Plan:
    plan = planned(owner=owner, cluster=cluster(owner, *objects), now=NOW)
    assert plan is not None
    return plan


SERVICE = obj(KAIWO, "KaiwoService", "chat", "svc-uid", namespace="team-a", spec={"image": "vllm"})


@pytest.mark.parametrize("workload", [JOB, SERVICE], ids=["KaiwoJob", "KaiwoService"])
def test_a_workload_plan_names_its_owner_the_kaiwoconfig_and_its_namespaces_config(
    workload: dict[str, Any],
) -> None:
    plan = plan_of(workload, KAIWO_CONFIG, TEAM_A_CONFIG, TEAM_B_CONFIG, QUEUE_CONFIG)

    # The owner first, then the configurations in (apiVersion, kind, namespace, name) order;
    # another namespace's config and the queue config (status only) are not sources.
    assert plan.sources == (named(workload), named(TEAM_A_CONFIG), named(KAIWO_CONFIG))


def test_a_configuration_that_does_not_exist_is_not_named() -> None:
    assert plan_of(JOB).sources == (named(JOB),)


def test_the_queue_config_and_a_model_name_what_they_read() -> None:
    assert plan_of(QUEUE_CONFIG, KAIWO_CONFIG, TEAM_A_CONFIG).sources == (
        named(QUEUE_CONFIG),
        named(KAIWO_CONFIG),
    )
    assert plan_of(MODEL, KAIWO_CONFIG, TEAM_A_CONFIG, MODELS_CONFIG).sources == (
        named(MODEL),
        named(TEAM_A_CONFIG),
        named(MODELS_CONFIG),
    )


def test_the_status_the_planner_assumes_leaves_the_owners_source_as_it_is() -> None:
    context = PlanningContext.of(cluster(JOB))
    assumed = owner_with_status(JOB, {"status": "PENDING"})

    plan = plan_object(owner=assumed, context=context, now=NOW).plan

    assert plan is not None
    assert plan.sources == (named(JOB),)


def test_a_namespace_that_opts_its_workloads_in_to_idle_preemption_is_a_source() -> None:
    opting_in = obj("v1", "Namespace", "team-a", "ns-uid", spec={})
    opting_in["metadata"]["annotations"] = {"kaiwo.silogen.ai/gpu-preemption.policy": "Always"}
    plain = obj("v1", "Namespace", "team-a", "ns-uid", spec={})

    assert plan_of(JOB, opting_in).sources == (named(JOB), named(opting_in))
    # Without such annotations it decides nothing of the plan: not a source.
    assert plan_of(JOB, plain).sources == (named(JOB),)


def test_an_aimnamespaceconfig_not_in_force_names_the_one_in_force_too() -> None:
    # Decision 0209: its NotInForce plan was computed from the one in force (TEAM_A_CONFIG,
    # "default", first by name); an invalid one's plan from itself alone.
    later = obj(CONFIG, "AIMNamespaceConfig", "later", "later-uid", namespace="team-a", spec={})
    broken = obj(
        CONFIG,
        "AIMNamespaceConfig",
        "mistyped",
        "broken-uid",
        namespace="team-a",
        spec={"images": {"imagePullSecrets": "registry"}},
    )

    assert plan_of(later, TEAM_A_CONFIG, TEAM_B_CONFIG, KAIWO_CONFIG).sources == (
        named(later),
        named(TEAM_A_CONFIG),
    )
    assert plan_of(broken, TEAM_A_CONFIG, KAIWO_CONFIG).sources == (named(broken),)
