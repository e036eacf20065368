"""A child the plan deletes and wants again is created anew after the delete, never applied
over the old one; a refused apply shows in the owner's status as ``ApplyRefused``
(decision 0048). Against the fake API server through the real adapter."""

from __future__ import annotations

from typing import Any

from kaiwo_contracts.plans import FinalizerRelease, ObjectRef, Plan
from kaiwo_kube.resources import CONFIG_MAP

FINALIZER = "example.com/hold"


def config_map_ref(live: dict[str, Any]) -> ObjectRef:
    return ObjectRef(
        api_version="v1",
        kind="ConfigMap",
        name=live["metadata"]["name"],
        namespace=live["metadata"]["namespace"],
        uid=live["metadata"]["uid"],
    )


def replacing(harness: Any, old: dict[str, Any], new: dict[str, Any]) -> Plan:
    return harness.plan([new]).model_copy(update={"delete": (config_map_ref(old),)})


def outcomes(execution: Any) -> list[tuple[str, str, str, str | None]]:
    return [(a.operation, a.target.display(), a.outcome, a.reason) for a in execution.actions]


async def test_a_replaced_child_is_deleted_then_created_anew(harness: Any) -> None:
    await harness.run(harness.plan([harness.config_map()]), plan_id="plan-1")
    old = harness.find("v1", "ConfigMap", "train-entrypoint")

    plan = replacing(harness, old, harness.config_map(entrypoint="python eval.py"))
    execution = await harness.run(plan, plan_id="plan-2")

    new = harness.find("v1", "ConfigMap", "train-entrypoint")
    assert new["metadata"]["uid"] != old["metadata"]["uid"]
    assert new["data"] == {"entrypoint.sh": "python eval.py"}
    assert outcomes(execution) == [
        ("delete", "ConfigMap/team-a/train-entrypoint", "deleted", None),
        ("apply", "ConfigMap/team-a/train-entrypoint", "applied", "replaced"),
    ]
    # Delivered again, the delete finds the old object gone and the new one is left alone.
    again = await harness.run(plan, plan_id="plan-3")
    kept = harness.find("v1", "ConfigMap", "train-entrypoint")
    assert kept["metadata"]["uid"] == new["metadata"]["uid"]
    assert [a.outcome for a in again.actions] == ["unchanged", "unchanged"]


async def test_a_replacement_waits_for_the_old_object_a_finalizer_holds(harness: Any) -> None:
    held = harness.config_map()
    held["metadata"]["finalizers"] = [FINALIZER]
    await harness.run(harness.plan([held]), plan_id="plan-1")
    old = harness.find("v1", "ConfigMap", "train-entrypoint")

    new = harness.config_map(entrypoint="python eval.py")
    execution = await harness.run(replacing(harness, old, new), plan_id="plan-2")

    terminating = harness.find("v1", "ConfigMap", "train-entrypoint")
    assert terminating["metadata"]["uid"] == old["metadata"]["uid"]
    assert terminating["metadata"].get("deletionTimestamp")
    assert terminating["data"] == {"entrypoint.sh": "python train.py"}  # not applied over
    assert outcomes(execution)[1] == (
        "apply",
        "ConfigMap/team-a/train-entrypoint",
        "unchanged",
        "the object it replaces is still being deleted; created once it is gone",
    )

    # The finalizer goes; the next plan (the planner still names the old uid) creates it.
    await harness.kube.merge_patch(
        CONFIG_MAP,
        "train-entrypoint",
        {"metadata": {"finalizers": None}},
        namespace=harness.namespace,
    )
    assert harness.find("v1", "ConfigMap", "train-entrypoint") is None
    execution = await harness.run(replacing(harness, old, new), plan_id="plan-3")
    created = harness.find("v1", "ConfigMap", "train-entrypoint")
    assert created["data"] == {"entrypoint.sh": "python eval.py"}
    assert outcomes(execution)[1][2:] == ("applied", "replaced")


async def replaced_with_release(harness: Any, finalizers: list[str]) -> tuple[Any, Any]:
    """A ConfigMap held by ``finalizers``, replaced by a plan releasing :data:`FINALIZER`:
    the old object and the execution."""
    held = harness.config_map()
    held["metadata"]["finalizers"] = finalizers
    await harness.run(harness.plan([held]), plan_id="plan-1")
    old = harness.find("v1", "ConfigMap", "train-entrypoint")
    new = harness.config_map(entrypoint="python eval.py")
    release = FinalizerRelease(target=config_map_ref(old), finalizers=(FINALIZER,))
    plan = replacing(harness, old, new).model_copy(update={"release_finalizers": (release,)})
    return old, await harness.run(plan, plan_id="plan-2")


async def test_a_finalizer_the_plan_releases_lets_the_replacement_happen_at_once(
    harness: Any,
) -> None:
    old, execution = await replaced_with_release(harness, [FINALIZER])

    created = harness.find("v1", "ConfigMap", "train-entrypoint")
    assert created["metadata"]["uid"] != old["metadata"]["uid"]
    assert created["data"] == {"entrypoint.sh": "python eval.py"}
    assert outcomes(execution) == [
        ("delete", "ConfigMap/team-a/train-entrypoint", "deleted", None),
        ("delete", "ConfigMap/team-a/train-entrypoint", "deleted", f"released {FINALIZER}"),
        ("apply", "ConfigMap/team-a/train-entrypoint", "applied", "replaced"),
    ]


async def test_only_the_released_finalizer_is_taken_off(harness: Any) -> None:
    old, execution = await replaced_with_release(harness, [FINALIZER, "example.com/other"])

    # Another controller's finalizer still holds the old object: the new one waits.
    still = harness.find("v1", "ConfigMap", "train-entrypoint")
    assert still["metadata"]["uid"] == old["metadata"]["uid"]
    assert still["metadata"]["finalizers"] == ["example.com/other"]
    assert [a.outcome for a in execution.actions] == ["deleted", "deleted", "unchanged"]


async def test_a_refused_apply_shows_in_the_status_until_an_apply_goes_through(
    harness: Any,
) -> None:
    bad = harness.config_map()
    bad["metadata"]["name"] = "Train_Entrypoint"
    status = {"status": "PENDING"}

    await harness.run(harness.plan([harness.job(), bad], status=status), plan_id="plan-1")

    live = harness.find("kaiwo.silogen.ai/v1alpha1", "KaiwoJob", "train")
    [condition] = live["status"]["conditions"]
    assert condition["type"] == "ApplyRefused"
    assert condition["status"] == "True"
    assert condition["reason"] == "Invalid"
    assert condition["lastTransitionTime"] == "2025-03-01T12:00:00Z"
    assert condition["message"].startswith(
        "the API server refused: ConfigMap team-a/Train_Entrypoint: "
    )
    assert "metadata.name" in condition["message"]
    assert len(harness.events(reason="ApplyFailed")) == 1

    # The next plan without the refused object: the condition goes.
    await harness.run(harness.plan([harness.job()], status=status), plan_id="plan-2")
    live = harness.find("kaiwo.silogen.ai/v1alpha1", "KaiwoJob", "train")
    assert live["status"] == {"status": "PENDING"}
