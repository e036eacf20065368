"""KaiwoQueueConfig model: Kueue sub-types, limits from the API reference, round trips."""

from __future__ import annotations

from typing import Any

import pytest
from kaiwo_contracts.crds.kaiwo_v1alpha1 import (
    KAIWO_QUEUE_CONFIG_NAME,
    ClusterQueueSpec,
    KaiwoQueueConfig,
    KaiwoQueueConfigList,
    WorkloadStatus,
)
from kaiwo_contracts.crds.label_syntax import QUALIFIED_NAME_PATTERN
from kaiwo_contracts.crds.meta import DNS_SUBDOMAIN_PATTERN
from kaiwo_contracts.crds.schema import custom_resource_definition
from kaiwo_contracts.validation import Problem, validate_manifest
from pydantic import ValidationError

KQC_FROM_API: dict[str, Any] = {
    "apiVersion": "kaiwo.silogen.ai/v1alpha1",
    "kind": "KaiwoQueueConfig",
    "metadata": {
        "name": "kaiwo",
        "uid": "c1f3b1a2-1111-4c1e-9a0b-0d2e3f4a5b6c",
        "resourceVersion": "1200",
        "generation": 3,
        "creationTimestamp": "2025-06-01T12:00:00Z",
        "managedFields": [
            {
                "manager": "kaiwo-executor",
                "operation": "Apply",
                "apiVersion": "kaiwo.silogen.ai/v1alpha1",
                "time": "2025-06-01T12:00:00Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:clusterQueues": {}}},
            }
        ],
    },
    "spec": {
        "resourceFlavors": [
            {
                "name": "amd-mi300x-8gpu",
                "nodeLabels": {"kaiwo/nodepool": "amd-mi300x-8gpu"},
                "taints": [
                    {"key": "kaiwo.silogen.ai/gpu", "value": "true", "effect": "NoSchedule"}
                ],
                "tolerations": [
                    {"key": "kaiwo.silogen.ai/gpu", "operator": "Exists", "effect": ""}
                ],
            }
        ],
        "clusterQueues": [
            {
                "name": "kaiwo",
                "namespaces": ["kaiwo", "ml-team"],
                "spec": {
                    "cohort": "kaiwo",
                    "queueingStrategy": "BestEffortFIFO",
                    "stopPolicy": "None",
                    "flavorFungibility": {
                        "whenCanBorrow": "Borrow",
                        "whenCanPreempt": "TryNextFlavor",
                    },
                    "preemption": {
                        "reclaimWithinCohort": "Never",
                        "withinClusterQueue": "Never",
                        "borrowWithinCohort": {"policy": "Never"},
                    },
                    "namespaceSelector": {},
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu", "memory", "amd.com/gpu"],
                            "flavors": [
                                {
                                    "name": "amd-mi300x-8gpu",
                                    "resources": [
                                        {"name": "cpu", "nominalQuota": "384"},
                                        {"name": "memory", "nominalQuota": "3000Gi"},
                                        {
                                            "name": "amd.com/gpu",
                                            "nominalQuota": 16,
                                            "borrowingLimit": "8",
                                        },
                                    ],
                                }
                            ],
                        }
                    ],
                },
            }
        ],
        "workloadPriorityClasses": [
            {
                "apiVersion": "kueue.x-k8s.io/v1beta1",
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": "high-priority"},
                "value": 1000,
                "description": "first",
            }
        ],
        "topologies": [
            {
                "metadata": {"name": "default-topology"},
                "spec": {
                    "levels": [
                        {"nodeLabel": "kaiwo/topology-block"},
                        {"nodeLabel": "kaiwo/topology-rack"},
                        {"nodeLabel": "kubernetes.io/hostname"},
                    ]
                },
            }
        ],
    },
    "status": {"status": "READY"},
}


def _errors(data: dict[str, Any]) -> list[tuple[Any, str]]:
    with pytest.raises(ValidationError) as caught:
        KaiwoQueueConfig.from_wire(data)
    return [(error["loc"], error["msg"]) for error in caught.value.errors()]


