"""Can this workload ever be scheduled here? The ``Schedulable`` condition (upstream Kaiwo §6.4).

Checks, first failure wins: the cluster queue exists in the KaiwoQueueConfig; the queue admits
the workload's namespace; its ``priorityClass`` names something that exists
(:mod:`~kaiwo_planner.domain.state.priority_classes`); a Deployment's ``gpus`` divides evenly over
its ``replicas`` (decision 0113); the cluster has GPUs of the vendor; it has enough of them; its
largest node has as many as one pod asks for (upstream does not check this: a pod larger than
every node stayed Pending for ever). A workload
that fails is in ERROR and gets no children until something changes (the verdict is recomputed
on every plan, so a new node or queue fixes it without touching the workload).

A workload Kueue has already admitted is not held to the first three checks: they are about the
KaiwoQueueConfig (and the priority classes) it would be admitted under *now*, and an
administrator who removes its ClusterQueue or WorkloadPriorityClass, or moves its namespace to
another queue, while it runs does not stop it (Kueue keeps admitted workloads where they were
admitted). It stays True with the reason ``AdmittedBeforeQueueChange`` and a message naming what
no longer holds; before this, it went ERROR while running and never reached COMPLETE (decision
0126).

The GPU checks that read the nodes (``NoGPUs``, ``InsufficientGPUs``,
``InsufficientGPUsPerNode``) do not stop an admitted workload either: a node removed or
relabelled by its device plugin (a count label of 4 where there were 8) turned a RUNNING job
ERROR while its pod ran on, and an ERROR workload's status never looks at its
children, so it never reached COMPLETE. It stays True with the reason
``AdmittedBeforeNodeChange`` and the check's message, its children are left as they are (the
allocation read from the changed nodes must not re-split a running workload, e.g. a
Deployment rolled to one pod larger than every node), and its phase follows them (decision
0132).

A schedulable workload whose pods hold another total than ``spec.gpus`` asked (the split by
node size rounds down; ``gpusPerReplica`` recalculates it) stays True with the reason
``GpusRoundedDown`` or ``GpusRecalculated`` and a message naming the fields (decision 0118).

A batch Job that Kueue may admit partially (``kueue.x-k8s.io/job-min-parallelism`` in
``spec.job.metadata.annotations``) is held to its minimum width by the cluster-size check: a
sweep of 4 pods x 8 GPUs with minimum 2 fits a cluster of 16, since Kueue can start 2 of its
pods, and the message says so; a minimum that does not fit is refused, naming it (decision
0155). Before, such a sweep went ERROR with ``InsufficientGPUs`` and its Job was never made.

A RayJob sent to an existing Ray cluster, not queued in Kueue (decision 0156), is not made in a
namespace that has a LocalQueue named ``default``: Kueue's webhook would put it there, suspend
it, and KubeRay would fail it for good. ``DefaultLocalQueue`` says so until the LocalQueue goes
(decision 0159).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwoqueueconfig import KaiwoQueueConfigSpec

from kaiwo_planner.domain.children.partial_admission import JOB_MIN_PARALLELISM_ANNOTATION
from kaiwo_planner.domain.scheduling.gpu_allocation import GpuAllocation, GpuStats
from kaiwo_planner.domain.state.priority_classes import (
    NO_PRIORITY,
    REASON_NOT_FOUND,
    PriorityChoice,
    not_found_message,
)

SCHEDULABLE = "Schedulable"
REASON_GPUS_ROUNDED_DOWN = "GpusRoundedDown"
"""Schedulable, and the split by node size holds fewer GPUs than ``spec.gpus`` (decision 0118)."""
REASON_GPUS_RECALCULATED = "GpusRecalculated"
"""Schedulable, and ``gpusPerReplica`` set another total than ``spec.gpus`` (decision 0118)."""
GPUS_ADJUSTED_REASONS = frozenset({REASON_GPUS_ROUNDED_DOWN, REASON_GPUS_RECALCULATED})
REASON_ADMITTED_BEFORE_QUEUE_CHANGE = "AdmittedBeforeQueueChange"
"""Schedulable: Kueue admitted the workload before its queue or priority class stopped holding
(decision 0126)."""
REASON_QUEUE_CONFIG_INVALID = "QueueConfigInvalid"
"""Not schedulable: the KaiwoQueueConfig fails validation, so none of its queues is in force
(decision 0205); said so, not that the queue is not defined."""
REASON_ADMITTED_BEFORE_NODE_CHANGE = "AdmittedBeforeNodeChange"
"""Schedulable: Kueue admitted the workload before the nodes stopped holding what it asks for
(decision 0132); its children are kept as they are."""
REASON_DEFAULT_LOCAL_QUEUE = "DefaultLocalQueue"
"""Not schedulable: a RayJob sent to an existing Ray cluster, which Kueue does not queue, in a
namespace whose LocalQueue ``default`` Kueue would queue it in all the same (decision 0159)."""
DEFAULT_LOCAL_QUEUE = "default"
"""The LocalQueue Kueue's ``LocalQueueDefaulting`` puts a job without a queue label in."""
NODE_CHECK_REASONS = frozenset({"NoGPUs", "InsufficientGPUs", "InsufficientGPUsPerNode"})
"""The GPU checks that read the nodes (the others read the spec alone)."""
QUEUE_CONFIG_NAME = "kaiwo"


