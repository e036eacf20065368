"""A field the owner no longer sets leaves a child the executor made again, and a RayJob
still waiting in its queue (decision 0225). Against the fake API server, which models field
ownership (``managedFields``) and server-side apply, through the real adapter.

Made again by POST, a child's fields belonged to ``kaiwo``'s ``Update`` entry, which the later
applies under ``kaiwo`` never clear: a removed field stayed for good. A RayJob created under
``kaiwo-create`` kept every field of its creation while it waited, though it takes the whole
edit in place (decision 0123).
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kaiwo_contracts.plans import ObjectRef
from kaiwo_executor.creation_metadata import creation_metadata_release
from kaiwo_kube import resources
from kaiwo_kubefake import ResourceKind

from tests.managed_fields import field_managers_of
from tests.unit.executor.conftest import KAIWO_JOB, NAMESPACE, Harness, owner_harness

RAY_JOB = ResourceKind(
    group="ray.io", version="v1", plural="rayjobs", kind="RayJob", namespaced=True
)
CONFIG_MAP_WRITES = ("", "configmaps", NAMESPACE, "train-entrypoint")
RAY_JOB_WRITES = ("ray.io", "rayjobs", NAMESPACE, "train")


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    job = {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoJob",
        "metadata": {"name": "train", "namespace": NAMESPACE},
        "spec": {"image": "busybox:1.36"},
    }
    async for found in owner_harness(tmp_path, kinds=(KAIWO_JOB, RAY_JOB), owner=job):
        yield found


def ref_of(manifest: dict[str, Any]) -> ObjectRef:
    return ObjectRef.of(manifest)


def two_scripts(harness: Harness) -> dict[str, Any]:
    config_map = harness.config_map()
    config_map["data"]["setup.sh"] = "pip install -r requirements.txt"
    return config_map


def managers(found: dict[str, Any]) -> set[tuple[str, str]]:
    return {(e["manager"], e["operation"]) for e in found["metadata"]["managedFields"]}


async def test_a_child_made_again_gives_up_a_field_a_later_plan_leaves_out(
    harness: Harness,
) -> None:
    """Two children gone at once (each read for the check of names, then made again)."""
    config_map, claim = two_scripts(harness), harness.pvc()
    await harness.run(harness.plan([config_map, claim]), plan_id="plan-1")
    await harness.kube.delete(resources.CONFIG_MAP, "train-entrypoint", namespace=NAMESPACE)
    await harness.kube.delete(resources.PERSISTENT_VOLUME_CLAIM, "train-data", namespace=NAMESPACE)

    again = await harness.run(
        harness.plan([config_map, claim]),
        plan_id="plan-2",
        absent=(ref_of(config_map), ref_of(claim)),
    )
    assert [(a.operation, a.outcome) for a in again.actions if a.operation == "apply"] == [
        ("apply", "applied"),
        ("apply", "applied"),
    ]
    made = harness.find("v1", "ConfigMap", "train-entrypoint")
    assert managers(made) == {("kaiwo", "Apply")}

    await harness.run(harness.plan([harness.config_map(), claim]), plan_id="plan-3")

    found = harness.find("v1", "ConfigMap", "train-entrypoint")
    assert found["data"] == {"entrypoint.sh": "python train.py"}


async def test_a_replaced_child_is_created_as_a_new_one_and_gives_up_a_removed_field(
    harness: Harness,
) -> None:
    """Replaced (deleted, then created in the same plan): created under the manager and
    force of a new child's creation, ``kaiwo-create`` for one created suspended."""
    job = harness.job()
    job["spec"].update(suspend=True, activeDeadlineSeconds=3600)
    await harness.run(harness.plan([job]), plan_id="plan-1")
    old = harness.find("batch/v1", "Job", "train")
    old_ref = ObjectRef.of(old).model_copy(update={"uid": old["metadata"]["uid"]})

    replacement = harness.job(image="busybox:1.37")
    replacement["spec"].update(suspend=True, activeDeadlineSeconds=3600)
    replacing = harness.plan([replacement]).model_copy(update={"delete": (old_ref,)})
    await harness.run(replacing, plan_id="plan-2")

    new = harness.find("batch/v1", "Job", "train")
    assert new["metadata"]["uid"] != old["metadata"]["uid"]
    assert managers(new) == {("kaiwo-create", "Apply")}

    later = copy.deepcopy(replacement)
    del later["spec"]["suspend"], later["spec"]["activeDeadlineSeconds"]
    await harness.run(harness.plan([later]), plan_id="plan-3")

    found = harness.find("batch/v1", "Job", "train")
    assert "activeDeadlineSeconds" not in found["spec"]
    assert found["spec"]["suspend"] is True  # still the creation's, until Kueue takes it
    assert field_managers_of(found, "spec", "suspend") == {"kaiwo-create"}


