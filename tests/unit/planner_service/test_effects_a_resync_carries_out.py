"""A resync publishes again a plan whose effects beyond children and status the cluster does
not show (decisions 0250 and 0263).

The executor dead-letters a plan whose API calls kept failing through every delivery (the API
server away for longer than the retries). Decision 0234 had a resync make good its children
and its status; its other effects were lost for good while nothing about the owner changed:
the next plan is the same decision, so it was not news. Here each plan of the owner is taken
as dead-lettered (nothing it asks is observed done), then the cluster is made to show it, and
the resync after that publishes nothing.

The plan function is scripted (what a real planner asks, reduced to the one effect under
test), so the planner service alone decides what is published.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import pytest
from kaiwo_contracts.events.envelope import Envelope
from kaiwo_contracts.events.plans import PlanDecidedV1
from kaiwo_contracts.gpu_workloads import gpu_workload_name
from kaiwo_contracts.plans import FinalizerRelease, ObjectRef, Plan, PruneRule, ScaleIntent
from kaiwo_planner.domain.gpu_root_preemption import preempt_intent, still_holds
from kaiwo_planner.domain.planning import PlanningResult
from kaiwo_planner.domain.state.planning_context import PlanningContext

KAIWO = "kaiwo.silogen.ai/v1alpha1"
OWNER_UID_LABEL = "kaiwo.silogen.ai/owner-uid"
CACHE_EVICTION = "kubeai.org/cache-eviction"
FEATURE_LABEL = "features.kubeai.org/TextGeneration"
DELETING = "2026-03-01T12:00:30Z"
PREEMPTING = {"phase": "Preempting", "verdict": "idle for 30m; preempted for team-a/waits"}


def controller(owner: Mapping[str, Any]) -> dict[str, Any]:
    meta = owner["metadata"]
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
    }


def child(
    owner: Mapping[str, Any], api_version: str, kind: str, name: str, **metadata: Any
) -> dict[str, Any]:
    """A child of ``owner`` as the planner wants it and the cluster reports it: the
    inventory label and the owner as its controller."""
    meta = owner["metadata"]
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": meta.get("namespace"),
            "labels": {OWNER_UID_LABEL: meta["uid"]},
            "ownerReferences": [controller(owner)],
            **metadata,
        },
    }


def scripted(
    *, owner: Mapping[str, Any], context: PlanningContext, now: datetime
) -> PlanningResult:
    """A KaiwoJob wants its Job, and its ConfigMap while ``spec.config`` says so (both
    pruned otherwise); a Model carries the cache finalizer and its feature label, its Pod
    ``spec.replace`` names is deleted (a rollout), and it is scaled as the autoscaler's
    decision ``spec.decided`` says while its replicas are those the decision started from
    (``autoscaling.scale_intent``); a GpuWorkload whose workload is being preempted
    (``Preempting``) preempts it while it still holds (``gpu_workload_plan._preempting``),
    one without a workload is deleted (its TTL); a KaiwoQueueConfig's ResourceFlavor being
    replaced is deleted and has Kueue's finalizer released."""
    meta = owner["metadata"]
    uid = meta["uid"]
    ref = ObjectRef.of(owner)
    selector = {OWNER_UID_LABEL: uid}
    spec = owner.get("spec") or {}
    if owner["kind"] in ("Pod", "Deployment"):  # the workloads preempted: not planned here
        return PlanningResult(plan=None)
    if owner["kind"] == "KaiwoJob":
        desired = [child(owner, "batch/v1", "Job", meta["name"])]
        if spec.get("config"):
            desired.append(child(owner, "v1", "ConfigMap", f"{meta['name']}-config"))
        plan = Plan(
            owner=ref,
            desired=tuple(desired),
            prune=(
                PruneRule(api_version="batch/v1", kind="Job"),
                PruneRule(api_version="v1", kind="ConfigMap"),
            ),
            prune_selector=selector,
        )
    elif owner["kind"] == "Model":
        replaced = spec.get("replace")
        decided = spec.get("decided") or {}
        replicas = spec.get("replicas") or 0
        scale = (
            ScaleIntent(target=ref, replicas=decided["to"], from_replicas=replicas)
            if decided and replicas == decided["from"] != decided["to"]
            else None
        )
        plan = Plan(
            observed_generation=meta["generation"],
            owner=ref,
            prune_selector=selector,
            finalizers=(CACHE_EVICTION,),
            owner_labels={FEATURE_LABEL: "true"},
            delete=(
                (
                    ObjectRef(
                        api_version="v1",
                        kind="Pod",
                        name=replaced,
                        namespace="team-a",
                        uid=f"uid-{replaced}",
                    ),
                )
                if replaced
                else ()
            ),
            scale=scale,
        )
    elif owner["kind"] == "GpuWorkload" and "workloadUid" in spec:
        root = context.cluster.by_uid(spec["workloadUid"])
        holds = root is not None and still_holds(root)
        plan = Plan(
            owner=ref,
            status=owner.get("status"),
            preempt=preempt_intent(root) if root is not None and holds else None,
        )
    elif owner["kind"] == "GpuWorkload":
        plan = Plan(owner=ref, delete_owner=True)
    else:
        flavor = ObjectRef(
            api_version="kueue.x-k8s.io/v1beta1",
            kind="ResourceFlavor",
            name="old",
            uid="uid-old-flavor",
        )
        plan = Plan(
            owner=ref,
            prune_selector=selector,
            delete=(flavor,),
            release_finalizers=(
                FinalizerRelease(target=flavor, finalizers=("kueue.x-k8s.io/resource-in-use",)),
            ),
        )
    return PlanningResult(plan=plan)


