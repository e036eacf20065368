"""What Model plans ask of the executor: Pods deleted one by one (only the owner's, by
uid), a shared cache volume created once and never touched again, and the Model's own
finalizer added and removed without touching anyone else's. Against the fake API server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kaiwo_contracts.plans import ObjectRef, Plan, PruneRule
from kaiwo_executor.apply_plan import PlanExecutor
from kaiwo_executor.execution_memo import ExecutionMemo
from kaiwo_kube import resources
from kaiwo_kubefake import ResourceKind

from tests.unit.executor.conftest import MODEL_NAMESPACE, NOW, Harness, model_owner_harness

MODEL = ResourceKind(
    group="kubeai.org", version="v1", plural="models", kind="Model", namespaced=True
)
NAMESPACE = MODEL_NAMESPACE
INVENTORY = {"app.kubernetes.io/managed-by": "kaiwo"}


@pytest.fixture
async def model_harness(tmp_path: Path) -> AsyncIterator[Harness]:
    metadata = {"finalizers": ["example.com/keep"]}
    async for harness in model_owner_harness(tmp_path, kind=MODEL, metadata=metadata, spec={}):
        yield harness


def selector(harness: Harness) -> dict[str, str]:
    assert harness.owner.uid is not None
    return {**INVENTORY, "kaiwo.silogen.ai/owner-uid": harness.owner.uid}


async def pod(
    harness: Harness, name: str, *, labels: dict[str, str], controlled: bool = True
) -> dict[str, Any]:
    """A Pod; ``controlled``: the Model is its controller, as for the Pods the executor makes."""
    metadata: dict[str, Any] = {"name": name, "namespace": NAMESPACE, "labels": labels}
    if controlled:
        owner = harness.owner
        metadata["ownerReferences"] = [
            {
                "apiVersion": owner.api_version,
                "kind": owner.kind,
                "name": owner.name,
                "uid": owner.uid,
                "controller": True,
            }
        ]
    return await harness.kube.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": metadata,
            "spec": {"containers": [{"name": "server", "image": "vllm:1"}]},
        }
    )


def ref(found: dict[str, Any]) -> ObjectRef:
    meta = found["metadata"]
    return ObjectRef(
        api_version="v1", kind="Pod", name=meta["name"], namespace=NAMESPACE, uid=meta["uid"]
    )


def plan(harness: Harness, **fields: Any) -> Plan:
    return Plan(
        owner=harness.owner,
        prune=(PruneRule(api_version="v1", kind="ConfigMap"),),
        prune_selector=selector(harness),
        **fields,
    )


def executor(harness: Harness) -> PlanExecutor:
    return PlanExecutor(harness.kube, ExecutionMemo(harness.kv), clock=lambda: NOW)


async def test_the_pods_a_plan_names_are_deleted_and_only_those_of_the_owner(
    model_harness: Harness,
) -> None:
    harness = model_harness
    old = await pod(harness, "model-llm-old-0", labels=selector(harness))
    kept = await pod(harness, "model-llm-old-1", labels=selector(harness))
    foreign = await pod(harness, "db-0", labels={"app": "db"}, controlled=False)
    # The owner's labels copied onto someone else's Pod do not make it the owner's.
    copied = await pod(harness, "model-llm-copy-0", labels=selector(harness), controlled=False)

    execution = await harness.run(
        plan(harness, delete=(ref(old), ref(foreign), ref(copied))), plan_id="p1"
    )

    assert harness.find("v1", "Pod", "model-llm-old-0", namespace=NAMESPACE) is None
    assert harness.find("v1", "Pod", "model-llm-old-1", namespace=NAMESPACE) == kept
    assert harness.find("v1", "Pod", "db-0", namespace=NAMESPACE) is not None
    assert harness.find("v1", "Pod", "model-llm-copy-0", namespace=NAMESPACE) == copied
    outcomes = {
        (a.target.name, a.outcome, a.reason) for a in execution.actions if a.operation == "delete"
    }
    left_alone = "not the owner's (its inventory labels or controller differ); left alone"
    assert outcomes == {
        ("model-llm-old-0", "deleted", None),
        ("db-0", "unchanged", left_alone),
        ("model-llm-copy-0", "unchanged", left_alone),
    }


async def test_a_pod_replaced_by_one_of_the_same_name_or_gone_is_left_to_the_next_plan(
    model_harness: Harness,
) -> None:
    harness = model_harness
    old = await pod(harness, "model-llm-abc-0", labels=selector(harness))
    await harness.kube.delete(resources.POD, "model-llm-abc-0", namespace=NAMESPACE)
    again = await pod(harness, "model-llm-abc-0", labels=selector(harness))
    gone = ref(old).model_copy(update={"name": "model-llm-gone-0"})

    execution = await harness.run(plan(harness, delete=(ref(old), gone)), plan_id="p1")

    assert harness.find("v1", "Pod", "model-llm-abc-0", namespace=NAMESPACE) == again
    assert sorted(a.reason or "" for a in execution.actions if a.operation == "delete") == [
        "already deleted",
        "replaced by a new object of the same name; left to the next plan",
    ]


VOLUME = {
    "apiVersion": "v1",
    "kind": "PersistentVolumeClaim",
    "metadata": {
        "name": "shared-model-cache-fast",
        "namespace": NAMESPACE,
        "labels": {**INVENTORY, "kaiwo.silogen.ai/cache-profile": "fast"},
    },
    "spec": {
        "accessModes": ["ReadWriteMany"],
        "resources": {"requests": {"storage": "10Gi"}},
        "storageClassName": "nfs",
    },
}


async def test_a_shared_volume_is_created_once_and_never_overwritten(
    model_harness: Harness,
) -> None:
    harness = model_harness
    await harness.run(plan(harness, shared=(VOLUME,)), plan_id="p1")
    created = harness.find(
        "v1", "PersistentVolumeClaim", "shared-model-cache-fast", namespace=NAMESPACE
    )
    assert created is not None and "ownerReferences" not in created["metadata"]

    # Another Model's plan asks for it with another size: the volume stays as it is.
    bigger = {**VOLUME, "spec": {**VOLUME["spec"], "resources": {"requests": {"storage": "1Ti"}}}}
    await harness.run(plan(harness, shared=(bigger,)), plan_id="p2")
    found = harness.find(
        "v1", "PersistentVolumeClaim", "shared-model-cache-fast", namespace=NAMESPACE
    )
    assert found is not None and found["spec"]["resources"]["requests"]["storage"] == "10Gi"

    # Unchanged and not absent: no request at all.
    before = harness.writes()
    await harness.run(plan(harness, shared=(bigger,)), plan_id="p3")
    assert harness.writes() == before

    # Deleted by hand and named absent: created again.
    await harness.kube.delete(
        resources.PERSISTENT_VOLUME_CLAIM, "shared-model-cache-fast", namespace=NAMESPACE
    )
    absent = (
        ObjectRef(
            api_version="v1",
            kind="PersistentVolumeClaim",
            name="shared-model-cache-fast",
            namespace=NAMESPACE,
        ),
    )
    await harness.run(plan(harness, shared=(bigger,)), plan_id="p4", absent=absent)
    assert harness.find(
        "v1", "PersistentVolumeClaim", "shared-model-cache-fast", namespace=NAMESPACE
    )


async def test_the_models_finalizer_is_added_and_removed_and_others_are_kept(
    model_harness: Harness,
) -> None:
    harness = model_harness

    await harness.run(plan(harness, finalizers=("kubeai.org/cache-eviction",)), plan_id="p1")
    found = harness.find("kubeai.org/v1", "Model", "llm", namespace=NAMESPACE)
    assert found is not None
    assert found["metadata"]["finalizers"] == ["example.com/keep", "kubeai.org/cache-eviction"]

    # Asked again: already so, no write.
    model_key = ("kubeai.org", "models", NAMESPACE, "llm")
    before = harness.writes()[model_key]
    await harness.run(plan(harness, finalizers=("kubeai.org/cache-eviction",)), plan_id="p2")
    assert harness.writes()[model_key] == before

    execution = await harness.run(plan(harness, finalizers=()), plan_id="p3")
    found = harness.find("kubeai.org/v1", "Model", "llm", namespace=NAMESPACE)
    assert found is not None and found["metadata"]["finalizers"] == ["example.com/keep"]
    assert [a.reason for a in execution.actions if a.target.kind == "Model"] == ["owner metadata"]


async def test_the_models_feature_labels_are_set_exactly_and_the_users_labels_kept(
    model_harness: Harness,
) -> None:
    harness = model_harness
    model_key = ("kubeai.org", "models", NAMESPACE, "llm")
    await harness.kube.merge_patch(
        resources.known_type("kubeai.org/v1", "Model"),
        "llm",
        {"metadata": {"labels": {"team": "a", "features.kubeai.org/SpeechToText": "true"}}},
        namespace=NAMESPACE,
    )
    wanted = {
        "features.kubeai.org/TextGeneration": "true",
        "features.kubeai.org/TextEmbedding": "true",
    }

    await harness.run(plan(harness, owner_labels=wanted), plan_id="p1")

    found = harness.find("kubeai.org/v1", "Model", "llm", namespace=NAMESPACE)
    assert found is not None
    assert found["metadata"]["labels"] == {
        "team": "a",
        "features.kubeai.org/TextGeneration": "true",
        "features.kubeai.org/TextEmbedding": "true",
    }
    assert found["metadata"]["finalizers"] == ["example.com/keep"]

    # Asked again: already so, no write.
    before = harness.writes()[model_key]
    await harness.run(plan(harness, owner_labels=wanted), plan_id="p2")
    assert harness.writes()[model_key] == before


VOLUME_REF = ObjectRef(
    api_version="v1",
    kind="PersistentVolumeClaim",
    name="shared-model-cache-fast",
    namespace=NAMESPACE,
)


def load_job(harness: Harness) -> dict[str, Any]:
    """A child that mounts the volume (a cache's load Job)."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            **harness.child_metadata("load-cache-llm"),
            "namespace": NAMESPACE,
            "labels": selector(harness),
        },
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "OnFailure",
                    "containers": [{"name": "loader", "image": "loader:1"}],
                }
            }
        },
    }