async def test_a_replacement_still_waits_for_the_old_object_being_deleted(
    harness: Harness,
) -> None:
    """The apply that only creates finds the old object there (a finalizer holds it) as the
    POST did: nothing is written over it."""
    await harness.run(harness.plan([two_scripts(harness)]), plan_id="plan-1")
    await harness.kube.merge_patch(
        resources.CONFIG_MAP,
        "train-entrypoint",
        {"metadata": {"finalizers": ["example.com/hold"]}},
        namespace=NAMESPACE,
        field_manager="someone",
    )
    old = harness.find("v1", "ConfigMap", "train-entrypoint")
    old_ref = ObjectRef.of(old).model_copy(update={"uid": old["metadata"]["uid"]})
    before = harness.writes()[CONFIG_MAP_WRITES]

    replacing = harness.plan([harness.config_map(entrypoint="python eval.py")])
    await harness.run(replacing.model_copy(update={"delete": (old_ref,)}), plan_id="plan-2")

    kept = harness.find("v1", "ConfigMap", "train-entrypoint")
    assert kept["metadata"]["uid"] == old["metadata"]["uid"]
    assert kept["data"]["entrypoint.sh"] == "python train.py"
    assert harness.writes()[CONFIG_MAP_WRITES] - before == 2  # the delete, the refused create


def ray_job(harness: Harness) -> dict[str, Any]:
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": harness.child_metadata("train"),
        "spec": {
            "suspend": True,
            "entrypoint": "python train.py",
            "runtimeEnvYAML": "pip: [torch]",
            "shutdownAfterJobFinishes": True,
            "rayClusterSpec": {
                "headGroupSpec": {
                    "rayStartParams": {"dashboard-host": "0.0.0.0", "num-cpus": "0"},
                    "template": {"spec": {"containers": [{"name": "head", "image": "ray"}]}},
                }
            },
        },
    }


def edited(job: dict[str, Any]) -> dict[str, Any]:
    """A later plan's RayJob: ``suspend`` left to Kueue, the runtime environment and a start
    parameter of the head no longer set."""
    later = copy.deepcopy(job)
    del later["spec"]["suspend"], later["spec"]["runtimeEnvYAML"]
    del later["spec"]["rayClusterSpec"]["headGroupSpec"]["rayStartParams"]["num-cpus"]
    return later


async def test_a_waiting_ray_job_gives_up_every_field_the_spec_no_longer_sets(
    harness: Harness,
) -> None:
    job = ray_job(harness)
    await harness.run(harness.plan([job]), plan_id="plan-1")
    before = harness.writes()[RAY_JOB_WRITES]

    await harness.run(harness.plan([edited(job)]), plan_id="plan-2")

    found = harness.find("ray.io/v1", "RayJob", "train")
    assert "runtimeEnvYAML" not in found["spec"]
    assert found["spec"]["rayClusterSpec"]["headGroupSpec"]["rayStartParams"] == {
        "dashboard-host": "0.0.0.0"
    }
    assert found["spec"]["entrypoint"] == "python train.py"
    assert found["spec"]["suspend"] is True
    assert field_managers_of(found, "spec", "suspend") == {"kaiwo-create"}
    # What the update still sent stays held by the creation too.
    assert field_managers_of(found, "spec", "entrypoint") == {"kaiwo", "kaiwo-create"}
    assert harness.writes()[RAY_JOB_WRITES] - before == 2  # the update, and the release

    # Given up once: the next edit, removing nothing, is one request.
    again = edited(job)
    again["spec"]["entrypoint"] = "python eval.py"
    await harness.run(harness.plan([again]), plan_id="plan-3")
    assert harness.writes()[RAY_JOB_WRITES] - before == 3


async def test_a_ray_job_that_ran_after_its_release_keeps_what_its_creation_still_holds(
    harness: Harness,
) -> None:
    """Released while waiting, the creation still holds what was sent since: once Kueue lets
    the RayJob run, a start parameter the plans no longer set stays (decision 0123)."""
    job = ray_job(harness)
    await harness.run(harness.plan([job]), plan_id="plan-1")
    waiting = edited(job)
    await harness.run(harness.plan([waiting]), plan_id="plan-2")
    await harness.kube.merge_patch(
        resources.RAY_JOB,
        "train",
        {"spec": {"suspend": False}},
        namespace=NAMESPACE,
        field_manager="kueue-admission",
    )

    running = copy.deepcopy(waiting)
    running["spec"]["rayClusterSpec"]["headGroupSpec"]["rayStartParams"] = {}
    await harness.run(harness.plan([running]), plan_id="plan-3")

    found = harness.find("ray.io/v1", "RayJob", "train")
    assert found["spec"]["rayClusterSpec"]["headGroupSpec"]["rayStartParams"] == {
        "dashboard-host": "0.0.0.0"
    }
    assert found["spec"]["suspend"] is False


