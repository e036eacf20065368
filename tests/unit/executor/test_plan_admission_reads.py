"""What plan admission keeps of the objects it read: the copies of the last ``ttl_seconds``
only (a copy older than that is never trusted), and the uid read under each name for longer,
so an owner deleted since is still told apart from one that never was."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from kaiwo_contracts.plan_sources import source_of
from kaiwo_contracts.plans import ObjectRef, Plan
from kaiwo_executor import plan_admission
from kaiwo_executor.plan_admission import PlanAdmission
from kaiwo_kube import NotFound
from kaiwo_kube.resources import ResourceType

TTL = 30.0


def kaiwo_job(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoJob",
        "metadata": {
            "name": name,
            "namespace": "team-a",
            "uid": f"uid-{name}",
            "resourceVersion": "7",
        },
        "spec": {"image": "busybox:1.36"},
    }


def plan_for(owner: dict[str, Any]) -> Plan:
    return Plan(owner=ObjectRef.of(owner), desired=(), sources=(source_of(owner),))


class Cluster:
    """The objects the API server holds, by name; counts the reads."""

    def __init__(self, *objects: dict[str, Any]) -> None:
        self.objects = {obj["metadata"]["name"]: obj for obj in objects}
        self.reads = 0

    async def get(
        self, resource: ResourceType, name: str, *, namespace: str | None = None
    ) -> dict[str, Any]:
        self.reads += 1
        if name not in self.objects:
            raise NotFound(f"{resource.kind} {namespace}/{name} not found", code=404)
        return self.objects[name]


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_copies_older_than_the_ttl_are_forgotten_at_the_next_read() -> None:
    owners = [kaiwo_job(f"train-{n}") for n in range(3)]
    cluster, clock = Cluster(*owners, kaiwo_job("late")), Clock()
    admission = PlanAdmission(cluster, ttl_seconds=TTL, monotonic=clock)
    for owner in owners:
        assert (await admission.check(plan_for(owner))).admitted
    assert admission.remembered_objects == 3

    clock.now += TTL - 1  # still trusted: a second plan of each reads nothing
    for owner in owners:
        assert (await admission.check(plan_for(owner))).admitted
    assert (cluster.reads, admission.remembered_objects) == (3, 3)

    clock.now += 1  # then a plan for another owner is read, and the three are let go
    assert (await admission.check(plan_for(cluster.objects["late"]))).admitted
    assert (cluster.reads, admission.remembered_objects) == (4, 1)


async def test_no_more_than_known_objects_are_held_within_the_ttl(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(plan_admission, "KNOWN_OBJECTS", 2)
    owners = [kaiwo_job(f"train-{n}") for n in range(3)]
    cluster = Cluster(*owners)
    admission = PlanAdmission(cluster, ttl_seconds=TTL, monotonic=Clock())

    for owner in owners:
        await admission.check(plan_for(owner))

    assert admission.remembered_objects == 2
    await admission.check(plan_for(owners[0]))  # the oldest went first: read again
    assert cluster.reads == 4


async def test_an_owner_read_long_ago_and_deleted_since_is_told_apart() -> None:
    owner = kaiwo_job("train")
    cluster, clock = Cluster(owner), Clock()
    admission = PlanAdmission(cluster, ttl_seconds=TTL, monotonic=clock)
    assert (await admission.check(plan_for(owner))).admitted
    clock.now += 10 * TTL  # its copy long forgotten
    del cluster.objects["train"]

    after_deletion = await admission.check(plan_for(owner))
    never_was = await admission.check(plan_for(kaiwo_job("ghost")))

    assert (after_deletion.owner_deleted, after_deletion.owner_absent) == (True, True)
    assert (never_was.owner_deleted, never_was.owner_absent) == (False, True)
    assert not after_deletion.admitted


async def test_the_owners_creation_time_is_told_when_it_exists_with_the_plans_uid() -> None:
    owner = kaiwo_job("train")
    owner["metadata"]["creationTimestamp"] = "2026-03-01T12:00:00Z"
    replaced = {**owner, "metadata": {**owner["metadata"], "uid": "uid-another"}}
    undated = kaiwo_job("undated")

    told = await PlanAdmission(Cluster(owner)).check(plan_for(owner))
    assert told.owner_created_at == datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    # Another object of its name, or none: not the owner's age (decision 0215).
    assert (await PlanAdmission(Cluster(replaced)).check(plan_for(owner))).owner_created_at is None
    assert (await PlanAdmission(Cluster()).check(plan_for(owner))).owner_created_at is None
    assert (await PlanAdmission(Cluster(undated)).check(plan_for(undated))).owner_created_at is None
