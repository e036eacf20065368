"""A planning context carried along plans as a fresh one does, byte for byte.

The planner service keeps one :class:`PlanningContext` and moves it from state to state,
telling it which kinds changed (``PlanningContextKeeper``); values that read none of them are
kept, and values of one owner are kept per version of their inputs. A value kept when it
should have been worked out again would make the service's plan differ from the one a
fresh planner (another replica, a restart, replay) makes from the same observations.

Each case is a sequence of observations, so the target runs a quarter of the profile's
cases (250 in CI). For random sequences of observations (objects drawn from the models'
schemas as in :mod:`tests.fuzz.planning.test_planning_fuzz`; later versions of the same
objects with a new status, a new spec, new labels, or deleted; the owners' children as
their first plans asked for them; the monitor's findings), after each one every owner the
projection holds is planned twice, with the carried context and with a fresh one: the
canonical JSON of the two results must be equal. The API server's rule is kept:
``metadata.generation`` moves when, and only when, the spec does.
"""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kaiwo_contracts.events import ObservedObjectV1
from kaiwo_contracts.plans import canonical_json
from kaiwo_planner.domain.planning import PlanningResult, plan_object
from kaiwo_planner.domain.state.context_keeper import PlanningContextKeeper
from kaiwo_planner.domain.state.planning_context import PlanningContext
from kaiwo_planner.domain.state.projection import Projection
from kaiwo_planner.domain.state.workload_finding import WorkloadFinding

from tests.fuzz.planning.test_planning_fuzz import (
    OWNER_KINDS,
    OWNERS,
    children_of,
    namespaces,
    nodes,
    statuses,
)
from tests.fuzz.profiles import PROFILE

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
OWNER_KIND_NAMES = frozenset({"KaiwoJob", "KaiwoService", "KaiwoQueueConfig", "Model"})
SETTINGS = st.sampled_from(OWNER_KINDS).flatmap(lambda model: OWNERS[model])


class Cluster:
    """Observations applied in order, as the planner service applies them."""

    def __init__(self) -> None:
        self.projection = Projection()
        self.contexts = PlanningContextKeeper()
        self.versions: dict[str, int] = {}
        self.generations: dict[str, tuple[int, str]] = {}
        self.sequence = 0

    def observe(self, obj: dict[str, Any], event: str = "MODIFIED") -> None:
        meta = obj.get("metadata")
        if not isinstance(meta, dict) or not isinstance(meta.get("uid"), str):
            return
        uid = meta["uid"]
        self.sequence += 1
        self.versions[uid] = self.versions.get(uid, 0) + 1
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(self.versions[uid])
        # The API server moves the generation when, and only when, the spec changes.
        spec = repr(obj.get("spec"))
        generation, known = self.generations.get(uid, (0, ""))
        if spec != known or generation == 0:
            generation += 1
        self.generations[uid] = (generation, spec)
        obj["metadata"]["generation"] = generation
        try:
            observed = ObservedObjectV1(
                kind=obj["kind"],
                api_version=obj["apiVersion"],
                namespace=meta.get("namespace"),
                name=meta["name"],
                uid=uid,
                resource_version=str(self.versions[uid]),
                event_type=event,  # type: ignore[arg-type]
                object=obj,
            )
            self.projection.apply(observed, sequence=self.sequence)
        except (KeyError, TypeError, ValueError, AttributeError):
            return  # not an observation the watcher could publish, or poison to the planner

    def owners(self) -> list[dict[str, Any]]:
        found = []
        for kind in OWNER_KIND_NAMES:
            group = "kubeai.org" if kind == "Model" else "kaiwo.silogen.ai"
            found += self.projection.objects_of_kind(group=group, kind=kind)
        return sorted(found, key=lambda o: str(o["metadata"]["uid"]))


def _result(result: PlanningResult) -> str:
    return canonical_json(
        {
            "plan": result.plan.model_dump(mode="json") if result.plan is not None else None,
            "replanAt": result.replan_at.isoformat() if result.replan_at else None,
            "alsoReplan": [ref.model_dump(mode="json") for ref in result.also_replan],
        }
    )


def plan_both_ways(cluster: Cluster, *, now: datetime) -> list[dict[str, Any]]:
    """Plan every owner with the carried context and with a fresh one; the plans made."""
    carried = cluster.contexts.context(cluster.projection)
    fresh = PlanningContext.of(cluster.projection.cluster_state())
    plans = []
    for owner in cluster.owners():
        kept = plan_object(owner=owner, context=carried, now=now)
        afresh = plan_object(owner=owner, context=fresh, now=now)
        assert _result(kept) == _result(afresh), owner["metadata"]
        if afresh.plan is not None:
            plans.append({"owner": owner, "plan": afresh.plan})
    return plans