@dataclass(frozen=True, slots=True)
class SchedulableVerdict:
    schedulable: bool
    reason: str
    message: str

    @property
    def condition_status(self) -> str:
        return "True" if self.schedulable else "False"


def default_local_queue_message(namespace: str) -> str:
    """Why a RayJob sent to an existing Ray cluster is not made in ``namespace``, which has a
    LocalQueue named ``default`` (decision 0159)."""
    return (
        "spec.rayJob.spec.clusterSelector sends the RayJob to an existing Ray cluster, which "
        f"Kueue does not queue, but namespace '{namespace}' has a Kueue LocalQueue named "
        "'default': Kueue gives every RayJob made there without a queue that queue and "
        "suspends it, and KubeRay fails a suspended RayJob on an existing cluster for good. "
        "The RayJob is made once no LocalQueue 'default' is left in the namespace (Kaiwo "
        "makes one for a ClusterQueue named 'default' in the KaiwoQueueConfig), or run the "
        "job in another namespace"
    )


def queue_namespaces(spec: KaiwoQueueConfigSpec | None) -> dict[str, tuple[str, ...]]:
    """Each cluster queue of a KaiwoQueueConfig and the namespaces it is limited to (sorted)."""
    if spec is None:
        return {}
    return {q.name: tuple(sorted(set(q.namespaces or ()))) for q in spec.cluster_queues or ()}


def decide_schedulable(
    *,
    cluster_queue: str,
    namespace: str,
    queue_namespaces: Mapping[str, Sequence[str]],
    allocation: GpuAllocation,
    stats: GpuStats,
    priority_class: str = "",
    priority: PriorityChoice | None = NO_PRIORITY,
    admitted: bool = False,
    queued: bool = True,
    default_local_queue: bool = False,
    queue_config_invalid: bool = False,
) -> SchedulableVerdict:
    """The verdict for one workload.

    ``queue_namespaces`` maps each cluster queue of the KaiwoQueueConfig to its ``namespaces``
    (empty: any namespace may use it). ``priority`` is what ``priority_class`` (the spec's)
    resolved to, None when it names nothing that exists. ``admitted``: Kueue admitted the
    workload already, so the queue and priority checks no longer stop it (module docstring).
    ``queued``: False for a workload Kueue never queues (a RayJob sent to an existing Ray
    cluster, decision 0156), which neither check concerns. ``default_local_queue``: such a
    workload's child is not made yet and its namespace has a Kueue LocalQueue named
    ``default``, which would queue (and so kill) it (decision 0159).
    ``queue_config_invalid``: the KaiwoQueueConfig exists and fails validation, so none of
    its queues is in force (told as such, not as a queue it does not define).
    """
    if not queued and default_local_queue:
        return SchedulableVerdict(
            schedulable=False,
            reason=REASON_DEFAULT_LOCAL_QUEUE,
            message=default_local_queue_message(namespace),
        )
    queue_verdict = (
        _queue_verdict(
            cluster_queue=cluster_queue,
            namespace=namespace,
            queue_namespaces=queue_namespaces,
            priority_class=priority_class,
            priority=priority,
            queue_config_invalid=queue_config_invalid,
        )
        if queued
        else None
    )
    gpu_verdict = _gpu_verdict(allocation, stats)
    if not admitted:
        return gpu_verdict if queue_verdict is None else queue_verdict
    if not gpu_verdict.schedulable and gpu_verdict.reason in NODE_CHECK_REASONS:
        return SchedulableVerdict(
            schedulable=True,
            reason=REASON_ADMITTED_BEFORE_NODE_CHANGE,
            message=(
                f"{gpu_verdict.message}; Kueue admitted the workload before the nodes changed, "
                "so its children are kept as they are and it goes on as far as its pods can "
                "(it would not be admitted again as it is)"
            ),
        )
    if queue_verdict is None:
        return gpu_verdict
    if not gpu_verdict.schedulable or gpu_verdict.reason in GPUS_ADJUSTED_REASONS:
        return gpu_verdict
    return SchedulableVerdict(
        schedulable=True,
        reason=REASON_ADMITTED_BEFORE_QUEUE_CHANGE,
        message=(
            f"{queue_verdict.message}; Kueue admitted the workload before this changed, so it "
            "runs on where it was admitted (it would not be admitted again as it is)"
        ),
    )


