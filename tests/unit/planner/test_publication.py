"""Whether a plan is news (kaiwo_planner.domain.publication), with hand-written cases."""

from __future__ import annotations

from kaiwo_contracts.plans import ObjectRef, Plan
from kaiwo_planner.domain.publication import Published, decision_fingerprint, publication

OWNER = ObjectRef(
    api_version="kaiwo.silogen.ai/v1alpha1", kind="KaiwoJob", name="a", namespace="t", uid="u"
)
JOB = ObjectRef(api_version="batch/v1", kind="Job", name="a", namespace="t")
CONFIG_MAP = ObjectRef(api_version="v1", kind="ConfigMap", name="a", namespace="t")


def plan(status: str = "PENDING", version: str = "1") -> Plan:
    return Plan(owner=OWNER, observed_resource_version=version, status={"status": status})


def test_a_first_plan_is_published_with_every_gap() -> None:
    decided = publication(
        plan=plan(), owner={}, last=None, absent=(JOB,), drifted=(), reapply_gaps=False
    )
    assert (decided.publish, decided.absent, decided.drifted) == (True, (JOB,), ())
    assert decided.record == Published(
        fingerprint=plan().fingerprint(),
        absent=(JOB,),
        resource_version="1",
        status={"status": "PENDING"},
    )
    assert decided.plan_fingerprint == plan().fingerprint()


def test_the_same_plan_with_the_same_gaps_is_not_news_and_the_gaps_are_remembered() -> None:
    last = Published(
        fingerprint=plan().fingerprint(), absent=(JOB, CONFIG_MAP), resource_version="1"
    )
    owner = {"status": {"status": "PENDING"}}
    decided = publication(
        plan=plan(), owner=owner, last=last, absent=(JOB,), drifted=(), reapply_gaps=False
    )
    assert not decided.publish
    assert decided.record == Published(
        fingerprint=plan().fingerprint(), absent=(JOB,), resource_version="1"
    )


def test_a_new_gap_is_news_and_only_it_is_named() -> None:
    last = Published(fingerprint=plan().fingerprint(), absent=(JOB,), resource_version="1")
    decided = publication(
        plan=plan(),
        owner={"status": {"status": "PENDING"}},
        last=last,
        absent=(JOB, CONFIG_MAP),
        drifted=(),
        reapply_gaps=False,
    )
    assert (decided.publish, decided.absent) == (True, (CONFIG_MAP,))
    # A resync names every gap again, and publishes while any remains.
    again = publication(
        plan=plan(),
        owner={"status": {"status": "PENDING"}},
        last=last,
        absent=(JOB,),
        drifted=(),
        reapply_gaps=True,
    )
    assert (again.publish, again.absent) == (True, (JOB,))


def test_a_status_left_behind_by_a_newer_owner_version_is_published_again() -> None:
    last = Published(fingerprint=plan(version="1").fingerprint(), resource_version="1")
    newer = plan(version="2")
    left_behind = publication(
        plan=newer,
        owner={"status": {}},
        last=last,
        absent=(),
        drifted=(),
        reapply_gaps=False,
    )
    arrived = publication(
        plan=newer,
        owner={"status": {"status": "PENDING"}},
        last=last,
        absent=(),
        drifted=(),
        reapply_gaps=False,
    )
    assert (left_behind.publish, arrived.publish) == (True, False)


def test_events_alone_do_not_make_news() -> None:
    from kaiwo_contracts.plans import EventIntent

    with_event = plan().model_copy(
        update={"events": (EventIntent(type="Normal", reason="R", message="m"),)}
    )
    fingerprint, own = decision_fingerprint(with_event)
    assert (fingerprint, own) == (plan().fingerprint(), False)


GATED_JOB = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "a", "namespace": "t"},
    "spec": {"suspend": True, "parallelism": 1, "template": {"spec": {"containers": []}}},
}


def gated_plan_with_an_event() -> Plan:
    from kaiwo_contracts.plans import EventIntent

    return plan().model_copy(
        update={
            "desired": (GATED_JOB,),
            "events": (EventIntent(type="Normal", reason="R", message="m"),),
        }
    )


def test_the_decision_of_a_gated_plan_leaves_out_its_events_and_the_gate_only() -> None:
    ungated = {**GATED_JOB, "spec": {"parallelism": 1, "template": {"spec": {"containers": []}}}}
    same_decision = plan().model_copy(update={"desired": (ungated,)})

    fingerprint, own = decision_fingerprint(gated_plan_with_an_event())

    assert (fingerprint, own) == (same_decision.fingerprint(), False)


def test_a_published_plan_carries_its_own_fingerprint_and_an_unpublished_one_none() -> None:
    gated = gated_plan_with_an_event()
    first = publication(plan=gated, owner={}, last=None, absent=(), drifted=(), reapply_gaps=False)
    again = publication(
        plan=gated,
        owner={"status": {"status": "PENDING"}},
        last=first.record,
        absent=(),
        drifted=(),
        reapply_gaps=False,
    )

    assert first.plan_fingerprint == gated.fingerprint() != first.fingerprint
    assert (again.publish, again.plan_fingerprint) == (False, None)