def _queue(name: str, **spec: Any) -> dict[str, Any]:
    return {"name": name, "spec": spec}


def test_queue_config_from_the_api_server_round_trips_exactly() -> None:
    config = KaiwoQueueConfig.from_wire(KQC_FROM_API)

    assert config.to_wire() == KQC_FROM_API
    assert config.metadata.name == KAIWO_QUEUE_CONFIG_NAME
    assert config.status.status is WorkloadStatus.READY
    assert config.spec.cluster_queues is not None
    quotas = config.spec.cluster_queues[0].spec.resource_groups
    assert quotas is not None
    assert [q.nominal_quota for q in quotas[0].flavors[0].resources] == ["384", "3000Gi", 16]


def test_queue_config_list_round_trips() -> None:
    wire = {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoQueueConfigList",
        "metadata": {"resourceVersion": "1201"},
        "items": [KQC_FROM_API],
    }

    assert KaiwoQueueConfigList.from_wire(wire).to_wire() == wire


def test_cluster_queue_spec_defaults_follow_kueue() -> None:
    spec = ClusterQueueSpec.from_wire({})

    assert spec.queueing_strategy == "BestEffortFIFO"
    assert spec.stop_policy == "None"
    assert spec.flavor_fungibility.when_can_borrow == "Borrow"
    assert spec.flavor_fungibility.when_can_preempt == "TryNextFlavor"
    assert spec.preemption.reclaim_within_cohort == "Never"
    assert spec.preemption.within_cluster_queue == "Never"
    assert spec.namespace_selector is None


def test_crd_metadata_is_cluster_scoped() -> None:
    crd = KaiwoQueueConfig.crd

    assert crd.scope == "Cluster"
    assert crd.crd_name == "kaiwoqueueconfigs.kaiwo.silogen.ai"
    assert crd.short_names == ("kqc",)
    assert crd.categories == ("kaiwo",)
    assert [(c.name, c.json_path) for c in crd.printer_columns] == [
        ("WorkloadStatus", ".status.status")
    ]


def test_at_most_ten_cluster_queues() -> None:
    queues = [_queue(f"q{i}") for i in range(11)]

    assert _errors({"spec": {"clusterQueues": queues}}) == [
        (("spec", "clusterQueues"), "List should have at most 10 items after validation, not 11")
    ]


def test_at_most_five_workload_priority_classes() -> None:
    classes = [{"metadata": {"name": f"p{i}"}, "value": i} for i in range(6)]

    assert _errors({"spec": {"workloadPriorityClasses": classes}}) == [
        (
            ("spec", "workloadPriorityClasses"),
            "List should have at most 5 items after validation, not 6",
        )
    ]


@pytest.mark.parametrize(
    ("value", "problems"),
    [
        (2**31 - 1, []),
        (-(2**31), []),
        (2**31, [Problem("spec.workloadPriorityClasses[0].value", "must be at most 2147483647")]),
        (
            -(2**31) - 1,
            [Problem("spec.workloadPriorityClasses[0].value", "must be at least -2147483648")],
        ),
    ],
)
def test_a_priority_value_fits_kueues_int32(value: int, problems: list[Problem]) -> None:
    # Before, a larger value was accepted and Kueue refused the WorkloadPriorityClass.
    manifest = {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": "kaiwo"},
        "spec": {"workloadPriorityClasses": [{"metadata": {"name": "p"}, "value": value}]},
    }
    assert validate_manifest(manifest) == problems


def test_resource_flavor_limits() -> None:
    flavor = {
        "name": "f",
        "nodeLabels": {f"label-{i}": "x" for i in range(11)},
        "taints": [{"key": f"t{i}", "effect": "NoSchedule"} for i in range(6)],
        "tolerations": [{"key": f"t{i}", "operator": "Exists"} for i in range(6)],
    }

    errors = _errors({"spec": {"resourceFlavors": [flavor]}})

    assert [loc for loc, _ in errors] == [
        ("spec", "resourceFlavors", 0, "nodeLabels"),
        ("spec", "resourceFlavors", 0, "taints"),
        ("spec", "resourceFlavors", 0, "tolerations"),
    ]
    assert errors[1][1] == "List should have at most 5 items after validation, not 6"


