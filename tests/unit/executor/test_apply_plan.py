"""PlanExecutor against the fake API server through the real kubernetes_asyncio adapter."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from kaiwo_contracts.crds.config_v1alpha1 import KaiwoConfig
from kaiwo_contracts.crds.schema import custom_resource_definition
from kaiwo_contracts.events.plans import PlanDecidedV1
from kaiwo_contracts.plans import EventIntent, ObjectRef, Plan, PruneRule
from kaiwo_kube import Conflict, Retryable

JOBS = ("batch", "jobs", "team-a", "train")
PVCS = ("", "persistentvolumeclaims", "team-a", "train-data")
CONFIG_MAPS = ("", "configmaps", "team-a", "train-entrypoint")
OWNER_STATUS = ("kaiwo.silogen.ai", "kaiwojobs", "team-a", "train")


def new_writes(before: Counter[Any], after: Counter[Any]) -> dict[Any, int]:
    return {key: after[key] - before[key] for key in after if after[key] != before[key]}


def managers(obj: dict[str, Any]) -> list[tuple[str, str, str]]:
    return sorted(
        (entry["manager"], entry["operation"], entry.get("subresource", ""))
        for entry in obj["metadata"].get("managedFields") or []
    )


def outcomes(execution: Any) -> list[tuple[str, str, str]]:
    return [(a.operation, a.target.display(), a.outcome) for a in execution.actions]


async def test_a_plan_creates_its_children_with_field_manager_kaiwo_and_owner_references(
    harness: Any,
) -> None:
    plan = harness.plan([harness.job(), harness.pvc(), harness.config_map()])

    execution = await harness.run(plan, plan_id="plan-1")

    # The plan's order: apiVersion, kind, namespace, name ("batch/v1" sorts before "v1").
    assert outcomes(execution) == [
        ("apply", "Job/team-a/train", "applied"),
        ("apply", "ConfigMap/team-a/train-entrypoint", "applied"),
        ("apply", "PersistentVolumeClaim/team-a/train-data", "applied"),
    ]
    for api_version, kind, name in (
        ("batch/v1", "Job", "train"),
        ("v1", "PersistentVolumeClaim", "train-data"),
        ("v1", "ConfigMap", "train-entrypoint"),
    ):
        stored = harness.find(api_version, kind, name)
        assert stored is not None, f"{kind} {name} was not created"
        assert managers(stored) == [("kaiwo", "Apply", "")]
        assert [ref["uid"] for ref in stored["metadata"]["ownerReferences"]] == [harness.owner.uid]
        assert stored["metadata"]["labels"] == {harness.inventory_label: harness.owner.uid}
    job = harness.find("batch/v1", "Job", "train")
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox:1.36"
    assert not execution.must_retry


async def test_the_same_plan_again_makes_no_write_request(harness: Any) -> None:
    plan = harness.plan(
        [harness.job(), harness.pvc(), harness.config_map()],
        status={"status": "PENDING"},
        events=(EventIntent(type="Normal", reason="WorkloadPending", message="Waiting"),),
    )
    await harness.run(plan, plan_id="plan-1")
    before = harness.writes()

    # The same decision under a new id (the planner re-published it), then the same id again.
    again = await harness.run(plan, plan_id="plan-2")
    redelivered = await harness.run(plan, plan_id="plan-2")

    assert new_writes(before, harness.writes()) == {}
    assert {a.outcome for a in again.actions} == {"unchanged"}
    assert len(again.actions) == 5  # three objects, the status, the event
    assert redelivered.skipped
    assert redelivered.actions == ()


async def test_a_changed_plan_writes_only_the_changed_object(harness: Any) -> None:
    await harness.run(
        harness.plan([harness.job(), harness.pvc(), harness.config_map()]), plan_id="plan-1"
    )
    before = harness.writes()

    changed = harness.plan(
        [harness.job(), harness.pvc(), harness.config_map(entrypoint="python train.py --lr 3e-4")]
    )
    execution = await harness.run(changed, plan_id="plan-2")

    assert new_writes(before, harness.writes()) == {CONFIG_MAPS: 1}
    assert outcomes(execution) == [
        ("apply", "Job/team-a/train", "unchanged"),
        ("apply", "ConfigMap/team-a/train-entrypoint", "applied"),
        ("apply", "PersistentVolumeClaim/team-a/train-data", "unchanged"),
    ]
    stored = harness.find("v1", "ConfigMap", "train-entrypoint")
    assert stored["data"] == {"entrypoint.sh": "python train.py --lr 3e-4"}


async def test_a_child_no_longer_desired_is_deleted_and_other_owners_children_stay(
    harness: Any,
) -> None:
    config_maps = harness.served("v1", "ConfigMap")
    other_uid = "5d0c7a8e-1111-4c2b-9d7e-000000000002"
    harness.fake.store.put(
        config_maps,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": harness.child_metadata("other-entrypoint", owner_uid=other_uid),
            "data": {"entrypoint.sh": "echo other"},
        },
    )
    harness.fake.store.put(
        config_maps,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "unlabelled", "namespace": "team-a"},
            "data": {},
        },
    )
    await harness.run(harness.plan([harness.job(), harness.config_map()]), plan_id="plan-1")

    execution = await harness.run(harness.plan([harness.job()]), plan_id="plan-2")

    assert harness.find("v1", "ConfigMap", "train-entrypoint") is None
    assert harness.find("v1", "ConfigMap", "other-entrypoint") is not None
    assert harness.find("v1", "ConfigMap", "unlabelled") is not None
    assert harness.find("batch/v1", "Job", "train") is not None
    assert outcomes(execution) == [
        ("apply", "Job/team-a/train", "unchanged"),
        ("delete", "ConfigMap/team-a/train-entrypoint", "deleted"),
    ]


async def test_a_plan_without_prune_selector_deletes_nothing(harness: Any) -> None:
    await harness.run(harness.plan([harness.job(), harness.config_map()]), plan_id="plan-1")
    plan = harness.plan([harness.job()]).model_copy(update={"prune_selector": {}})

    await harness.run(plan, plan_id="plan-2")

    assert harness.find("v1", "ConfigMap", "train-entrypoint") is not None


async def test_a_child_deleted_by_hand_comes_back_when_the_plan_names_it_absent(
    harness: Any,
) -> None:
    plan = harness.plan([harness.job(), harness.config_map()])
    await harness.run(plan, plan_id="plan-1")
    harness.fake.store.delete(harness.served("batch/v1", "Job"), namespace="team-a", name="train")

    # Without `absent` the memo says "applied already": the executor trusts the planner.
    await harness.run(plan, plan_id="plan-2")
    assert harness.find("batch/v1", "Job", "train") is None

    job_ref = ObjectRef(api_version="batch/v1", kind="Job", name="train", namespace="team-a")
    execution = await harness.run(plan, plan_id="plan-3", absent=(job_ref,))

    assert harness.find("batch/v1", "Job", "train") is not None
    assert outcomes(execution) == [
        ("apply", "Job/team-a/train", "applied"),
        ("apply", "ConfigMap/team-a/train-entrypoint", "unchanged"),
    ]


async def test_a_child_changed_by_hand_is_applied_again_when_the_plan_names_it_drifted(
    harness: Any,
) -> None:
    plan = harness.plan([harness.job(), harness.config_map()])
    await harness.run(plan, plan_id="plan-1")
    config_maps = harness.served("v1", "ConfigMap")
    edited = harness.fake.store.get(config_maps, namespace="team-a", name="train-entrypoint")
    harness.fake.store.put(config_maps, {**edited, "data": {"entrypoint.sh": "rm -rf /data"}})

    cm_ref = ObjectRef(
        api_version="v1", kind="ConfigMap", name="train-entrypoint", namespace="team-a"
    )
    execution = await harness.run(plan, plan_id="plan-2", drifted=(cm_ref,))

    restored = harness.find("v1", "ConfigMap", "train-entrypoint")
    assert restored is not None
    assert restored["data"] == harness.config_map()["data"]
    assert outcomes(execution) == [
        ("apply", "Job/team-a/train", "unchanged"),
        ("apply", "ConfigMap/team-a/train-entrypoint", "applied"),
    ]


async def test_status_goes_through_the_status_subresource_and_only_when_it_changed(
    harness: Any,
) -> None:
    running = {"status": "RUNNING", "observedGeneration": 1}
    await harness.run(harness.plan([harness.job()], status=running), plan_id="plan-1")

    owner = harness.find("kaiwo.silogen.ai/v1alpha1", "KaiwoJob", "train")
    assert owner["status"] == {"status": "RUNNING", "observedGeneration": 1}
    assert ("kaiwo-status", "Apply", "status") in managers(owner)
    assert owner["spec"] == {"image": "busybox:1.36"}

    before = harness.writes()
    await harness.run(harness.plan([harness.job()], status=running), plan_id="plan-2")
    assert new_writes(before, harness.writes()) == {}

    complete = {"status": "COMPLETE", "observedGeneration": 1}
    execution = await harness.run(harness.plan([harness.job()], status=complete), plan_id="plan-3")
    assert new_writes(before, harness.writes()) == {OWNER_STATUS: 1}
    assert harness.find("kaiwo.silogen.ai/v1alpha1", "KaiwoJob", "train")["status"] == complete
    assert ("status", "KaiwoJob/team-a/train", "applied") in outcomes(execution)


async def test_events_are_created_once_also_across_a_restart(harness: Any) -> None:
    intent = EventIntent(type="Normal", reason="WorkloadStarting", message="Workload is starting")
    plan = harness.plan([harness.job()], events=(intent,))

    await harness.run(plan, plan_id="plan-1")
    # A restarted executor: new instance, the same bucket; the plan re-published.
    await harness.run(plan, plan_id="plan-2", executor=harness.executor())
    # The memo lost entirely: the deterministic Event name still prevents a copy.
    fresh = harness.executor(kv=type(harness.kv)())
    execution = await harness.run(plan, plan_id="plan-1", executor=fresh)

    events = harness.events(reason="WorkloadStarting")
    assert len(events) == 1
    event = events[0]
    assert event["type"] == "Normal"
    assert event["message"] == "Workload is starting"
    assert event["involvedObject"]["uid"] == harness.owner.uid
    assert event["involvedObject"]["kind"] == "KaiwoJob"
    assert event["metadata"]["namespace"] == "team-a"
    assert event["source"] == {"component": "kaiwo-executor"}
    assert [a.outcome for a in execution.actions if a.operation == "event"] == ["unchanged"]


async def test_conflict_too_many_requests_and_server_errors_are_retried(
    harness: Any, flaky: Any
) -> None:
    flaky.fail(
        "apply",
        Conflict("the object has been modified", code=409, reason="Conflict"),
        Retryable("too many requests", code=429, reason="TooManyRequests", retry_after=0.7),
        Retryable("etcd timeout", code=500, reason="InternalError"),
    )
    executor = harness.executor(kube=flaky, attempts=4)

    execution = await harness.run(
        harness.plan([harness.job(), harness.config_map()]), plan_id="plan-1", executor=executor
    )

    assert outcomes(execution) == [
        ("apply", "Job/team-a/train", "applied"),
        ("apply", "ConfigMap/team-a/train-entrypoint", "applied"),
    ]
    assert [a.attempts for a in execution.actions] == [4, 1]
    assert harness.find("v1", "ConfigMap", "train-entrypoint") is not None
    # Equal jitter at 0.5: 3/4 of 0.1, 0.2 (raised to the server's 0.7), 0.4.
    assert harness.sleeps == pytest.approx([0.075, 0.7, 0.3])
    retries = harness.metrics.api_retries
    assert [retries.labels(code=c)._value.get() for c in ("409", "429", "500")] == [1, 1, 1]
    assert not execution.must_retry


async def test_retries_running_out_fail_the_action_and_ask_for_redelivery(
    harness: Any, flaky: Any
) -> None:
    flaky.fail("apply", *[Retryable("unavailable", code=503) for _ in range(3)])
    executor = harness.executor(kube=flaky, attempts=3)
    plan = harness.plan([harness.job(), harness.config_map()])

    execution = await harness.run(plan, plan_id="plan-1", executor=executor)

    assert execution.must_retry
    failed = execution.failed
    assert [(a.target.display(), a.http_status, a.attempts) for a in failed] == [
        ("Job/team-a/train", 503, 3)
    ]
    assert failed[0].reason == "gave up after 3 attempts: unavailable"
    assert harness.find("v1", "ConfigMap", "train-entrypoint") is not None
    assert harness.events(reason="ApplyFailed") == []

    # The redelivery writes only what failed.
    before = harness.writes()
    again = await harness.run(plan, plan_id="plan-1", executor=executor)
    assert new_writes(before, harness.writes()) == {JOBS: 1}
    assert not again.must_retry


async def test_an_invalid_object_fails_with_a_warning_event_and_the_rest_is_applied(
    harness: Any,
) -> None:
    bad = harness.config_map()
    bad["metadata"]["name"] = "Train_Entrypoint"

    execution = await harness.run(harness.plan([harness.job(), bad]), plan_id="plan-1")

    assert harness.find("batch/v1", "Job", "train") is not None
    failed = execution.failed
    assert [(a.operation, a.target.display(), a.http_status) for a in failed] == [
        ("apply", "ConfigMap/team-a/Train_Entrypoint", 422)
    ]
    assert "metadata.name" in failed[0].reason
    assert not execution.must_retry
    warnings = harness.events(reason="ApplyFailed")
    assert len(warnings) == 1
    assert warnings[0]["type"] == "Warning"
    assert warnings[0]["message"].startswith("apply ConfigMap/team-a/Train_Entrypoint failed: ")
    assert warnings[0]["involvedObject"]["name"] == "train"

    # Carried out again (a redelivery), the warning is not repeated.
    await harness.run(harness.plan([harness.job(), bad]), plan_id="plan-2")
    assert len(harness.events(reason="ApplyFailed")) == 1


async def test_a_node_intent_is_merge_patched_and_keeps_the_nodes_own_taints(
    harness: Any,
) -> None:
    nodes = harness.served("v1", "Node")
    unreachable = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute"}
    harness.fake.store.put(
        nodes,
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "gpu-1", "labels": {"kubernetes.io/hostname": "gpu-1"}},
            "spec": {"taints": [unreachable]},
        },
    )
    gpu_taint = {"key": "kaiwo.silogen.ai/gpu", "value": "true", "effect": "NoSchedule"}
    # The planner saw the node before it became unreachable: its partial lacks that taint.
    intent = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "gpu-1", "labels": {"kaiwo/nodepool": "amd-mi300x-8gpu"}},
        "spec": {"taints": [gpu_taint]},
    }
    plan = harness.plan([intent], prune=())

    execution = await harness.run(plan, plan_id="plan-1")

    node = harness.find("v1", "Node", "gpu-1", namespace=None)
    assert node["spec"]["taints"] == [unreachable, gpu_taint]
    assert node["metadata"]["labels"] == {
        "kubernetes.io/hostname": "gpu-1",
        "kaiwo/nodepool": "amd-mi300x-8gpu",
    }
    assert managers(node) == [("kaiwo", "Update", "")]
    assert outcomes(execution) == [("apply", "Node/gpu-1", "applied")]

    # A fresh executor (no memo) finds the node already as asked: no write.
    before = harness.writes()
    fresh = harness.executor(kv=type(harness.kv)())
    again = await harness.run(plan, plan_id="plan-2", executor=fresh)
    assert new_writes(before, harness.writes()) == {}
    assert outcomes(again) == [("apply", "Node/gpu-1", "unchanged")]


async def test_the_owner_in_desired_is_applied_like_the_others(harness: Any) -> None:
    queue_configs = harness.served("kaiwo.silogen.ai/v1alpha1", "KaiwoQueueConfig")
    stored = harness.fake.store.put(
        queue_configs,
        {
            "apiVersion": "kaiwo.silogen.ai/v1alpha1",
            "kind": "KaiwoQueueConfig",
            "metadata": {"name": "kaiwo"},
            "spec": {},
        },
    )
    owner = ObjectRef(
        api_version="kaiwo.silogen.ai/v1alpha1",
        kind="KaiwoQueueConfig",
        name="kaiwo",
        uid=stored["metadata"]["uid"],
    )
    harness.owner = owner
    spec = {"clusterQueues": [{"name": "kaiwo", "spec": {"cohort": "kaiwo"}}]}
    desired = {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": "kaiwo"},
        "spec": spec,
    }
    plan = harness.plan(
        [desired],
        status={"status": "READY"},
        prune=(
            PruneRule(api_version="kueue.x-k8s.io/v1beta1", kind="ClusterQueue", namespaced=False),
        ),
    )

    execution = await harness.run(plan, plan_id="plan-1")

    live = harness.find("kaiwo.silogen.ai/v1alpha1", "KaiwoQueueConfig", "kaiwo", namespace=None)
    assert live["spec"] == spec
    assert live["status"] == {"status": "READY"}
    # Kueue is not installed in the fake: nothing to prune, and that is not a failure.
    assert outcomes(execution) == [
        ("apply", "KaiwoQueueConfig/kaiwo", "applied"),
        ("status", "KaiwoQueueConfig/kaiwo", "applied"),
    ]


async def test_delete_owner_deletes_the_owner_and_its_children_go_with_it(harness: Any) -> None:
    await harness.run(harness.plan([harness.job()]), plan_id="plan-1")

    execution = await harness.run(harness.plan([], prune=(), delete_owner=True), plan_id="plan-2")

    assert harness.find("kaiwo.silogen.ai/v1alpha1", "KaiwoJob", "train") is None
    assert outcomes(execution) == [("delete-owner", "KaiwoJob/team-a/train", "deleted")]

    again = await harness.run(harness.plan([], prune=(), delete_owner=True), plan_id="plan-3")
    assert [(a.outcome, a.reason) for a in again.actions] == [("unchanged", "already deleted")]


async def test_a_child_already_gone_when_pruned_is_fine(harness: Any, flaky: Any) -> None:
    await harness.run(harness.plan([harness.job(), harness.config_map()]), plan_id="plan-1")
    from kaiwo_kube import NotFound

    flaky.fail("delete", NotFound('configmaps "train-entrypoint" not found', code=404))
    execution = await harness.run(
        harness.plan([harness.job()]), plan_id="plan-2", executor=harness.executor(kube=flaky)
    )

    assert [(a.operation, a.outcome, a.reason) for a in execution.actions[1:]] == [
        ("delete", "unchanged", "already deleted")
    ]
    assert execution.failed == ()


async def test_the_first_plan_of_an_owner_lists_nothing_to_prune(harness: Any, flaky: Any) -> None:
    execution = await harness.run(
        harness.plan([harness.job(), harness.config_map()]),
        plan_id="plan-1",
        executor=harness.executor(kube=flaky),
    )

    assert flaky.calls["list"] == 0
    assert [a.outcome for a in execution.actions] == ["applied", "applied"]


async def test_children_of_a_plan_cut_short_by_a_crash_are_pruned_by_the_next(
    harness: Any, flaky: Any
) -> None:
    executor = harness.executor()
    # Carried out, but the executor died before the result (and the memo) were saved.
    await executor.execute(
        PlanDecidedV1.of(harness.plan([harness.job(), harness.config_map()])), plan_id="plan-1"
    )
    assert harness.find("v1", "ConfigMap", "train-entrypoint") is not None

    execution = await harness.run(
        harness.plan([harness.job()]), plan_id="plan-2", executor=harness.executor(kube=flaky)
    )

    assert flaky.calls["list"] == 3  # one per prune rule: Job, ConfigMap, PVC
    assert harness.find("v1", "ConfigMap", "train-entrypoint") is None
    assert ("delete", "ConfigMap/team-a/train-entrypoint", "deleted") in [
        (a.operation, a.target.display(), a.outcome) for a in execution.actions
    ]


async def test_a_created_default_kaiwoconfig_leaves_its_schema_defaults_to_the_user(
    harness: Any,
) -> None:
    # A POST makes its field manager the owner of every field the server fills in from the
    # CRD's defaults (a KaiwoConfig's whole spec, here as on a real API server), so the
    # user's own apply of those fields would then conflict with the operator.
    await harness.kube.apply_crd(custom_resource_definition(KaiwoConfig), field_manager="tests")
    api_version = "config.kaiwo.silogen.ai/v1alpha1"
    harness.owner = ObjectRef(api_version=api_version, kind="KaiwoConfig", name="kaiwo")
    empty = {"apiVersion": api_version, "kind": "KaiwoConfig", "metadata": {"name": "kaiwo"}}
    plan = Plan(owner=harness.owner, desired=({**empty, "spec": {}},), create_only=True)

    created = await harness.run(plan, plan_id="plan-1", absent=(harness.owner,))

    assert outcomes(created) == [("apply", "KaiwoConfig/kaiwo", "applied")]
    stored = harness.find(api_version, "KaiwoConfig", "kaiwo", namespace=None)
    assert stored["spec"]["nodes"]["addTaintsToGpuNodes"] is False  # the schema's default
    users = {
        **empty,
        "spec": {"nodes": {"addTaintsToGpuNodes": True}, "ray": {"headPodMemory": "32Gi"}},
    }
    applied = await harness.kube.apply(users, field_manager="kaiwo-apply", force=False)
    assert applied["spec"]["nodes"]["addTaintsToGpuNodes"] is True
    assert applied["spec"]["ray"]["headPodMemory"] == "32Gi"


async def test_a_create_only_plan_creates_and_never_overwrites_the_users_edits(
    harness: Any,
) -> None:
    empty = {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": "kaiwo"},
        "spec": {},
    }
    harness.owner = ObjectRef(
        api_version="kaiwo.silogen.ai/v1alpha1", kind="KaiwoQueueConfig", name="kaiwo"
    )
    plan = Plan(owner=harness.owner, desired=(empty,), create_only=True)
    kqc_ref = ObjectRef(
        api_version="kaiwo.silogen.ai/v1alpha1", kind="KaiwoQueueConfig", name="kaiwo"
    )

    created = await harness.run(plan, plan_id="plan-1", absent=(kqc_ref,))
    stored = harness.find("kaiwo.silogen.ai/v1alpha1", "KaiwoQueueConfig", "kaiwo", namespace=None)
    assert stored["spec"] == {}
    assert outcomes(created) == [("apply", "KaiwoQueueConfig/kaiwo", "applied")]
    # No field inside the user's spec belongs to the operator: it sent only the empty map.
    [entry] = stored["metadata"]["managedFields"]
    assert (entry["manager"], entry["fieldsV1"]) == ("kaiwo", {"f:spec": {}})

    # The user fills it in; the same plan again (say, after the planner restarted) creates
    # nothing and changes nothing.
    queue_configs = harness.served("kaiwo.silogen.ai/v1alpha1", "KaiwoQueueConfig")
    spec = {"clusterQueues": [{"name": "team", "spec": {}}]}
    harness.fake.store.put(queue_configs, {**stored, "spec": spec})
    again = await harness.run(
        plan, plan_id="plan-2", absent=(kqc_ref,), executor=harness.executor(kv=type(harness.kv)())
    )
    kept = harness.find("kaiwo.silogen.ai/v1alpha1", "KaiwoQueueConfig", "kaiwo", namespace=None)
    assert kept["spec"] == spec
    assert outcomes(again) == [("apply", "KaiwoQueueConfig/kaiwo", "unchanged")]


async def test_an_invalid_kaiwoconfigs_plan_writes_its_event_once_and_no_status(
    harness: Any,
) -> None:
    # Decision 0206: the plan of a KaiwoConfig the operator cannot use carries only a Warning
    # Event on it (the CRD has no status); a redelivery or a re-publication adds nothing.
    await harness.kube.apply_crd(custom_resource_definition(KaiwoConfig), field_manager="tests")
    api_version = "config.kaiwo.silogen.ai/v1alpha1"
    stored = await harness.kube.create(
        {
            "apiVersion": api_version,
            "kind": "KaiwoConfig",
            "metadata": {"name": "kaiwo"},
            "spec": {"ray": {"headPodMemory": "lots"}},
        }
    )
    harness.owner = ObjectRef(
        api_version=api_version, kind="KaiwoConfig", name="kaiwo", uid=stored["metadata"]["uid"]
    )
    warning = EventIntent(
        type="Warning", reason="InvalidConfig", message="spec.ray.headPodMemory: bad"
    )
    plan = Plan(owner=harness.owner, events=(warning,), sources=(harness.owner_source(),))

    before = harness.writes()
    first = await harness.run(plan, plan_id="plan-1")
    again = await harness.run(plan, plan_id="plan-2")

    assert outcomes(first) == [("event", f"Event/default/{_event_name(harness)}", "applied")]
    assert [a.outcome for a in again.actions] == ["unchanged"]
    (event,) = harness.events(reason="InvalidConfig")
    assert (event["type"], event["message"]) == ("Warning", "spec.ray.headPodMemory: bad")
    assert event["involvedObject"] == {
        "apiVersion": api_version,
        "kind": "KaiwoConfig",
        "name": "kaiwo",
        "uid": harness.owner.uid,
    }
    assert [key[1] for key in new_writes(before, harness.writes())] == ["events"]
    after = harness.find(api_version, "KaiwoConfig", "kaiwo", namespace=None)
    assert "status" not in after


def _event_name(harness: Any) -> str:
    (event,) = harness.events(reason="InvalidConfig")
    return str(event["metadata"]["name"])
