"""``kaiwo queues`` and ``kaiwo nodes``: what the cluster can run and what waits.

Rendering is :mod:`kaiwo_cli.capacity_views` (pure); this module only reads the cluster.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from kaiwo_cli.commands.options import all_namespaces_option, cluster_options, namespace_option
from kaiwo_cli.commands.workload_access import resolve_target, run_on_cluster, utc_now

if TYPE_CHECKING:
    from kaiwo_cli.cluster_port import ClusterReader


KUEUE_NOT_SERVED = (
    "Kueue is not installed: the cluster does not serve kueue.x-k8s.io/v1beta1 ClusterQueues, "
    "so no workload is admitted (KaiwoJobs and KaiwoServices wait in PENDING) and the "
    "KaiwoQueueConfig makes no queues; install it: docs/operations.md, What the cluster needs"
)


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

    Every namespace unless -n names one (ClusterQueues are cluster-wide). Credentials that may
    not list ClusterQueues see the LocalQueues of -n, else of the context's namespace, as their
    status tells them.
    """
    scope = None if all_namespaces else namespace
    target = resolve_target(kubeconfig, context, state)

    async def work(kube: ClusterReader) -> str:
        from kaiwo_contracts.queue_estimates.kueue import cluster_estimates, declared_durations
        from kaiwo_kube import KubeError, NotFound, resources

        from kaiwo_cli.capacity_views import cluster_queue_table, local_queue_table, pending_table
        from kaiwo_cli.cluster_access import (
            context_namespace,
            is_forbidden,
            kueue_workloads,
            optional_list,
            queue_world,
        )

        try:
            cluster_queues: list[dict[str, Any]] | None = (
                await kube.list(resources.KUEUE_CLUSTER_QUEUE, namespace=None)
            ).items
        except NotFound:
            # Only an unserved kind makes the list of a cluster-wide kind 404.
            return KUEUE_NOT_SERVED
        except KubeError as error:
            if not is_forbidden(error):
                raise
            cluster_queues = None
        if cluster_queues is None:
            # A namespace's `edit`: the cluster's queues are not the user's to see; their
            # namespace's LocalQueues may be (decision 0143).
            own = None if all_namespaces else namespace or context_namespace(target)
            return await namespace_queues(kube, own, named=namespace is not None)
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

    click.echo(run_on_cluster("queues", target, work))


async def namespace_queues(kube: ClusterReader, namespace: str | None, *, named: bool) -> str:
    """What a user refused ClusterQueues may see: the LocalQueues of ``namespace`` (None:
    every one, as -A asked) by their status, and the Workloads waiting in them if they may
    list those. LocalQueues refused too is the server's refusal, exit 2."""
    from kaiwo_kube import resources

    from kaiwo_cli.capacity_views import local_queue_status_table, pending_table
    from kaiwo_cli.cluster_access import optional_list, readable_kueue_workloads

    local_queues = await optional_list(kube, resources.KUEUE_LOCAL_QUEUE, namespace=namespace)
    where = "every namespace" if namespace is None else namespace
    whose = "" if named or namespace is None else ", your context's namespace (-n for another)"
    click.echo(
        "kaiwo queues: your credentials may not list ClusterQueues, so the cluster's queues "
        f"and quotas are not shown; showing the LocalQueues of {where}{whose}",
        err=True,
    )
    if not local_queues:
        return f"No Kueue LocalQueues in {where}"
    waiting = await readable_kueue_workloads(kube, namespace=namespace)
    if waiting is None:
        pending = " (not shown: your credentials may not list Kueue Workloads)"
    else:
        table = pending_table(waiting, now=utc_now())
        pending = f"\n{table}" if len(table.splitlines()) > 1 else " none"
    return f"{local_queue_status_table(local_queues)}\n\nPending workloads:{pending}"


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

    VENDOR is amd or nvidia (default: both). Nodes are cluster-wide: credentials that may not
    list them get exit 2 and what to do instead.
    """
    if vendor is not None and vendor not in ("amd", "nvidia"):
        raise click.BadParameter("amd or nvidia", param_hint="VENDOR")

    async def work(kube: ClusterReader) -> str:
        from kaiwo_kube import resources

        from kaiwo_cli.capacity_views import gpu_nodes, node_table, pool_summary

        found = await every_node(kube)
        if not gpu_nodes(found, vendor=vendor):
            # Two empty tables said nothing of why.
            return f"No {vendor + ' ' if vendor else ''}GPU nodes among the {len(found)} nodes"
        pods = (await kube.list(resources.POD)).items
        summary = pool_summary(found, pods, vendor=vendor)
        return f"{summary}\n\n{node_table(found, pods, vendor=vendor)}"

    click.echo(run_on_cluster("nodes", resolve_target(kubeconfig, context, state), work))


async def every_node(kube: ClusterReader) -> list[dict[str, Any]]:
    """Every Node; refused them (a namespace's ``edit``), one line that says what to do: the
    whole answer is cluster-wide, so there is nothing smaller to show (decision 0143)."""
    from kaiwo_kube import KubeError, resources

    from kaiwo_cli.cluster_access import ClusterError, is_forbidden, one_line

    try:
        return (await kube.list(resources.NODE)).items
    except KubeError as error:
        if not is_forbidden(error):
            raise
        raise ClusterError(
            "your credentials may not list Nodes, which are cluster-wide "
            f"({one_line(error)}); ask a cluster administrator for read access to Nodes, "
            "or see the GPUs your workloads use with kaiwo gpus"
        ) from None