@st.composite
def changed(draw: st.DrawFn, obj: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """A later version of ``obj``: a new status, a new spec, new labels, or its deletion."""
    change = draw(st.sampled_from(["status", "spec", "labels", "annotations", "deleted"]))
    later = copy.deepcopy(obj)
    if change == "status":
        later["status"] = draw(statuses)
    elif change == "spec":
        drawn = draw(SETTINGS)
        if isinstance(drawn, dict) and drawn.get("kind") == obj.get("kind"):
            later["spec"] = drawn.get("spec")
        else:
            later["spec"] = {**(later.get("spec") or {}), "image": draw(st.sampled_from("xyz"))}
    elif change == "labels":
        labels = draw(st.dictionaries(st.sampled_from(["team", "tier"]), st.sampled_from("ab")))
        later["metadata"] = {**later["metadata"], "labels": labels}
    elif change == "annotations":
        # Opted in to GPU idle preemption, or not: the planner reads the annotations itself.
        policy = draw(st.sampled_from([None, "OnPressure", "Always"]))
        annotations = {} if policy is None else {"kaiwo.silogen.ai/gpu-preemption.policy": policy}
        later["metadata"] = {**later["metadata"], "annotations": annotations}
    return later, "DELETED" if change == "deleted" else "MODIFIED"


def finding(uid: str, at: datetime, draw: st.DrawFn) -> WorkloadFinding:
    idle = draw(st.booleans())
    return WorkloadFinding(
        uid=uid,
        at=at,
        measured=draw(st.booleans()),
        vendor="amd",
        gpu_count=draw(st.integers(0, 8)),
        threshold_ratio=0.2,
        underutilized_since=at - timedelta(minutes=draw(st.integers(0, 120))),
        idle_threshold_ratio=0.01 if idle else None,
        idle_since=at - timedelta(minutes=draw(st.integers(0, 120))) if idle else None,
        utilization_ratio=draw(st.sampled_from([0.0, 0.1, 0.5])),
        idle_utilization_ratio=draw(st.sampled_from([0.0, 0.005, 0.5])) if idle else None,
        idle_aggregation=draw(st.sampled_from(["Min", "Max", "Avg"])) if idle else None,
    )


@pytest.mark.slow
@pytest.mark.timeout(900)
@PROFILE.__class__(PROFILE, max_examples=max(PROFILE.max_examples // 4, 1))
@given(
    start=st.tuples(namespaces, st.lists(nodes(), max_size=2), st.lists(SETTINGS, max_size=3)),
    data=st.data(),
)
def test_a_carried_context_plans_as_a_fresh_one(
    start: tuple[list[Any], list[Any], list[Any]], data: st.DataObject
) -> None:
    cluster = Cluster()
    spaces, drawn_nodes, objects = start
    for obj in (*spaces, *drawn_nodes, *objects):
        if isinstance(obj, dict):
            cluster.observe(obj, "ADDED")
    now = NOW
    for _ in range(data.draw(st.integers(1, 8), label="steps")):
        plans = plan_both_ways(cluster, now=now)
        step = data.draw(st.sampled_from(["children", "change", "new", "finding", "later"]))
        configs = cluster.projection.objects_of_kind(
            group="config.kaiwo.silogen.ai", kind="KaiwoConfig"
        )
        live = [*cluster.owners(), *configs]
        if step == "children" and plans:
            made = data.draw(st.sampled_from(plans))
            for child in data.draw(children_of(made["plan"])):
                cluster.observe(child, "ADDED")
        elif step == "change" and live:
            later, event = data.draw(changed(copy.deepcopy(dict(data.draw(st.sampled_from(live))))))
            cluster.observe(later, event)
        elif step == "new":
            obj = data.draw(st.one_of(SETTINGS, nodes()))
            if isinstance(obj, dict):
                cluster.observe(obj, "ADDED")
        elif step == "finding" and live:
            uid = str(data.draw(st.sampled_from(live))["metadata"]["uid"])
            cluster.projection.apply_finding(
                finding(uid, now, data.draw), sequence=cluster.sequence + 1
            )
            cluster.sequence += 1
        else:
            now += timedelta(minutes=data.draw(st.integers(1, 90)))
    plan_both_ways(cluster, now=now)


def test_the_comparison_sees_a_value_kept_too_long() -> None:
    # A carried context that missed a change (here: told nothing changed) plans from the
    # old KaiwoConfig; the fresh one does not. The property above would report it.
    cluster = Cluster()
    config = {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoConfig",
        "metadata": {"name": "kaiwo", "uid": "config"},
        "spec": {"defaultClusterQueueName": "first"},
    }
    job = {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoJob",
        "metadata": {"name": "train", "namespace": "team-a", "uid": "job"},
        "spec": {"image": "busybox"},
    }
    cluster.observe(config, "ADDED")
    cluster.observe(job, "ADDED")
    stale = PlanningContext.of(cluster.projection.cluster_state())
    owner = cluster.owners()[0]
    plan_object(owner=owner, context=stale, now=NOW)
    cluster.observe({**config, "spec": {"defaultClusterQueueName": "second"}})
    blind = stale.moved_to(cluster.projection.cluster_state(), changed=())
    fresh = PlanningContext.of(cluster.projection.cluster_state())
    kept = plan_object(owner=owner, context=blind, now=NOW)
    afresh = plan_object(owner=owner, context=fresh, now=NOW)
    assert kept.plan is not None and afresh.plan is not None
    assert kept.plan.status is not None and afresh.plan.status is not None
    assert _result(kept) != _result(afresh)