def _queue_verdict(
    *,
    cluster_queue: str,
    namespace: str,
    queue_namespaces: Mapping[str, Sequence[str]],
    priority_class: str,
    priority: PriorityChoice | None,
    queue_config_invalid: bool = False,
) -> SchedulableVerdict | None:
    """What keeps the KaiwoQueueConfig (or the priority classes) from admitting the workload
    now; None: nothing."""
    if cluster_queue not in queue_namespaces and queue_config_invalid:
        return SchedulableVerdict(
            schedulable=False,
            reason=REASON_QUEUE_CONFIG_INVALID,
            message=(
                f"KaiwoQueueConfig '{QUEUE_CONFIG_NAME}' is invalid, so none of its queues is "
                f"in force (its Valid condition says why): cluster queue '{cluster_queue}' "
                "waits for it to be fixed"
            ),
        )
    if cluster_queue not in queue_namespaces:
        return SchedulableVerdict(
            schedulable=False,
            reason="ClusterQueueNotFound",
            message=(
                f"Cluster queue '{cluster_queue}' is not defined in "
                f"KaiwoQueueConfig '{QUEUE_CONFIG_NAME}'"
            ),
        )
    allowed = queue_namespaces[cluster_queue]
    if allowed and namespace not in allowed:
        return SchedulableVerdict(
            schedulable=False,
            reason="WrongQueueNamespace",
            message=(
                f"Cluster queue '{cluster_queue}' defines one or more namespaces, but workload "
                f"namespace '{namespace}' is not one of them"
            ),
        )
    if priority is None:
        return SchedulableVerdict(
            schedulable=False,
            reason=REASON_NOT_FOUND,
            message=not_found_message(priority_class),
        )
    return None


def _gpu_verdict(allocation: GpuAllocation, stats: GpuStats) -> SchedulableVerdict:
    # Before the check for no GPUs: 2 GPUs over 4 replicas leaves every pod with none.
    if allocation.rule == "over-replicas" and allocation.adjusted_from is not None:
        return SchedulableVerdict(
            schedulable=False,
            reason="GpusNotDivisibleByReplicas",
            message=(
                f"spec.gpus ({allocation.adjusted_from}) does not divide evenly over spec.replicas "
                f"({allocation.replicas}) of a Deployment: set spec.gpus to a multiple of "
                "spec.replicas, or set spec.gpusPerReplica"
            ),
        )
    # No pod holds any: no GPUs asked, or a RayJob sent to an existing Ray cluster, whose
    # own pods run it (no worker group of its own, decision 0156).
    if allocation.gpus <= 0 or allocation.held_gpus <= 0:
        return SchedulableVerdict(
            schedulable=True,
            reason=SCHEDULABLE,
            message="Workload does not require GPU resources",
        )
    if stats.total_gpus == 0:
        return SchedulableVerdict(
            schedulable=False,
            reason="NoGPUs",
            message=f"Cluster has 0 GPUs (vendor: {allocation.vendor})",
        )
    whole_fits = allocation.held_gpus <= stats.total_gpus
    # Kueue may start a Job it admits partially with its minimum (decision 0155).
    if not whole_fits and allocation.min_held_gpus > stats.total_gpus:
        return SchedulableVerdict(
            schedulable=False,
            reason="InsufficientGPUs",
            message=(
                f"Cluster has {stats.total_gpus} GPUs, but requested for "
                f"{allocation.held_gpus} GPUs (vendor: {allocation.vendor})"
                f"{_in_worker_groups(allocation)}{_minimum_too_large(allocation)}"
            ),
        )
    largest = stats.max_gpus_per_node or 0
    if allocation.gpus_per_replica > largest:
        return SchedulableVerdict(
            schedulable=False,
            reason="InsufficientGPUsPerNode",
            message=_pod_too_large_message(allocation, largest),
        )
    return _sufficient(allocation, partial_fit_of=None if whole_fits else stats.total_gpus)