def test_taint_effect_is_an_enum() -> None:
    flavor = {"name": "f", "taints": [{"key": "gpu", "effect": "NoRun"}]}

    assert _errors({"spec": {"resourceFlavors": [flavor]}}) == [
        (
            ("spec", "resourceFlavors", 0, "taints", 0, "effect"),
            "Input should be 'NoSchedule', 'PreferNoSchedule' or 'NoExecute'",
        )
    ]


def test_queueing_strategy_and_stop_policy_are_enums() -> None:
    errors = _errors(
        {"spec": {"clusterQueues": [_queue("q", queueingStrategy="FIFO", stopPolicy="Pause")]}}
    )

    assert errors == [
        (
            ("spec", "clusterQueues", 0, "spec", "queueingStrategy"),
            "Input should be 'StrictFIFO' or 'BestEffortFIFO'",
        ),
        (
            ("spec", "clusterQueues", 0, "spec", "stopPolicy"),
            "Input should be 'None', 'Hold' or 'HoldAndDrain'",
        ),
    ]


def test_flavor_quotas_must_match_covered_resources() -> None:
    group = {
        "coveredResources": ["cpu", "memory"],
        "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": 4}]}],
    }

    assert _errors({"spec": {"clusterQueues": [_queue("q", resourceGroups=[group])]}}) == [
        (
            ("spec", "clusterQueues", 0, "spec", "resourceGroups", 0),
            "flavor 'f' must list one quota for each of the coveredResources (cpu, memory) "
            "and for no other resource, got (cpu)",
        )
    ]


def test_nominal_quota_is_required() -> None:
    group = {
        "coveredResources": ["cpu"],
        "flavors": [{"name": "f", "resources": [{"name": "cpu"}]}],
    }

    assert _errors({"spec": {"clusterQueues": [_queue("q", resourceGroups=[group])]}}) == [
        (
            (
                "spec",
                "clusterQueues",
                0,
                "spec",
                "resourceGroups",
                0,
                "flavors",
                0,
                "resources",
                0,
                "nominalQuota",
            ),
            "Field required",
        )
    ]


def test_admission_checks_are_listed_one_way_only() -> None:
    queue = _queue(
        "q",
        admissionChecks=["prov"],
        admissionChecksStrategy={"admissionChecks": [{"name": "prov"}]},
    )

    assert _errors({"spec": {"clusterQueues": [queue]}}) == [
        (
            ("spec", "clusterQueues", 0, "spec"),
            "set either admissionChecks or admissionChecksStrategy, not both",
        )
    ]


def test_names_must_be_unique() -> None:
    errors = _errors({"spec": {"clusterQueues": [_queue("a"), _queue("b"), _queue("a")]}})

    assert errors == [(("spec",), "clusterQueues[].name must be unique; repeated: a")]


def test_workload_priority_class_needs_a_name_and_a_value() -> None:
    errors = _errors({"spec": {"workloadPriorityClasses": [{"metadata": {}, "value": 1}, {}]}})

    assert errors == [
        (("spec", "workloadPriorityClasses", 0), "a WorkloadPriorityClass needs metadata.name"),
        (("spec", "workloadPriorityClasses", 1, "metadata"), "Field required"),
        (("spec", "workloadPriorityClasses", 1, "value"), "Field required"),
    ]


def test_topology_hostname_only_at_the_lowest_level() -> None:
    topology = {
        "metadata": {"name": "t"},
        "spec": {"levels": [{"nodeLabel": "kubernetes.io/hostname"}, {"nodeLabel": "rack"}]},
    }

    assert _errors({"spec": {"topologies": [topology]}}) == [
        (
            ("spec", "topologies", 0, "spec"),
            "the kubernetes.io/hostname label can only be used at the lowest level",
        )
    ]


