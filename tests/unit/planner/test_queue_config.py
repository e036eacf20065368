"""KaiwoQueueConfig -> Kueue objects, node labels and status; expected manifests by hand."""

from __future__ import annotations

import copy
from datetime import UTC, datetime
from typing import Any

import pytest
from kaiwo_contracts.crds.config_v1alpha1.kaiwoconfig import KaiwoConfig
from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwoqueueconfig import KaiwoQueueConfig
from kaiwo_contracts.plans import EventIntent, ObjectRef, PruneRule
from kaiwo_planner.domain.queues.queue_config import default_queue_config, plan_queue_config
from kaiwo_planner.domain.state.cluster import ClusterState

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
KUEUE = "kueue.x-k8s.io/v1beta1"
AMD_POOL = "amd-mi300x-8gpu-115core-1843gi"
CPU_POOL = "cpu-only-0gpu-14core-57gi"
LABELS = {"app.kubernetes.io/managed-by": "kaiwo", "kaiwo.silogen.ai/queue-config": "kaiwo"}
OWNER = {
    "apiVersion": "kaiwo.silogen.ai/v1alpha1",
    "kind": "KaiwoQueueConfig",
    "name": "kaiwo",
    "uid": "kqc-uid",
    "controller": True,
    "blockOwnerDeletion": True,
}
META = {"labels": LABELS, "ownerReferences": [OWNER]}

TWO_QUEUES_SPEC: dict[str, Any] = {
    "resourceFlavors": [
        {"name": "amd-mi300x", "nodeLabels": {"kaiwo/nodepool": AMD_POOL}},
        {
            "name": "cpu",
            "nodeLabels": {"kaiwo/nodepool": CPU_POOL},
            "tolerations": [
                {"key": "dedicated", "operator": "Equal", "value": "cpu", "effect": "NoSchedule"}
            ],
        },
    ],
    "clusterQueues": [
        {
            "name": "research",
            "namespaces": ["vision", "ml"],
            "spec": {
                "cohort": "shared",
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory", "amd.com/gpu"],
                        "flavors": [
                            {
                                "name": "amd-mi300x",
                                "resources": [
                                    {"name": "cpu", "nominalQuota": "200"},
                                    {"name": "memory", "nominalQuota": "3000Gi"},
                                    {"name": "amd.com/gpu", "nominalQuota": "16"},
                                ],
                            }
                        ],
                    }
                ],
            },
        },
        {
            "name": "batch",
            "spec": {
                "namespaceSelector": {"matchLabels": {"team": "batch"}},
                "queueingStrategy": "StrictFIFO",
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory"],
                        "flavors": [
                            {
                                "name": "cpu",
                                "resources": [
                                    {"name": "cpu", "nominalQuota": "14"},
                                    {"name": "memory", "nominalQuota": "57Gi"},
                                ],
                            }
                        ],
                    }
                ],
            },
        },
    ],
    "workloadPriorityClasses": [
        {"metadata": {"name": "high"}, "value": 1000, "description": "urgent"}
    ],
}

EXPECTED_KUEUE_OBJECTS = [
    {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": "batch", **META},
        "spec": {
            "namespaceSelector": {"matchLabels": {"team": "batch"}},
            "queueingStrategy": "StrictFIFO",
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory"],
                    "flavors": [
                        {
                            "name": "cpu",
                            "resources": [
                                {"name": "cpu", "nominalQuota": "14"},
                                {"name": "memory", "nominalQuota": "57Gi"},
                            ],
                        }
                    ],
                }
            ],
        },
    },
    {
        "apiVersion": KUEUE,
        "kind": "ClusterQueue",
        "metadata": {"name": "research", **META},
        "spec": {
            "namespaceSelector": {},
            "cohort": "shared",
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory", "amd.com/gpu"],
                    "flavors": [
                        {
                            "name": "amd-mi300x",
                            "resources": [
                                {"name": "cpu", "nominalQuota": "200"},
                                {"name": "memory", "nominalQuota": "3000Gi"},
                                {"name": "amd.com/gpu", "nominalQuota": "16"},
                            ],
                        }
                    ],
                }
            ],
        },
    },
    {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        "metadata": {"name": "research", "namespace": "ml", **META},
        "spec": {"clusterQueue": "research"},
    },
    {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        "metadata": {"name": "research", "namespace": "vision", **META},
        "spec": {"clusterQueue": "research"},
    },
    {
        "apiVersion": KUEUE,
        "kind": "ResourceFlavor",
        "metadata": {"name": "amd-mi300x", **META},
        "spec": {"nodeLabels": {"kaiwo/nodepool": AMD_POOL, "kaiwo/worker": "true"}},
    },
    {
        "apiVersion": KUEUE,
        "kind": "ResourceFlavor",
        "metadata": {"name": "cpu", **META},
        "spec": {
            "nodeLabels": {"kaiwo/nodepool": CPU_POOL, "kaiwo/worker": "true"},
            "tolerations": [
                {"key": "dedicated", "operator": "Equal", "value": "cpu", "effect": "NoSchedule"}
            ],
        },
    },
    {
        "apiVersion": KUEUE,
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": "high", **META},
        "value": 1000,
        "description": "urgent",
    },
]


