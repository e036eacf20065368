"""Node intents become merge patches that add or update taints, never drop the node's own."""

from __future__ import annotations

from kaiwo_executor.node_merge import merged_taints, node_patch

GPU = {"key": "kaiwo.silogen.ai/gpu", "value": "true", "effect": "NoSchedule"}
UNREACHABLE = {
    "key": "node.kubernetes.io/unreachable",
    "effect": "NoExecute",
    "timeAdded": "2025-03-01T11:59:00Z",
}


def test_wanted_taints_are_appended_after_the_nodes_own() -> None:
    assert merged_taints([UNREACHABLE], [GPU]) == [UNREACHABLE, GPU]


def test_a_wanted_taint_replaces_the_one_with_the_same_key_and_effect() -> None:
    old = {"key": "kaiwo.silogen.ai/gpu", "value": "false", "effect": "NoSchedule"}
    other_effect = {"key": "kaiwo.silogen.ai/gpu", "value": "false", "effect": "NoExecute"}

    assert merged_taints([old, other_effect], [GPU]) == [GPU, other_effect]


def test_an_equal_taint_keeps_the_nodes_copy_with_its_time() -> None:
    wanted = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}

    assert merged_taints([UNREACHABLE], [wanted]) == [UNREACHABLE]


def test_the_patch_carries_labels_merged_taints_and_the_resource_version() -> None:
    live = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "gpu-1", "resourceVersion": "42", "labels": {"a": "1"}},
        "spec": {"taints": [UNREACHABLE]},
    }
    intent = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "gpu-1", "labels": {"kaiwo/worker": "true"}},
        "spec": {"taints": [GPU]},
    }

    assert node_patch(intent, live) == {
        "metadata": {"labels": {"kaiwo/worker": "true"}, "resourceVersion": "42"},
        "spec": {"taints": [UNREACHABLE, GPU]},
    }


def test_no_patch_when_the_node_already_carries_the_intent() -> None:
    live = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "gpu-1", "resourceVersion": "42", "labels": {"kaiwo/worker": "true"}},
        "spec": {"taints": [UNREACHABLE, GPU]},
    }
    intent = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "gpu-1", "labels": {"kaiwo/worker": "true"}},
        "spec": {"taints": [GPU]},
    }

    assert node_patch(intent, live) is None


def test_a_labels_only_intent_leaves_the_taints_alone() -> None:
    live = {"metadata": {"name": "cpu-1", "labels": {}}, "spec": {"taints": [UNREACHABLE]}}
    intent = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "cpu-1", "labels": {"x": "y"}},
    }

    assert node_patch(intent, live) == {"metadata": {"labels": {"x": "y"}}}


def owned(manager: str, *labels: str) -> dict[str, object]:
    return {
        "manager": manager,
        "operation": "Update",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:metadata": {"f:labels": {f"f:{key}": {} for key in labels}}},
    }


POOL_INTENT = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {
        "name": "gpu-1",
        "labels": {"kaiwo/nodepool": "amd-mi300x-8gpu-115core-1843gi", "kaiwo/worker": "true"},
    },
}


def test_a_label_value_an_admin_wrote_is_not_replaced() -> None:
    live = {
        "metadata": {
            "name": "gpu-1",
            "resourceVersion": "7",
            "labels": {"kaiwo/nodepool": "amd-mi300x-8gpu"},
            "managedFields": [owned("kubectl-label", "kaiwo/nodepool")],
        }
    }

    assert node_patch(POOL_INTENT, live, manager="kaiwo") == {
        "metadata": {"labels": {"kaiwo/worker": "true"}, "resourceVersion": "7"}
    }


def test_a_label_value_the_operator_wrote_follows_the_pool() -> None:
    live = {
        "metadata": {
            "name": "gpu-1",
            "resourceVersion": "7",
            "labels": {"kaiwo/nodepool": "amd-mi300x-4gpu-115core-1843gi", "kaiwo/worker": "true"},
            "managedFields": [
                owned("kubelet"),
                owned("kaiwo", "kaiwo/nodepool", "kaiwo/worker"),
            ],
        }
    }

    assert node_patch(POOL_INTENT, live, manager="kaiwo") == {
        "metadata": {
            "labels": {"kaiwo/nodepool": "amd-mi300x-8gpu-115core-1843gi", "kaiwo/worker": "true"},
            "resourceVersion": "7",
        }
    }


def test_nothing_to_patch_when_only_an_admins_label_differs() -> None:
    live = {
        "metadata": {
            "name": "gpu-1",
            "labels": {"kaiwo/nodepool": "mine", "kaiwo/worker": "true"},
        }
    }

    assert node_patch(POOL_INTENT, live, manager="kaiwo") is None