def test_names_that_become_kueue_objects_must_be_rfc_1123() -> None:
    # Found by fuzzing: a ClusterQueue named "AMD" was planned, and the API server refused it.
    manifest = {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": "kaiwo"},
        "spec": {
            "clusterQueues": [{"name": "AMD", "namespaces": ["team-a", "Team_B"]}],
            "resourceFlavors": [{"name": "gpu_pool"}],
        },
    }
    assert validate_manifest(manifest) == [
        Problem(
            "spec.clusterQueues[0].name",
            "must be a lowercase RFC 1123 name such as team-a or gpu.pool-1",
        ),
        Problem(
            "spec.clusterQueues[0].namespaces[1]",
            "must be a lowercase RFC 1123 label such as team-a",
        ),
        Problem(
            "spec.resourceFlavors[0].name",
            "must be a lowercase RFC 1123 name such as team-a or gpu.pool-1",
        ),
    ]
    fixed = {
        **manifest,
        "spec": {
            "clusterQueues": [{"name": "amd.gpu-1", "namespaces": ["team-a", "team-b"]}],
            "resourceFlavors": [{"name": "gpu-pool"}],
        },
    }
    assert validate_manifest(fixed) == []


def test_whole_kueue_objects_listed_need_names_the_api_server_takes() -> None:
    # Found by fuzzing: a WorkloadPriorityClass named ":" and a Topology named "None".
    manifest = {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": "kaiwo"},
        "spec": {
            "workloadPriorityClasses": [{"metadata": {"name": ":"}, "value": 1}],
            "topologies": [
                {"metadata": {"name": "None"}, "spec": {"levels": [{"nodeLabel": "a"}]}},
                {"metadata": {}, "spec": {"levels": [{"nodeLabel": "a"}]}},
            ],
        },
    }
    assert validate_manifest(manifest) == [
        Problem(
            "spec.workloadPriorityClasses[0]",
            "metadata.name must be a lowercase RFC 1123 name such as team-a, not ':'",
        ),
        Problem(
            "spec.topologies[0]",
            "metadata.name must be a lowercase RFC 1123 name such as team-a, not 'None'",
        ),
        # Found by fuzzing too: a Topology without a name was created as "None".
        Problem("spec.topologies[1]", "a Topology needs metadata.name"),
    ]


def test_a_cluster_queues_namespace_selector_must_hold_kubernetes_label_keys() -> None:
    # Found by fuzzing planning: the key "hf://org/model" reached the ClusterQueue, which the
    # API server refuses (422) on every apply.
    def problems(selector: dict[str, Any]) -> list[str]:
        manifest = {
            "apiVersion": "kaiwo.silogen.ai/v1alpha1",
            "kind": "KaiwoQueueConfig",
            "metadata": {"name": "kaiwo"},
            "spec": {"clusterQueues": [{"name": "q", "spec": {"namespaceSelector": selector}}]},
        }
        return [problem.path for problem in validate_manifest(manifest)]

    assert problems({"matchLabels": {"team": "a"}}) == []
    assert problems({"matchExpressions": [{"key": "team", "operator": "Exists"}]}) == []
    assert problems({"matchLabels": {"hf://org/model": ""}}) == [
        "spec.clusterQueues[0].spec.namespaceSelector.matchLabels"
    ]
    assert problems({"matchExpressions": [{"key": "a b", "operator": "Exists"}]}) == [
        "spec.clusterQueues[0].spec.namespaceSelector.matchExpressions[0].key"
    ]


def _problems(*queue_specs: dict[str, Any]) -> list[Problem]:
    manifest = {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": "kaiwo"},
        "spec": {"clusterQueues": [_queue(f"q{n}", **s) for n, s in enumerate(queue_specs)]},
    }
    return validate_manifest(manifest)


