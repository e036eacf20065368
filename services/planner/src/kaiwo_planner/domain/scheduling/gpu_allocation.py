"""How many replicas a workload gets and how many GPUs each (upstream Kaiwo §6).

:func:`allocate_workload_gpus` is the entry point: it picks the rule for the workload's shape
(decision 0113). Ray workloads, and the rest when ``gpusPerReplica`` is given or no ``gpus``
are asked for, use upstream's calculation (:func:`calculate_gpu_allocation`): Ray worker groups
and Deployments use ``replicas``, every pod gets ``gpus_per_replica``. Where the numbers go is
the children planners' business.

Choices that differ from upstream, on purpose:

* A non-Ray KaiwoJob's pod gets every GPU of ``gpus``, or ``gpusPerReplica`` when given;
  ``replicas`` is ignored (decision 0118). Upstream split ``gpus`` by node size and gave the
  pod one share (16 GPUs on 8-GPU nodes ran on 8); a pod larger than every node is refused by
  the Schedulable check instead. The allocation's replicas are the pods the Job runs at once
  (:func:`job_pods`: ``spec.job``'s ``parallelism``, no more than its ``completions``, as
  Kueue counts the Job's pod set), so ``NUM_REPLICAS``, ``NUM_GPUS`` and every count describe
  all of them (decision 0147); upstream's env describes its node-size split, whatever the
  Job runs.
  A running Job does not hold the pods whose quota Kueue released (:func:`released_pods`,
  its Workload's ``reclaimablePods``, once fewer completions are left than its
  parallelism): the counts of held GPUs subtract them, the env and the Schedulable check
  do not (decision 0152).
  A Job Kueue may admit partially (``kueue.x-k8s.io/job-min-parallelism``) keeps that
  minimum (:attr:`GpuAllocation.min_replicas`): the Schedulable check compares the cluster's
  GPUs with the minimum width, since Kueue can start the Job with that many pods (decision
  0155); the env and every other count still describe all its pods.
* A non-Ray KaiwoService with ``replicas`` above 1 and no ``gpusPerReplica`` keeps its
  replicas, each pod getting ``gpus / replicas`` (the reference: ``replicas`` sets the
  Deployment's replicas). Upstream replaced the replicas by its node-size split. ``gpus`` that
  does not divide evenly is refused by the Schedulable check, not rounded down. ``replicas: 1``
  (also the default) keeps the node-size split, as upstream.
* A non-Ray KaiwoService that asks for no GPUs (no ``gpus``, no ``gpusPerReplica``) but whose
  given Deployment's main container does (``amd.com/gpu: 2`` in its limits or requests, under
  the vendor's key) holds those in each of its ``replicas`` pods (:func:`template_gpus`,
  decision 0163): the pods run with them whatever Kaiwo counts (a container's own value is
  kept, decision 0161, as upstream), and Kueue reserves them; upstream, and this planner
  before, counted none (``NUM_GPUS=0``, no Schedulable check, nothing for preemption).
  So does a non-Ray KaiwoJob's given ``spec.job`` in each of the pods it runs at once
  (:func:`job_pods`, less the pods Kueue released or did not admit, as for ``gpus``): the
  same rule ``template`` (decision 0166).
  So does a Ray workload's given ``rayJob``/``rayService`` whose templates ask for their own
  (:func:`ray_template_allocation`, decision 0167): each worker group holds Kaiwo's replicas
  x its ``numOfHosts`` pods of its own template's GPUs, the head its own; the groups may
  differ, so the allocation keeps each group's (:attr:`GpuAllocation.worker_group_gpus`).
* When both ``replicas`` and ``gpusPerReplica`` are set, they are taken as given and the total
  is their product, as the API reference says ("gpus is recalculated based on those values").
* The total is what the pods hold: the split by node size rounds down (30 GPUs on 8-GPU nodes
  are 4 x 7 = 28), and ``NUM_GPUS`` says 28 where upstream said 30. ``adjusted_from`` keeps
  the 30 so that the Schedulable condition can tell the user (decision 0118).
  Upstream keeps ``max(gpus, replicas * gpusPerReplica)`` as the total and falls back to the
  automatic split when the product exceeds the cluster, which only changes workloads that the
  Schedulable check rejects anyway.
* A running workload keeps the split by node size its main child was made with
  (:func:`keep_running_split`, decision 0137): upstream recomputes it from the nodes of the
  moment, so a smaller GPU node joining rolled a running Deployment to other replicas. What
  the child was made from is read back from the child itself (the annotation
  :data:`SPLIT_MADE_FROM_ANNOTATION` and its own replicas and GPU limits), so plans stay a
  pure function of what is observed.
* A Ray cluster with several worker groups (a user-given ``rayJob``/``rayService``) runs the
  split in every group, as upstream sizes them (and the API reference: ``replicas`` sets
  ``workerGroupSpecs[].replicas``); upstream then counted one group. Here the GPUs the
  workload holds are every group's (:attr:`GpuAllocation.held_gpus`, what Kueue reserves):
  the Schedulable check, the preemption counts and ``kaiwo gpus`` use them (decision 0146).
* A multi-host worker group (KubeRay's ``numOfHosts``: each replica is that many pods, each
  with the template's GPUs) holds the split on every host; Kueue 0.17 counts its pod set as
  ``replicas x numOfHosts`` pods, and so does :attr:`GpuAllocation.held_gpus` (decision 0151).
  Upstream never read ``numOfHosts``.
* The vendor is compared case-insensitively (the docs spell it "AMD"/"NVIDIA").
* Cluster statistics come from each node's device-plugin labels, not from the
  ``kaiwo/nodepool`` label the queue-config planner writes from those same labels; the numbers
  are identical once nodes are labelled, and correct before that too. Control-plane nodes
  count only while ``excludeMasterNodesFromNodePools`` is off, as they are in the pools
  (:func:`vendor_gpu_stats`, decision 0224): upstream counted a control-plane node that kept
  its pool label from before the setting was turned on.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from kaiwo_planner.domain.children.naming import main_child_name
from kaiwo_planner.domain.children.partial_admission import partially_admitted_parallelism
from kaiwo_planner.domain.settings.cluster_settings import NODE_KIND, kaiwo_config
from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.state.index_entry import owner_uids
from kaiwo_planner.domain.state.nodes import GPU_RESOURCE_BY_VENDOR, NodeInfo, parse_quantity
from kaiwo_planner.domain.state.planning_context import PlanningContext
from kaiwo_planner.domain.status.child_phase import OTHER_MAIN_KIND


@dataclass(frozen=True, slots=True)
class GpuStats:
    """GPU totals of one vendor across the cluster (cordoned nodes included, as upstream)."""

    vendor: str
    total_gpus: int = 0
    min_gpus_per_node: int | None = None
    total_allocatable_gpus: int = 0
    min_allocatable_gpus_per_node: int | None = None
    max_gpus_per_node: int | None = None
    """The largest node: a pod asking for more GPUs can never be scheduled."""


def gpu_stats(
    nodes: Iterable[NodeInfo], vendor: str, *, exclude_control_plane: bool = False
) -> GpuStats:
    """Sum the GPUs of ``vendor`` (``amd``/``nvidia``) over the nodes that have them, leaving
    out the control-plane nodes with ``exclude_control_plane`` (the KaiwoConfig's
    ``excludeMasterNodesFromNodePools``: no queue's quota holds their GPUs)."""
    wanted = vendor.lower()
    counts: list[int] = []
    allocatable: list[int] = []
    for node in nodes:
        if node.gpu_vendor != wanted or node.gpu_count <= 0:
            continue
        if exclude_control_plane and node.is_control_plane:
            continue
        counts.append(node.gpu_count)
        free = node.allocatable_gpus(wanted)
        if free > 0:
            allocatable.append(free)
    return GpuStats(
        vendor=wanted,
        total_gpus=sum(counts),
        min_gpus_per_node=min(counts) if counts else None,
        total_allocatable_gpus=sum(allocatable),
        min_allocatable_gpus_per_node=min(allocatable) if allocatable else None,
        max_gpus_per_node=max(counts) if counts else None,
    )


WorkloadShape = Literal["ray", "batch-job", "deployment"]
"""How a workload runs its GPUs: Ray worker groups, the single pod of a Job, a Deployment."""

SplitRule = Literal[
    "automatic",
    "kept",
    "per-replica",
    "one-pod",
    "one-pod-per-replica",
    "over-replicas",
    "template",
]
"""Which rule set ``gpus_per_replica`` (what the Schedulable check names, when the pod cannot
fit or the total is not ``spec.gpus``): ``automatic`` upstream's split by node size, ``kept``
the split by node size the running child was made with, which the nodes of now would make
otherwise (decision 0137),
``per-replica`` the given ``replicas x gpusPerReplica``, ``one-pod`` every GPU of ``gpus`` in
each pod of a batch Job, ``one-pod-per-replica`` the given ``gpusPerReplica`` in each pod of a
batch Job (the Job's pods are the allocation's replicas, decision 0147),
``over-replicas`` ``gpus`` shared by a Deployment's given replicas, ``template`` the GPUs the
main container of a KaiwoService's given Deployment (decision 0163) or of a KaiwoJob's given
batch Job (decision 0166) asks for, when the spec asks for none (:func:`template_gpus`)."""


GivenTemplate = Literal["deployment", "job", "rayJob", "rayService"]
"""The given object whose own templates' GPUs a workload holds under rule ``template``: the
``spec`` field that holds it."""


@dataclass(frozen=True, slots=True)
class GpuAllocation:
    """The split of a workload's GPUs.

    ``gpus`` is the total the pods hold, ``replicas x gpus_per_replica`` (what ``NUM_GPUS``
    reports and preemption counts, decision 0118); ``gpus_per_replica`` is what one pod gets
    (kept for a paused workload, whose ``replicas`` is 0). ``adjusted_from`` is ``spec.gpus``
    when the pods hold another number than it asked for: the split by node size rounded down
    (30 GPUs on 8-GPU nodes -> 4 x 7 = 28), or ``gpusPerReplica`` recalculated it.
    ``rule`` says what set ``gpus_per_replica``.

    A Ray cluster runs the split in each of its worker groups (Kaiwo sizes every group
    alike), each replica of a group on its ``numOfHosts`` pods: ``worker_group_hosts`` holds
    one entry per group, its hosts per replica (``(1,)`` for every other shape). ``gpus`` is
    then one group's replicas on one host each, and :attr:`held_gpus` the whole cluster's
    (decisions 0146, 0151).

    ``min_replicas``: the fewest pods Kueue may start a batch Job with (partial admission,
    ``kueue.x-k8s.io/job-min-parallelism``, fewer than ``replicas``); None for a Job that runs
    all its pods or none, and for every other shape (decision 0155).

    ``given_template``: for rule ``template``, which given object's main container the GPUs
    per pod were read from, ``spec.deployment`` or ``spec.job`` (decisions 0163, 0166), or
    the Ray cluster of ``spec.rayJob`` or ``spec.rayService`` (decision 0167), so the
    Schedulable check can name it; None for every other rule.

    ``worker_group_gpus`` and ``head_gpus``: for rule ``template`` of a Ray cluster, each
    worker group's own GPUs per pod (in the order of ``worker_group_hosts``) and the head's,
    as the main containers of their templates ask for them (decision 0167); every group then
    runs ``replicas`` replicas (Kaiwo's, as for any Ray cluster) of its own GPUs, ``gpus``
    is what they all hold, and ``gpus_per_replica`` the largest pod's. Empty and 0 for
    every other rule: every group runs ``gpus_per_replica``.
    """

    gpus: int
    gpus_per_replica: int
    replicas: int
    vendor: str
    rule: SplitRule = "automatic"
    adjusted_from: int | None = None
    worker_group_hosts: tuple[int, ...] = (1,)
    min_replicas: int | None = None
    given_template: GivenTemplate | None = None
    worker_group_gpus: tuple[int, ...] = ()
    head_gpus: int = 0

    @property
    def worker_groups(self) -> int:
        """The Ray worker groups that run the split (1 for every other shape)."""
        return len(self.worker_group_hosts)

    @property
    def held_gpus(self) -> int:
        """The GPUs every pod of the workload holds together: each worker group's ``gpus`` on
        each of its hosts (what Kueue reserves quota for: one pod set per group, of
        ``replicas x numOfHosts`` pods); under rule ``template`` of a Ray cluster, each group's
        own GPUs per pod on its hosts, and the head's (decision 0167)."""
        if self.worker_group_gpus or self.head_gpus:
            return self.head_gpus + self.replicas * sum(
                hosts * per_pod
                # Not strict: a running cluster's groups against the spec's templates read
                # as far as both go (the two differ only when edited by hand).
                for hosts, per_pod in zip(
                    self.worker_group_hosts, self.worker_group_gpus, strict=False
                )
            )
        return self.gpus * sum(self.worker_group_hosts)

    @property
    def min_held_gpus(self) -> int:
        """The GPUs the fewest pods Kueue may start the workload with hold together:
        :attr:`held_gpus` unless it may be admitted partially (decision 0155)."""
        if self.min_replicas is None:
            return self.held_gpus
        return self.min_replicas * self.gpus_per_replica

    def on_hosts(self, hosts: int) -> GpuAllocation:
        """The split as one worker group of ``hosts`` hosts per replica runs it: every host
        a pod of ``gpus_per_replica`` GPUs, so ``replicas x hosts`` pods (what its pods' env
        describes, decision 0151)."""
        if hosts <= 1:
            return self
        return replace(
            self,
            replicas=self.replicas * hosts,
            gpus=self.gpus * hosts,
            worker_group_hosts=(1,),
        )

    @property
    def resource_key(self) -> str:
        """The extended resource to request: ``amd.com/gpu`` or ``nvidia.com/gpu``."""
        return GPU_RESOURCE_BY_VENDOR.get(self.vendor, f"{self.vendor}.com/gpu")


def _split(
    *, asked: int, replicas: int, gpus_per_replica: int, vendor: str, rule: SplitRule
) -> GpuAllocation:
    """``replicas`` pods of ``gpus_per_replica``; ``asked`` (``spec.gpus``, 0 when not given)
    is remembered when the pods hold another number."""
    held = replicas * gpus_per_replica
    return GpuAllocation(
        gpus=held,
        gpus_per_replica=gpus_per_replica,
        replicas=replicas,
        vendor=vendor,
        rule=rule,
        adjusted_from=asked if asked > 0 and asked != held else None,
    )


def vendor_gpu_stats(context: PlanningContext, vendor: str) -> GpuStats:
    """GPU totals of ``vendor`` over the cluster's nodes in the pools' reach: control-plane
    nodes only while the KaiwoConfig's ``excludeMasterNodesFromNodePools`` is off."""
    wanted = vendor.lower()
    nodes = context.cluster.nodes
    exclude = kaiwo_config(context).spec.nodes.exclude_master_nodes_from_node_pools
    return context.derived(
        # The setting is in the key: the value of either stays valid while the nodes do.
        ("gpu-stats", wanted, exclude),
        reads=(NODE_KIND,),
        inputs=lambda: (nodes,),
        compute=lambda: gpu_stats(nodes, wanted, exclude_control_plane=exclude),
    )


def allocate_workload_gpus(
    *,
    shape: WorkloadShape,
    gpus: int,
    replicas: int | None,
    gpus_per_replica: int | None,
    vendor: str,
    stats: GpuStats,
    batch_job_pods: int = 1,
    batch_job_min_pods: int | None = None,
    given: Mapping[str, Any] | None = None,
) -> GpuAllocation:
    """The allocation of a workload of ``shape`` (the module docstring: ``batch_job_pods``
    pods of the same GPUs for a batch Job, ``gpus`` over the given replicas of a Deployment,
    otherwise upstream's calculation). A batch Job runs the pods of its own ``parallelism``
    (:func:`job_pods`), whatever ``replicas`` says, ``0`` included (the API reference:
    replicas is ignored for a batch KaiwoJob, decisions 0111, 0118 and 0147).
    ``batch_job_min_pods``: the fewest pods Kueue may start the batch Job with
    (:func:`~kaiwo_planner.domain.children.partial_admission.partial_admission_min_pods`,
    decision 0155); kept as :attr:`GpuAllocation.min_replicas` when fewer than its pods.
    ``given``: the workload's given Deployment (``spec.deployment``) or batch Job
    (``spec.job``), as the wire or the model holds it; when the spec asks for no GPUs, and
    only then, what its main container asks for (:func:`template_gpus`) is what each of its
    replicas, or each pod the Job runs at once, holds (rule ``template``, decisions 0163 and
    0166). For a Ray workload its given RayJob (``spec.rayJob``) or RayService
    (``spec.rayService``): then each worker group of its cluster holds its own template's
    GPUs in each pod, and the head its own (:func:`ray_template_allocation`, decision 0167).
    """
    wanted = vendor.lower()
    asked = max(gpus, 0)
    # A given Ray cluster's own GPUs, read only when the spec asks for none.
    from_groups = (
        ray_template_allocation(given, replicas=replicas, vendor=wanted)
        if shape == "ray" and asked == 0 and not gpus_per_replica and given is not None
        else None
    )
    # The given template's own GPUs per pod, read only when the spec asks for none.
    from_template = (
        (template_gpus(given, vendor) or 0)
        if shape != "ray" and asked == 0 and not gpus_per_replica and given is not None
        else 0
    )
    if from_template > 0 and shape == "deployment":
        pods = replicas if replicas is not None else 1
        return GpuAllocation(
            gpus=max(pods, 0) * from_template,
            gpus_per_replica=from_template,
            replicas=max(pods, 0),
            vendor=wanted,
            rule="template",
            given_template="deployment",
        )
    if shape == "batch-job":
        pods = max(batch_job_pods, 0)
        rule: SplitRule = "one-pod-per-replica" if gpus_per_replica else "one-pod"
        per_pod = gpus_per_replica or asked
        if from_template > 0:
            rule, per_pod = "template", from_template
        read_from: Literal["job"] | None = "job" if rule == "template" else None
        if pods == 0:
            # parallelism (or completions) 0: the Job runs no pod, so holds nothing, by request.
            return GpuAllocation(
                gpus=0,
                gpus_per_replica=per_pod,
                replicas=0,
                vendor=wanted,
                rule=rule,
                given_template=read_from,
            )
        split = _split(
            asked=asked, replicas=pods, gpus_per_replica=per_pod, vendor=wanted, rule=rule
        )
        if read_from is not None:
            split = replace(split, given_template=read_from)
        if batch_job_min_pods is not None and 1 <= batch_job_min_pods < pods:
            return replace(split, min_replicas=batch_job_min_pods)
        return split
    deployment_replicas = replicas if shape == "deployment" and replicas is not None else 0
    if asked > 0 and not gpus_per_replica and deployment_replicas > 1:
        # Rounded down here; Schedulable refuses a total that does not divide evenly.
        return _split(
            asked=asked,
            replicas=deployment_replicas,
            gpus_per_replica=asked // deployment_replicas,
            vendor=wanted,
            rule="over-replicas",
        )
    return (
        from_groups
        if from_groups is not None
        else calculate_gpu_allocation(
            gpus=gpus,
            replicas=replicas,
            gpus_per_replica=gpus_per_replica,
            vendor=vendor,
            stats=stats,
        )
    )


def calculate_gpu_allocation(
    *,
    gpus: int,
    replicas: int | None,
    gpus_per_replica: int | None,
    vendor: str,
    stats: GpuStats,
) -> GpuAllocation:
    """Decide replicas and GPUs per replica from the spec and the cluster's GPU statistics
    (upstream's calculation, for every shape that :func:`allocate_workload_gpus` does not
    decide itself)."""
    wanted = vendor.lower()
    asked = max(gpus, 0)
    if replicas == 0:
        # An explicit 0 pauses the Deployment or the Ray worker group (decision 0111): no
        # pods, so no GPUs held (not an adjustment to tell); each replica's share stays what
        # a scale-up would get.
        return GpuAllocation(
            gpus=0,
            gpus_per_replica=gpus_per_replica or 0,
            replicas=0,
            vendor=wanted,
        )
    if replicas and gpus_per_replica and replicas > 0 and gpus_per_replica > 0:
        # The API reference: "If replicas and gpusPerReplica are also specified, gpus is
        # recalculated based on those values."
        return _split(
            asked=asked,
            replicas=replicas,
            gpus_per_replica=gpus_per_replica,
            vendor=wanted,
            rule="per-replica",
        )
    if asked == 0:
        return GpuAllocation(gpus=0, gpus_per_replica=0, replicas=replicas or 1, vendor=wanted)
    per_node = _gpus_per_node(stats, asked)
    if per_node is None:
        # No node has this vendor's GPUs: one replica with everything; Schedulable says NoGPUs.
        return GpuAllocation(gpus=asked, gpus_per_replica=asked, replicas=1, vendor=wanted)
    count = math.ceil(asked / per_node)
    return _split(
        asked=asked,
        replicas=count,
        gpus_per_replica=asked // count,
        vendor=wanted,
        rule="automatic",
    )


def job_pods(job: Mapping[str, Any] | None) -> int:
    """How many pods the batch Job of a KaiwoJob whose ``spec.job`` is ``job`` (the embedded
    Job, wire form, read defensively) runs at once: its ``parallelism`` (Kubernetes' default
    1, which the planner writes too), never more than its ``completions``. Kueue 0.17 counts
    the Job's pod set so and reserves quota for that many pods (decision 0147). The pods that
    finish are not subtracted here: this is what the spec runs (the env, ``Schedulable``);
    what a running Job still holds is this less :func:`released_pods` (decision 0152)."""
    spec = _mapping(_mapping(job).get("spec"))
    parallelism = _whole_number(spec.get("parallelism"), default=1)
    completions = spec.get("completions")
    if isinstance(completions, int) and not isinstance(completions, bool):
        return min(parallelism, max(completions, 0))
    return parallelism


StatsOf = Callable[[str], GpuStats]
"""The GPU statistics of a vendor (``amd``/``nvidia``), e.g. :func:`vendor_gpu_stats` of a
context; :func:`no_nodes` where no nodes are known."""


def no_nodes(vendor: str) -> GpuStats:
    """The statistics of a cluster without nodes: the split puts every GPU in one replica."""
    return GpuStats(vendor=vendor.lower())


def released_pods(kueue_workloads: Iterable[Mapping[str, Any]]) -> int:
    """The pods of a batch Job whose quota Kueue has released: the ``reclaimablePods`` counts
    of its Kueue Workloads (``kueue_workloads``, wire form, read defensively) that hold quota
    (``status.admission``). Kueue 0.17 writes them once fewer completions are left than the
    Job's ``parallelism`` (``parallelism - (completions - succeeded)``) and subtracts them
    from the ClusterQueue's usage, so another workload can be admitted into them (decision
    0152, measured on the real stack). 0 for a Workload without quota: it holds nothing."""
    released = 0
    for workload in kueue_workloads:
        status = _mapping(workload.get("status"))
        if not isinstance(status.get("admission"), Mapping):
            continue
        reclaimable = status.get("reclaimablePods")
        for pod_set in reclaimable if isinstance(reclaimable, list) else ():
            released += _whole_number(_mapping(pod_set).get("count"), default=0)
    return released


def releases_pods(workload: Mapping[str, Any]) -> bool:
    """Whether Kueue may release quota of some of a KaiwoJob's (wire form) pods before it
    ends: a batch Job that runs more than one pod at once (Kueue reclaims nothing of a Job
    of ``parallelism`` 1). Only then are its Kueue Workloads looked up."""
    spec = _mapping(workload.get("spec"))
    if wire_workload_shape(str(workload.get("kind") or ""), spec) != "batch-job":
        return False
    return job_pods(_mapping(spec.get("job"))) > 1


ReleasingJob = tuple[str, str]
"""The uid of a KaiwoJob whose Job may have pods released, and its Job's name."""


def releasing_job(workload: Mapping[str, Any]) -> ReleasingJob | None:
    """The uid of a KaiwoJob (wire form) whose Job may have pods released
    (:func:`releases_pods`), and its Job's name; None for any other workload. A function of
    the workload object alone: a reader of many workloads may keep it per object."""
    if not releases_pods(workload):
        return None
    meta = _mapping(workload.get("metadata"))
    uid, name = meta.get("uid"), meta.get("name")
    if not (isinstance(uid, str) and uid and isinstance(name, str) and name):
        return None
    return uid, main_child_name(name)


def released_pods_of(cluster: ClusterState, workload: Mapping[str, Any]) -> int:
    """:func:`released_pods` of the batch Job of a KaiwoJob (wire form): of its main child
    Job's Kueue Workloads; 0 for any other workload, or without the Job."""
    return released_pods_for(cluster, releasing_job(workload))


def released_pods_for(cluster: ClusterState, releasing: ReleasingJob | None) -> int:
    """:func:`released_pods_of` the workload whose :func:`releasing_job` is ``releasing``."""
    if releasing is None:
        return 0
    uid, job_name = releasing
    job = cluster.child_of(uid, kind="Job", name=job_name)
    job_uid = _mapping(_mapping(job).get("metadata")).get("uid")
    if not isinstance(job_uid, str) or not job_uid:
        return 0
    return released_pods(cluster.kueue_workloads_for(job_uid))


def released_pods_among(
    children: Iterable[Mapping[str, Any]],
    kueue_workloads: Iterable[Mapping[str, Any]],
    workload: Mapping[str, Any],
) -> int:
    """:func:`released_pods_of` among listed ``children`` and ``kueue_workloads`` (wire form,
    any owners; a client such as ``kaiwo gpus`` that lists them)."""
    found = releasing_job(workload)
    if found is None:
        return 0
    uid, job_name = found
    job_uids = {
        str(meta.get("uid"))
        for child in children
        if child.get("kind") == "Job"
        and (meta := _mapping(child.get("metadata"))).get("name") == job_name
        and meta.get("uid")
        and uid in owner_uids(child)
    }
    return released_pods(
        found for found in kueue_workloads if not job_uids.isdisjoint(owner_uids(found))
    )


def allocated_gpus(
    workload: Mapping[str, Any],
    stats_of: StatsOf,
    *,
    running_child: Mapping[str, Any] | None = None,
    released: int = 0,
) -> int:
    """The GPUs a KaiwoJob or KaiwoService (wire form, read defensively) holds while all its
    pods run: the total of the allocation its pods get (:func:`allocate_workload_gpus`, the
    planner's own rule, decision 0118), so 28 for ``gpus: 30`` on 8-GPU nodes, every pod a
    batch Job runs at once (decision 0147), none for a paused workload; for a running
    workload, the split by node size its
    main child (``running_child``) was made with (:func:`keep_running_split`, decision 0137).
    A Ray cluster holds that in every worker group (decision 0146); a running batch Job that
    Kueue admitted partially, the pods it admitted (decision 0153). What the wire does not
    say as a whole number counts as absent. ``released``: the pods of a batch Job whose quota
    Kueue has released (:func:`released_pods_of`, decision 0152); they hold nothing."""
    spec = workload.get("spec")
    if not isinstance(spec, Mapping):
        return 0
    vendor = str(spec.get("gpuVendor") or "amd")
    asked = _whole_number(spec.get("gpus"), default=0)
    shape = _held_shape(str(workload.get("kind") or ""), spec, running_child)
    per_replica = _whole_number(spec.get("gpusPerReplica"), default=0) or None
    allocation = allocate_workload_gpus(
        shape=shape,
        gpus=asked,
        replicas=_whole_number(spec.get("replicas"), default=1),
        gpus_per_replica=per_replica,
        vendor=vendor,
        stats=stats_of(vendor.lower()),
        batch_job_pods=(
            max(_batch_job_pods(spec, running_child) - released, 0) if shape == "batch-job" else 1
        ),
        # Its given object, whose own GPUs count when the spec asks for none.
        given=_optional_mapping(spec.get(given_field(str(workload.get("kind") or ""), shape))),
    )
    kept = keep_running_split(
        allocation, asked=asked, child=running_child, runs=running_child is not None
    )
    # Running: the worker groups of the child, which a running Ray child keeps as observed
    # (decision 0123); else those the spec gives.
    groups = child_worker_groups(running_child) if running_child is not None else None
    if groups is None:
        groups = workload_worker_groups(workload)
    return in_worker_groups(kept, groups).held_gpus


def _held_shape(
    kind: str, spec: Mapping[str, Any], running_child: Mapping[str, Any] | None
) -> WorkloadShape:
    """The shape whose GPUs a workload holds: its running child's for a KaiwoJob whose spec
    switched between Ray and a batch Job while that child runs, and keeps running (decision
    0247); else its spec's."""
    if kind == "KaiwoJob" and running_child is not None:
        match running_child.get("kind"):
            case "RayJob":
                return "ray"
            case "Job":
                return "batch-job"
    return wire_workload_shape(kind, spec)


def _batch_job_pods(spec: Mapping[str, Any], running_child: Mapping[str, Any] | None) -> int:
    """The pods a KaiwoJob's batch Job holds: those its ``spec.job`` runs at once (decision
    0147), or, while Kueue runs it partially admitted, the fewer pods Kueue admitted and set
    as the running Job's ``parallelism`` (decision 0153)."""
    asked = job_pods(_mapping(spec.get("job")))
    admitted = None if running_child is None else partially_admitted_parallelism(running_child)
    return asked if admitted is None else min(asked, max(admitted, 0))


WorkerGroupHosts = tuple[int, ...]
"""The hosts per replica (``numOfHosts``, 1 when not given) of each Ray worker group that
runs a workload's split, in the cluster's order; ``(1,)`` for a shape without groups."""


def in_worker_groups(allocation: GpuAllocation, hosts: WorkerGroupHosts) -> GpuAllocation:
    """``allocation`` run in each Ray worker group of ``hosts`` (decisions 0146, 0151)."""
    if allocation.worker_group_hosts == hosts:
        return allocation
    grouped = replace(allocation, worker_group_hosts=hosts)
    # Rule template of a Ray cluster: what its groups hold is its total (decision 0167).
    return replace(grouped, gpus=grouped.held_gpus) if grouped.worker_group_gpus else grouped


def ray_worker_groups(ray_child: Mapping[str, Any] | None, *, cluster_key: str) -> WorkerGroupHosts:
    """The worker groups Kaiwo sizes in a Ray workload: its default cluster's one when the
    user gives no ``rayJob``/``rayService`` (``ray_child``), or gives one with neither a
    cluster nor a ``clusterSelector`` (Kaiwo gives its default cluster, decision 0151); else
    those of the given cluster (``cluster_key``: ``rayClusterSpec`` or ``rayClusterConfig``),
    Kaiwo's one when it gives none (added when GPUs are asked for; without, none are held
    anyway); none for a RayJob sent to an existing cluster (``clusterSelector``), which makes
    no pods of its own."""
    if ray_child is None:
        return (1,)
    spec = _mapping(ray_child.get("spec"))
    cluster = spec.get(cluster_key)
    if not isinstance(cluster, Mapping) and spec.get("clusterSelector"):
        return ()
    return _worker_group_hosts(_mapping(cluster)) or (1,)


def workload_worker_groups(workload: Mapping[str, Any]) -> WorkerGroupHosts:
    """The worker groups of a KaiwoJob or KaiwoService (wire form) that runs Ray; ``(1,)``
    for any other shape (its split runs once)."""
    spec = _mapping(workload.get("spec"))
    kind = str(workload.get("kind") or "")
    if wire_workload_shape(kind, spec) != "ray":
        return (1,)
    if kind == "KaiwoJob":
        return ray_worker_groups(_optional_mapping(spec.get("rayJob")), cluster_key=RAY_JOB_CLUSTER)
    return ray_worker_groups(
        _optional_mapping(spec.get("rayService")), cluster_key=RAY_SERVICE_CLUSTER
    )


def child_worker_groups(child: Mapping[str, Any]) -> WorkerGroupHosts | None:
    """The worker groups of a main child that is a RayJob or an AppWrapper; None for others."""
    cluster = _child_ray_cluster(child)
    return None if cluster is None else _worker_group_hosts(cluster)


RAY_JOB_CLUSTER = "rayClusterSpec"
RAY_SERVICE_CLUSTER = "rayClusterConfig"


def _worker_group_hosts(cluster: Mapping[str, Any]) -> WorkerGroupHosts:
    groups = cluster.get("workerGroupSpecs")
    return tuple(
        worker_group_hosts(_mapping(group))
        for group in (groups if isinstance(groups, list) else ())
    )


def worker_group_hosts(group: Mapping[str, Any]) -> int:
    """The pods of one replica of a Ray worker group: its ``numOfHosts`` (KubeRay's default
    1; Kueue multiplies a pod set's count by it only when above 1)."""
    return max(_whole_number(group.get("numOfHosts"), default=1), 1)


def _optional_mapping(value: object) -> Mapping[str, Any] | None:
    return value if isinstance(value, Mapping) else None


def given_field(kind: str, shape: WorkloadShape) -> GivenTemplate:
    """The ``spec`` field of a KaiwoJob or KaiwoService of ``shape`` that holds the object it
    gives (:func:`allocate_workload_gpus`'s ``given``)."""
    if shape == "ray":
        return "rayJob" if kind == "KaiwoJob" else "rayService"
    return "job" if shape == "batch-job" else "deployment"


def wire_workload_shape(kind: str, spec: Mapping[str, Any]) -> WorkloadShape:
    """The shape of a KaiwoJob or KaiwoService from its wire ``spec``, as the API models'
    ``is_ray_job``/``is_ray_service`` read it: ``ray: true``, or the Ray child given."""
    ray_child = "rayJob" if kind == "KaiwoJob" else "rayService"
    if spec.get("ray") is True or spec.get(ray_child) is not None:
        return "ray"
    return "batch-job" if kind == "KaiwoJob" else "deployment"


SPLIT_MADE_FROM_ANNOTATION = "kaiwo.silogen.ai/gpus-split-by-node-size"
"""On a main child whose GPUs were split by node size: the ``spec.gpus`` it was split from.
With the child's own replicas and GPU limits it tells what a running workload holds, and
that its spec asks for the same GPUs still (decision 0137)."""


def split_made_from(allocation: GpuAllocation, asked: int) -> dict[str, str]:
    """The annotations of a main child made with ``allocation`` from ``spec.gpus`` ``asked``:
    the mark of a split by node size (kept or not), none for a split the spec fixes."""
    if allocation.rule not in ("automatic", "kept") or allocation.replicas < 1 or asked < 1:
        return {}
    return {SPLIT_MADE_FROM_ANNOTATION: str(asked)}


def keep_running_split(
    allocation: GpuAllocation, *, asked: int, child: Mapping[str, Any] | None, runs: bool
) -> GpuAllocation:
    """``allocation`` (from the nodes of now), or the split by node size the existing main
    ``child`` was made with when the workload runs (``runs``: Kueue admitted it, or its child
    is not waiting, see :func:`child_runs`) and its spec still asks for the same GPUs.

    The nodes' size decides only the automatic split; a node that joins, leaves or is
    relabelled must not roll a running Deployment to other replicas, nor make the counts,
    the env and the status speak of pods that do not run (decision 0137). The child's split
    is taken when it carries :data:`SPLIT_MADE_FROM_ANNOTATION` with ``asked`` (so an edit
    of ``spec.gpus`` splits anew by the nodes of now), and its replicas and GPUs per pod are
    a split of ``asked`` (``gpus_per_replica == asked // replicas``; anything else, a
    Deployment scaled by hand, is put back as the nodes split it). A workload that does not
    run yet follows the nodes: nothing is lost by placing it as they are now."""
    # Paused (replicas: 0), it asks for no pods at all, whatever its child still runs.
    paused = allocation.replicas < 1
    if allocation.rule != "automatic" or child is None or not runs or asked < 1 or paused:
        return allocation
    annotations = (_mapping(child.get("metadata"))).get("annotations")
    if _mapping(annotations).get(SPLIT_MADE_FROM_ANNOTATION) != str(asked):
        return allocation
    found = child_split(child, allocation.resource_key)
    if found is None:
        return allocation
    replicas, per_pod = found
    if replicas < 1 or per_pod < 1 or per_pod != asked // replicas:
        return allocation
    if (replicas, per_pod) == (allocation.replicas, allocation.gpus_per_replica):
        return allocation
    return _split(
        asked=asked,
        replicas=replicas,
        gpus_per_replica=per_pod,
        vendor=allocation.vendor,
        rule="kept",
    )


def child_runs(child: Mapping[str, Any] | None) -> bool:
    """Whether a main child is past waiting for admission: a Deployment with a Ready pod, a
    RayJob or AppWrapper Kueue no longer holds suspended (a batch Job's split is never by
    node size)."""
    if child is None:
        return False
    if child.get("kind") == "Deployment":
        ready = _mapping(child.get("status")).get("readyReplicas")
        return isinstance(ready, int) and ready > 0
    return _mapping(child.get("spec")).get("suspend") is not True


def running_child_of(
    cluster: ClusterState, workload: Mapping[str, Any]
) -> Mapping[str, Any] | None:
    """The main child of a KaiwoJob or KaiwoService (wire form) whose GPUs may be split by node
    size (a Deployment, RayJob or AppWrapper), or its batch Job, when it runs
    (:func:`child_runs`), else None: what :func:`allocated_gpus` reads the split of a running
    workload, or the pods Kueue admitted of a partially admitted Job, from."""
    child = main_child_of(cluster, workload)
    return child if child_runs(child) else None


def main_child_of(cluster: ClusterState, workload: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The observed main child (:func:`running_child_of`'s kinds) of a KaiwoJob or
    KaiwoService (wire form), running or not; None while none is observed."""
    found = _main_child_key(workload)
    if found is None:
        return None
    uid, kind, name = found
    return _main_among(cluster.children_of(uid), workload, kind=kind, name=name)


def running_child_among(
    children: Iterable[Mapping[str, Any]], workload: Mapping[str, Any]
) -> Mapping[str, Any] | None:
    """:func:`running_child_of` among listed ``children`` (wire form, any owners; a client
    such as ``kaiwo gpus`` that lists them rather than holding a cluster state)."""
    found = _main_child_key(workload)
    if found is None:
        return None
    uid, kind, name = found
    owned = (child for child in children if _owned_by(child, uid))
    child = _main_among(owned, workload, kind=kind, name=name)
    return child if child_runs(child) else None


def _owned_by(child: Mapping[str, Any], uid: str) -> bool:
    owners = _mapping(child.get("metadata")).get("ownerReferences")
    return isinstance(owners, list) and any(_mapping(owner).get("uid") == uid for owner in owners)


def _main_among(
    children: Iterable[Mapping[str, Any]], workload: Mapping[str, Any], *, kind: str, name: str
) -> Mapping[str, Any] | None:
    """The child of ``kind`` named ``name`` among a workload's ``children``; for a KaiwoJob
    without one, its child of the other kind when that is the one it keeps (decision 0247).
    One pass: every waiting and running workload's is looked up in each idle decision."""
    switched = _switched_kind(workload, kind)
    kept = None
    for child in children:
        if _mapping(child.get("metadata")).get("name") != name:
            continue
        if child.get("kind") == kind:
            return child
        if switched is not None and child.get("kind") == switched and _kept_after_a_switch(child):
            kept = child
    return kept


def _switched_kind(workload: Mapping[str, Any], kind: str) -> str | None:
    """The other kind of main child a KaiwoJob keeps when its spec switched between Ray and a
    batch Job while that child runs (decision 0247): the planner plans it as the kind that
    runs. None for a KaiwoService."""
    if workload.get("kind") != "KaiwoJob":
        return None
    return OTHER_MAIN_KIND.get(kind)


def _kept_after_a_switch(child: Mapping[str, Any] | None) -> bool:
    """Whether a KaiwoJob's main child of the kind its spec no longer asks for is the one it
    keeps: it runs and is not being deleted (the planner's rule, decision 0247)."""
    if child is None or _mapping(child.get("metadata")).get("deletionTimestamp"):
        return False
    return child_runs(child)


def _main_child_key(workload: Mapping[str, Any]) -> tuple[str, str, str] | None:
    """The owner uid, kind and name of the main child of a workload whose GPUs may be split
    by node size, or a batch Job (whose running pods Kueue may have admitted partially,
    decision 0153); None for a workload without uid or name."""
    spec, meta = _mapping(workload.get("spec")), _mapping(workload.get("metadata"))
    kind = str(workload.get("kind") or "")
    uid, name = meta.get("uid"), meta.get("name")
    if not (isinstance(uid, str) and uid and isinstance(name, str) and name):
        return None
    match wire_workload_shape(kind, spec):
        case "ray":
            child_kind = "RayJob" if kind == "KaiwoJob" else "AppWrapper"
        case "deployment":
            child_kind = "Deployment"
        case _:
            child_kind = "Job"
    return uid, child_kind, main_child_name(name)


def child_split(child: Mapping[str, Any], resource_key: str) -> tuple[int, int] | None:
    """The replicas and GPUs per pod (``resource_key``) a Deployment, RayJob or AppWrapper
    was made with; None when it does not say. A Ray cluster says it only when every worker
    group has the same split (Kaiwo sizes them alike; a group edited by hand is no split of
    the workload's ``gpus``, decision 0146)."""
    spec = _mapping(child.get("spec"))
    if child.get("kind") == "Deployment":
        return _group_split(spec.get("replicas"), spec.get("template"), resource_key)
    cluster = _child_ray_cluster(child)
    if cluster is None:
        return None
    groups = cluster.get("workerGroupSpecs")
    splits = {
        _group_split(_mapping(group).get("replicas"), _mapping(group).get("template"), resource_key)
        for group in (groups if isinstance(groups, list) else ())
    }
    if len(splits) != 1:
        return None
    return splits.pop()


def _child_ray_cluster(child: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The Ray cluster of a RayJob, or of the RayService inside an AppWrapper; None for
    another kind."""
    spec = _mapping(child.get("spec"))
    match child.get("kind"):
        case "RayJob":
            return _mapping(spec.get(RAY_JOB_CLUSTER))
        case "AppWrapper":
            components = spec.get("components")
            component = components[0] if isinstance(components, list) and components else {}
            ray_spec = _mapping(_mapping(_mapping(component).get("template")).get("spec"))
            return _mapping(ray_spec.get(RAY_SERVICE_CLUSTER))
        case _:
            return None


def _group_split(replicas: object, template: object, resource_key: str) -> tuple[int, int] | None:
    per_pod = _pod_gpus(template, resource_key)
    if isinstance(replicas, bool) or not isinstance(replicas, int) or per_pod is None:
        return None
    return replicas, per_pod


def template_gpus(given: Mapping[str, Any] | None, vendor: str) -> int | None:
    """The GPUs the main (first) container of a KaiwoService's given Deployment (decision
    0163) or a KaiwoJob's given batch Job (``spec.job``, decision 0166) asks for under
    ``vendor``'s key: its limit, else its request, when a whole number above 0; None
    otherwise (no such container or key, another vendor's key, a vendor whose key is not
    known offline). Kaiwo gives the main container its GPUs, so that is the one that tells
    what each pod holds. Both kinds keep their pod template at ``spec.template``."""
    key = GPU_RESOURCE_BY_VENDOR.get(vendor.lower())
    template = _mapping(_mapping(_mapping(given).get("spec")).get("template"))
    containers = _mapping(template.get("spec")).get("containers")
    if key is None or not isinstance(containers, list) or not containers:
        return None
    resources = _mapping(_mapping(containers[0]).get("resources"))
    for section in ("limits", "requests"):
        value = _mapping(resources.get(section)).get(key)
        if value is None:
            continue
        try:
            quantity = parse_quantity(value)
        except (TypeError, ValueError):
            return None
        return int(quantity) if quantity > 0 and quantity == int(quantity) else None
    return None


def pod_template_gpus(template: object, vendor: str) -> int:
    """:func:`template_gpus` of a pod template itself (a Ray group's or head's): its main
    container's own GPUs under ``vendor``'s key, 0 when it names none."""
    return template_gpus({"spec": {"template": template}}, vendor) or 0


def ray_template_allocation(
    given: Mapping[str, Any], *, replicas: int | None, vendor: str
) -> GpuAllocation | None:
    """Rule ``template`` of a Ray workload whose spec asks for no GPUs (decision 0167): the
    GPUs the main containers of the given RayJob's or RayService's (``given``, wire form)
    Ray cluster ask for themselves, which Kaiwo keeps as written and Kueue reserves. Each
    worker group runs Kaiwo's ``replicas`` (1 when not given, 0 paused; what the written
    group says, decision 0146) of ``numOfHosts`` pods, each with its own template's GPUs; the
    head one pod with its own. None when no template asks for any (or none is given: a RayJob
    on an existing cluster, or Kaiwo's default cluster, whose templates are Kaiwo's). A
    RayJob keeps its cluster at ``rayClusterSpec``, a RayService at ``rayClusterConfig``."""
    spec = _mapping(given.get("spec"))
    field: GivenTemplate = "rayJob" if RAY_JOB_CLUSTER in spec else "rayService"
    cluster = _mapping(spec.get(RAY_JOB_CLUSTER if field == "rayJob" else RAY_SERVICE_CLUSTER))
    groups = cluster.get("workerGroupSpecs")
    group_list = [_mapping(group) for group in (groups if isinstance(groups, list) else ())]
    per_group = tuple(pod_template_gpus(group.get("template"), vendor) for group in group_list)
    head = pod_template_gpus(_mapping(cluster.get("headGroupSpec")).get("template"), vendor)
    if not any(per_group) and not head:
        return None
    pods = max(replicas if replicas is not None else 1, 0)
    allocation = GpuAllocation(
        gpus=0,
        gpus_per_replica=max((*per_group, head)),
        replicas=pods,
        vendor=vendor,
        rule="template",
        worker_group_hosts=tuple(worker_group_hosts(group) for group in group_list),
        given_template=field,
        worker_group_gpus=per_group,
        head_gpus=head,
    )
    return replace(allocation, gpus=allocation.held_gpus)


def _pod_gpus(template: object, resource_key: str) -> int | None:
    """The GPU limit of the first container of ``template`` that has one."""
    containers = _mapping(_mapping(template).get("spec")).get("containers")
    for container in containers if isinstance(containers, list) else ():
        limit = _mapping(_mapping(_mapping(container).get("resources")).get("limits")).get(
            resource_key
        )
        if isinstance(limit, str) and limit.isdigit():
            return int(limit)
        if isinstance(limit, int) and not isinstance(limit, bool):
            return limit
    return None


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _whole_number(value: object, *, default: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        return default
    return max(value, 0)


def _gpus_per_node(stats: GpuStats, total: int) -> int | None:
    """The smallest node size: of allocatable GPUs when they cover the request, else of all."""
    if stats.total_allocatable_gpus >= total and stats.min_allocatable_gpus_per_node:
        return stats.min_allocatable_gpus_per_node
    return stats.min_gpus_per_node
