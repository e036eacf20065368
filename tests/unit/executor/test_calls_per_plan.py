"""What one plan costs the executor, counted: KV bucket writes (each a stored JetStream message,
issue 28) and API calls by verb. Pins today's budget so a change that adds a call fails here;
a change that removes one lowers the figure on purpose."""

from __future__ import annotations

from typing import Any

from kaiwo_runtime.kv import MemoryKeyValue


class CountingKeyValue(MemoryKeyValue):
    """A memory bucket that counts its writes."""

    def __init__(self) -> None:
        super().__init__()
        self.puts = 0

    async def put(self, key: str, value: bytes) -> None:
        self.puts += 1
        await super().put(key, value)


async def test_a_new_owners_first_plan_writes_the_memo_twice(harness: Any, flaky: Any) -> None:
    kv = CountingKeyValue()
    executor = harness.executor(kube=flaky, kv=kv)

    await harness.run(
        harness.plan([harness.job(), harness.config_map()]), plan_id="plan-1", executor=executor
    )

    # Once before the first API call (no record = no children of ours), once when done.
    assert kv.puts == 2
    # "Never adopt": one read per child the memo does not know, then one apply per child.
    assert dict(flaky.calls) == {"get": 2, "apply": 2}
    assert dict(flaky.reads) == {"Job": 1, "ConfigMap": 1}


async def test_a_settled_replan_writes_the_memo_once_and_the_objects_never(
    harness: Any, flaky: Any
) -> None:
    kv = CountingKeyValue()
    plan = harness.plan([harness.job(), harness.config_map()])
    await harness.run(plan, plan_id="plan-1", executor=harness.executor(kv=kv))
    kv.puts = 0

    await harness.run(plan, plan_id="plan-2", executor=harness.executor(kube=flaky, kv=kv))

    assert kv.puts == 1
    # Only the plan id is remembered; nothing changed, so not one API call.
    assert dict(flaky.calls) == {}