def _group(*flavors: str, resources: tuple[str, ...] = ("cpu",), **quota: Any) -> dict[str, Any]:
    return {
        "coveredResources": list(resources),
        "flavors": [
            {"name": f, "resources": [{"name": r, "nominalQuota": "8", **quota} for r in resources]}
            for f in flavors
        ],
    }


Q0 = "spec.clusterQueues[0].spec"


def test_kueues_rules_on_a_cluster_queue_spec_are_the_models() -> None:
    # Before, each of these was accepted and the ClusterQueue refused by Kueue on every apply.
    assert _problems(
        {"resourceGroups": [_group("f", borrowingLimit="2")]},
        {"resourceGroups": [_group("f", lendingLimit="2")]},
        {
            "preemption": {
                "reclaimWithinCohort": "Never",
                "borrowWithinCohort": {"policy": "LowerPriority"},
            }
        },
        {"cohort": "Team_A"},
        {"flavorFungibility": {"preference": "BorrowingOverPreemption"}},
    ) == [
        Problem(
            "spec.clusterQueues[0].spec.resourceGroups",
            "borrowingLimit must be nil when cohort is empty",
        ),
        Problem(
            "spec.clusterQueues[1].spec.resourceGroups",
            "lendingLimit must be nil when cohort is empty",
        ),
        Problem(
            "spec.clusterQueues[2].spec.preemption.borrowWithinCohort.policy",
            "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never: a queue that may "
            "preempt in its cohort while borrowing must also reclaim",
        ),
        Problem(
            "spec.clusterQueues[3].spec.cohort",
            "must be a lowercase RFC 1123 name such as team-a or gpu.pool-1",
        ),
        Problem(
            "spec.clusterQueues[4].spec.flavorFungibility.preference",
            "preference can only be set when both whenCanBorrow and whenCanPreempt are "
            "TryNextFlavor",
        ),
    ]
    # The same settings as Kueue takes them.
    assert (
        _problems(
            {
                "cohort": "team-a",
                "resourceGroups": [_group("f", borrowingLimit="2", lendingLimit="8")],
            },
            {
                "preemption": {
                    "reclaimWithinCohort": "Any",
                    "borrowWithinCohort": {"policy": "LowerPriority"},
                }
            },
            {
                "flavorFungibility": {
                    "whenCanBorrow": "TryNextFlavor",
                    "whenCanPreempt": "TryNextFlavor",
                    "preference": "BorrowingOverPreemption",
                }
            },
        )
        == []
    )


def test_kueues_webhook_rules_on_a_cluster_queue_spec_are_the_models() -> None:
    assert _problems(
        {"cohort": "c", "resourceGroups": [_group("f", lendingLimit="9")]},
        {"fairSharing": {"weight": "1n"}},
        {"resourceGroups": [_group("f"), _group("f", resources=("memory",))]},
        {"resourceGroups": [_group("f", resources=("hf://model",))]},
    ) == [
        Problem(
            "spec.clusterQueues[0].spec.resourceGroups[0].flavors[0].resources[0].lendingLimit",
            "lendingLimit must be less than or equal to the nominalQuota",
        ),
        Problem(
            "spec.clusterQueues[1].spec.fairSharing.weight", "When not 0, weight must be > 10e-9"
        ),
        Problem(
            "spec.clusterQueues[2].spec",
            "resourceGroups[].flavors[].name must be unique; repeated: f",
        ),
        Problem(
            "spec.clusterQueues[3].spec.resourceGroups[0].coveredResources[0]",
            f"must match the pattern {QUALIFIED_NAME_PATTERN}",
        ),
        Problem(
            "spec.clusterQueues[3].spec.resourceGroups[0].flavors[0].resources[0].name",
            f"must match the pattern {QUALIFIED_NAME_PATTERN}",
        ),
    ]
    assert _problems({"fairSharing": {"weight": "0"}}, {"fairSharing": {"weight": "2n"}}) == []


