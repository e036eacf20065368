"""Planning one owner in a fresh context, for tests that hold a ClusterState.

``plan_object`` takes a :class:`PlanningContext`; a test that built a cluster state plans in
a fresh context of it, as replay does (tests of contexts carried along build their own).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from kaiwo_contracts.plans import Plan
from kaiwo_planner.domain.planning import PlanningResult, plan_object
from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.state.planning_context import PlanningContext


def planning(*, owner: Mapping[str, Any], cluster: ClusterState, now: datetime) -> PlanningResult:
    """The whole planning result of ``owner`` in a fresh context of ``cluster``."""
    return plan_object(owner=owner, context=PlanningContext.of(cluster), now=now)


def planned(*, owner: Mapping[str, Any], cluster: ClusterState, now: datetime) -> Plan | None:
    """The plan of ``owner`` in a fresh context of ``cluster`` (None: it owns nothing)."""
    return planning(owner=owner, cluster=cluster, now=now).plan
