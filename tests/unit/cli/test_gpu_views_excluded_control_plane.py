"""``kaiwo gpus`` splits a workload's GPUs over the nodes the planner counts: without the
control-plane nodes ``excludeMasterNodesFromNodePools`` leaves out (decision 0224)."""

from __future__ import annotations

from kaiwo_cli.gpu_views import gpu_workload_table

from tests.unit.planner.conftest import build_node


def test_an_excluded_control_planes_gpus_do_not_shape_the_split() -> None:
    # A Ray job asking for 30: on the 8-GPU workers 4 x 7 = 28; with the 4-GPU control plane
    # counted the smallest node has 4, so 8 x 3 = 24.
    job = {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoJob",
        "metadata": {
            "namespace": "team-a",
            "name": "rounded",
            "annotations": {"kaiwo.silogen.ai/gpu-preemption.policy": "Always"},
        },
        "spec": {"gpus": 30, "ray": True},
        "status": {"status": "RUNNING"},
    }
    nodes = [
        *(build_node(f"mi300x-{i}", gpu="mi300x", gpus=8) for i in range(4)),
        build_node("cp-0", gpu="mi300x", gpus=4, control_plane=True),
    ]

    def gpus_column(*, exclude: bool) -> list[str]:
        table = gpu_workload_table([], [job], nodes=nodes, exclude_control_plane=exclude)
        return [line.split()[3] for line in table.splitlines()[1:]]

    assert gpus_column(exclude=True) == ["28"]
    assert gpus_column(exclude=False) == ["24"]
