"""``make demo`` and then ``make run`` in the same checkout (decision 0042): the second stack
runs against another cluster, so it must not resume from the first one's checkpoints, plans
or memo, nor tell its story in ``kaiwo events``. Each ``kaiwo up --fake`` starts a new fake
API server, with a kube-system uid of its own: two stacks in a row on one state directory are
the demo-then-other-cluster switch."""

from __future__ import annotations

import asyncio
import sys
from asyncio.subprocess import PIPE
from pathlib import Path

import pytest
from kaiwo_cli.stack.local import LocalStack, StackOptions
from kaiwo_cli.stack.state import StackState
from kaiwo_contracts.events.permissions import ADMIN
from kaiwo_runtime.cluster_binding import CLUSTER_KEY
from kaiwo_runtime.kv import NatsKeyValue
from kaiwo_runtime.nats_connection import connect_client

pytestmark = [pytest.mark.nats, pytest.mark.slow, pytest.mark.timeout(400)]

BOUND_BUCKETS = ("kaiwo-watcher", "kaiwo-executor")
KAIWO = str(Path(sys.executable).parent / "kaiwo")


async def bound_clusters(stack: LocalStack) -> dict[str, str | None]:
    """The cluster each service's bucket is bound to."""
    client = await connect_client(stack.nats_connection(ADMIN))
    try:
        found: dict[str, str | None] = {}
        for bucket in BOUND_BUCKETS:
            raw = await (await NatsKeyValue.open(client, bucket)).get(CLUSTER_KEY)
            found[bucket] = raw.decode() if raw is not None else None
        return found
    finally:
        await client.close()


async def test_another_cluster_starts_fresh_state_beside_the_first(tmp_path: Path) -> None:
    state = tmp_path / "kaiwo"
    options = StackOptions(state_dir=state, fake_cluster=True, ready_timeout=120.0)

    async with LocalStack(options) as demo:
        demo_uid = demo.cluster_uid
        assert demo_uid is not None
        assert demo.cluster_note is None  # a new directory: nothing to set aside
        assert await bound_clusters(demo) == dict.fromkeys(BOUND_BUCKETS, demo_uid)

    async with LocalStack(options) as other:
        other_uid = other.cluster_uid
        assert other_uid is not None and other_uid != demo_uid
        assert other.cluster_note == (
            f"the state in {state} was of another cluster (kube-system uid {demo_uid}): kept "
            f"in {state / 'clusters' / demo_uid}; this cluster ({other_uid}) starts with "
            "fresh state"
        )
        # Fresh buckets: bound to this cluster, not the demo's (which would be refused).
        assert await bound_clusters(other) == dict.fromkeys(BOUND_BUCKETS, other_uid)
        assert StackState.read(state).cluster_uid == other_uid

    kept = state / "clusters" / demo_uid
    assert (kept / "nats" / "jetstream").is_dir()
    assert (kept / "events.db").is_file()

    exported = await asyncio.create_subprocess_exec(
        KAIWO, "events", "export", "--state", str(state), stdout=PIPE, stderr=PIPE
    )
    out, err = await exported.communicate()
    assert exported.returncode == 0, err.decode()
    assert err.decode().splitlines() == [
        f"kaiwo events: cluster {other_uid} (uid of its kube-system namespace)"
    ]
    assert out  # this cluster's own events: the fake's seeded nodes and namespaces
