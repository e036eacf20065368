"""Re-planning: a fresh projection fed the recorded inputs up to each plan's sequences, and the
pure planner run with the plan's ``now`` (pure: events in, verdicts out)."""

from __future__ import annotations

from collections.abc import (
    Callable,
    Iterable,
    Sequence,
)
from dataclasses import dataclass

from kaiwo_contracts.events import ObservedObjectV1, PlanDecidedV1
from kaiwo_eventstore import StoredEvent, cyclic_gc_paused
from kaiwo_planner.domain.planning import plan_object
from kaiwo_planner.domain.state.context_keeper import PlanningContextKeeper
from kaiwo_planner.domain.state.planning_context import PlanningContext
from kaiwo_planner.domain.state.projection import Projection
from kaiwo_planner.domain.state.scale_request import ScaleRequest
from kaiwo_planner.domain.state.workload_finding import WorkloadFinding

from kaiwo_cli.replay.comparison import (
    UNPARSABLE,
    PlanFunction,
    PlanReplay,
    ReplayReport,
    VerdictSink,
    judge_plan,
    no_verdicts,
    skipped_verdict,
)
from kaiwo_cli.replay.recorded import (
    PLAN_TYPE,
    decided_plan,
    findings_in_stream_order,
    observations_in_stream_order,
    plan_order,
    scale_requests_in_stream_order,
)

Progress = Callable[[int, int | None], None]
"""Called with (plans done, plans in all, or None when not known: a streamed replay) while
replaying."""


def replay_recorded(
    *,
    observations: Iterable[StoredEvent],
    plans: Iterable[StoredEvent],
    findings: Iterable[StoredEvent] = (),
    scale_decisions: Iterable[StoredEvent] = (),
    plan_fn: PlanFunction = plan_object,
    progress: Progress | None = None,
    fresh_contexts: bool = False,
) -> ReplayReport:
    """Replay ``plans`` over ``observations``, ``findings`` and ``scale_decisions`` (as
    recorded; any order). See :func:`replay_from_store` for ``fresh_contexts``."""
    with cyclic_gc_paused():  # every collection would walk the whole recorded history
        return _replay(
            observations,
            plans,
            _Inputs(findings=findings, scale_decisions=scale_decisions),
            replayer=Replayer(plan_fn, fresh_contexts=fresh_contexts),
            progress=progress,
        )


@dataclass(frozen=True, slots=True)
class _Inputs:
    """The planning inputs besides observations."""

    findings: Iterable[StoredEvent]
    scale_decisions: Iterable[StoredEvent]


def _replay(
    observations: Iterable[StoredEvent],
    plans: Iterable[StoredEvent],
    inputs: _Inputs,
    *,
    replayer: Replayer,
    progress: Progress | None,
) -> ReplayReport:
    ordered = [(o.sequence, o.payload) for o in observations_in_stream_order(observations)]
    readings = findings_in_stream_order(inputs.findings)
    requests = scale_requests_in_stream_order(inputs.scale_decisions)
    recorded = sorted((event for event in plans if event.type == PLAN_TYPE), key=plan_order)
    applied = taken = scaled = 0
    for done, event in enumerate(recorded, start=1):
        decided = decided_plan(event)
        if decided is not None:
            upto = applied
            while upto < len(ordered) and ordered[upto][0] <= decided.obs_sequence:
                upto += 1
            replayer.apply_observations(ordered[applied:upto])
            applied = upto
            upto = taken
            while upto < len(readings) and readings[upto][0] <= decided.mon_sequence:
                upto += 1
            replayer.apply_findings(readings[taken:upto])
            taken = upto
            upto = scaled
            while upto < len(requests) and requests[upto][0] <= decided.scale_sequence:
                upto += 1
            replayer.apply_scale_requests(requests[scaled:upto])
            scaled = upto
        replayer.judge(event, decided)
        if progress is not None:
            progress(done, len(recorded))
    return replayer.report()


def _fresh_context(projection: Projection) -> PlanningContext:
    return PlanningContext.of(projection.cluster_state())


class Replayer:
    """The projection a replay builds, the verdicts on the plans it is handed in order, and
    their tally. Plans are judged as they come, so a caller may keep only some verdicts."""

    def __init__(
        self,
        plan_fn: PlanFunction,
        *,
        keep: Callable[[PlanReplay], bool] | None = None,
        on_verdict: VerdictSink | None = None,
        fresh_contexts: bool = False,
    ) -> None:
        self._plan_fn = plan_fn
        self._fresh_contexts = fresh_contexts
        self._contexts = PlanningContextKeeper()
        self._keep = keep
        self._on_verdict = on_verdict
        # The observations are not shared with anything else: no copies with shared strings.
        self.projection = Projection(share_strings=False)
        self.observations = 0
        self.obs_through = 0
        self._kept: list[PlanReplay] = []
        self._tally = no_verdicts()

    def apply_observations(self, items: Sequence[tuple[int, ObservedObjectV1]]) -> None:
        """Take in the observations up to the next plan, in sequence order: each object's
        once (:meth:`Projection.fast_forward`), to the same projection as one by one."""
        if not items:
            return
        self.projection.fast_forward(items)
        self.observations += len(items)
        self.obs_through = items[-1][0]

    def apply_findings(self, items: Iterable[tuple[int, WorkloadFinding]]) -> None:
        for sequence, finding in items:
            self.projection.apply_finding(finding, sequence=sequence)

    def apply_scale_requests(self, items: Iterable[tuple[int, ScaleRequest]]) -> None:
        for sequence, request in items:
            self.projection.apply_scale_request(request, sequence=sequence)

    def judge(self, event: StoredEvent, decided: PlanDecidedV1 | None) -> PlanReplay:
        if decided is None:
            verdict = skipped_verdict(event, UNPARSABLE)
        elif self._fresh_contexts:
            verdict = judge_plan(event, decided, self.projection, self._plan_fn, _fresh_context)
        else:
            verdict = judge_plan(
                event, decided, self.projection, self._plan_fn, self._contexts.context
            )
            if verdict.outcome == "differs":  # confirmed from scratch: the reference
                verdict = judge_plan(event, decided, self.projection, self._plan_fn, _fresh_context)
        self.record(verdict)
        return verdict

    def record(self, verdict: PlanReplay) -> None:
        self._tally[verdict.outcome] += 1
        if self._on_verdict is not None:
            self._on_verdict(verdict)
        if self._keep is None or self._keep(verdict):
            self._kept.append(verdict)

    def report(self, *, late_observations: int = 0) -> ReplayReport:
        return ReplayReport(
            plans=tuple(self._kept),
            observations=self.observations,
            tally=dict(self._tally),
            late_observations=late_observations,
        )