def owner(kind: str, name: str, **spec: Any) -> dict[str, Any]:
    api_version = {"Model": "kubeai.org/v1"}.get(kind, KAIWO)
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name, "namespace": "team-a", "uid": f"uid-{name}", "generation": 1},
        "spec": spec,
    }


def with_metadata(obj: Mapping[str, Any], **metadata: Any) -> dict[str, Any]:
    return {**obj, "metadata": {**obj["metadata"], **metadata}}


def with_spec(obj: Mapping[str, Any], **spec: Any) -> dict[str, Any]:
    return {**obj, "spec": {**obj["spec"], **spec}}


def workload(kind: str, name: str, **spec: Any) -> dict[str, Any]:
    """A workload asking for a GPU that no Kaiwo kind owns: a GpuWorkload's plan may
    preempt it, and its changes replan that GpuWorkload."""
    pod_spec = {"containers": [{"name": "main", "resources": {"limits": {"amd.com/gpu": 1}}}]}
    if kind == "Deployment":
        spec = {"template": {"spec": pod_spec}, **spec}
    else:
        spec = {**pod_spec, **spec}
    return {
        "apiVersion": {"Deployment": "apps/v1"}.get(kind, "v1"),
        "kind": kind,
        "metadata": {"name": name, "namespace": "team-a", "uid": f"uid-{name}"},
        "spec": spec,
    }


def preempting(victim: Mapping[str, Any]) -> dict[str, Any]:
    """The GpuWorkload of ``victim`` once its status saying why it is preempted is written."""
    meta = victim["metadata"]
    name = gpu_workload_name(kind=victim["kind"], name=meta["name"], uid=meta["uid"])
    return {**owner("GpuWorkload", name, workloadUid=meta["uid"]), "status": dict(PREEMPTING)}


def plans_of(harness: Any, name: str) -> list[Envelope[PlanDecidedV1]]:
    subjects = {f"team-a/{name}", name}  # namespaced, cluster-scoped
    return [plan for plan in harness.plans() if plan.subject in subjects]


async def resync_publishes(harness: Any, service: Any, clock: Any, name: str) -> list[str]:
    """The triggers of the plans of ``name`` the next resync publishes."""
    await harness.drain(service)
    before = len(plans_of(harness, name))
    clock.advance(600)
    await service.resync()
    return [plan.data.trigger for plan in plans_of(harness, name)[before:]]


@pytest.fixture
async def service(harness: Any) -> Any:
    started = harness.service(plan_fn=scripted, resync_on_start=False, resync_every_seconds=0)
    await started.start()
    return started


async def test_a_child_the_plan_no_longer_wants_is_pruned_by_the_next_resync(
    harness: Any, service: Any, clock: Any
) -> None:
    job = owner("KaiwoJob", "train", config=True)
    await harness.observe(job, "1", "ADDED")
    await harness.observe(child(job, "batch/v1", "Job", "train", uid="uid-job"), "2", "ADDED")
    config_map = child(job, "v1", "ConfigMap", "train-config", uid="uid-cm")
    await harness.observe(config_map, "3", "ADDED")
    # The ConfigMap is no longer wanted; the plan that prunes it is dead-lettered.
    await harness.observe(with_metadata(owner("KaiwoJob", "train"), generation=2), "4")
    await harness.drain(service)
    assert plans_of(harness, "train")[-1].data.plan.desired[0]["kind"] == "Job"

    assert await resync_publishes(harness, service, clock, "train") == ["resync"]
    # Deleting: a finalizer holds it, so the prune was carried out.
    await harness.observe(with_metadata(config_map, deletionTimestamp=DELETING), "5")
    assert await resync_publishes(harness, service, clock, "train") == []
    await harness.observe(config_map, "6", "DELETED")
    assert await resync_publishes(harness, service, clock, "train") == []


