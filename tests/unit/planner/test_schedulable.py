from __future__ import annotations

import dataclasses

import pytest
from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwoqueueconfig import KaiwoQueueConfigSpec
from kaiwo_planner.domain.scheduling.gpu_allocation import GpuAllocation, GpuStats
from kaiwo_planner.domain.scheduling.schedulable import (
    SchedulableVerdict,
    decide_schedulable,
    queue_namespaces,
)
from kaiwo_planner.domain.state.priority_classes import NO_PRIORITY, PriorityChoice

QUEUES = {"kaiwo": (), "team-a": ("research", "prod")}
EIGHT_AMD = GpuStats(vendor="amd", total_gpus=8, min_gpus_per_node=8, max_gpus_per_node=8)


def _alloc(gpus: int, vendor: str = "amd") -> GpuAllocation:
    return GpuAllocation(gpus=gpus, gpus_per_replica=gpus, replicas=1, vendor=vendor)


@pytest.mark.parametrize(
    ("queue", "namespace", "gpus", "stats", "expected"),
    [
        (
            "missing",
            "research",
            0,
            EIGHT_AMD,
            SchedulableVerdict(
                schedulable=False,
                reason="ClusterQueueNotFound",
                message="Cluster queue 'missing' is not defined in KaiwoQueueConfig 'kaiwo'",
            ),
        ),
        (
            "team-a",
            "default",
            1,
            EIGHT_AMD,
            SchedulableVerdict(
                schedulable=False,
                reason="WrongQueueNamespace",
                message=(
                    "Cluster queue 'team-a' defines one or more namespaces, but workload "
                    "namespace 'default' is not one of them"
                ),
            ),
        ),
        (
            "kaiwo",
            "default",
            2,
            GpuStats(vendor="amd"),
            SchedulableVerdict(
                schedulable=False, reason="NoGPUs", message="Cluster has 0 GPUs (vendor: amd)"
            ),
        ),
        (
            "team-a",
            "prod",
            9,
            EIGHT_AMD,
            SchedulableVerdict(
                schedulable=False,
                reason="InsufficientGPUs",
                message="Cluster has 8 GPUs, but requested for 9 GPUs (vendor: amd)",
            ),
        ),
        (
            "team-a",
            "research",
            8,
            EIGHT_AMD,
            SchedulableVerdict(
                schedulable=True,
                reason="Schedulable",
                message="Cluster has sufficient GPU resources",
            ),
        ),
        (
            "kaiwo",
            "anywhere",
            0,
            GpuStats(vendor="amd"),
            SchedulableVerdict(
                schedulable=True,
                reason="Schedulable",
                message="Workload does not require GPU resources",
            ),
        ),
    ],
    ids=["queue-unknown", "wrong-namespace", "no-gpus", "insufficient", "enough", "cpu-only"],
)
def test_schedulable_reasons(
    queue: str, namespace: str, gpus: int, stats: GpuStats, expected: SchedulableVerdict
) -> None:
    verdict = decide_schedulable(
        cluster_queue=queue,
        namespace=namespace,
        queue_namespaces=QUEUES,
        allocation=_alloc(gpus),
        stats=stats,
    )
    assert verdict == expected
    assert verdict.condition_status == ("True" if expected.schedulable else "False")


def test_nvidia_vendor_in_message() -> None:
    verdict = decide_schedulable(
        cluster_queue="kaiwo",
        namespace="default",
        queue_namespaces=QUEUES,
        allocation=_alloc(1, "nvidia"),
        stats=GpuStats(vendor="nvidia"),
    )
    assert verdict.message == "Cluster has 0 GPUs (vendor: nvidia)"


def test_queue_namespaces_from_spec() -> None:
    spec = KaiwoQueueConfigSpec.from_wire(
        {
            "clusterQueues": [
                {"name": "kaiwo"},
                {"name": "team-a", "namespaces": ["prod", "research"]},
            ]
        }
    )
    assert queue_namespaces(spec) == {"kaiwo": (), "team-a": ("prod", "research")}
    assert queue_namespaces(None) == {}


# ------------------------------------------------------------------ one pod's GPUs (0113)

TWO_EIGHT_GPU_NODES = GpuStats(
    vendor="amd", total_gpus=16, min_gpus_per_node=8, max_gpus_per_node=8
)