def _minimum_too_large(allocation: GpuAllocation) -> str:
    """The words for a Job that Kueue may admit partially whose minimum does not fit either."""
    minimum = allocation.min_replicas
    if minimum is None:
        return ""
    return (
        f"; Kueue may start the Job with {minimum} of its {allocation.replicas} pods "
        f"({JOB_MIN_PARALLELISM_ANNOTATION}), {allocation.min_held_gpus} GPUs, which do not "
        "fit either: lower the annotation, or spec.gpus"
    )


def _partial_fit(allocation: GpuAllocation, total_gpus: int) -> str:
    """The words for a Job whose pods exceed the cluster but whose minimum fits it."""
    return (
        f": the Job runs {allocation.replicas} pods of {allocation.gpus_per_replica} GPUs "
        f"({allocation.held_gpus}) and Kueue may start it with {allocation.min_replicas} "
        f"({JOB_MIN_PARALLELISM_ANNOTATION}), which fit the cluster's {total_gpus}"
    )


def _sufficient(
    allocation: GpuAllocation, *, partial_fit_of: int | None = None
) -> SchedulableVerdict:
    """Schedulable, with a note when the pods hold another total than ``spec.gpus``, and
    when only the minimum of a Job Kueue may admit partially fits the cluster's
    ``partial_fit_of`` GPUs (decision 0155)."""
    sized = (
        _in_worker_groups(allocation)
        if partial_fit_of is None
        else _partial_fit(allocation, partial_fit_of)
    )
    sufficient = f"Cluster has sufficient GPU resources{sized}"
    adjusted = _adjusted_total(allocation)
    if adjusted is None:
        return SchedulableVerdict(schedulable=True, reason=SCHEDULABLE, message=sufficient)
    reason, note = adjusted
    return SchedulableVerdict(schedulable=True, reason=reason, message=f"{sufficient}; {note}")


def _in_worker_groups(allocation: GpuAllocation) -> str:
    """The words for a Ray cluster whose several worker groups each run the split (decision
    0146), or whose groups run each replica on several hosts (``numOfHosts``, decision 0151):
    the user's ``gpus`` is one group's replicas on one host each, so the workload holds a
    multiple of it."""
    if allocation.worker_group_gpus or allocation.head_gpus:
        return _own_ray_gpus(allocation)
    hosts = allocation.worker_group_hosts
    multi_host = any(count > 1 for count in hosts)
    if len(hosts) < 2 and not multi_host:
        return ""
    replicas = f"{allocation.replicas} replica{'' if allocation.replicas == 1 else 's'}"
    if len(hosts) < 2:
        sized = (
            f": the worker group of the Ray cluster runs {replicas} of {hosts[0]} hosts "
            f"(numOfHosts) with {allocation.gpus_per_replica} GPUs each"
        )
    else:
        sized = (
            f": each of the {len(hosts)} worker groups of the Ray cluster runs {replicas} of "
            f"{allocation.gpus_per_replica} GPUs (spec.replicas and the GPU fields size every "
            "group)"
        )
        if multi_host:
            sized += (
                ", every replica on numOfHosts pods ("
                + ", ".join(str(count) for count in hosts)
                + " by group)"
            )
    return f"{sized}, so the workload holds {allocation.held_gpus} GPUs"


