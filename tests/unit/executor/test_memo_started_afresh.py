"""A memo bucket lost, or deleted to start it afresh (decision 0215): an owner the memo has no
record of lists its children to prune at its first plan, once, unless the API server created it
after the memo began to record owners (then nothing of ours can exist for it: no list call)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kaiwo_contracts.events.envelope import Envelope
from kaiwo_contracts.events.plans import PlanDecidedV1
from kaiwo_contracts.events.streams import bus_topology
from kaiwo_contracts.events.subjects import plan_subject
from kaiwo_contracts.plans import ObjectRef, PruneRule
from kaiwo_executor.execution_memo import SINCE_KEY, ExecutionMemo, OwnerMemo
from kaiwo_executor.service import ExecutorService
from kaiwo_runtime.kv import MemoryKeyValue
from kaiwo_runtime.memory_bus import MemoryBus
from kaiwo_runtime.memory_jetstream import MemoryJetStream

RUNNING_PRUNE = (
    PruneRule(api_version="batch/v1", kind="Job"),
    PruneRule(api_version="v1", kind="ConfigMap"),
)
"""A running workload's rules leave its volumes out: PVCs are kept on purpose."""


def outcomes(execution: Any) -> list[tuple[str, str, str]]:
    return [(a.operation, a.target.display(), a.outcome) for a in execution.actions]


def put_config_map(harness: Any, metadata: dict[str, Any]) -> None:
    manifest = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {}}
    harness.fake.store.put(harness.served("v1", "ConfigMap"), manifest)


def later(harness: Any, **delta: float) -> Any:
    """A clock reading the owner's creation time plus ``delta``."""
    moment = harness.owner_created_at() + timedelta(**delta)
    return lambda: moment


async def test_a_child_unwanted_while_the_memo_was_lost_is_pruned_at_once_and_then_never_listed(
    harness: Any, flaky: Any
) -> None:
    # The operator made the Job and the ConfigMap; then its bucket was lost, and started
    # afresh an hour after the owner's creation, while the plan stopped wanting the ConfigMap.
    await harness.run(harness.plan([harness.job(), harness.config_map()]), plan_id="plan-1")
    fresh = MemoryKeyValue()
    executor = harness.executor(kube=flaky, kv=fresh, clock=later(harness, hours=1))
    await executor.start()

    execution = await harness.run(
        harness.plan([harness.job()]), plan_id="plan-2", executor=executor
    )

    assert harness.find("v1", "ConfigMap", "train-entrypoint") is None
    assert harness.find("batch/v1", "Job", "train") is not None
    assert outcomes(execution) == [
        ("apply", "Job/team-a/train", "applied"),
        ("delete", "ConfigMap/team-a/train-entrypoint", "deleted"),
    ]
    assert flaky.calls["list"] == 3  # Job, ConfigMap, PVC: the plan's prune rules
    # Once: three further plans of the same children make not one API call.
    flaky.calls.clear()
    for plan_id in ("plan-3", "plan-4", "plan-5"):
        again = await harness.run(harness.plan([harness.job()]), plan_id=plan_id, executor=executor)
        assert outcomes(again) == [("apply", "Job/team-a/train", "unchanged")]
    assert dict(flaky.calls) == {}


async def test_a_fresh_memo_prunes_only_the_owners_labelled_children_of_the_plans_kinds(
    harness: Any, flaky: Any
) -> None:
    # Left in the cluster while the operator was down: a ConfigMap of the owner the plan no
    # longer wants, one with its labels that another object controls, one it controls that
    # lacks its labels, and its volume.
    put_config_map(harness, harness.child_metadata("old-gateway"))
    other = harness.child_metadata("copied-labels")
    other["ownerReferences"][0]["uid"] = "5d0c7a8e-1111-4c2b-9d7e-000000000002"
    put_config_map(harness, other)
    unlabelled = harness.child_metadata("unlabelled")
    del unlabelled["labels"]
    put_config_map(harness, unlabelled)
    harness.fake.store.put(harness.served("v1", "PersistentVolumeClaim"), harness.pvc())
    executor = harness.executor(kube=flaky, clock=later(harness, minutes=10))

    execution = await harness.run(
        harness.plan([harness.job()], prune=RUNNING_PRUNE), plan_id="plan-1", executor=executor
    )

    assert outcomes(execution) == [
        ("apply", "Job/team-a/train", "applied"),
        ("delete", "ConfigMap/team-a/old-gateway", "deleted"),
    ]
    assert harness.find("v1", "ConfigMap", "old-gateway") is None
    assert harness.find("v1", "ConfigMap", "copied-labels") is not None
    assert harness.find("v1", "ConfigMap", "unlabelled") is not None
    assert harness.find("v1", "PersistentVolumeClaim", "train-data") is not None
    assert flaky.calls["list"] == 2


@pytest.mark.parametrize(
    ("memo_began", "lists"),
    [
        (timedelta(hours=-1), 0),  # the owner came after: new, nothing of ours can exist
        (timedelta(seconds=-2), 0),
        (timedelta(seconds=-1), 3),  # within the clocks' margin (1 s): not known new
        (timedelta(seconds=0), 3),
        (timedelta(hours=1), 3),  # the memo began after: its children are unknown to it
    ],
    ids=["an-hour-before", "2s-before", "1s-before", "at-creation", "an-hour-after"],
)
async def test_a_first_plan_lists_unless_the_owner_came_after_the_memo_began(
    harness: Any, flaky: Any, memo_began: timedelta, lists: int
) -> None:
    began = harness.owner_created_at() + memo_began
    executor = harness.executor(kube=flaky, clock=lambda: began)
    await executor.start()

    execution = await harness.run(
        harness.plan([harness.job(), harness.config_map()]), plan_id="plan-1", executor=executor
    )

    assert flaky.calls["list"] == lists
    assert [a.outcome for a in execution.actions] == ["applied", "applied"]