@pytest.mark.parametrize(
    ("allocation", "expected"),
    [
        (
            GpuAllocation(gpus=16, gpus_per_replica=16, replicas=1, vendor="amd", rule="one-pod"),
            SchedulableVerdict(
                schedulable=False,
                reason="InsufficientGPUsPerNode",
                message=(
                    "spec.gpus (16) asks for 16 GPUs in the single pod of a Job, but the "
                    "largest node has 8 GPUs (vendor: amd): set ray: true to spread the GPUs "
                    "across nodes, or lower spec.gpus"
                ),
            ),
        ),
        (
            GpuAllocation(
                gpus=16, gpus_per_replica=16, replicas=1, vendor="amd", rule="over-replicas"
            ),
            SchedulableVerdict(
                schedulable=False,
                reason="InsufficientGPUsPerNode",
                message=(
                    "spec.gpus (16) over spec.replicas (1) asks for 16 GPUs per pod, but the "
                    "largest node has 8 GPUs (vendor: amd): raise spec.replicas or lower spec.gpus"
                ),
            ),
        ),
        (
            GpuAllocation(gpus=12, gpus_per_replica=12, replicas=1, vendor="amd"),
            SchedulableVerdict(
                schedulable=False,
                reason="InsufficientGPUsPerNode",
                message=(
                    "spec.gpusPerReplica (12) asks for 12 GPUs per pod, but the largest node "
                    "has 8 GPUs (vendor: amd): lower spec.gpusPerReplica and raise spec.replicas"
                ),
            ),
        ),
        (
            GpuAllocation(
                gpus=6,
                gpus_per_replica=2,
                replicas=3,
                vendor="amd",
                rule="over-replicas",
                adjusted_from=8,
            ),
            SchedulableVerdict(
                schedulable=False,
                reason="GpusNotDivisibleByReplicas",
                message=(
                    "spec.gpus (8) does not divide evenly over spec.replicas (3) of a "
                    "Deployment: set spec.gpus to a multiple of spec.replicas, or set "
                    "spec.gpusPerReplica"
                ),
            ),
        ),
        (
            # Fewer GPUs than replicas would leave pods without any: refused the same way.
            GpuAllocation(
                gpus=0,
                gpus_per_replica=0,
                replicas=4,
                vendor="amd",
                rule="over-replicas",
                adjusted_from=2,
            ),
            SchedulableVerdict(
                schedulable=False,
                reason="GpusNotDivisibleByReplicas",
                message=(
                    "spec.gpus (2) does not divide evenly over spec.replicas (4) of a "
                    "Deployment: set spec.gpus to a multiple of spec.replicas, or set "
                    "spec.gpusPerReplica"
                ),
            ),
        ),
        (
            GpuAllocation(gpus=8, gpus_per_replica=8, replicas=1, vendor="amd", rule="one-pod"),
            SchedulableVerdict(
                schedulable=True,
                reason="Schedulable",
                message="Cluster has sufficient GPU resources",
            ),
        ),
        (
            GpuAllocation(
                gpus=16, gpus_per_replica=8, replicas=2, vendor="amd", rule="over-replicas"
            ),
            SchedulableVerdict(
                schedulable=True,
                reason="Schedulable",
                message="Cluster has sufficient GPU resources",
            ),
        ),
    ],
    ids=[
        "job-pod-larger-than-any-node",
        "deployment-pod-larger-than-any-node",
        "gpus-per-replica-larger-than-any-node",
        "deployment-gpus-not-divisible",
        "deployment-fewer-gpus-than-replicas",
        "job-pod-fits",
        "deployment-pods-fit",
    ],
)
def test_one_pod_must_fit_on_the_largest_node(
    allocation: GpuAllocation, expected: SchedulableVerdict
) -> None:
    verdict = decide_schedulable(
        cluster_queue="kaiwo",
        namespace="default",
        queue_namespaces=QUEUES,
        allocation=allocation,
        stats=TWO_EIGHT_GPU_NODES,
    )
    assert verdict == expected


# ------------------------------------------------------------------ totals told (0118)

FOUR_EIGHT_GPU_NODES = GpuStats(
    vendor="amd", total_gpus=32, min_gpus_per_node=8, max_gpus_per_node=8
)


