"""Which flavors of a queue hold a workload's ``gpuModels`` (decision 0237), by hand."""

from __future__ import annotations

from kaiwo_planner.domain.scheduling.gpu_model_flavors import (
    flavors_holding_models,
    gpu_flavor_names,
)
from kaiwo_planner.domain.state.nodes import NodeInfo

PRODUCT = "amd.com/gpu.product-name"
MI300X = {PRODUCT: "AMD_Instinct_MI300X_OAM"}
MI250X = {PRODUCT: "AMD_Instinct_MI250X"}
NODES = (
    NodeInfo(name="a", labels={**MI300X, "kaiwo/gpu-model": "mi300x"}),
    NodeInfo(name="b", labels={**MI250X, "kaiwo/gpu-model": "mi250x"}),
)


def test_only_the_flavor_whose_nodes_hold_the_model_is_named() -> None:
    assert flavors_holding_models([MI300X, MI250X], NODES, ["mi250x"]) == (
        ((PRODUCT, "AMD_Instinct_MI250X"),),
    )


def test_nothing_is_named_when_every_flavor_or_none_holds_the_models() -> None:
    assert flavors_holding_models([MI300X, MI250X], NODES, ["mi250x", "mi300x"]) == ()
    assert flavors_holding_models([MI300X, MI250X], NODES, ["mi210"]) == ()
    assert flavors_holding_models([MI250X], NODES, ["mi250x"]) == ()


def test_a_flavor_of_several_labels_holds_a_model_on_a_node_with_all_of_them() -> None:
    pool_a = {"kaiwo/nodepool": "big", "kaiwo/worker": "true"}
    nodes = (
        NodeInfo(name="a", labels={**pool_a, "kaiwo/gpu-model": "mi300x"}),
        NodeInfo(name="b", labels={"kaiwo/nodepool": "small", "kaiwo/gpu-model": "mi250x"}),
    )
    small = {"kaiwo/nodepool": "small", "kaiwo/worker": "true"}  # node b is no worker
    assert flavors_holding_models([pool_a, small], nodes, ["mi300x"]) == (
        (("kaiwo/nodepool", "big"), ("kaiwo/worker", "true")),
    )
    assert flavors_holding_models([pool_a, small], nodes, ["mi250x"]) == ()


def test_the_flavors_of_groups_that_cover_the_gpus_in_order() -> None:
    cluster_queue = {
        "spec": {
            "resourceGroups": [
                {"coveredResources": ["cpu", "memory"], "flavors": [{"name": "cpu-only"}]},
                {
                    "coveredResources": ["amd.com/gpu", "cpu"],
                    "flavors": [{"name": "mi300x"}, {"name": "mi250x"}],
                },
            ]
        }
    }
    assert gpu_flavor_names(cluster_queue, "amd.com/gpu") == ("mi300x", "mi250x")
    assert gpu_flavor_names(cluster_queue, "nvidia.com/gpu") == ()