async def test_a_child_not_controlled_by_the_owner_is_not_the_resyncs_to_prune(
    harness: Any, service: Any, clock: Any
) -> None:
    """Carrying the owner's label is not enough: the executor prunes only what the owner
    controls, so a resync publishing for it would publish at every resync for nothing."""
    job = owner("KaiwoJob", "train")
    await harness.observe(job, "1", "ADDED")
    await harness.observe(child(job, "batch/v1", "Job", "train", uid="uid-job"), "2", "ADDED")
    someone_elses = child(job, "v1", "ConfigMap", "copied", uid="uid-copied")
    someone_elses["metadata"]["ownerReferences"] = [{**controller(job), "controller": False}]
    await harness.observe(someone_elses, "3", "ADDED")
    assert await resync_publishes(harness, service, clock, "train") == []


async def test_the_owners_finalizer_and_label_are_written_by_the_next_resync(
    harness: Any, service: Any, clock: Any
) -> None:
    model = owner("Model", "llama")
    await harness.observe(model, "1", "ADDED")
    await harness.drain(service)
    [first] = plans_of(harness, "llama")
    assert first.data.plan.finalizers == (CACHE_EVICTION,)

    assert await resync_publishes(harness, service, clock, "llama") == ["resync"]
    with_finalizer = with_metadata(model, finalizers=[CACHE_EVICTION])
    await harness.observe(with_finalizer, "2")
    # The label is still missing.
    assert await resync_publishes(harness, service, clock, "llama") == ["resync"]
    settled = with_metadata(with_finalizer, labels={FEATURE_LABEL: "true", "team": "nlp"})
    await harness.observe(settled, "3")
    assert await resync_publishes(harness, service, clock, "llama") == []
    # A label of the operator's the plan does not name is taken off as well.
    stray = with_metadata(settled, labels={FEATURE_LABEL: "true", "features.kubeai.org/X": "true"})
    await harness.observe(stray, "4")
    assert await resync_publishes(harness, service, clock, "llama") == ["resync"]


async def test_a_child_the_plan_deletes_by_uid_is_deleted_by_the_next_resync(
    harness: Any, service: Any, clock: Any
) -> None:
    model = with_metadata(
        owner("Model", "llama", replace="llama-0"),
        finalizers=[CACHE_EVICTION],
        labels={FEATURE_LABEL: "true"},
    )
    await harness.observe(model, "1", "ADDED")
    pod = child(model, "v1", "Pod", "llama-0", uid="uid-llama-0")
    await harness.observe(pod, "2", "ADDED")
    await harness.drain(service)

    assert await resync_publishes(harness, service, clock, "llama") == ["resync"]
    await harness.observe(with_metadata(pod, deletionTimestamp=DELETING), "3")
    assert await resync_publishes(harness, service, clock, "llama") == []


async def test_a_kueue_finalizer_the_plan_releases_is_released_by_the_next_resync(
    harness: Any, service: Any, clock: Any
) -> None:
    queues = {
        "apiVersion": KAIWO,
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": "kaiwo", "uid": "uid-kaiwo", "generation": 1},
        "spec": {},
    }
    await harness.observe(queues, "1", "ADDED")
    flavor = child(queues, "kueue.x-k8s.io/v1beta1", "ResourceFlavor", "old", uid="uid-old-flavor")
    held = with_metadata(
        flavor, deletionTimestamp=DELETING, finalizers=["kueue.x-k8s.io/resource-in-use"]
    )
    await harness.observe(held, "2", "ADDED")
    await harness.drain(service)

    assert await resync_publishes(harness, service, clock, "kaiwo") == ["resync"]
    await harness.observe(held, "3", "DELETED")
    assert await resync_publishes(harness, service, clock, "kaiwo") == []


async def test_an_owner_the_plan_deletes_is_deleted_by_the_next_resync(
    harness: Any, service: Any, clock: Any
) -> None:
    record = owner("GpuWorkload", "gone-pod")
    await harness.observe(record, "1", "ADDED")
    await harness.drain(service)
    [first] = plans_of(harness, "gone-pod")
    assert first.data.plan.delete_owner

    assert await resync_publishes(harness, service, clock, "gone-pod") == ["resync"]
    # Deleted, held by someone else's finalizer: nothing left to do.
    await harness.observe(
        with_metadata(record, deletionTimestamp=DELETING, finalizers=["example.com/audit"]), "2"
    )
    assert await resync_publishes(harness, service, clock, "gone-pod") == []


