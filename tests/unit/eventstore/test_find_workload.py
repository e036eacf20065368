"""Finding a workload by name in the recorded observations (``kaiwo events explain``,
``export`` and ``replay --workload``): that name's history only, never the whole store."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from kaiwo_contracts.events import ObservedObjectV1
from kaiwo_eventstore import InMemoryEventStore, NewEvent, StoredEvent
from kaiwo_eventstore.explain import (
    AmbiguousWorkloadError,
    WorkloadIdentity,
    WorkloadNotFoundError,
    earlier_note,
    find_workload,
)

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
OLD_UID = "0b7c0a5e-0000-4000-8000-000000000001"
NEW_UID = "0b7c0a5e-0000-4000-8000-000000000002"
JOB_UID = "0b7c0a5e-0000-4000-8000-000000000003"
OTHER_UID = "0b7c0a5e-0000-4000-8000-000000000004"


def observed(
    number: int, *, kind: str, name: str, uid: str, workload: str, namespace: str = "team-a"
) -> NewEvent:
    return NewEvent(
        event_id=f"{uid}:{number}",
        stream_id=f"workload/{workload}",
        type=ObservedObjectV1.EVENT_TYPE,
        subject=f"{namespace}/{name}",
        time=T0 + timedelta(seconds=number),
        source="/kaiwo/watcher",
        correlation_id=workload,
        causation_id=None,
        data={"kind": kind, "name": name, "namespace": namespace, "uid": uid},
        metadata={},
    )


class OnlyNarrowReads(InMemoryEventStore):
    """A store that fails a read of every event of a type, or of the whole store."""

    async def read_by_type(
        self, types: Iterable[str], *, from_position: int = 1, limit: int | None = None
    ) -> list[StoredEvent]:
        raise AssertionError("read every event of a type")

    async def read_all(self, from_position: int = 1, limit: int = 1000) -> list[StoredEvent]:
        raise AssertionError("read the whole store")

    def iter_by_type(self, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError("read every event of a type")


@pytest.fixture
async def store() -> InMemoryEventStore:
    recorded = OnlyNarrowReads()
    await recorded.append(
        [
            # train was deleted and made again: the newest is the one asked for.
            observed(1, kind="KaiwoJob", name="train", uid=OLD_UID, workload=OLD_UID),
            observed(2, kind="Job", name="train", uid=JOB_UID, workload=OLD_UID),
            observed(3, kind="KaiwoJob", name="other", uid=OTHER_UID, workload=OTHER_UID),
            observed(4, kind="KaiwoJob", name="train", uid=NEW_UID, workload=NEW_UID),
            # A child whose workload the recorder never saw (its own correlation).
            observed(5, kind="Job", name="orphan", uid=JOB_UID, workload=JOB_UID),
        ]
    )
    return recorded


async def test_a_workload_by_name_is_the_newest_of_that_name(store: InMemoryEventStore) -> None:
    found = await find_workload(store, "team-a/train")
    # The earlier workload of that name is named, so it can be read (decision 0164).
    assert found == WorkloadIdentity("team-a", "train", NEW_UID, "KaiwoJob", earlier=(OLD_UID,))
    assert earlier_note(found) == (
        "team-a/train was also the name of 1 earlier workload(s), deleted and made again "
        f"under it: uid {OLD_UID} (give a uid instead of team-a/train to read one)"
    )
    assert (await find_workload(store, "KaiwoJob/team-a/other")).uid == OTHER_UID


async def test_a_workload_by_uid_is_that_one_even_when_its_name_was_given_again(
    store: InMemoryEventStore,
) -> None:
    assert await find_workload(store, OLD_UID) == WorkloadIdentity(
        "team-a", "train", OLD_UID, "KaiwoJob"
    )
    assert await find_workload(store, OTHER_UID) == WorkloadIdentity(
        "team-a", "other", OTHER_UID, "KaiwoJob"
    )
    assert earlier_note(await find_workload(store, "team-a/other")) is None
    with pytest.raises(
        WorkloadNotFoundError, match=f"no recorded observation of a workload of uid {JOB_UID}"
    ):
        await find_workload(store, JOB_UID)  # a Job's uid, not a workload's


async def test_a_child_names_the_workload_it_belongs_to(store: InMemoryEventStore) -> None:
    found = await find_workload(store, "Job/team-a/train")
    assert found == WorkloadIdentity("team-a", "train", OLD_UID, "KaiwoJob", via="Job team-a/train")


@pytest.mark.parametrize(
    ("reference", "reason"),
    [
        ("team-a/nope", "no recorded observation of a workload team-a/nope"),
        ("team-b/train", "no recorded observation of a workload team-b/train"),
        ("KaiwoService/team-a/train", "no recorded observation of a workload team-a/train"),
        ("Pod/team-a/train", "no recorded observation of a Pod team-a/train"),
        ("Job/team-a/orphan", "Job team-a/orphan belongs to no recorded workload"),
    ],
)
async def test_a_name_nothing_recorded_is_said_so(
    store: InMemoryEventStore, reference: str, reason: str
) -> None:
    with pytest.raises(WorkloadNotFoundError, match=reason):
        await find_workload(store, reference)


SERVICE_UID = "0b7c0a5e-0000-4000-8000-000000000005"
MODEL_UID = "0b7c0a5e-0000-4000-8000-000000000006"


async def test_a_name_a_job_and_a_service_both_had_is_refused_with_both_ways_to_say_it(
    store: InMemoryEventStore,
) -> None:
    """Decision 0198: a KaiwoJob and a KaiwoService may share a name; the newest of the two
    was picked and the other called an earlier workload "deleted and made again"."""
    await store.append(
        [observed(6, kind="KaiwoService", name="train", uid=SERVICE_UID, workload=SERVICE_UID)]
    )

    with pytest.raises(AmbiguousWorkloadError) as refused:
        await find_workload(store, "team-a/train")

    assert str(refused.value) == (
        "team-a/train was recorded as a KaiwoJob and a KaiwoService: say which, as "
        "KaiwoJob/team-a/train or KaiwoService/team-a/train (or give its uid)"
    )
    # Each way it names reads that one; a job's earlier workloads are jobs only.
    job = await find_workload(store, "KaiwoJob/team-a/train")
    service = await find_workload(store, "kaiwoservice/team-a/train")
    assert job == WorkloadIdentity("team-a", "train", NEW_UID, "KaiwoJob", earlier=(OLD_UID,))
    assert service == WorkloadIdentity("team-a", "train", SERVICE_UID, "KaiwoService")
    assert earlier_note(service) is None
    assert (await find_workload(store, SERVICE_UID)).kind == "KaiwoService"


async def test_a_name_three_kinds_had_names_all_three(store: InMemoryEventStore) -> None:
    await store.append(
        [
            observed(6, kind="Model", name="train", uid=MODEL_UID, workload=MODEL_UID),
            observed(7, kind="KaiwoService", name="train", uid=SERVICE_UID, workload=SERVICE_UID),
        ]
    )

    with pytest.raises(
        AmbiguousWorkloadError,
        match=r"^team-a/train was recorded as a KaiwoJob, "
        r"a KaiwoService and a Model: say which, as KaiwoJob/team-a/train, "
        r"KaiwoService/team-a/train or Model/team-a/train \(or give its uid\)$",
    ):
        await find_workload(store, "team-a/train")
    # A child of that name still names its one workload.
    assert (await find_workload(store, "Job/team-a/train")).uid == OLD_UID
