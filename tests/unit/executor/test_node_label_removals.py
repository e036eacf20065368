"""A node intent naming a label with ``None`` removes it only where the operator alone wrote it
(decision 0224): Kaiwo's pool labels on a control-plane node ``excludeMasterNodesFromNodePools``
leaves out. The ``managedFields`` entries are written as the API server writes them for a merge
patch (operation Update) and a server-side apply (operation Apply)."""

from __future__ import annotations

from typing import Any

from kaiwo_executor.node_merge import node_patch

REMOVE_POOL_LABELS = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {
        "name": "cp-0",
        "labels": {"kaiwo/nodepool": None, "kaiwo/worker": None, "kaiwo/gpu-model": None},
    },
}


def owned(manager: str, *labels: str, operation: str = "Update") -> dict[str, Any]:
    return {
        "manager": manager,
        "operation": operation,
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:metadata": {"f:labels": {f"f:{key}": {} for key in labels}}},
    }


def node(labels: dict[str, str], *managed: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "cp-0",
            "resourceVersion": "11",
            "labels": labels,
            "managedFields": list(managed),
        }
    }


def test_the_pool_labels_the_operator_wrote_are_removed_and_the_admins_label_stays() -> None:
    live = node(
        {
            "node-role.kubernetes.io/control-plane": "",
            "team": "infra",
            "kaiwo/nodepool": "amd-mi300x-8gpu-115core-1843gi",
            "kaiwo/worker": "true",
            "kaiwo/gpu-model": "mi300x",
        },
        owned("kubelet", "node-role.kubernetes.io/control-plane"),
        owned("kubectl-label", "team"),
        owned("kaiwo", "kaiwo/nodepool", "kaiwo/worker", "kaiwo/gpu-model"),
    )

    assert node_patch(REMOVE_POOL_LABELS, live, manager="kaiwo") == {
        "metadata": {
            "labels": {"kaiwo/nodepool": None, "kaiwo/worker": None, "kaiwo/gpu-model": None},
            "resourceVersion": "11",
        }
    }


def test_a_pool_label_an_admin_wrote_is_not_removed() -> None:
    # The admin's own flavor selects kaiwo/nodepool=infra-gpus (decision 0110).
    live = node(
        {"kaiwo/nodepool": "infra-gpus", "kaiwo/worker": "true"},
        owned("kubectl-label", "kaiwo/nodepool"),
        owned("kaiwo", "kaiwo/worker"),
    )

    assert node_patch(REMOVE_POOL_LABELS, live, manager="kaiwo") == {
        "metadata": {"labels": {"kaiwo/worker": None}, "resourceVersion": "11"}
    }


def test_a_pool_label_an_admin_applied_beside_the_operators_is_not_removed() -> None:
    # Applied with the operator's value: server-side apply makes both managers its owners.
    live = node(
        {"kaiwo/worker": "true"},
        owned("kaiwo", "kaiwo/worker"),
        owned("admin", "kaiwo/worker", operation="Apply"),
    )

    assert node_patch(REMOVE_POOL_LABELS, live, manager="kaiwo") is None


def test_no_patch_once_the_labels_are_gone() -> None:
    live = node({"node-role.kubernetes.io/control-plane": "", "team": "infra"})

    assert node_patch(REMOVE_POOL_LABELS, live, manager="kaiwo") is None


def test_a_label_of_no_field_manager_is_not_removed() -> None:
    # Without managedFields nothing shows it is the operator's.
    live = node({"kaiwo/worker": "true"})

    assert node_patch(REMOVE_POOL_LABELS, live, manager="kaiwo") is None