async def test_an_owner_of_unknown_age_lists_at_its_first_plan(harness: Any, flaky: Any) -> None:
    executor = harness.executor(kube=flaky)  # the memo began long before the owner

    await harness.run(
        harness.plan([harness.job()]), plan_id="plan-1", executor=executor, owner_created_at=None
    )

    assert flaky.calls["list"] == 3


# ---------------------------------------------------------------------- through the service


async def _step_plan(service: ExecutorService, bus: MemoryBus, harness: Any, plan: Any) -> None:
    moment = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
    envelope = Envelope.new(
        data=PlanDecidedV1.of(plan, planned_at=moment),
        source="/kaiwo/planner",
        time=moment,
        subject="team-a/train",
        correlationid=harness.owner.uid,
    )
    subject = plan_subject(kind="KaiwoJob", namespace="team-a", uid=harness.owner.uid)
    await bus.publish(envelope, subject)
    assert await service.step() == 1


async def _service(harness: Any, kube: Any, clock: Any) -> tuple[ExecutorService, MemoryBus]:
    bus = MemoryBus(server=MemoryJetStream(), topology=bus_topology())
    await bus.ensure_streams()
    service = ExecutorService(bus, kube, harness.kv, clock, poll_timeout=0.05)
    await service.executor.start()
    return service, bus


async def test_the_service_prunes_what_a_fresh_memo_finds_unwanted_by_the_owners_age(
    harness: Any, flaky: Any
) -> None:
    # The memo began after the owner: admission's read of it tells the executor so.
    put_config_map(harness, harness.child_metadata("old-gateway"))
    service, bus = await _service(harness, flaky, later(harness, hours=1))

    await _step_plan(service, bus, harness, harness.plan([harness.job()]))

    assert harness.find("v1", "ConfigMap", "old-gateway") is None
    assert flaky.calls["list"] == 3


async def test_the_service_lists_nothing_for_an_owner_younger_than_the_memo(
    harness: Any, flaky: Any
) -> None:
    service, bus = await _service(harness, flaky, later(harness, hours=-1))

    await _step_plan(service, bus, harness, harness.plan([harness.job(), harness.config_map()]))

    assert harness.find("v1", "ConfigMap", "train-entrypoint") is not None
    # Admission's read of the owner, the two children read (never adopt), applied.
    assert dict(flaky.calls) == {"get": 3, "apply": 2}


# ---------------------------------------------------------------------- memo-since


class Monotonic:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


async def test_the_memo_records_when_it_began_once_and_every_process_reads_it() -> None:
    kv = MemoryKeyValue()

    assert await ExecutionMemo(kv).since(now=T0) == T0
    assert await ExecutionMemo(kv).since(now=T0 + timedelta(days=1)) == T0
    assert await kv.get(SINCE_KEY) == b"2025-03-01T12:00:00+00:00"


async def test_an_owner_is_new_only_past_the_margin_after_the_memo_began() -> None:
    memo = ExecutionMemo(MemoryKeyValue())
    await memo.since(now=T0)

    assert not await memo.owner_is_new(T0 - timedelta(seconds=1), now=T0)
    assert not await memo.owner_is_new(T0 + timedelta(seconds=1), now=T0)
    assert await memo.owner_is_new(T0 + timedelta(seconds=2), now=T0)


async def test_a_bucket_started_afresh_under_a_running_executor_is_noticed() -> None:
    kv = MemoryKeyValue()
    clock = Monotonic()
    memo = ExecutionMemo(kv, monotonic=clock)
    owner = ObjectRef(
        api_version="kaiwo.silogen.ai/v1alpha1",
        kind="KaiwoJob",
        name="train",
        namespace="team-a",
        uid="5d0c7a8e-1111-4c2b-9d7e-000000000001",
    )
    await memo.since(now=T0)
    await memo.claim(owner, OwnerMemo())
    # Lost, and made anew by another replica starting a day later.
    for key in (SINCE_KEY, f"owner/{owner.uid}"):
        await kv.delete(key)
    later_start = T0 + timedelta(days=1)
    await ExecutionMemo(kv).since(now=later_start)

    assert await memo.since(now=T0) == T0  # read again only after a while...
    _, fresh = await memo.claim(owner, OwnerMemo())
    assert fresh
    assert await memo.since(now=T0) == later_start  # ...or once a known record is gone


async def test_memo_since_is_read_again_after_a_minute() -> None:
    kv = MemoryKeyValue()
    clock = Monotonic()
    memo = ExecutionMemo(kv, monotonic=clock)
    await memo.since(now=T0)
    await kv.put(SINCE_KEY, b"2025-03-02T12:00:00+00:00")

    clock.now += 59
    assert await memo.since(now=T0) == T0
    clock.now += 1
    assert await memo.since(now=T0) == datetime(2025, 3, 2, 12, 0, tzinfo=UTC)


async def test_an_unreadable_memo_since_is_taken_as_now() -> None:
    kv = MemoryKeyValue()
    await kv.put(SINCE_KEY, b"not a time")

    assert await ExecutionMemo(kv).since(now=T0) == T0
    assert await kv.get(SINCE_KEY) == b"2025-03-01T12:00:00+00:00"