@pytest.mark.parametrize(
    ("allocation", "expected"),
    [
        (
            GpuAllocation(gpus=28, gpus_per_replica=7, replicas=4, vendor="amd", adjusted_from=30),
            SchedulableVerdict(
                schedulable=True,
                reason="GpusRoundedDown",
                message=(
                    "Cluster has sufficient GPU resources; spec.gpus (30) is rounded down to "
                    "28: the nodes' size splits it into 4 replicas of 7 GPUs, and 30 does not "
                    "divide evenly over 4; set spec.gpus to a multiple of 4, or set "
                    "spec.replicas and spec.gpusPerReplica to choose the split"
                ),
            ),
        ),
        (
            # Kept from the nodes its pods were made on (0137): a 4-GPU node joined since.
            GpuAllocation(
                gpus=28, gpus_per_replica=7, replicas=4, vendor="amd", rule="kept", adjusted_from=30
            ),
            SchedulableVerdict(
                schedulable=True,
                reason="GpusRoundedDown",
                message=(
                    "Cluster has sufficient GPU resources; spec.gpus (30) is rounded down to "
                    "28: the nodes' size when its pods were made split it into 4 replicas of 7 "
                    "GPUs, kept while they run, and 30 does not divide evenly over 4; set "
                    "spec.gpus to a multiple of 4, or set spec.replicas and spec.gpusPerReplica "
                    "to choose the split"
                ),
            ),
        ),
        (
            GpuAllocation(
                gpus=8,
                gpus_per_replica=8,
                replicas=1,
                vendor="amd",
                rule="per-replica",
                adjusted_from=16,
            ),
            SchedulableVerdict(
                schedulable=True,
                reason="GpusRecalculated",
                message=(
                    "Cluster has sufficient GPU resources; spec.gpus (16) is recalculated from "
                    "spec.replicas (1) x spec.gpusPerReplica (8): the workload holds 8 GPUs; "
                    "set spec.replicas to 2 for 16 GPUs, or leave out spec.gpus"
                ),
            ),
        ),
        (
            GpuAllocation(
                gpus=6,
                gpus_per_replica=3,
                replicas=2,
                vendor="amd",
                rule="per-replica",
                adjusted_from=8,
            ),
            SchedulableVerdict(
                schedulable=True,
                reason="GpusRecalculated",
                message=(
                    "Cluster has sufficient GPU resources; spec.gpus (8) is recalculated from "
                    "spec.replicas (2) x spec.gpusPerReplica (3): the workload holds 6 GPUs; "
                    "set spec.gpus to 6, or leave it out"
                ),
            ),
        ),
        (
            GpuAllocation(
                gpus=4,
                gpus_per_replica=4,
                replicas=1,
                vendor="amd",
                rule="one-pod-per-replica",
                adjusted_from=8,
            ),
            SchedulableVerdict(
                schedulable=True,
                reason="GpusRecalculated",
                message=(
                    "Cluster has sufficient GPU resources; spec.gpus (8) is recalculated as "
                    "spec.gpusPerReplica (4), the GPUs of the single pod of a Job "
                    "(spec.replicas is ignored for a Job): the workload holds 4 GPUs; leave "
                    "out spec.gpusPerReplica to give the pod all 8, or set ray: true to run "
                    "spec.replicas pods"
                ),
            ),
        ),
        (
            GpuAllocation(
                gpus=12,
                gpus_per_replica=12,
                replicas=1,
                vendor="amd",
                rule="one-pod-per-replica",
            ),
            SchedulableVerdict(
                schedulable=False,
                reason="InsufficientGPUsPerNode",
                message=(
                    "spec.gpusPerReplica (12) asks for 12 GPUs in the single pod of a Job, but "
                    "the largest node has 8 GPUs (vendor: amd): set ray: true to spread the "
                    "GPUs across nodes, or lower spec.gpusPerReplica"
                ),
            ),
        ),
        # A Job that runs several pods at once holds the pods' sum (decision 0147).
        (
            GpuAllocation(
                gpus=32,
                gpus_per_replica=8,
                replicas=4,
                vendor="amd",
                rule="one-pod",
                adjusted_from=8,
            ),
            SchedulableVerdict(
                schedulable=True,
                reason="GpusRecalculated",
                message=(
                    "Cluster has sufficient GPU resources; spec.gpus (8) is the GPUs of each pod "
                    "of a Job (spec.gpusPerReplica not given), and the Job runs 4 pods at once "
                    "(spec.job.spec.parallelism, no more than its completions), each with 8 "
                    "GPUs: the workload holds 32 GPUs; set spec.gpusPerReplica to 2 to share 8 "
                    "GPUs over the pods, or lower spec.job.spec.parallelism"
                ),
            ),
        ),
        (
            GpuAllocation(
                gpus=24,
                gpus_per_replica=6,
                replicas=4,
                vendor="amd",
                rule="one-pod",
                adjusted_from=6,
            ),
            SchedulableVerdict(
                schedulable=True,
                reason="GpusRecalculated",
                message=(
                    "Cluster has sufficient GPU resources; spec.gpus (6) is the GPUs of each pod "
                    "of a Job (spec.gpusPerReplica not given), and the Job runs 4 pods at once "
                    "(spec.job.spec.parallelism, no more than its completions), each with 6 "
                    "GPUs: the workload holds 24 GPUs; lower spec.job.spec.parallelism"
                ),
            ),
        ),
        (
            GpuAllocation(
                gpus=16,
                gpus_per_replica=8,
                replicas=2,
                vendor="amd",
                rule="one-pod-per-replica",
                adjusted_from=8,
            ),
            SchedulableVerdict(
                schedulable=True,
                reason="GpusRecalculated",
                message=(
                    "Cluster has sufficient GPU resources; spec.gpus (8) is recalculated from "
                    "spec.gpusPerReplica (8): the Job runs 2 pods at once "
                    "(spec.job.spec.parallelism, no more than its completions), each with 8 "
                    "GPUs: the workload holds 16 GPUs; set spec.gpus to 16, or leave it out"
                ),
            ),
        ),
        (
            # The total a Job's pods hold must fit the cluster (4 x 8 > 32 is refused)...
            GpuAllocation(gpus=40, gpus_per_replica=8, replicas=5, vendor="amd", rule="one-pod"),
            SchedulableVerdict(
                schedulable=False,
                reason="InsufficientGPUs",
                message="Cluster has 32 GPUs, but requested for 40 GPUs (vendor: amd)",
            ),
        ),
        (
            # ...and each of its pods a node.
            GpuAllocation(gpus=24, gpus_per_replica=12, replicas=2, vendor="amd", rule="one-pod"),
            SchedulableVerdict(
                schedulable=False,
                reason="InsufficientGPUsPerNode",
                message=(
                    "spec.gpus (12) asks for 12 GPUs in each of the 2 pods of a Job "
                    "(spec.job.spec.parallelism), but the largest node has 8 GPUs (vendor: "
                    "amd): set spec.gpusPerReplica to what one pod needs, or lower spec.gpus"
                ),
            ),
        ),
        (
            GpuAllocation(
                gpus=24, gpus_per_replica=12, replicas=2, vendor="amd", rule="one-pod-per-replica"
            ),
            SchedulableVerdict(
                schedulable=False,
                reason="InsufficientGPUsPerNode",
                message=(
                    "spec.gpusPerReplica (12) asks for 12 GPUs in each of the 2 pods of a Job, "
                    "but the largest node has 8 GPUs (vendor: amd): set ray: true to spread the "
                    "GPUs across nodes, or lower spec.gpusPerReplica"
                ),
            ),
        ),
        (
            # The Job runs no pod (parallelism 0): nothing held, nothing to tell.
            GpuAllocation(gpus=0, gpus_per_replica=8, replicas=0, vendor="amd", rule="one-pod"),
            SchedulableVerdict(
                schedulable=True,
                reason="Schedulable",
                message="Workload does not require GPU resources",
            ),
        ),
    ],
    ids=[
        "split-rounded-down",
        "kept-split-rounded-down",
        "recalculated-from-replicas-and-gpus-per-replica",
        "recalculated-not-a-multiple",
        "job-recalculated-from-gpus-per-replica",
        "job-gpus-per-replica-larger-than-any-node",
        "parallel-job-holds-each-pods-gpus",
        "parallel-job-gpus-not-shared-evenly",
        "parallel-job-recalculated-from-gpus-per-replica",
        "parallel-job-larger-than-the-cluster",
        "parallel-job-pod-larger-than-any-node",
        "parallel-job-gpus-per-replica-larger-than-any-node",
        "job-running-no-pod",
    ],
)
def test_a_total_other_than_spec_gpus_is_told_on_a_true_condition(
    allocation: GpuAllocation, expected: SchedulableVerdict
) -> None:
    verdict = decide_schedulable(
        cluster_queue="kaiwo",
        namespace="default",
        queue_namespaces=QUEUES,
        allocation=allocation,
        stats=FOUR_EIGHT_GPU_NODES,
    )
    assert verdict == expected


