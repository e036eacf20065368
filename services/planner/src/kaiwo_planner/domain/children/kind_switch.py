"""A KaiwoJob whose ``ray`` is switched while its main child runs keeps that child (decision 0247).

``spec.ray`` (or a ``spec.rayJob`` given or taken away) chooses the main child: a RayJob or a
batch Job. Switched while the child of the other kind ran, the plan made the new kind's child
and pruned the running one: the Ray cluster went down with its job (or the Job's pod was
deleted), the work started over as the other kind, ``ChildSpecApplied`` said the new child
matched the spec, and a ``ChildDeleted`` Warning blamed a deletion nobody made. A running
RayJob keeps the spec it started with (decision 0123) and a running Job its template (decision
0101); the kind of the child is kept the same way: the workload is planned as the kind that
runs, and told why. A child still waiting in its queue takes the switch (it is replaced, as
any waiting child takes an edit, decision 0129), and so does one Kueue stops and queues again.

Pure: what runs is read from the cluster state the plan is made from.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from kaiwo_contracts.crds.kaiwo_v1alpha1.kaiwojob import KaiwoJob

from kaiwo_planner.domain.children.job_changes import waits_in_its_queue
from kaiwo_planner.domain.children.naming import main_child_name
from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.status.kueue_admission import kueue_admitted

JobChildKind = Literal["Job", "RayJob"]


def running_child_of_the_other_kind(job: KaiwoJob, cluster: ClusterState) -> JobChildKind | None:
    """The kind of ``job``'s main child when it is not the kind the spec asks for now and it
    runs (Kueue let it start, or admitted it to start); None otherwise."""
    uid = job.metadata.uid
    if not uid:
        return None
    other: JobChildKind = "Job" if job.spec.is_ray_job else "RayJob"
    child = cluster.child_of(uid, kind=other, name=main_child_name(job.metadata.name or ""))
    if child is None or (child.get("metadata") or {}).get("deletionTimestamp"):
        return None
    if waits_in_its_queue(child, admitted=_admitted(child, cluster)):
        return None
    return other


def planned_as(job: KaiwoJob, kind: JobChildKind) -> KaiwoJob:
    """``job`` with the spec choosing ``kind`` for its main child, the rest as it is."""
    if kind == "RayJob":
        spec = job.spec.model_copy(update={"ray": True})
    else:
        spec = job.spec.model_copy(update={"ray": False, "ray_job": None})
    return job.model_copy(update={"spec": spec})


def kind_kept_message(kind: JobChildKind) -> str:
    """What ``ChildSpecApplied`` says while the running ``kind`` is kept against the spec."""
    asked = "a batch Job" if kind == "RayJob" else "a RayJob"
    return (
        f"Not applied to the running {kind}: spec.ray (with spec.rayJob) asks for {asked} "
        f"now, and switched while it runs the {kind} would be deleted and its work started "
        f"over as {asked}; the {kind} runs on as it started. Delete and re-create the "
        f"workload to run it as {asked}."
    )


def _admitted(child: Mapping[str, Any], cluster: ClusterState) -> bool:
    uid = (child.get("metadata") or {}).get("uid")
    workloads = cluster.kueue_workloads_for(uid) if isinstance(uid, str) and uid else ()
    return bool(workloads) and all(kueue_admitted(w.get("status") or {}) for w in workloads)