def _own_ray_gpus(allocation: GpuAllocation) -> str:
    """The words for a Ray cluster whose templates give its GPUs, the spec asking for none
    (rule ``template``, decision 0167), when its groups are more than one, run on several
    hosts, or its head holds some: what each holds, and the total."""
    hosts, per_group = allocation.worker_group_hosts, allocation.worker_group_gpus
    if len(hosts) < 2 and all(count <= 1 for count in hosts) and not allocation.head_gpus:
        return ""
    replicas = f"{allocation.replicas} replica{'' if allocation.replicas == 1 else 's'}"
    sized = (
        ": the spec asks for no GPUs, so the Ray cluster's own templates give them: "
        f"each of its {len(hosts)} worker group{'' if len(hosts) == 1 else 's'} runs "
        f"{replicas} (spec.replicas) of "
        + ", ".join(str(gpus) for gpus in per_group)
        + f" GPUs per pod{' by group' if len(hosts) > 1 else ''}"
    )
    if any(count > 1 for count in hosts):
        sized += ", every replica on numOfHosts pods (" + ", ".join(str(c) for c in hosts) + ")"
    if allocation.head_gpus:
        sized += f", and its head {allocation.head_gpus}"
    return f"{sized}, so the workload holds {allocation.held_gpus} GPUs"


def _adjusted_total(allocation: GpuAllocation) -> tuple[str, str] | None:
    """The reason and the words for pods that hold another total than ``spec.gpus`` asked
    (decision 0118): a note on a True condition, not a failure, so the user who reads
    ``kubectl describe`` learns that 30 became 28, and why."""
    asked = allocation.adjusted_from
    if asked is None:
        return None
    held, replicas, per_pod = allocation.gpus, allocation.replicas, allocation.gpus_per_replica
    if allocation.rule == "automatic":
        return REASON_GPUS_ROUNDED_DOWN, (
            f"spec.gpus ({asked}) is rounded down to {held}: the nodes' size splits it into "
            f"{replicas} replicas of {per_pod} GPUs, and {asked} does not divide evenly over "
            f"{replicas}; set spec.gpus to a multiple of {replicas}, or set spec.replicas and "
            "spec.gpusPerReplica to choose the split"
        )
    if allocation.rule == "kept":
        return REASON_GPUS_ROUNDED_DOWN, (
            f"spec.gpus ({asked}) is rounded down to {held}: the nodes' size when its pods "
            f"were made split it into {replicas} replicas of {per_pod} GPUs, kept while they "
            f"run, and {asked} does not divide evenly over {replicas}; set spec.gpus to a "
            f"multiple of {replicas}, or set spec.replicas and spec.gpusPerReplica to choose "
            "the split"
        )
    if allocation.rule in ("one-pod", "one-pod-per-replica") and replicas > 1:
        return REASON_GPUS_RECALCULATED, _parallel_job_note(allocation, asked)
    if allocation.rule == "one-pod-per-replica":
        return REASON_GPUS_RECALCULATED, (
            f"spec.gpus ({asked}) is recalculated as spec.gpusPerReplica ({per_pod}), the GPUs "
            f"of the single pod of a Job (spec.replicas is ignored for a Job): the workload "
            f"holds {held} GPUs; leave out spec.gpusPerReplica to give the pod all {asked}, or "
            "set ray: true to run spec.replicas pods"
        )
    hint = (
        f"set spec.replicas to {asked // per_pod} for {asked} GPUs, or leave out spec.gpus"
        if per_pod and asked % per_pod == 0
        else f"set spec.gpus to {held}, or leave it out"
    )
    return REASON_GPUS_RECALCULATED, (
        f"spec.gpus ({asked}) is recalculated from spec.replicas ({replicas}) x "
        f"spec.gpusPerReplica ({per_pod}): the workload holds {held} GPUs; {hint}"
    )


def _parallel_job_note(allocation: GpuAllocation, asked: int) -> str:
    """A batch Job running several pods at once, each with the pod's GPUs, holds their sum
    (decision 0147): what the pods hold, and the fields that size it."""
    held, pods, per_pod = allocation.gpus, allocation.replicas, allocation.gpus_per_replica
    runs = (
        f"the Job runs {pods} pods at once (spec.job.spec.parallelism, no more than its "
        f"completions), each with {per_pod} GPUs: the workload holds {held} GPUs"
    )
    if allocation.rule == "one-pod-per-replica":
        return (
            f"spec.gpus ({asked}) is recalculated from spec.gpusPerReplica ({per_pod}): {runs}; "
            f"set spec.gpus to {held}, or leave it out"
        )
    share = (
        f"set spec.gpusPerReplica to {asked // pods} to share {asked} GPUs over the pods, or "
        if asked % pods == 0
        else ""
    )
    return (
        f"spec.gpus ({asked}) is the GPUs of each pod of a Job (spec.gpusPerReplica not "
        f"given), and {runs}; {share}lower spec.job.spec.parallelism"
    )