# --------------------------------------------- a workload Kueue admitted before the queue changed


@pytest.mark.parametrize(
    ("queue", "namespace", "priority", "told"),
    [
        (
            "gone",
            "research",
            NO_PRIORITY,
            "Cluster queue 'gone' is not defined in KaiwoQueueConfig 'kaiwo'",
        ),
        (
            "team-a",
            "default",
            NO_PRIORITY,
            "Cluster queue 'team-a' defines one or more namespaces, but workload namespace "
            "'default' is not one of them",
        ),
        (
            "kaiwo",
            "default",
            None,
            "spec.priorityClass 'high' names neither a Kubernetes PriorityClass nor a Kueue "
            "WorkloadPriorityClass (KaiwoQueueConfig spec.workloadPriorityClasses); the workload "
            "waits until one of that name exists",
        ),
    ],
)
def test_an_admitted_workload_runs_on_when_its_queue_or_priority_class_goes(
    queue: str, namespace: str, priority: PriorityChoice | None, told: str
) -> None:
    # An administrator removed the queue or priority class, or moved the namespace, while
    # Kueue ran the workload: it is not ERROR (it would never reach COMPLETE), and says why.
    def verdict(*, admitted: bool) -> SchedulableVerdict:
        return decide_schedulable(
            cluster_queue=queue,
            namespace=namespace,
            queue_namespaces=QUEUES,
            allocation=_alloc(8),
            stats=EIGHT_AMD,
            priority_class="high",
            priority=priority,
            admitted=admitted,
        )

    assert verdict(admitted=True) == SchedulableVerdict(
        schedulable=True,
        reason="AdmittedBeforeQueueChange",
        message=told + "; Kueue admitted the workload before this changed, so it runs on "
        "where it was admitted (it would not be admitted again as it is)",
    )
    # Not yet admitted: it waits, as before.
    assert not verdict(admitted=False).schedulable