async def test_a_scale_the_executor_gave_up_on_is_made_by_the_next_resync(
    harness: Any, service: Any, clock: Any
) -> None:
    """An autoscaled Model whose scale-up was dead-lettered stayed at its old replicas."""
    model = with_metadata(
        owner("Model", "llama", replicas=1, decided={"from": 1, "to": 3}),
        finalizers=[CACHE_EVICTION],
        labels={FEATURE_LABEL: "true"},
    )
    await harness.observe(model, "1", "ADDED")
    await harness.drain(service)
    [first] = plans_of(harness, "llama")
    assert first.data.plan.scale is not None
    assert (first.data.plan.scale.from_replicas, first.data.plan.scale.replicas) == (1, 3)

    assert await resync_publishes(harness, service, clock, "llama") == ["resync"]
    # Scaled: its spec, so its generation, moved on.
    await harness.observe(with_metadata(with_spec(model, replicas=3), generation=2), "2")
    assert await resync_publishes(harness, service, clock, "llama") == []


async def test_a_preemption_the_executor_gave_up_on_is_made_by_the_next_resync(
    harness: Any, service: Any, clock: Any
) -> None:
    """Its status written, the deletion of an idle Pod dead-lettered: the Pod kept its GPUs
    and the workload waiting for them kept waiting."""
    pod = workload("Pod", "idle")
    record = preempting(pod)
    await harness.observe(pod, "1", "ADDED")
    await harness.observe(record, "2", "ADDED")
    await harness.drain(service)
    [first] = plans_of(harness, record["metadata"]["name"])
    assert first.data.plan.preempt is not None
    assert first.data.plan.preempt.action == "delete"

    assert await resync_publishes(harness, service, clock, record["metadata"]["name"]) == ["resync"]
    # Deleted, in its grace period: being stopped, nothing left to do.
    await harness.observe(with_metadata(pod, deletionTimestamp=DELETING), "3")
    assert await resync_publishes(harness, service, clock, record["metadata"]["name"]) == []


async def test_a_scale_to_zero_the_executor_gave_up_on_is_made_by_the_next_resync(
    harness: Any, service: Any, clock: Any
) -> None:
    deployment = workload("Deployment", "idle-server", replicas=2)
    record = preempting(deployment)
    name = record["metadata"]["name"]
    await harness.observe(deployment, "1", "ADDED")
    await harness.observe(record, "2", "ADDED")
    await harness.drain(service)
    [first] = plans_of(harness, name)
    assert first.data.plan.preempt is not None
    assert (first.data.plan.preempt.action, first.data.plan.preempt.from_replicas) == (
        "scale-to-zero",
        2,
    )

    assert await resync_publishes(harness, service, clock, name) == ["resync"]
    await harness.observe(with_spec(deployment, replicas=0), "3")
    assert await resync_publishes(harness, service, clock, name) == []


async def test_a_settled_cluster_gets_no_plan_at_a_resync(
    harness: Any, service: Any, clock: Any
) -> None:
    job = owner("KaiwoJob", "train", config=True)
    # Scaled as the autoscaler decided; a preempted Pod in its grace period.
    model = with_metadata(
        owner("Model", "llama", replicas=3, decided={"from": 1, "to": 3}),
        finalizers=[CACHE_EVICTION],
        labels={FEATURE_LABEL: "true"},
        generation=2,
    )
    stopping = with_metadata(workload("Pod", "idle"), deletionTimestamp=DELETING)
    await harness.observe(job, "1", "ADDED")
    await harness.observe(child(job, "batch/v1", "Job", "train", uid="uid-job"), "2", "ADDED")
    await harness.observe(child(job, "v1", "ConfigMap", "train-config", uid="uid-cm"), "3", "ADDED")
    await harness.observe(model, "4", "ADDED")
    await harness.observe(stopping, "5", "ADDED")
    await harness.observe(preempting(stopping), "6", "ADDED")
    await harness.drain(service)
    published = len(harness.plans())
    assert published == 3  # one per owner, when first observed
    assert harness.plans()[-1].data.plan.preempt is not None  # asked until the Pod is gone

    for _ in range(3):
        clock.advance(600)
        await service.resync()
    assert len(harness.plans()) == published
