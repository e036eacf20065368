"""``kaiwo gpus``: every GPU workload GPU idle preemption tracks, with its utilization, idle
stretch, policy and verdict (the GpuWorkload records, decision 0047).

Rendering is :mod:`kaiwo_cli.gpu_views` (pure); this module only reads the cluster.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from kaiwo_cli.commands.options import all_namespaces_option, cluster_options, namespace_option
from kaiwo_cli.commands.workloads import _run, _target

if TYPE_CHECKING:
    from kaiwo_kube import KubernetesPort


@click.command()
@namespace_option
@all_namespaces_option
@cluster_options
def gpus(
    *,
    namespace: str | None,
    all_namespaces: bool,
    kubeconfig: Path | None,
    context: str | None,
    state: Path | None,
) -> None:
    """GPU workloads tracked for idle preemption: phase, GPUs, utilization, idle since,
    policy and verdict.

    Pods, Jobs, Deployments, StatefulSets, RayJobs and RayClusters that opted in, by their
    annotations or their namespace's. Every namespace unless -n names one.
    """
    scope = None if all_namespaces else namespace

    async def work(kube: KubernetesPort) -> str:
        from kaiwo_kube import resources

        from kaiwo_cli.cluster_access import optional_list
        from kaiwo_cli.gpu_views import gpu_workload_table

        return gpu_workload_table(
            await optional_list(kube, resources.GPU_WORKLOAD, namespace=scope)
        )

    click.echo(_run("gpus", _target(kubeconfig, context, state), work))
