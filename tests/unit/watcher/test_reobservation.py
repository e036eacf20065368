"""Observing again what a refused plan was made from (decision 0038): the watcher reads the
object the executor names and publishes what the API server holds, marked ``reobserved``."""

from __future__ import annotations

from datetime import UTC, datetime

from kaiwo_contracts.events.envelope import Envelope
from kaiwo_contracts.events.results import PlanRefusedV1
from kaiwo_contracts.events.subjects import result_subject
from kaiwo_contracts.plans import ObjectRef
from kaiwo_kube import resources

from tests.unit.watcher.test_service import counter, kaiwo_job, rv_of, uid_of

KAIWO = "kaiwo.silogen.ai/v1alpha1"
WHEN = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def refusal(*objects: ObjectRef, refusal_id: str = "refusal-1") -> tuple[dict[str, str], bytes]:
    owner = objects[0] if objects else ObjectRef(api_version=KAIWO, kind="KaiwoJob", name="x")
    envelope = Envelope.new(
        data=PlanRefusedV1(
            plan_id="plan-1",
            plan_fingerprint="f" * 64,
            owner=owner,
            reasons=("a source differs",),
            reobserve=objects,
        ),
        source="/kaiwo/executor",
        time=WHEN,
        correlationid=owner.uid or "x",
        id=refusal_id,
    )
    return envelope.to_nats()


def subject_of(owner: ObjectRef) -> str:
    return result_subject(
        outcome="refused", kind=owner.kind, namespace=owner.namespace, uid=owner.uid or "x"
    )


def ref_of(obj: dict[str, object], *, uid: str | None = None) -> ObjectRef:
    metadata = obj["metadata"]
    assert isinstance(metadata, dict)
    return ObjectRef(
        api_version=KAIWO,
        kind="KaiwoJob",
        name=metadata["name"],
        namespace=metadata["namespace"],
        uid=uid or metadata["uid"],
    )


async def test_a_refused_owner_is_published_again_as_the_api_server_holds_it(kit):
    job = kit.cluster.put(resources.KAIWO_JOB, kaiwo_job("train"))
    kit.cluster.put(resources.KAIWO_JOB, kaiwo_job("other"))
    service = kit.service()
    owner = ref_of(job)
    headers, body = refusal(owner)

    assert await service.handle_refusal(headers, body, subject=subject_of(owner)) == 1

    [event] = kit.events()
    assert event.id == f"reobserved:{uid_of(job)}:{rv_of(job)}:refusal-1"
    assert event.causationid == "refusal-1"
    assert event.data.reobserved
    assert event.data.event_type == "SYNC"
    assert event.data.object["spec"]["image"] == "busybox"
    assert (
        counter(service, "kaiwo_watcher_reobservations_total", kind="KaiwoJob", outcome="published")
        == 1
    )


async def test_an_owner_the_api_server_does_not_hold_is_published_as_deleted(kit):
    service = kit.service()
    forged = ObjectRef(
        api_version=KAIWO, kind="KaiwoJob", name="ghost", namespace="team-a", uid="forged-uid"
    )
    headers, body = refusal(forged)

    assert await service.handle_refusal(headers, body, subject=subject_of(forged)) == 1

    [event] = kit.events()
    assert event.id == "reobserved:forged-uid:deleted:refusal-1"
    assert (event.data.event_type, event.data.uid, event.data.reobserved) == (
        "DELETED",
        "forged-uid",
        True,
    )


async def test_an_object_is_read_at_most_once_in_a_moment_and_only_where_it_is_watched(kit):
    job = kit.cluster.put(resources.KAIWO_JOB, kaiwo_job("train"))
    service = kit.service()
    owner = ref_of(job)
    await service.handle_refusal(*refusal(owner), subject=subject_of(owner))
    again = refusal(owner, refusal_id="refusal-2")
    assert await service.handle_refusal(*again, subject=subject_of(owner)) == 0
    assert (
        counter(service, "kaiwo_watcher_reobservations_total", kind="KaiwoJob", outcome="throttled")
        == 1
    )

    secret = ObjectRef(api_version="v1", kind="Secret", name="token", namespace="team-a")
    assert await service.handle_refusal(*refusal(secret), subject=subject_of(secret)) == 0
    assert (
        counter(service, "kaiwo_watcher_reobservations_total", kind="Secret", outcome="not_watched")
        == 1
    )
    assert len(kit.events()) == 1


async def test_a_message_that_is_not_a_refusal_is_ignored(kit):
    service = kit.service()
    owner = ObjectRef(api_version=KAIWO, kind="KaiwoJob", name="x", namespace="team-a", uid="u")

    assert await service.handle_refusal({}, b"{}", subject=subject_of(owner)) == 0
    assert kit.events() == []
    assert (
        counter(service, "kaiwo_watcher_reobservations_total", kind="-", outcome="unreadable") == 1
    )