def test_kueues_limits_on_resource_groups() -> None:
    # Kueue takes 64 flavors and 64 covered resources in a group (the model said 16), but
    # not more than 512 quotas in a group nor 256 flavors over all groups.
    many = tuple(f"example.com/r{n}" for n in range(64))
    assert (
        _problems(
            {"resourceGroups": [_group(*(f"f{n}" for n in range(64)))]},
            {"resourceGroups": [_group("f", resources=many)]},
        )
        == []
    )
    assert _problems(
        {"resourceGroups": [_group(*(f"f{n}" for n in range(65)))]},
        {"resourceGroups": [_group(*(f"f{n}" for n in range(9)), resources=many)]},
        {
            "resourceGroups": [
                _group(*(f"g{g}-f{n}" for n in range(64)), resources=(f"r{g}",)) for g in range(5)
            ]
        },
    ) == [
        Problem(
            "spec.clusterQueues[0].spec.resourceGroups[0].flavors", "must have at most 64 items"
        ),
        Problem(
            "spec.clusterQueues[1].spec.resourceGroups[0].flavors",
            "number of flavor-resource combinations in a resourceGroup must be ≤ 512 (flavors "
            "times coveredResources)",
        ),
        Problem(
            "spec.clusterQueues[2].spec.resourceGroups",
            "total number of flavors across all resourceGroups must be ≤ 256",
        ),
    ]


def test_kueues_fungibility_and_admission_scope_values_are_taken() -> None:
    # Before, MayStopSearch (Kueue's default and new name of Borrow and Preempt), preference
    # and admissionScope were refused.
    spec = ClusterQueueSpec.from_wire(
        {
            "flavorFungibility": {
                "whenCanBorrow": "MayStopSearch",
                "whenCanPreempt": "MayStopSearch",
            },
            "admissionScope": {"admissionMode": "NoAdmissionFairSharing"},
        }
    )
    assert spec.flavor_fungibility.when_can_borrow == "MayStopSearch"
    assert spec.flavor_fungibility.when_can_preempt == "MayStopSearch"
    assert spec.to_wire()["admissionScope"] == {"admissionMode": "NoAdmissionFairSharing"}
    assert _problems({"admissionScope": {"admissionMode": "Sometimes"}}) == [
        Problem(
            f"{Q0}.admissionScope.admissionMode",
            "must be one of UsageBasedAdmissionFairSharing, NoAdmissionFairSharing",
        )
    ]


def test_the_crd_carries_kueues_rules_so_the_api_server_refuses_what_kueue_would() -> None:
    schema = custom_resource_definition(KaiwoQueueConfig)["spec"]["versions"][0]["schema"]
    queue = schema["openAPIV3Schema"]["properties"]["spec"]["properties"]["clusterQueues"]
    spec = queue["items"]["properties"]["spec"]
    rules = {
        (where, entry["message"])
        for where, node in (
            ("spec", spec),
            ("preemption", spec["properties"]["preemption"]),
            ("flavorFungibility", spec["properties"]["flavorFungibility"]),
        )
        for entry in node.get("x-kubernetes-validations", ())
    }
    assert {
        ("spec", "borrowingLimit must be nil when cohort is empty"),
        ("spec", "lendingLimit must be nil when cohort is empty"),
        (
            "preemption",
            "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never: a queue that may "
            "preempt in its cohort while borrowing must also reclaim",
        ),
        (
            "flavorFungibility",
            "preference can only be set when both whenCanBorrow and whenCanPreempt are "
            "TryNextFlavor",
        ),
    } <= rules
    assert spec["properties"]["cohort"]["pattern"] == DNS_SUBDOMAIN_PATTERN
    fungibility = spec["properties"]["flavorFungibility"]["properties"]
    assert fungibility["whenCanBorrow"]["enum"] == ["MayStopSearch", "TryNextFlavor", "Borrow"]
    assert fungibility["whenCanPreempt"]["enum"] == ["MayStopSearch", "TryNextFlavor", "Preempt"]
