"""What counts as "the cluster holds what the manifest asks for": objects as a real API server
stores them (defaults filled in, zero values left out, canonical quantities, fields of other
managers) against manifests as the planner writes them. Every case is written out by hand."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kaiwo_planner.domain.state.index_entry import written_last_by_operator
from kaiwo_planner.domain.state.manifest_comparison import (
    carries,
    contains,
    differing_paths,
    may_be_quantity,
    removed_paths,
    same_exactly,
)
from kaiwo_planner.domain.state.nodes import parse_quantity

WANTED_JOB: dict[str, Any] = {
    "kind": "Job",
    "metadata": {
        "name": "train",
        "namespace": "ml-team",
        "labels": {"app.kubernetes.io/managed-by": "kaiwo"},
    },
    "spec": {
        "parallelism": 1,
        "suspend": True,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "hostNetwork": False,
                "containers": [
                    {
                        "name": "main",
                        "image": "ghcr.io/silogen/rocm-ray:6.4",
                        "args": ["python", "train.py"],
                        "env": [],
                        "resources": {
                            "requests": {"cpu": "0.5", "memory": "1024Mi", "amd.com/gpu": 4},
                            "limits": {"amd.com/gpu": "4"},
                        },
                    }
                ],
            }
        },
    },
}

# The same Job as kube-apiserver v1.36 returns it after the Job controller and Kueue acted.
STORED_JOB: dict[str, Any] = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {
        "name": "train",
        "namespace": "ml-team",
        "uid": "0d2f",
        "resourceVersion": "812",
        "generation": 2,
        "labels": {"app.kubernetes.io/managed-by": "kaiwo"},
    },
    "spec": {
        "parallelism": 1,
        "completions": 1,
        "backoffLimit": 6,
        "suspend": True,
        "completionMode": "NonIndexed",
        "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "0d2f"}},
        "template": {
            "metadata": {"labels": {"batch.kubernetes.io/job-name": "train", "job-name": "train"}},
            "spec": {
                "restartPolicy": "Never",
                "dnsPolicy": "ClusterFirst",
                "schedulerName": "default-scheduler",
                "terminationGracePeriodSeconds": 30,
                "securityContext": {},
                "containers": [
                    {
                        "name": "main",
                        "image": "ghcr.io/silogen/rocm-ray:6.4",
                        "args": ["python", "train.py"],
                        "imagePullPolicy": "IfNotPresent",
                        "terminationMessagePath": "/dev/termination-log",
                        "terminationMessagePolicy": "File",
                        "resources": {
                            "requests": {"cpu": "500m", "memory": "1Gi", "amd.com/gpu": "4"},
                            "limits": {"amd.com/gpu": "4"},
                        },
                    }
                ],
            },
        },
    },
    "status": {"active": 1},
}


def _edited(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    edited = copy.deepcopy(STORED_JOB)
    target = edited
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return edited


def test_a_stored_job_with_defaults_and_canonical_quantities_holds_the_manifest() -> None:
    assert contains(STORED_JOB, WANTED_JOB)
    assert differing_paths(STORED_JOB, WANTED_JOB, path="") == []


@pytest.mark.parametrize(
    ("path", "value", "differs_at"),
    [
        (("spec", "parallelism"), 4, ".spec.parallelism"),
        (("spec", "suspend"), False, ".spec.suspend"),
        (
            ("spec", "template", "spec", "containers", 0, "args"),
            ["train.py", "python"],
            ".spec.template.spec.containers[0].args",
        ),
        (
            ("spec", "template", "spec", "containers", 0, "resources", "requests", "memory"),
            "2Gi",
            ".spec.template.spec.containers[0].resources.requests.memory",
        ),
        (("spec", "template", "spec", "hostNetwork"), True, ".spec.template.spec.hostNetwork"),
        (
            ("metadata", "labels"),
            {"team": "vision"},
            ".metadata.labels.app.kubernetes.io/managed-by",
        ),
    ],
)
def test_a_field_changed_by_hand_is_found(
    path: tuple[Any, ...], value: Any, differs_at: str
) -> None:
    edited = _edited(path, value)
    assert not contains(edited, WANTED_JOB)
    assert differing_paths(edited, WANTED_JOB, path="") == [differs_at]


def test_a_container_of_someone_else_is_tolerated_a_missing_one_is_not() -> None:
    sidecar = {"name": "proxy", "image": "envoy:1.30"}
    stored = copy.deepcopy(STORED_JOB)
    stored["spec"]["template"]["spec"]["containers"].append(sidecar)
    assert contains(stored, WANTED_JOB)
    stored["spec"]["template"]["spec"]["containers"] = [sidecar]
    assert not contains(stored, WANTED_JOB)


def test_zero_values_the_server_leaves_out_count_as_present() -> None:
    wanted = {"spec": {"env": [], "hostNetwork": False, "note": "", "replicas": 0, "x": None}}
    assert contains({"spec": {}}, wanted)
    assert not contains({"spec": {"replicas": 2}}, wanted)
    assert not contains({}, {"spec": {"replicas": 2}})


def test_kueue_defaults_filled_in_by_the_crd_schema_are_tolerated() -> None:
    wanted = {
        "kind": "ClusterQueue",
        "metadata": {"name": "kaiwo"},
        "spec": {
            "namespaceSelector": {},
            "cohort": "kaiwo",
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory", "amd.com/gpu"],
                    "flavors": [
                        {
                            "name": "amd-mi300x-8gpu-115core-1843gi",
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
    }
    stored = copy.deepcopy(wanted)
    stored["spec"] |= {
        "flavorFungibility": {"whenCanBorrow": "Borrow", "whenCanPreempt": "TryNextFlavor"},
        "preemption": {"reclaimWithinCohort": "Never", "withinClusterQueue": "Never"},
        "queueingStrategy": "BestEffortFIFO",
        "stopPolicy": "None",
    }
    stored["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2]["nominalQuota"] = 8
    assert contains(stored, wanted)
    stored["spec"]["cohort"] = "other"
    assert differing_paths(stored, wanted, path="") == [".spec.cohort"]


def test_our_taint_among_the_nodes_own_with_the_time_the_server_added() -> None:
    wanted = {
        "kind": "Node",
        "metadata": {"name": "gpu-1", "labels": {"kaiwo/worker": "true"}},
        "spec": {
            "taints": [{"key": "kaiwo.silogen.ai/gpu", "value": "true", "effect": "NoSchedule"}]
        },
    }
    stored = {
        "kind": "Node",
        "metadata": {"name": "gpu-1", "labels": {"kaiwo/worker": "true", "zone": "a"}},
        "spec": {
            "taints": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "effect": "NoSchedule",
                    "timeAdded": "2026-11-24T09:00:00Z",
                },
                {"key": "kaiwo.silogen.ai/gpu", "value": "true", "effect": "NoSchedule"},
            ]
        },
    }
    assert contains(stored, wanted)
    stored["spec"]["taints"] = stored["spec"]["taints"][:1]
    assert not contains(stored, wanted)


@pytest.mark.parametrize(
    ("stored", "wanted", "held"),
    [
        ("500m", "0.5", True),
        ("1Gi", "1073741824", True),
        ("4", 4, True),
        (8, "8", True),
        ("1Ti", "1Gi", False),
        ("true", True, False),
        (None, "x", False),
        ("v1.2", "v1.20", False),
    ],
)
def test_scalars(stored: Any, wanted: Any, held: bool) -> None:
    assert contains(stored, wanted) is held


@pytest.mark.parametrize(
    ("text", "maybe"),
    [
        ("500m", True),
        (" 1Gi", True),
        ("-1", True),
        ("+2", True),
        (".5", True),
        ("\u0663", True),  # an Arabic-Indic three: Decimal reads it
        ("main", False),
        ("IfNotPresent", False),
        ("/bin/sh", False),
        ("inf", False),
        ("NaN", False),
        ("", False),
        ("  ", False),
    ],
)
def test_a_text_that_may_be_a_quantity(text: str, maybe: bool) -> None:
    assert may_be_quantity(text) is maybe


@given(st.text(max_size=8))
def test_what_may_not_be_a_quantity_does_not_parse_as_one(text: str) -> None:
    # The fast refusal must never refuse what parse_quantity takes.
    if not may_be_quantity(text):
        with pytest.raises(ValueError):
            parse_quantity(text)


@given(st.text(alphabet="0123456789.+-eEkKmMGTiu n", max_size=8))
def test_quantity_like_texts_are_never_refused_unparsed(text: str) -> None:
    try:
        parse_quantity(text)
    except ValueError:
        return
    assert may_be_quantity(text)


def test_differing_paths_are_found_in_one_walk_as_before() -> None:
    stored = copy.deepcopy(STORED_JOB)
    template = stored["spec"]["template"]
    template["spec"]["containers"][0]["image"] = "other:1"
    template["metadata"] = {"labels": {"team": "b"}}
    wanted = copy.deepcopy(WANTED_JOB)
    wanted["spec"]["template"]["metadata"] = {"labels": {"team": "a"}}

    assert differing_paths(stored["spec"]["template"], wanted["spec"]["template"], path="t") == [
        "t.metadata.labels.team",
        "t.spec.containers[0].image",
    ]
    assert differing_paths(STORED_JOB, WANTED_JOB, path="job") == []


def _managed(*entries: tuple[str, str, str | None]) -> dict[str, Any]:
    return {
        "metadata": {
            "managedFields": [
                {"manager": manager, "operation": "Apply", "time": at}
                | ({"subresource": sub} if sub else {})
                for manager, at, sub in entries
            ]
        }
    }


@pytest.mark.parametrize(
    ("entries", "ours"),
    [
        # Our apply, then the Job controller's status: still ours.
        (
            [
                ("kaiwo", "2026-11-24T09:00:00Z", None),
                ("kube-controller-manager", "2026-11-24T09:00:05Z", "status"),
            ],
            True,
        ),
        # Someone ran kubectl edit after our apply.
        (
            [
                ("kaiwo", "2026-11-24T09:00:00Z", None),
                ("kubectl-edit", "2026-11-24T09:03:00Z", None),
            ],
            False,
        ),
        # The same second: their edit may be the newer one.
        (
            [("kaiwo", "2026-11-24T09:00:00Z", None), ("kueue", "2026-11-24T09:00:00Z", None)],
            False,
        ),
        ([], False),
    ],
)
def test_who_wrote_an_object_last(entries: list[Any], ours: bool) -> None:
    assert written_last_by_operator(_managed(*entries)) is ours


def test_kueue_stores_borrow_and_preempt_as_may_stop_search() -> None:
    """Kueue 0.15+ serves a ClusterQueue's v1beta1 ``Borrow``/``Preempt`` back as
    ``MayStopSearch`` (seen on the real Kueue); an older Kueue keeps them as written."""
    wanted = {
        "spec": {"flavorFungibility": {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"}}
    }
    served = {
        "spec": {
            "flavorFungibility": {
                "whenCanBorrow": "MayStopSearch",
                "whenCanPreempt": "MayStopSearch",
            }
        }
    }
    assert contains(served, wanted)
    assert contains(wanted, wanted)
    other = {"spec": {"flavorFungibility": {"whenCanBorrow": "TryNextFlavor"}}}
    assert not contains(other, wanted)
    # Only that way round: asking for MayStopSearch is not met by Borrow.
    assert not contains(wanted, served)


def test_removed_paths_names_the_named_pod_list_items_a_manifest_dropped() -> None:
    stored = {
        "metadata": {"labels": {"batch.kubernetes.io/job-name": "j", "team": "a"}},
        "spec": {
            "imagePullSecrets": [{"name": "reg-a"}],
            "tolerations": [{"key": "kueue-flavor", "operator": "Exists"}],
            "containers": [
                {
                    "name": "sidecar",
                    "env": [{"name": "X", "value": "1"}],
                },
                {
                    "name": "workload",
                    "env": [{"name": "A", "value": "1"}, {"name": "HF_TOKEN", "value": "t"}],
                    "volumeMounts": [{"name": "data", "mountPath": "/workload"}],
                    "terminationMessagePath": "/dev/termination-log",
                },
            ],
        },
    }
    # The workload's container first, the sidecar second; no pull secrets, no tolerations,
    # no labels, no mounts: only the named items dropped count.
    wanted = {
        "spec": {
            "containers": [
                {"name": "workload", "env": [{"name": "A", "value": "1"}]},
                {"name": "sidecar", "env": [{"name": "X", "value": "1"}]},
            ]
        }
    }

    assert removed_paths(stored, wanted, path="t") == [
        "t.spec.containers[0].env[name=HF_TOKEN]",
        "t.spec.containers[0].volumeMounts[name=data]",
        "t.spec.imagePullSecrets[name=reg-a]",
    ]
    assert differing_paths(stored, wanted, path="t") == []


def test_removed_paths_is_empty_when_the_manifest_keeps_every_named_item() -> None:
    stored = {"spec": {"containers": [{"name": "c", "env": [{"name": "A", "value": "1"}]}]}}
    wanted = {"spec": {"containers": [{"name": "c", "env": [{"name": "A", "value": "2"}]}]}}

    assert removed_paths(stored, wanted, path="t") == []
    assert removed_paths("damaged", wanted, path="t") == []


# ------------------------------------------------ atomic fields of Kueue objects (decision 0226)


@pytest.mark.parametrize(
    ("observed", "wanted", "same"),
    [
        ({}, {}, True),
        (None, {}, True),  # left out by the API server: an empty selector
        ({"matchLabels": {}}, {}, True),
        ({"matchLabels": {"team": "x"}}, {}, False),
        ([{"name": "a"}, {"name": "b"}], [{"name": "a"}, {"name": "b"}], True),
        ([{"name": "b"}, {"name": "a"}], [{"name": "a"}, {"name": "b"}], False),
        ([{"name": "a"}, {"name": "b"}], [{"name": "a"}], False),
        ([{"name": "a", "lendingLimit": "0"}], [{"name": "a"}], False),
        ([{"name": "a", "lendingLimit": None}], [{"name": "a"}], True),
        ([{"nominalQuota": "500m"}], [{"nominalQuota": "0.5"}], True),
        ([{"nominalQuota": "4"}], [{"nominalQuota": 4}], True),
        ("Never", "Never", True),
        ("Any", "Never", False),
    ],
)
def test_same_exactly(observed: Any, wanted: Any, same: bool) -> None:
    assert same_exactly(observed, wanted) is same


def test_only_the_atomic_fields_of_a_kueue_kind_are_compared_exactly() -> None:
    wanted = {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ResourceFlavor",
        "metadata": {"name": "gpu"},
        "spec": {"nodeLabels": {"pool": "a"}},
    }
    added_label = {**wanted, "spec": {"nodeLabels": {"pool": "a", "zone": "b"}}}
    assert contains(added_label, wanted)
    assert not carries(added_label, wanted)
    # A map of another kind (a ConfigMap's data) keeps the lenient test.
    config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    assert carries({**config_map, "data": {"a": "1", "b": "2"}}, {**config_map, "data": {"a": "1"}})
    # Served at another version of Kueue's group: still Kueue's.
    served = {**added_label, "apiVersion": "kueue.x-k8s.io/v1beta2"}
    assert not carries(served, wanted)
    assert carries({**wanted, "apiVersion": "kueue.x-k8s.io/v1beta2"}, wanted)
