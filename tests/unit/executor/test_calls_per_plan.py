"""What one plan costs the executor, counted: KV bucket writes (each a stored JetStream message,
issue 28) and API calls by verb. Pins today's budget so a change that adds a call fails here;
a change that removes one lowers the figure on purpose."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from kaiwo_contracts.plans import ObjectRef
from kaiwo_runtime.kv import MemoryKeyValue


class CountingKeyValue(MemoryKeyValue):
    """A memory bucket that counts its calls, each a round trip to JetStream."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter[str] = Counter()

    async def get(self, key: str) -> bytes | None:
        self.calls["get"] += 1
        return await super().get(key)

    async def put(self, key: str, value: bytes) -> None:
        self.calls["put"] += 1
        await super().put(key, value)

    async def create(self, key: str, value: bytes) -> bytes | None:
        self.calls["create"] += 1
        return await super().create(key, value)


async def test_a_new_owners_first_plan_creates_the_memo_then_writes_it_once(
    harness: Any, flaky: Any
) -> None:
    kv = CountingKeyValue()
    executor = harness.executor(kube=flaky, kv=kv)
    await executor.start()  # as the process does: when the memo began, once (decision 0215)
    assert dict(kv.calls) == {"create": 1}
    kv.calls.clear()

    await harness.run(
        harness.plan([harness.job(), harness.config_map()]), plan_id="plan-1", executor=executor
    )

    # Created before the first API call (no record = no children of ours, the owner being
    # created after the memo began), without reading it first; written once more when done.
    assert dict(kv.calls) == {"create": 1, "put": 1}
    # "Never adopt": one read per child the memo does not know, then one apply per child.
    assert dict(flaky.calls) == {"get": 2, "apply": 2}
    assert dict(flaky.reads) == {"Job": 1, "ConfigMap": 1}


@pytest.mark.parametrize("named_absent", [False, True], ids=["new", "absent"])
async def test_a_plans_one_new_child_is_created_by_one_apply_and_not_read(
    harness: Any, flaky: Any, named_absent: bool
) -> None:
    # The apply only creates (an existing object of that name is a Conflict), so it is the
    # check of the name as well as the write: no GET before it. A new owner's first plan
    # names its children absent (the planner has not seen them).
    job = harness.job()
    await harness.run(
        harness.plan([job]),
        plan_id="plan-1",
        absent=(ObjectRef.of(job),) if named_absent else (),
        executor=harness.executor(kube=flaky),
    )

    assert dict(flaky.calls) == {"apply": 1}
    job = harness.find("batch/v1", "Job", "train")
    assert job is not None
    assert job["metadata"]["ownerReferences"][0]["uid"] == harness.owner.uid


async def test_an_owner_this_executor_wrote_for_is_read_not_created(harness: Any) -> None:
    kv = CountingKeyValue()
    executor = harness.executor(kv=kv)
    await harness.run(harness.plan([harness.job()]), plan_id="plan-1", executor=executor)
    kv.calls.clear()

    await harness.run(harness.plan([harness.job()]), plan_id="plan-2", executor=executor)

    assert dict(kv.calls) == {"get": 1, "put": 1}


async def test_a_restarted_executor_finds_the_record_by_its_refused_create(
    harness: Any, flaky: Any
) -> None:
    kv = CountingKeyValue()
    plan = harness.plan([harness.job()])
    await harness.run(plan, plan_id="plan-1", executor=harness.executor(kv=kv))
    before = await kv.get("owner/" + plan.owner.uid)
    kv.calls.clear()

    # The same plan delivered again to a new executor: the record it refuses to replace
    # says the plan was carried out, so not one API call and not one write.
    await harness.run(plan, plan_id="plan-1", executor=harness.executor(kube=flaky, kv=kv))

    assert dict(kv.calls) == {"create": 1}
    assert await kv.get("owner/" + plan.owner.uid) == before
    assert dict(flaky.calls) == {}


async def test_a_settled_replan_writes_the_memo_once_and_the_objects_never(
    harness: Any, flaky: Any
) -> None:
    kv = CountingKeyValue()
    plan = harness.plan([harness.job(), harness.config_map()])
    await harness.run(plan, plan_id="plan-1", executor=harness.executor(kv=kv))
    kv.calls.clear()

    await harness.run(plan, plan_id="plan-2", executor=harness.executor(kube=flaky, kv=kv))

    assert kv.calls["put"] == 1
    # Only the plan id is remembered; nothing changed, so not one API call.
    assert dict(flaky.calls) == {}