ADMITTED_NOTE = (
    "; Kueue admitted the workload before the nodes changed, so its children are kept as they "
    "are and it goes on as far as its pods can (it would not be admitted again as it is)"
)


@pytest.mark.parametrize(
    ("allocation", "stats", "check"),
    [
        (_alloc(8), GpuStats(vendor="amd"), "Cluster has 0 GPUs (vendor: amd)"),
        (_alloc(9), EIGHT_AMD, "Cluster has 8 GPUs, but requested for 9 GPUs (vendor: amd)"),
        (
            _alloc(8),
            GpuStats(vendor="amd", total_gpus=12, min_gpus_per_node=4, max_gpus_per_node=4),
            "spec.gpus (8) asks for 8 GPUs in the single pod of a Job, but the largest node has "
            "4 GPUs (vendor: amd): set ray: true to spread the GPUs across nodes, or lower "
            "spec.gpus",
        ),
    ],
)
def test_an_admitted_workload_runs_on_when_the_nodes_no_longer_hold_it(
    allocation: GpuAllocation, stats: GpuStats, check: str
) -> None:
    # Decision 0132: a node removed or relabelled under a running workload does not make it
    # ERROR (it would never reach COMPLETE); it is told, with the check that no longer holds.
    def verdict(*, admitted: bool) -> SchedulableVerdict:
        return decide_schedulable(
            cluster_queue="gone",
            namespace="research",
            queue_namespaces=QUEUES,
            allocation=dataclasses.replace(allocation, rule="one-pod"),
            stats=stats,
            admitted=admitted,
        )

    assert verdict(admitted=True) == SchedulableVerdict(
        schedulable=True, reason="AdmittedBeforeNodeChange", message=check + ADMITTED_NOTE
    )
    # Not yet admitted: it waits in ERROR, on the queue check first, as before.
    assert verdict(admitted=False).reason == "ClusterQueueNotFound"


def test_an_admitted_workload_still_meets_the_checks_of_its_spec() -> None:
    # Only the checks that read the nodes (and the queues) are waived: gpus that do not divide
    # over a Deployment's replicas is the spec's fault, whatever Kueue admitted.
    found = decide_schedulable(
        cluster_queue="kaiwo",
        namespace="research",
        queue_namespaces=QUEUES,
        allocation=GpuAllocation(
            gpus=8,
            gpus_per_replica=2,
            replicas=4,
            vendor="amd",
            rule="over-replicas",
            adjusted_from=10,
        ),
        stats=EIGHT_AMD,
        admitted=True,
    )
    assert (found.schedulable, found.reason) == (False, "GpusNotDivisibleByReplicas")


def test_an_admitted_workload_with_its_queue_in_place_is_plainly_schedulable() -> None:
    found = decide_schedulable(
        cluster_queue="kaiwo",
        namespace="research",
        queue_namespaces=QUEUES,
        allocation=_alloc(8),
        stats=EIGHT_AMD,
        admitted=True,
    )
    assert found.reason == "Schedulable"
