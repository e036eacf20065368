"""``kaiwo queues`` and ``kaiwo nodes``: what the cluster can run and what waits.

Rendering is :mod:`kaiwo_cli.capacity_views` (pure); this module only reads the cluster.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from kaiwo_cli.commands.options import all_namespaces_option, cluster_options, namespace_option
from kaiwo_cli.commands.workload_access import resolve_target, run_on_cluster, utc_now

if TYPE_CHECKING:
    from kaiwo_cli.cluster_port import ClusterReader


@click.command()
@namespace_option
@all_namespaces_option
@cluster_options
def queues(
    *,
    namespace: str | None,
    all_namespaces: bool,
    kubeconfig: Path | None,
    context: str | None,
    state: Path | None,
) -> None:
    """ClusterQueues (quota and use per flavor), LocalQueues and the workloads waiting.

    Every namespace unless -n names one (ClusterQueues are cluster-wide).
    """
    scope = None if all_namespaces else namespace

    async def work(kube: ClusterReader) -> str:
        from kaiwo_contracts.queue_estimates.kueue import cluster_estimates, declared_durations
        from kaiwo_kube import resources

        from kaiwo_cli.capacity_views import cluster_queue_table, local_queue_table, pending_table
        from kaiwo_cli.cluster_access import kueue_workloads, optional_list, queue_world

        cluster_queues = await optional_list(kube, resources.KUEUE_CLUSTER_QUEUE, namespace=None)
        local_queues = await optional_list(kube, resources.KUEUE_LOCAL_QUEUE, namespace=scope)
        waiting = await kueue_workloads(kube, namespace=scope)
        if not cluster_queues and not local_queues:
            return (
                "No Kueue queues (is a KaiwoQueueConfig applied? kaiwo apply -f "
                "examples/kaiwoqueueconfig.yaml)"
            )
        now = utc_now()
        world = await queue_world(kube, namespace=scope)
        estimates = cluster_estimates(
            cluster_queues=world.cluster_queues,
            local_queues=world.local_queues,
            kueue_workloads=world.kueue_workloads,
            declared=declared_durations(world.workloads),
            now=now,
        )
        pending = pending_table(waiting, now=now, estimates=estimates)
        if not world.whole:
            pending += (
                "\n(estimated from the workloads of this namespace only: others' were not "
                "readable, so they may start later)"
            )
        return "\n\n".join(
            [
                cluster_queue_table(cluster_queues, waiting),
                local_queue_table(local_queues, waiting),
                "Pending workloads:"
                + (f"\n{pending}" if len(pending.splitlines()) > 1 else " none"),
            ]
        )

    click.echo(run_on_cluster("queues", resolve_target(kubeconfig, context, state), work))


@click.command()
@click.argument("vendor", required=False, default=None, metavar="[amd|nvidia]")
@cluster_options
def nodes(
    vendor: str | None,
    *,
    kubeconfig: Path | None,
    context: str | None,
    state: Path | None,
) -> None:
    """GPU nodes by vendor and pool: model, GPUs in use of allocatable, readiness.

    VENDOR is amd or nvidia (default: both).
    """
    if vendor is not None and vendor not in ("amd", "nvidia"):
        raise click.BadParameter("amd or nvidia", param_hint="VENDOR")

    async def work(kube: ClusterReader) -> str:
        from kaiwo_kube import resources

        from kaiwo_cli.capacity_views import node_table, pool_summary

        found = (await kube.list(resources.NODE)).items
        pods = (await kube.list(resources.POD)).items
        return f"{pool_summary(found, pods)}\n\n{node_table(found, pods, vendor=vendor)}"

    click.echo(run_on_cluster("nodes", resolve_target(kubeconfig, context, state), work))