# ------------------------------------------------------------------ the operator's GPU taint moves


OLD_GPU = {"key": "kaiwo.silogen.ai/gpu", "value": "true", "effect": "NoSchedule"}
NEW_GPU = {"key": "example.com/gpu", "value": "true", "effect": "NoSchedule"}
ADMINS = {"key": "example.com/maintenance", "value": "sunday", "effect": "PreferNoSchedule"}
RENAMED_INTENT = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "gpu-1", "annotations": {"kaiwo/gpu-taint": "example.com/gpu"}},
    "spec": {"taints": [NEW_GPU]},
}


def recording(manager: str) -> dict[str, object]:
    return {
        "manager": manager,
        "operation": "Update",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:metadata": {"f:annotations": {"f:kaiwo/gpu-taint": {}}}},
    }


def tainted_node(taints: list[dict[str, str]], *, record: str | None, by: str) -> dict[str, object]:
    metadata: dict[str, object] = {"name": "gpu-1", "resourceVersion": "9"}
    if record is not None:
        metadata["annotations"] = {"kaiwo/gpu-taint": record}
        metadata["managedFields"] = [recording(by)]
    return {"metadata": metadata, "spec": {"taints": taints}}


def test_a_renamed_key_moves_the_taint_the_operators_record_names() -> None:
    live = tainted_node([ADMINS, OLD_GPU], record="kaiwo.silogen.ai/gpu", by="kaiwo")

    assert node_patch(RENAMED_INTENT, live, manager="kaiwo") == {
        "metadata": {"annotations": {"kaiwo/gpu-taint": "example.com/gpu"}, "resourceVersion": "9"},
        "spec": {"taints": [ADMINS, NEW_GPU]},
    }


def test_a_taint_of_the_old_key_with_no_record_of_ours_stays() -> None:
    # An admin's own taint of that key, or one an operator before records put there; the
    # record an admin wrote is no record of ours either.
    for live in (
        tainted_node([OLD_GPU], record=None, by="kaiwo"),
        tainted_node([OLD_GPU], record="kaiwo.silogen.ai/gpu", by="kubectl-annotate"),
    ):
        patch = node_patch(RENAMED_INTENT, live, manager="kaiwo")
        assert patch is not None
        assert patch["spec"] == {"taints": [OLD_GPU, NEW_GPU]}
        assert patch["metadata"]["annotations"] == {"kaiwo/gpu-taint": "example.com/gpu"}


def test_only_the_operators_exact_taint_is_removed() -> None:
    # Same key, but another effect or value: not what the operator added.
    evicting = {**OLD_GPU, "effect": "NoExecute"}
    changed = {**OLD_GPU, "value": "reserved"}
    live = tainted_node([evicting, changed], record="kaiwo.silogen.ai/gpu", by="kaiwo")

    patch = node_patch(RENAMED_INTENT, live, manager="kaiwo")

    assert patch is not None
    assert patch["spec"] == {"taints": [evicting, changed, NEW_GPU]}


def test_a_new_key_the_node_already_carries_stays_its_owners_and_is_not_recorded() -> None:
    live = tainted_node([OLD_GPU, NEW_GPU], record="kaiwo.silogen.ai/gpu", by="kaiwo")

    assert node_patch(RENAMED_INTENT, live, manager="kaiwo") == {
        "metadata": {"annotations": {"kaiwo/gpu-taint": None}, "resourceVersion": "9"},
        "spec": {"taints": [NEW_GPU]},
    }
    # Once moved, nothing more: the admin's taint is never recorded as the operator's.
    moved = tainted_node([NEW_GPU], record=None, by="kaiwo")
    assert node_patch(RENAMED_INTENT, moved, manager="kaiwo") is None


def test_no_patch_once_the_recorded_taint_is_in_place() -> None:
    live = tainted_node([ADMINS, NEW_GPU], record="example.com/gpu", by="kaiwo")

    assert node_patch(RENAMED_INTENT, live, manager="kaiwo") is None


def test_without_a_record_in_the_intent_the_operators_taint_stays() -> None:
    # addTaintsToGpuNodes turned off: the intent carries labels only; nothing is removed.
    live = tainted_node([OLD_GPU], record="kaiwo.silogen.ai/gpu", by="kaiwo")
    labels_only = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "gpu-1", "labels": {"kaiwo/worker": "true"}},
    }

    assert node_patch(labels_only, live, manager="kaiwo") == {
        "metadata": {"labels": {"kaiwo/worker": "true"}, "resourceVersion": "9"}
    }