def kqc(spec: dict[str, Any], *, name: str = "kaiwo", status: Any = None) -> KaiwoQueueConfig:
    wire: dict[str, Any] = {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": name, "uid": "kqc-uid", "generation": 3, "resourceVersion": "77"},
        "spec": spec,
    }
    if status is not None:
        wire["status"] = status
    return KaiwoQueueConfig.from_wire(wire)


def cluster(nodes: list[dict[str, Any]], namespaces: tuple[str, ...] = ("ml", "vision")) -> Any:
    return ClusterState.from_wire(nodes=nodes, namespaces=namespaces)


def kaiwo_config(**spec: Any) -> KaiwoConfig:
    return KaiwoConfig.from_wire({"metadata": {"name": "kaiwo"}, "spec": spec})


def kueue_part(desired: tuple[dict[str, Any], ...]) -> list[dict[str, Any]]:
    return [o for o in desired if o["apiVersion"].startswith("kueue.x-k8s.io/")]


def applied(
    plan: Any, nodes: list[dict[str, Any]], namespaces: tuple[str, ...] = ("ml", "vision")
) -> ClusterState:
    """The cluster once the executor applied the plan's Kueue objects and the watcher saw them."""
    objects = []
    for number, manifest in enumerate(kueue_part(plan.desired), start=1):
        obj = copy.deepcopy(manifest)
        obj["metadata"]["uid"] = f"kueue-{number}"
        obj["metadata"]["resourceVersion"] = str(number)
        objects.append(obj)
    return ClusterState.from_wire(nodes=nodes, objects=objects, namespaces=namespaces)


def test_two_flavors_two_queues(mixed_cluster_nodes: list[dict[str, Any]]) -> None:
    plan = plan_queue_config(
        queue_config=kqc(TWO_QUEUES_SPEC),
        kaiwo_config=kaiwo_config(),
        cluster=cluster(mixed_cluster_nodes),
        now=NOW,
    )
    assert plan.owner == ObjectRef(
        api_version="kaiwo.silogen.ai/v1alpha1",
        kind="KaiwoQueueConfig",
        name="kaiwo",
        uid="kqc-uid",
    )
    assert plan.observed_generation == 3
    assert plan.observed_resource_version == "77"
    assert kueue_part(plan.desired) == EXPECTED_KUEUE_OBJECTS
    # After the Kueue objects come the five Node partials (control plane included by default).
    assert [(o["kind"], o["metadata"]["name"]) for o in plan.desired[7:]] == [
        ("Node", "cp-0"),
        ("Node", "cpu-0"),
        ("Node", "h100-0"),
        ("Node", "mi300x-0"),
        ("Node", "mi300x-1"),
    ]
    # Nothing is applied yet: not READY.
    assert plan.status == {
        "status": "PENDING",
        "conditions": [
            {
                "type": "Ready",
                "status": "False",
                "observedGeneration": 3,
                "lastTransitionTime": "2026-01-01T12:00:00Z",
                "reason": "KueueObjectsPending",
                "message": "Kueue objects are being created or updated to match the "
                "KaiwoQueueConfig",
            }
        ],
    }
    assert plan.events == ()
    assert plan.delete == ()

    # Applied and observed: READY.
    ready = plan_queue_config(
        queue_config=kqc(TWO_QUEUES_SPEC, status=plan.status),
        kaiwo_config=kaiwo_config(),
        cluster=applied(plan, mixed_cluster_nodes),
        now=datetime(2026, 1, 1, 12, 0, 5, tzinfo=UTC),
    )
    assert ready.desired == plan.desired
    assert ready.status == {
        "status": "READY",
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "observedGeneration": 3,
                "lastTransitionTime": "2026-01-01T12:00:05Z",
                "reason": "KueueObjectsMatch",
                "message": "Kueue objects match the KaiwoQueueConfig",
            }
        ],
    }
    assert ready.events == (
        EventIntent(
            type="Normal",
            reason="KaiwoQueueConfigReady",
            message="Kueue objects match the KaiwoQueueConfig",
        ),
    )
    assert plan.prune == (
        PruneRule(api_version=KUEUE, kind="ClusterQueue", namespaced=False),
        PruneRule(api_version=KUEUE, kind="LocalQueue", namespaced=True),
        PruneRule(api_version=KUEUE, kind="ResourceFlavor", namespaced=False),
        PruneRule(api_version="kueue.x-k8s.io/v1beta1", kind="Topology", namespaced=False),
        PruneRule(api_version=KUEUE, kind="WorkloadPriorityClass", namespaced=False),
    )
    assert plan.prune_selector == LABELS