async def test_a_running_ray_job_keeps_what_its_creation_holds(harness: Harness) -> None:
    """Running, a RayJob keeps its spec (decision 0123): only its deadline and cluster TTL
    may go (decision 0133). Taking a start parameter from its cluster would make Kueue stop
    it and KubeRay start it over."""
    job = ray_job(harness)
    await harness.run(harness.plan([job]), plan_id="plan-1")
    await harness.kube.merge_patch(
        resources.RAY_JOB,
        "train",
        {"spec": {"suspend": False}},
        namespace=NAMESPACE,
        field_manager="kueue-admission",
    )
    before = harness.writes()[RAY_JOB_WRITES]

    await harness.run(harness.plan([edited(job)]), plan_id="plan-2")

    found = harness.find("ray.io/v1", "RayJob", "train")
    assert found["spec"]["runtimeEnvYAML"] == "pip: [torch]"
    assert found["spec"]["rayClusterSpec"]["headGroupSpec"]["rayStartParams"]["num-cpus"] == "0"
    assert found["spec"]["suspend"] is False
    assert harness.writes()[RAY_JOB_WRITES] - before == 1


def container_fields(*variables: str) -> dict[str, Any]:
    """A head container's ``fieldsV1`` as the API server writes it: ``containers`` and
    ``env`` are merged by name, so each item is a key of its own."""
    env = {f'k:{{"name":"{name}"}}': {".": {}, "f:name": {}, "f:value": {}} for name in variables}
    return {
        "f:headGroupSpec": {
            ".": {},
            "f:template": {
                ".": {},
                "f:spec": {
                    ".": {},
                    "f:containers": {
                        'k:{"name":"head"}': {
                            ".": {},
                            "f:name": {},
                            "f:image": {},
                            "f:env": {".": {}, **env},
                        }
                    },
                },
            },
        }
    }


def test_the_release_of_a_waiting_ray_job_holds_what_is_still_sent() -> None:
    entry = {
        "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
        "f:spec": {
            ".": {},
            "f:suspend": {},
            "f:entrypoint": {},
            "f:rayClusterSpec": {".": {}, **container_fields("KEPT", "DROPPED")},
        },
    }
    sent = {
        "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
        "f:spec": {
            ".": {},
            "f:entrypoint": {},
            "f:rayClusterSpec": {".": {}, **container_fields("KEPT")},
        },
    }
    head = {
        "name": "head",
        "image": "ray",
        "imagePullPolicy": "IfNotPresent",  # the API server's default: nobody's
        "env": [{"name": "KEPT", "value": "1"}, {"name": "DROPPED", "value": "2"}],
    }
    applied = {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {
            "name": "train",
            "namespace": "team-a",
            "labels": {"app": "x"},
            "managedFields": [
                {"manager": "kaiwo-create", "operation": "Apply", "fieldsV1": entry},
                {"manager": "kaiwo", "operation": "Apply", "fieldsV1": sent},
            ],
        },
        "spec": {
            "suspend": True,
            "entrypoint": "python a.py",
            "rayClusterSpec": {"headGroupSpec": {"template": {"spec": {"containers": [head]}}}},
        },
    }
    manifest = {"metadata": {"labels": {"app": "x"}}, "spec": {"entrypoint": "python a.py"}}

    # DROPPED goes; suspend and what the update still sent stay held, as they are.
    kept_head = {"name": "head", "image": "ray", "env": [{"name": "KEPT", "value": "1"}]}
    assert creation_metadata_release(applied, manifest) == {
        "apiVersion": "ray.io/v1",
        "kind": "RayJob",
        "metadata": {"name": "train", "namespace": "team-a"},
        "spec": {
            "suspend": True,
            "entrypoint": "python a.py",
            "rayClusterSpec": {
                "headGroupSpec": {"template": {"spec": {"containers": [kept_head]}}}
            },
        },
    }
    # Everything it holds sent again: nothing to give up, no request.
    applied["metadata"]["managedFields"][1]["fieldsV1"] = entry
    assert creation_metadata_release(applied, manifest) is None