def _pod_too_large_message(allocation: GpuAllocation, largest: int) -> str:
    """Which fields asked for the pod, what the largest node has, and what to change."""
    node = f"the largest node has {largest} GPUs (vendor: {allocation.vendor})"
    if allocation.rule == "one-pod" and allocation.replicas > 1:
        per_pod, pods = allocation.gpus_per_replica, allocation.replicas
        return (
            f"spec.gpus ({per_pod}) asks for {per_pod} GPUs in each of the {pods} pods of a "
            f"Job (spec.job.spec.parallelism), but {node}: set spec.gpusPerReplica to what "
            "one pod needs, or lower spec.gpus"
        )
    if allocation.rule == "one-pod":
        return (
            f"spec.gpus ({allocation.gpus}) asks for {allocation.gpus} GPUs in the single pod "
            f"of a Job, but {node}: set ray: true to spread the GPUs across nodes, or lower "
            "spec.gpus"
        )
    if allocation.rule == "one-pod-per-replica":
        return (
            f"spec.gpusPerReplica ({allocation.gpus_per_replica}) asks for "
            f"{allocation.gpus_per_replica} GPUs in {_job_pods_words(allocation)}, but {node}: set "
            "ray: true to spread the GPUs across nodes, or lower spec.gpusPerReplica"
        )
    if allocation.rule == "kept":
        return (
            f"spec.gpus ({allocation.adjusted_from or allocation.gpus}) was split by the "
            f"nodes' size when its pods were made into {allocation.replicas} replicas of "
            f"{allocation.gpus_per_replica} GPUs, kept while they run, but {node}: edit "
            "spec.gpus, or set spec.replicas and spec.gpusPerReplica, to split it over the "
            "nodes as they are now"
        )
    if allocation.rule == "over-replicas":
        return (
            f"spec.gpus ({allocation.gpus}) over spec.replicas ({allocation.replicas}) asks for "
            f"{allocation.gpus_per_replica} GPUs per pod, but {node}: raise spec.replicas or "
            "lower spec.gpus"
        )
    per_pod = allocation.gpus_per_replica
    return (
        _template_too_large_message(allocation, node)
        if allocation.rule == "template"
        else (
            f"spec.gpusPerReplica ({per_pod}) asks for {per_pod} GPUs per pod, but {node}: "
            "lower spec.gpusPerReplica and raise spec.replicas"
        )
    )


def _template_too_large_message(allocation: GpuAllocation, node: str) -> str:
    """The words for a given template's own GPUs per pod, the spec asking for none: of a
    Deployment (decision 0163), a batch Job (decision 0166) or a Ray cluster (0167)."""
    if allocation.given_template in ("rayJob", "rayService"):
        return _ray_template_too_large_message(allocation, node)
    asked = (
        f"spec.{allocation.given_template or 'deployment'}.spec.template.spec.containers[0] "
        f'asks for {allocation.gpus_per_replica} GPUs ("{allocation.resource_key}")'
    )
    if allocation.given_template == "job":
        return (
            f"{asked} in {_job_pods_words(allocation)}, but {node}: set ray: true to spread "
            "the GPUs across nodes, or lower it"
        )
    return f"{asked} per pod, but {node}: lower it and raise spec.replicas"


def _ray_template_too_large_message(allocation: GpuAllocation, node: str) -> str:
    """The words for a Ray cluster's template asking for more GPUs per pod than a node has
    (decision 0167), naming the head's or the first such group's main container."""
    cluster = (
        "spec.rayJob.spec.rayClusterSpec"
        if allocation.given_template == "rayJob"
        else "spec.rayService.spec.rayClusterConfig"
    )
    per_pod = allocation.gpus_per_replica
    template = (
        f"workerGroupSpecs[{allocation.worker_group_gpus.index(per_pod)}]"
        if per_pod in allocation.worker_group_gpus
        else "headGroupSpec"
    )
    return (
        f"{cluster}.{template}.template.spec.containers[0] asks for {per_pod} GPUs "
        f'("{allocation.resource_key}") per pod, but {node}: lower it, or set spec.gpus '
        "to let Kaiwo split the GPUs by the nodes' size"
    )


def _job_pods_words(allocation: GpuAllocation) -> str:
    if allocation.replicas > 1:
        return f"each of the {allocation.replicas} pods of a Job"
    return "the single pod of a Job"