def test_quotas_listed_in_another_order_reach_kueue_in_the_covered_order(
    mixed_cluster_nodes: list[dict[str, Any]],
) -> None:
    # Kueue wants each flavor's quotas in coveredResources order; upstream reorders them,
    # and so does the planner: the same ClusterQueue as the spec in order.
    shuffled = copy.deepcopy(TWO_QUEUES_SPEC)
    quotas = shuffled["clusterQueues"][0]["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    quotas.reverse()
    assert [q["name"] for q in quotas] == ["amd.com/gpu", "memory", "cpu"]

    plan = plan_queue_config(
        queue_config=kqc(shuffled),
        kaiwo_config=kaiwo_config(),
        cluster=cluster(mixed_cluster_nodes),
        now=NOW,
    )

    assert kueue_part(plan.desired) == EXPECTED_KUEUE_OBJECTS


def test_plan_is_deterministic(mixed_cluster_nodes: list[dict[str, Any]]) -> None:
    first = plan_queue_config(
        queue_config=kqc(TWO_QUEUES_SPEC),
        kaiwo_config=kaiwo_config(),
        cluster=cluster(mixed_cluster_nodes),
        now=NOW,
    )
    second = plan_queue_config(
        queue_config=kqc(TWO_QUEUES_SPEC),
        kaiwo_config=kaiwo_config(),
        cluster=cluster(list(reversed(mixed_cluster_nodes))),
        now=NOW,
    )
    assert first.fingerprint() == second.fingerprint()


def test_ready_status_is_stable(mixed_cluster_nodes: list[dict[str, Any]]) -> None:
    planned = plan_queue_config(
        queue_config=kqc(TWO_QUEUES_SPEC),
        kaiwo_config=kaiwo_config(),
        cluster=cluster(mixed_cluster_nodes),
        now=NOW,
    )
    first = plan_queue_config(
        queue_config=kqc(TWO_QUEUES_SPEC),
        kaiwo_config=kaiwo_config(),
        cluster=applied(planned, mixed_cluster_nodes),
        now=NOW,
    )
    assert first.status is not None and first.status["status"] == "READY"
    again = plan_queue_config(
        queue_config=kqc(TWO_QUEUES_SPEC, status=first.status),
        kaiwo_config=kaiwo_config(),
        cluster=applied(planned, mixed_cluster_nodes),
        now=datetime(2026, 1, 2, tzinfo=UTC),
    )
    assert again.status == first.status
    assert again.events == ()


def test_missing_namespace_fails_and_skips_that_local_queue(
    mixed_cluster_nodes: list[dict[str, Any]],
) -> None:
    plan = plan_queue_config(
        queue_config=kqc(TWO_QUEUES_SPEC),
        kaiwo_config=kaiwo_config(),
        cluster=cluster(mixed_cluster_nodes, namespaces=("ml",)),
        now=NOW,
    )
    local_queues = [o["metadata"]["namespace"] for o in plan.desired if o["kind"] == "LocalQueue"]
    assert local_queues == ["ml"]
    assert plan.status is not None
    assert plan.status["status"] == "FAILED"
    assert plan.status["conditions"][0]["reason"] == "NamespaceNotFound"
    assert plan.status["conditions"][0]["message"] == (
        "LocalQueues cannot be created in missing namespaces: vision"
    )
    assert plan.events == (
        EventIntent(
            type="Warning",
            reason="KaiwoQueueConfigFailed",
            message="LocalQueues cannot be created in missing namespaces: vision",
        ),
    )


def test_unknown_flavor_fails(mixed_cluster_nodes: list[dict[str, Any]]) -> None:
    spec = {**TWO_QUEUES_SPEC, "resourceFlavors": TWO_QUEUES_SPEC["resourceFlavors"][:1]}
    plan = plan_queue_config(
        queue_config=kqc(spec),
        kaiwo_config=kaiwo_config(),
        cluster=cluster(mixed_cluster_nodes),
        now=NOW,
    )
    assert plan.status is not None
    assert plan.status["conditions"][0]["reason"] == "ResourceFlavorNotFound"
    assert plan.status["conditions"][0]["message"] == (
        "ClusterQueues refer to ResourceFlavors that are not defined: batch/cpu"
    )


def test_other_names_are_not_acted_on() -> None:
    plan = plan_queue_config(
        queue_config=kqc(TWO_QUEUES_SPEC, name="other"),
        kaiwo_config=kaiwo_config(),
        cluster=cluster([]),
        now=NOW,
    )
    assert plan.desired == ()
    assert plan.prune == ()
    assert plan.status is not None
    assert plan.status["status"] == "FAILED"
    assert plan.status["conditions"][0]["reason"] == "UnsupportedName"


def test_empty_flavors_are_discovered_with_the_default_topology(make_node: Any) -> None:
    nodes = [make_node("mi300x-0", gpu="mi300x", cpu="128", memory="2Ti")]
    spec = {"clusterQueues": [{"name": "kaiwo"}]}
    plan = plan_queue_config(
        queue_config=kqc(spec), kaiwo_config=kaiwo_config(), cluster=cluster(nodes), now=NOW
    )
    assert kueue_part(plan.desired) == [
        {
            "apiVersion": KUEUE,
            "kind": "ClusterQueue",
            "metadata": {"name": "kaiwo", **META},
            "spec": {"namespaceSelector": {}},
        },
        {
            "apiVersion": KUEUE,
            "kind": "ResourceFlavor",
            "metadata": {"name": AMD_POOL, **META},
            "spec": {
                "topologyName": "default-topology",
                "nodeLabels": {"kaiwo/nodepool": AMD_POOL},
            },
        },
        {
            "apiVersion": KUEUE,
            "kind": "Topology",
            "metadata": {"name": "default-topology", **META},
            "spec": {
                "levels": [
                    {"nodeLabel": "kaiwo/topology-block"},
                    {"nodeLabel": "kaiwo/topology-rack"},
                    {"nodeLabel": "kubernetes.io/hostname"},
                ]
            },
        },
    ]
    # Without the dynamic setting the KaiwoQueueConfig itself is not rewritten.
    assert not [o for o in plan.desired if o["kind"] == "KaiwoQueueConfig"]


DYNAMIC_CONFIG = {
    "dynamicallyUpdateDefaultClusterQueue": True,
    "defaultClusterQueueCohortName": "everyone",
    "nodes": {"excludeMasterNodesFromNodePools": True, "addTaintsToGpuNodes": True},
}
DYNAMIC_USER_SPEC: dict[str, Any] = {
    "clusterQueues": [
        {"name": "kaiwo", "spec": {"cohort": "edited-by-user"}},
        {"name": "mine", "spec": {}},
    ],
    "resourceFlavors": [{"name": "custom", "nodeLabels": {"pool": "x"}}],
}
DEFAULT_TOPOLOGY_SPEC = {
    "levels": [
        {"nodeLabel": "kaiwo/topology-block"},
        {"nodeLabel": "kaiwo/topology-rack"},
        {"nodeLabel": "kubernetes.io/hostname"},
    ]
}


def test_the_dynamic_default_queue_reaches_kueue_and_never_the_users_spec(
    make_node: Any,
) -> None:
    nodes = [
        make_node("mi300x-0", gpu="mi300x", cpu="128", memory="2Ti"),
        make_node("cp-0", cpu="8", memory="32Gi", control_plane=True),
    ]
    plan = plan_queue_config(
        queue_config=kqc(DYNAMIC_USER_SPEC),
        kaiwo_config=kaiwo_config(**DYNAMIC_CONFIG),
        cluster=cluster(nodes),
        now=NOW,
    )
    # The user's spec is theirs: re-applying their manifest must never conflict with ours.
    assert not [o for o in plan.desired if o["kind"] == "KaiwoQueueConfig"]
    assert kueue_part(plan.desired) == [
        {
            "apiVersion": KUEUE,
            "kind": "ClusterQueue",
            "metadata": {"name": "kaiwo", **META},
            "spec": {
                "namespaceSelector": {},
                "cohort": "everyone",
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory", "amd.com/gpu"],
                        "flavors": [
                            {
                                "name": AMD_POOL,
                                "resources": [
                                    {"name": "cpu", "nominalQuota": "115"},
                                    {"name": "memory", "nominalQuota": "1843Gi"},
                                    {"name": "amd.com/gpu", "nominalQuota": "8"},
                                ],
                            }
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": KUEUE,
            "kind": "ClusterQueue",
            "metadata": {"name": "mine", **META},
            "spec": {"namespaceSelector": {}},
        },
        {
            "apiVersion": KUEUE,
            "kind": "ResourceFlavor",
            "metadata": {"name": AMD_POOL, **META},
            "spec": {
                "topologyName": "default-topology",
                "nodeLabels": {"kaiwo/nodepool": AMD_POOL},
            },
        },
        {
            "apiVersion": KUEUE,
            "kind": "ResourceFlavor",
            "metadata": {"name": "custom", **META},
            "spec": {"nodeLabels": {"kaiwo/worker": "true", "pool": "x"}},
        },
        {
            "apiVersion": KUEUE,
            "kind": "Topology",
            "metadata": {"name": "default-topology", **META},
            "spec": DEFAULT_TOPOLOGY_SPEC,
        },
    ]
    nodes_planned = [o for o in plan.desired if o["kind"] == "Node"]
    assert [n["metadata"]["name"] for n in nodes_planned] == ["mi300x-0"]
    assert nodes_planned[0]["spec"] == {
        "taints": [{"key": "kaiwo.silogen.ai/gpu", "value": "true", "effect": "NoSchedule"}]
    }
    applied_plan = plan_queue_config(
        queue_config=kqc(DYNAMIC_USER_SPEC),
        kaiwo_config=kaiwo_config(**DYNAMIC_CONFIG),
        cluster=applied(plan, nodes),
        now=NOW,
    )
    assert applied_plan.status is not None
    assert applied_plan.status["conditions"][0]["message"] == (
        "Kueue objects match the KaiwoQueueConfig (generated from the nodes: "
        f"ClusterQueues kaiwo; ResourceFlavors {AMD_POOL})"
    )


def test_discovered_flavors_go_away_with_their_nodes(make_node: Any) -> None:
    gpu_node = make_node("mi300x-0", gpu="mi300x", cpu="128", memory="2Ti")
    cpu_node = make_node("cpu-0", cpu="16", memory="64Gi")
    config = kaiwo_config(**DYNAMIC_CONFIG)
    before = plan_queue_config(
        queue_config=kqc(DYNAMIC_USER_SPEC),
        kaiwo_config=config,
        cluster=cluster([gpu_node, cpu_node]),
        now=NOW,
    )
    after = plan_queue_config(
        queue_config=kqc(DYNAMIC_USER_SPEC),
        kaiwo_config=config,
        cluster=cluster([cpu_node]),
        now=NOW,
    )

    def flavors(plan: Any) -> list[str]:
        return [o["metadata"]["name"] for o in plan.desired if o["kind"] == "ResourceFlavor"]

    def default_queue_flavors(plan: Any) -> list[str]:
        (queue,) = [
            o
            for o in plan.desired
            if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == "kaiwo"
        ]
        return [f["name"] for f in queue["spec"]["resourceGroups"][0]["flavors"]]

    assert flavors(before) == [AMD_POOL, CPU_POOL, "custom"]
    assert default_queue_flavors(before) == [CPU_POOL, AMD_POOL]
    assert flavors(after) == [CPU_POOL, "custom"]
    assert default_queue_flavors(after) == [CPU_POOL]


@pytest.mark.parametrize("exclude", [True, False])
def test_default_queue_config(make_node: Any, exclude: bool) -> None:
    nodes = [
        make_node("cpu-0", cpu="16", memory="64Gi"),
        make_node("cp-0", cpu="8", memory="32Gi", control_plane=True),
    ]
    config = kaiwo_config(nodes={"excludeMasterNodesFromNodePools": exclude})
    manifest = default_queue_config(kaiwo_config=config, cluster=cluster(nodes))
    flavor_names = [f["name"] for f in manifest["spec"]["resourceFlavors"]]
    expected = [CPU_POOL] if exclude else [CPU_POOL, "cpu-only-0gpu-7core-28gi"]
    assert flavor_names == expected
    assert manifest["spec"]["clusterQueues"][0]["name"] == "kaiwo"
    assert manifest["spec"]["topologies"][0]["metadata"] == {"name": "default-topology"}
    # The manifest is a valid KaiwoQueueConfig.
    assert KaiwoQueueConfig.from_wire(manifest).metadata.name == "kaiwo"


def test_an_empty_spec_means_the_default_queue_over_the_discovered_pools(
    make_node: Any,
) -> None:
    nodes = [make_node("mi300x-0", gpu="mi300x", cpu="128", memory="2Ti")]
    plan = plan_queue_config(
        queue_config=kqc({}), kaiwo_config=kaiwo_config(), cluster=cluster(nodes), now=NOW
    )
    assert kueue_part(plan.desired) == [
        {
            "apiVersion": KUEUE,
            "kind": "ClusterQueue",
            "metadata": {"name": "kaiwo", **META},
            "spec": {
                "namespaceSelector": {},
                "cohort": "kaiwo",
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu", "memory", "amd.com/gpu"],
                        "flavors": [
                            {
                                "name": AMD_POOL,
                                "resources": [
                                    {"name": "cpu", "nominalQuota": "115"},
                                    {"name": "memory", "nominalQuota": "1843Gi"},
                                    {"name": "amd.com/gpu", "nominalQuota": "8"},
                                ],
                            }
                        ],
                    }
                ],
            },
        },
        {
            "apiVersion": KUEUE,
            "kind": "ResourceFlavor",
            "metadata": {"name": AMD_POOL, **META},
            "spec": {
                "topologyName": "default-topology",
                "nodeLabels": {"kaiwo/nodepool": AMD_POOL},
            },
        },
        {
            "apiVersion": KUEUE,
            "kind": "Topology",
            "metadata": {"name": "default-topology", **META},
            "spec": DEFAULT_TOPOLOGY_SPEC,
        },
    ]
    assert plan.status is not None
    assert plan.status["status"] == "PENDING"
    applied_plan = plan_queue_config(
        queue_config=kqc({}), kaiwo_config=kaiwo_config(), cluster=applied(plan, nodes), now=NOW
    )
    assert applied_plan.status is not None
    assert applied_plan.status["status"] == "READY"


def test_a_node_reporting_more_than_kubernetes_holds_gives_a_valid_default_queue(
    make_node: Any,
) -> None:
    # Found by fuzzing planning: a Node with memory 1e100Gi made a flavor named
    # "-b5aba665-0gpu-0core-8999…gi" and a quota of a hundred digits, and planning raised a
    # ValidationError. Each capacity is capped at the largest quantity Kubernetes holds.
    nodes = [make_node(f"huge-{n}", gpu="mi300x", cpu="1e30", memory="1e100Gi") for n in range(2)]
    plan = plan_queue_config(
        queue_config=kqc({}), kaiwo_config=kaiwo_config(), cluster=cluster(nodes), now=NOW
    )
    (flavor,) = [o for o in plan.desired if o["kind"] == "ResourceFlavor"]
    name = flavor["metadata"]["name"]
    assert len(name) <= 63 and name[0].isalnum() and name[-1].isalnum(), name
    (queue,) = [o for o in plan.desired if o["kind"] == "ClusterQueue"]
    (resources,) = queue["spec"]["resourceGroups"]
    quotas = {r["name"]: r["nominalQuota"] for r in resources["flavors"][0]["resources"]}
    assert quotas == {
        "cpu": str(2**63 - 1),
        "memory": f"{(2**63 - 1) >> 30}Gi",
        "amd.com/gpu": "16",
    }


# ---------------------------------------------------------------- decision 0110


def node_intents(plan: Any) -> dict[str, dict[str, str]]:
    return {
        o["metadata"]["name"]: o["metadata"]["labels"] for o in plan.desired if o["kind"] == "Node"
    }


def test_nodes_keep_the_admins_pool_labels_when_the_user_lists_flavors(make_node: Any) -> None:
    # examples/kaiwoqueueconfig.yaml: flavors select nodes an admin labelled beforehand.
    nodes = [
        make_node(
            "mi300x-0",
            gpu="mi300x",
            cpu="128",
            memory="2Ti",
            labels={"kaiwo/nodepool": "amd-mi300x-8gpu", "kaiwo/gpu-model": "MI300X"},
        )
    ]
    spec = {
        "resourceFlavors": [
            {"name": "amd-mi300x-8gpu", "nodeLabels": {"kaiwo/nodepool": "amd-mi300x-8gpu"}}
        ],
        "clusterQueues": [{"name": "kaiwo", "spec": {}}],
    }
    plan = plan_queue_config(
        queue_config=kqc(spec), kaiwo_config=kaiwo_config(), cluster=cluster(nodes), now=NOW
    )
    # The model as the operator names it is asked for: the executor leaves the admin's value
    # (decision 0110), and a node without one gets it (decision 0201).
    assert node_intents(plan) == {
        "mi300x-0": {
            "kaiwo/gpu-model": "mi300x",
            "kaiwo/topology-block": "block-a",
            "kaiwo/topology-rack": "rack-a",
            "kaiwo/worker": "true",
        }
    }


def test_gpu_nodes_get_the_gpu_model_label_whatever_flavors_the_user_lists(
    make_node: Any,
) -> None:
    # Decision 0201: a workload's gpuModels is a node affinity on kaiwo/gpu-model. With the
    # user's own flavors no node got the label, and such a workload's pods never scheduled.
    nodes = [
        make_node("mi300x-0", gpu="mi300x", cpu="128", memory="2Ti"),
        make_node("cpu-0", cpu="32", memory="128Gi"),
    ]
    spec = {
        "resourceFlavors": [{"name": "gpus", "nodeLabels": {"kaiwo/nodepool": "gpus"}}],
        "clusterQueues": [{"name": "kaiwo", "spec": {}}],
    }
    plan = plan_queue_config(
        queue_config=kqc(spec), kaiwo_config=kaiwo_config(), cluster=cluster(nodes), now=NOW
    )
    intents = node_intents(plan)
    assert intents["mi300x-0"]["kaiwo/gpu-model"] == "mi300x"
    assert "kaiwo/nodepool" not in intents["mi300x-0"]  # the admin's, with flavors of theirs
    assert "kaiwo/gpu-model" not in intents["cpu-0"]


def test_nodes_of_discovered_flavors_get_the_pool_labels(make_node: Any) -> None:
    nodes = [make_node("mi300x-0", gpu="mi300x", cpu="128", memory="2Ti")]
    plan = plan_queue_config(
        queue_config=kqc({}), kaiwo_config=kaiwo_config(), cluster=cluster(nodes), now=NOW
    )
    assert node_intents(plan) == {
        "mi300x-0": {
            "kaiwo/gpu-model": "mi300x",
            "kaiwo/nodepool": AMD_POOL,
            "kaiwo/topology-block": "block-a",
            "kaiwo/topology-rack": "rack-a",
            "kaiwo/worker": "true",
        }
    }


def seventeen_shapes(make_node: Any) -> list[dict[str, Any]]:
    """17 CPU nodes, each of its own size: 17 node pools."""
    return [make_node(f"cpu-{n}", cpu=str(10 + 10 * n), memory="64Gi") for n in range(17)]


def test_seventeen_node_shapes_make_a_default_queue_of_seventeen_flavors(make_node: Any) -> None:
    plan = plan_queue_config(
        queue_config=kqc({}),
        kaiwo_config=kaiwo_config(),
        cluster=cluster(seventeen_shapes(make_node)),
        now=NOW,
    )
    (queue,) = [o for o in plan.desired if o["kind"] == "ClusterQueue"]
    flavors = [f["name"] for f in queue["spec"]["resourceGroups"][0]["flavors"]]
    assert len(flavors) == 17
    assert flavors[0] == "cpu-only-0gpu-9core-57gi"
    assert flavors[-1] == "cpu-only-0gpu-153core-57gi"
    assert len([o for o in plan.desired if o["kind"] == "ResourceFlavor"]) == 17
    assert plan.status is not None and plan.status["status"] == "PENDING"


def test_ten_user_queues_and_the_dynamic_default_queue(make_node: Any) -> None:
    spec = {"clusterQueues": [{"name": f"team-{n}", "spec": {}} for n in range(10)]}
    plan = plan_queue_config(
        queue_config=kqc(spec),
        kaiwo_config=kaiwo_config(dynamicallyUpdateDefaultClusterQueue=True),
        cluster=cluster([make_node("cpu-0", cpu="16", memory="64Gi")]),
        now=NOW,
    )
    queues = sorted(o["metadata"]["name"] for o in plan.desired if o["kind"] == "ClusterQueue")
    assert queues == sorted(["kaiwo", *(f"team-{n}" for n in range(10))])


def test_more_node_shapes_than_kueue_takes_fail_the_queue_config(make_node: Any) -> None:
    nodes = [make_node(f"cpu-{n}", cpu=str(10 + 10 * n), memory="64Gi") for n in range(65)]
    plan = plan_queue_config(
        queue_config=kqc({}), kaiwo_config=kaiwo_config(), cluster=cluster(nodes), now=NOW
    )
    assert plan.desired == () and plan.prune == ()  # the Kueue objects stay as they are
    assert plan.status is not None
    assert plan.status["status"] == "FAILED"
    (condition,) = plan.status["conditions"]
    assert condition["reason"] == "InvalidSpecInForce"
    assert condition["message"] == (
        "the default ClusterQueue 'kaiwo' would need 65 flavors in resourceGroups[0] "
        "(one per node pool); Kueue allows 64"
    )
    assert plan.events == (
        EventIntent(type="Warning", reason="KaiwoQueueConfigFailed", message=condition["message"]),
    )


def default_quota(plan: Any) -> dict[str, list[str]]:
    (queue,) = [
        o for o in plan.desired if o["kind"] == "ClusterQueue" and o["metadata"]["name"] == "kaiwo"
    ]
    return {
        f["name"]: [r["nominalQuota"] for r in f["resources"]]
        for f in queue["spec"]["resourceGroups"][0]["flavors"]
    }


@pytest.mark.parametrize("dynamic", [False, True])
def test_removing_a_gpu_node_changes_the_default_quota_only_when_dynamic(
    make_node: Any, dynamic: bool
) -> None:
    both = [
        make_node("mi300x-0", gpu="mi300x", cpu="128", memory="2Ti"),
        make_node("mi300x-1", gpu="mi300x", cpu="128", memory="2Ti"),
    ]
    config = kaiwo_config(dynamicallyUpdateDefaultClusterQueue=dynamic)
    first = plan_queue_config(
        queue_config=kqc({}), kaiwo_config=config, cluster=cluster(both), now=NOW
    )
    assert default_quota(first) == {AMD_POOL: ["230", "3686Gi", "16"]}
    later = plan_queue_config(
        queue_config=kqc({}), kaiwo_config=config, cluster=applied(first, both[:1]), now=NOW
    )
    if dynamic:
        assert default_quota(later) == {AMD_POOL: ["115", "1843Gi", "8"]}
    else:
        assert default_quota(later) == {AMD_POOL: ["230", "3686Gi", "16"]}
        assert later.status is not None and later.status["status"] == "READY"


def test_a_standing_default_queue_keeps_the_flavors_it_names(make_node: Any) -> None:
    gpu = make_node("mi300x-0", gpu="mi300x", cpu="128", memory="2Ti")
    cpu = make_node("cpu-0", cpu="16", memory="64Gi")
    first = plan_queue_config(
        queue_config=kqc({}), kaiwo_config=kaiwo_config(), cluster=cluster([gpu, cpu]), now=NOW
    )
    later = plan_queue_config(
        queue_config=kqc({}), kaiwo_config=kaiwo_config(), cluster=applied(first, [cpu]), now=NOW
    )
    flavors = sorted(o["metadata"]["name"] for o in later.desired if o["kind"] == "ResourceFlavor")
    assert flavors == [AMD_POOL, CPU_POOL]
    assert later.status is not None and later.status["status"] == "READY"


def test_a_spec_of_flavors_alone_gets_a_default_queue_whose_flavors_exist(make_node: Any) -> None:
    nodes = [make_node("mi300x-0", gpu="mi300x", cpu="128", memory="2Ti")]
    spec = {"resourceFlavors": [{"name": "custom", "nodeLabels": {"team": "a"}}]}
    plan = plan_queue_config(
        queue_config=kqc(spec), kaiwo_config=kaiwo_config(), cluster=cluster(nodes), now=NOW
    )
    flavors = sorted(o["metadata"]["name"] for o in plan.desired if o["kind"] == "ResourceFlavor")
    assert flavors == [AMD_POOL, "custom"]
    assert default_quota(plan) == {AMD_POOL: ["115", "1843Gi", "8"]}
    applied_plan = plan_queue_config(
        queue_config=kqc(spec), kaiwo_config=kaiwo_config(), cluster=applied(plan, nodes), now=NOW
    )
    assert applied_plan.status is not None and applied_plan.status["status"] == "READY"


def test_a_standing_default_queue_without_quota_is_made_again_from_the_nodes(
    make_node: Any,
) -> None:
    # The first plan of a fresh cluster may come before any node reported its capacity.
    gpu = make_node("mi300x-0", gpu="mi300x", cpu="128", memory="2Ti")
    first = plan_queue_config(
        queue_config=kqc({}), kaiwo_config=kaiwo_config(), cluster=cluster([]), now=NOW
    )
    later = plan_queue_config(
        queue_config=kqc({}), kaiwo_config=kaiwo_config(), cluster=applied(first, [gpu]), now=NOW
    )
    assert default_quota(later) == {AMD_POOL: ["115", "1843Gi", "8"]}


def labels(count: int) -> dict[str, str]:
    return {f"example.com/label-{n}": "x" for n in range(count)}


def one_flavor_queue(flavor: dict[str, Any], **queue_spec: Any) -> dict[str, Any]:
    group = {
        "coveredResources": ["cpu"],
        "flavors": [{"name": flavor["name"], "resources": [{"name": "cpu", "nominalQuota": "8"}]}],
    }
    return {
        "resourceFlavors": [flavor],
        "clusterQueues": [
            {"name": "team", "spec": {"resourceGroups": [group], **queue_spec}},
        ],
    }


def planned_objects(spec: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    plan = plan_queue_config(
        queue_config=kqc(spec), kaiwo_config=kaiwo_config(), cluster=cluster([]), now=NOW
    )
    return [o for o in plan.desired if o["kind"] == kind]


@pytest.mark.parametrize(
    ("count", "worker"),
    [(7, {"kaiwo/worker": "true"}), (8, {})],
)
def test_a_flavors_own_labels_and_the_worker_label_stay_within_kueues_eight(
    count: int, worker: dict[str, str]
) -> None:
    # Before, kaiwo/worker was always added: 8 labels of the user's became 9 on the
    # ResourceFlavor, which Kueue's CRD refuses (maxProperties 8), on every apply.
    (flavor,) = planned_objects(
        one_flavor_queue({"name": "f", "nodeLabels": labels(count)}), "ResourceFlavor"
    )
    assert flavor["spec"] == {"nodeLabels": {**labels(count), **worker}}
    assert len(flavor["spec"]["nodeLabels"]) <= 8


def test_a_flavor_labelled_kaiwo_worker_by_its_user_keeps_eight_labels() -> None:
    own = {**labels(7), "kaiwo/worker": "true"}
    (flavor,) = planned_objects(
        one_flavor_queue({"name": "f", "nodeLabels": own}), "ResourceFlavor"
    )
    assert flavor["spec"] == {"nodeLabels": own}


@pytest.mark.parametrize("topology", [False, True])
def test_a_flavor_with_more_node_labels_than_kueue_takes_fails_naming_it(topology: bool) -> None:
    # The API reference lets a flavor list 10 labels (accepted at the API); Kueue takes 8.
    # Before, the plan applied a ResourceFlavor of 11 (or 10) labels that Kueue refused on
    # every apply, and the status stayed PENDING with only ApplyRefused.
    flavor = {"name": "big", "nodeLabels": labels(10)}
    if topology:
        flavor["topologyName"] = "default-topology"
    spec = one_flavor_queue(flavor)
    spec["resourceFlavors"] = [{"name": "small", "nodeLabels": labels(1)}, flavor]
    plan = plan_queue_config(
        queue_config=kqc(spec), kaiwo_config=kaiwo_config(), cluster=cluster([]), now=NOW
    )
    assert plan.desired == () and plan.prune == ()  # the Kueue objects stay as they are
    assert plan.status is not None
    assert plan.status["status"] == "FAILED"
    (condition,) = plan.status["conditions"]
    assert condition["reason"] == "InvalidSpecInForce"
    assert condition["message"] == (
        "resourceFlavors[1] ('big').nodeLabels lists 10 labels: Kueue's ResourceFlavor takes "
        "at most 8 nodeLabels, so it cannot be created; list at most 8 (the labels that tell "
        "its nodes apart)"
    )
    assert plan.events == (
        EventIntent(type="Warning", reason="KaiwoQueueConfigFailed", message=condition["message"]),
    )


def test_kueues_newer_settings_reach_the_cluster_queue() -> None:
    # Before, MayStopSearch, preference and admissionScope were refused by the model.
    settings = {
        "cohort": "shared",
        "flavorFungibility": {
            "whenCanBorrow": "TryNextFlavor",
            "whenCanPreempt": "TryNextFlavor",
            "preference": "PreemptionOverBorrowing",
        },
        "admissionScope": {"admissionMode": "UsageBasedAdmissionFairSharing"},
    }
    (queue,) = planned_objects(one_flavor_queue({"name": "f"}, **settings), "ClusterQueue")
    assert queue["spec"] == {
        "cohort": "shared",
        "flavorFungibility": {
            "whenCanBorrow": "TryNextFlavor",
            "whenCanPreempt": "TryNextFlavor",
            "preference": "PreemptionOverBorrowing",
        },
        "admissionScope": {"admissionMode": "UsageBasedAdmissionFairSharing"},
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu"],
                "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": "8"}]}],
            }
        ],
    }
    stop = {
        "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "MayStopSearch"}
    }
    (queue,) = planned_objects(one_flavor_queue({"name": "f"}, **stop), "ClusterQueue")
    assert queue["spec"]["flavorFungibility"] == {
        "whenCanBorrow": "MayStopSearch",
        "whenCanPreempt": "MayStopSearch",
    }
