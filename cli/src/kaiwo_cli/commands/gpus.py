"""``kaiwo gpus``: every GPU workload GPU idle preemption tracks, with its utilization, idle
stretch, policy and verdict (the GpuWorkload records, decision 0047, and the opted-in
KaiwoJobs and KaiwoServices, decision 0056).

Rendering is :mod:`kaiwo_cli.gpu_views` (pure); this module only reads the cluster.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from kaiwo_cli.commands.options import all_namespaces_option, cluster_options, namespace_option
from kaiwo_cli.commands.workload_access import read_in_scope, resolve_target, run_on_cluster

if TYPE_CHECKING:
    from kaiwo_contracts.crds.config_v1alpha1.kaiwoconfig import KaiwoGpuPreemptionConfig

    from kaiwo_cli.cluster_port import ClusterReader


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

    KaiwoJobs, KaiwoServices, Pods, Jobs (a CronJob's runs too), Deployments, StatefulSets,
    RayJobs and RayClusters that opted in, by their annotations or their namespace's. Every
    namespace unless -n names one.
    """
    target = resolve_target(kubeconfig, context, state)

    async def work(kube: ClusterReader) -> str:
        from kaiwo_kube import resources

        from kaiwo_cli.cluster_access import optional_list
        from kaiwo_cli.gpu_views import gpu_workload_table

        async def read_records(where: str | None) -> list[dict[str, Any]]:
            return await optional_list(kube, resources.GPU_WORKLOAD, namespace=where)

        records, scope = await read_in_scope(
            "gpus",
            target,
            None if all_namespaces else namespace,
            read_records,
            every_asked=all_namespaces,
        )
        workloads = [
            {**item, "kind": resource.kind}
            for resource in (resources.KAIWO_JOB, resources.KAIWO_SERVICE)
            for item in await optional_list(kube, resource, namespace=scope)
        ]
        settings = await _kaiwo_config_spec(kube)
        return gpu_workload_table(
            records,
            workloads,
            namespaces=await _namespaces(kube, scope),
            defaults=_defaults(settings),
            nodes=await _nodes(kube),
            children=await _main_children(kube, scope),
            kueue_workloads=await _kueue_workloads(kube, scope),
            exclude_control_plane=bool(
                (settings.get("nodes") or {}).get("excludeMasterNodesFromNodePools")
            ),
        )

    click.echo(run_on_cluster("gpus", target, work))


async def _namespaces(kube: ClusterReader, scope: str | None) -> dict[str, dict[str, Any]]:
    """The Namespaces by name (their annotations opt workloads in); those the user may not
    read count as without annotations."""
    from kaiwo_kube import KubeError, resources

    try:
        if scope is not None:
            return {scope: await kube.get(resources.NAMESPACE, scope)}
        listed = await kube.list(resources.NAMESPACE)
    except KubeError:
        return {}
    return {str(item["metadata"]["name"]): item for item in listed.items}


async def _nodes(kube: ClusterReader) -> list[dict[str, Any]]:
    """The Nodes, for the GPUs a Kaiwo workload's allocation gives its pods (their size
    decides the split); a user who may not list them sees the GPUs each workload asks for."""
    from kaiwo_kube import KubeError, resources

    try:
        return list((await kube.list(resources.NODE)).items)
    except KubeError:
        return []


async def _kueue_workloads(kube: ClusterReader, scope: str | None) -> list[dict[str, Any]]:
    """Kueue's Workloads: their ``reclaimablePods`` are the pods of a running Job whose quota
    Kueue released (decision 0152). None when the user may not list them: the Job shows
    every pod it runs at once."""
    from kaiwo_kube import KubeError, resources

    from kaiwo_cli.cluster_access import optional_list

    try:
        return await optional_list(kube, resources.KUEUE_WORKLOAD, namespace=scope)
    except KubeError:
        return []


async def _main_children(kube: ClusterReader, scope: str | None) -> list[dict[str, Any]]:
    """The Deployments, RayJobs, AppWrappers and Jobs Kaiwo made: a running workload holds
    the GPU split its child was made with (decision 0137); a Job's uid finds its Kueue
    Workload (decision 0152). A kind the user may not list, or the cluster does not serve,
    counts as none: the workload shows the split of the nodes, every pod of its Job."""
    from kaiwo_kube import KubeError, resources
    from kaiwo_planner.domain.children.labels import LABEL_MANAGED_BY, MANAGED_BY_KAIWO

    from kaiwo_cli.cluster_access import optional_list

    found: list[dict[str, Any]] = []
    for resource in (resources.DEPLOYMENT, resources.RAY_JOB, resources.APP_WRAPPER, resources.JOB):
        try:
            items = await optional_list(
                kube,
                resource,
                namespace=scope,
                label_selector=f"{LABEL_MANAGED_BY}={MANAGED_BY_KAIWO}",
            )
        except KubeError:
            continue
        found.extend({**item, "kind": resource.kind} for item in items)
    return found


async def _kaiwo_config_spec(kube: ClusterReader) -> dict[str, Any]:
    """The KaiwoConfig's spec (empty without it, or when the user may not read it)."""
    from kaiwo_kube import KubeError, resources

    try:
        config = await kube.get(resources.KAIWO_CONFIG, "kaiwo")
    except KubeError:
        return {}
    return dict(config.get("spec") or {})


def _defaults(settings: dict[str, Any]) -> KaiwoGpuPreemptionConfig:
    """The KaiwoConfig's ``gpuPreemption`` defaults (the built-in ones without it)."""
    from kaiwo_contracts.crds.config_v1alpha1.kaiwoconfig import KaiwoGpuPreemptionConfig

    return KaiwoGpuPreemptionConfig.model_validate(settings.get("gpuPreemption") or {})