async def test_a_shared_volume_someone_else_made_is_not_used_and_the_owner_is_told_how(
    model_harness: Harness,
) -> None:
    """Made by a KubeAI install or a platform team, without the label the watcher observes
    by: the planner never sees it, so the executor does not load into it or mount it, and
    says what to do. Once labelled, it is the cache like any other."""
    harness = model_harness
    made = {**VOLUME, "metadata": {**VOLUME["metadata"], "labels": {"team": "ml"}}}
    await harness.kube.create(made)
    status = {"conditions": []}

    execution = await harness.run(
        plan(harness, desired=(load_job(harness),), shared=(VOLUME,), status=status),
        plan_id="p1",
        absent=(VOLUME_REF,),
    )

    told = (
        f"PersistentVolumeClaim/{NAMESPACE}/shared-model-cache-fast exists without the label "
        "app.kubernetes.io/managed-by=kaiwo, so Kaiwo does not see it: left as it is and not "
        "used; label it so to share it with Kaiwo's Models, or remove it"
    )
    assert harness.find("batch/v1", "Job", "load-cache-llm", namespace=NAMESPACE) is None
    found = harness.find(
        "v1", "PersistentVolumeClaim", "shared-model-cache-fast", namespace=NAMESPACE
    )
    assert found is not None and found["metadata"]["labels"] == {"team": "ml"}
    assert [
        (a.target.name, a.outcome, a.reason) for a in execution.actions if a.operation == "apply"
    ] == [
        ("shared-model-cache-fast", "failed", f"NameConflict: {told}"),
        (
            "load-cache-llm",
            "unchanged",
            f"withheld while {found_display(found)} is not this owner's",
        ),
    ]
    model = harness.find("kubeai.org/v1", "Model", "llm", namespace=NAMESPACE)
    assert model is not None
    [condition] = model["status"]["conditions"]
    assert (condition["type"], condition["reason"], condition["message"]) == (
        "NameConflict",
        "NameTaken",
        told,
    )
    assert [e["message"] for e in harness.events(reason="NameConflict")] == [told]

    # The owner's next plan (its status moved on) names no gap: the planner named the volume
    # absent once. It is still not used.
    await harness.run(
        plan(harness, desired=(load_job(harness),), shared=(VOLUME,), status=status),
        plan_id="p1b",
    )
    assert harness.find("batch/v1", "Job", "load-cache-llm", namespace=NAMESPACE) is None

    # Labelled by its owner: the next plan (the planner sees it now) uses it.
    await harness.kube.merge_patch(
        resources.PERSISTENT_VOLUME_CLAIM,
        "shared-model-cache-fast",
        {"metadata": {"labels": INVENTORY}},
        namespace=NAMESPACE,
    )
    await harness.run(
        plan(harness, desired=(load_job(harness),), shared=(VOLUME,), status=status),
        plan_id="p2",
    )
    assert harness.find("batch/v1", "Job", "load-cache-llm", namespace=NAMESPACE) is not None
    model = harness.find("kubeai.org/v1", "Model", "llm", namespace=NAMESPACE)
    assert model is not None and model["status"]["conditions"] == []


def found_display(found: dict[str, Any]) -> str:
    return f"PersistentVolumeClaim/{NAMESPACE}/{found['metadata']['name']}"
