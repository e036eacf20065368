"""Where Kueue counts a GPU workload's quota (:class:`~kaiwo_planner.domain.scheduling.
idle_preemption.QuotaScope`), read from the cluster state, pure (decisions 0236, 0260).

Quota a workload frees goes back to its own ClusterQueue and is lent only within its cohort,
so GPU idle preemption asks where both the victim and the waiting workload are counted.

* **A KaiwoJob or KaiwoService**: its queue (``spec.clusterQueue`` or the KaiwoConfig's
  default; the operator's LocalQueue carries that name) and the cohort of the observed
  ClusterQueue of that name. A Deployment-based KaiwoService none of whose pods Kueue made a
  Workload for (a namespace Kueue does not manage) holds no quota: unknown.
* **A GPU workload no Kaiwo kind owns** (decision 0047): Kueue queues it by its
  ``kueue.x-k8s.io/queue-name`` label (on the object, or on a Deployment's or StatefulSet's
  pod template, which Kueue's pod integration reads), naming a LocalQueue of its namespace;
  that LocalQueue's ``spec.clusterQueue`` is its ClusterQueue. The watcher sees every
  LocalQueue and ClusterQueue, anyone's (decision 0270); while a LocalQueue is not observed
  yet, the ClusterQueue an admitted Kueue Workload of the root names
  (``status.admission.clusterQueue``) serves.
  Without the label Kueue does not queue it: unknown, matched with anyone by vendor, as
  upstream matches every GpuWorkload (§11.4), and its GPUs are the scheduler's to give.

A ClusterQueue the planner does not observe (not made yet, or gone) has a cohort it cannot
read: a workload no Kaiwo kind owns counted there is unknown too, rather than held to a cohort
of its own that may not be so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kaiwo_contracts.crds.config_v1alpha1.kaiwoconfig import KaiwoConfig
from kaiwo_contracts.gpu_workloads import DEPLOYMENT, STATEFUL_SET, kind_of

from kaiwo_planner.domain.scheduling.gpu_allocation import wire_workload_shape
from kaiwo_planner.domain.scheduling.idle_preemption import QuotaScope
from kaiwo_planner.domain.settings.cluster_settings import workload_queue
from kaiwo_planner.domain.state.cluster import ClusterState, object_uid
from kaiwo_planner.domain.state.index_entry import KUEUE_GROUP, RUN_ID_LABEL

QUEUE_NAME_LABEL: Final = "kueue.x-k8s.io/queue-name"


def cohorts_of(cluster: ClusterState) -> dict[str, str]:
    """The cohort tree of each observed ClusterQueue by name ("" for none), named by its root.

    A ClusterQueue's cohort is ``spec.cohort`` as the watcher reads ClusterQueues (v1beta1),
    ``spec.cohortName`` as v1beta2 calls it. Kueue lends unused quota across a whole cohort
    tree (a Cohort object's ``spec.parentName``), so two queues whose cohorts have one root
    share (decision 0271); a cohort no Cohort object names a parent for is its own root."""
    parents = cohort_parents(cluster)
    found: dict[str, str] = {}
    for queue in cluster.objects_of_kind(group=KUEUE_GROUP, kind="ClusterQueue"):
        spec = queue.get("spec")
        name = (queue.get("metadata") or {}).get("name")
        if isinstance(spec, Mapping) and isinstance(name, str):
            cohort = spec.get("cohort") or spec.get("cohortName") or ""
            found[name] = cohort_root(cohort, parents) if isinstance(cohort, str) else ""
    return found


def cohort_parents(cluster: ClusterState) -> dict[str, str]:
    """Each observed Cohort's ``spec.parentName`` by its name (only those that name one)."""
    parents: dict[str, str] = {}
    for cohort in cluster.objects_of_kind(group=KUEUE_GROUP, kind="Cohort"):
        name = _text(_mapping(cohort.get("metadata")).get("name"))
        parent = _text(_mapping(cohort.get("spec")).get("parentName"))
        if name and parent:
            parents[name] = parent
    return parents


def cohort_root(cohort: str, parents: Mapping[str, str]) -> str:
    """The root of ``cohort``'s tree. Kueue refuses a cycle of parents (it deactivates the
    queues in it); one met here is named by its smallest member, whichever cohort the walk
    starts from, so the cycle's queues still share with each other."""
    seen: list[str] = []
    while cohort and cohort not in seen:
        seen.append(cohort)
        cohort = parents.get(cohort, "")
    if cohort:  # a cycle: one name for all of it
        return min(seen[seen.index(cohort) :])
    return seen[-1] if seen else ""


def kaiwo_quota_scope(
    obj: Mapping[str, Any], cluster: ClusterState, config: KaiwoConfig, cohorts: Mapping[str, str]
) -> QuotaScope | None:
    """Where Kueue counts the Kaiwo workload's GPUs (module docstring). Its Job, RayJob or
    AppWrapper carries the queue label, so Kueue queues it in any namespace; a Deployment's
    pods only where Kueue manages the namespace, seen by the Workloads Kueue made for them."""
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return None
    if wire_workload_shape(str(obj.get("kind") or ""), spec) == "deployment":
        pods = cluster.objects_labelled(RUN_ID_LABEL, object_uid(obj), kind="Pod")
        if not any(cluster.kueue_workloads_for(object_uid(pod)) for pod in pods):
            return None
    queue = workload_queue(spec, config)
    return QuotaScope(cluster_queue=queue, cohort=cohorts.get(queue, ""))


def foreign_quota_scope(
    root: Mapping[str, Any], cluster: ClusterState, cohorts: Mapping[str, str]
) -> QuotaScope | None:
    """Where Kueue counts the GPUs of a workload no Kaiwo kind owns; None when Kueue does not
    queue it or the planner cannot tell (module docstring)."""
    local_queue = queue_name_of(root)
    if not local_queue:
        return None
    namespace = str((root.get("metadata") or {}).get("namespace") or "")
    found = cluster.find_object(
        group=KUEUE_GROUP, kind="LocalQueue", name=local_queue, namespace=namespace
    )
    cluster_queue = _text(_mapping(_mapping(found).get("spec")).get("clusterQueue"))
    if not cluster_queue:
        cluster_queue = _admitted_cluster_queue(root, cluster)
    if not cluster_queue or cluster_queue not in cohorts:
        return None
    return QuotaScope(cluster_queue=cluster_queue, cohort=cohorts[cluster_queue])


def queue_name_of(root: Mapping[str, Any]) -> str:
    """The LocalQueue Kueue queues ``root`` in: its ``kueue.x-k8s.io/queue-name`` label, or a
    Deployment's or StatefulSet's pod template's ("" for none)."""
    own = _text(_mapping(_mapping(root.get("metadata")).get("labels")).get(QUEUE_NAME_LABEL))
    if own or kind_of(root) not in (DEPLOYMENT, STATEFUL_SET):
        return own
    template = _mapping(_mapping(root.get("spec")).get("template"))
    return _text(_mapping(_mapping(template.get("metadata")).get("labels")).get(QUEUE_NAME_LABEL))


def _admitted_cluster_queue(root: Mapping[str, Any], cluster: ClusterState) -> str:
    for workload in cluster.kueue_workloads_for(object_uid(root)):
        admission = _mapping(_mapping(workload.get("status")).get("admission"))
        if found := _text(admission.get("clusterQueue")):
            return found
    return ""


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
