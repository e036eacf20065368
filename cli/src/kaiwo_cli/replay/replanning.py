"""Re-planning: a fresh projection fed the recorded inputs up to each plan's sequences, and the
pure planner run with the plan's ``now`` (pure: events in, verdicts out)."""

from __future__ import annotations

from collections.abc import (
    Callable,
    Iterable,
    Sequence,
)
from dataclasses import dataclass, replace

from kaiwo_contracts.events import ObservedObjectV1, PlanDecidedV1
from kaiwo_eventstore import StoredEvent, cyclic_gc_paused
from kaiwo_planner.domain.planning import plan_object
from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.state.planning_context import (
    FINDINGS,
    SCALE_REQUESTS,
    PlanningContext,
)
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
from kaiwo_cli.replay.readings_as_of import CHANGES_KEPT, ReadingsAsOf
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


class Replayer:
    """The projection a replay builds, the verdicts on the plans it is handed in order, and
    their tally. Plans are judged as they come, so a caller may keep only some verdicts.

    The inputs are taken in forward only, each in stream order, as far as the plans need.
    Observations are applied to :attr:`projection`, which plans are judged against: plans
    come in ``obsSequence`` order (every planner replica reads the whole of ``KAIWO_OBS``).
    Findings and scale decisions go to the projection too, and each plan is judged with
    those *as of its own* ``monSequence`` and ``scaleSequence`` (:class:`ReadingsAsOf`):
    planner replicas read ``KAIWO_MON`` and ``KAIWO_GATEWAY`` each on its own, so a plan
    judged after another may have read fewer of them (decision 0220)."""

    def __init__(
        self,
        plan_fn: PlanFunction,
        *,
        keep: Callable[[PlanReplay], bool] | None = None,
        on_verdict: VerdictSink | None = None,
        fresh_contexts: bool = False,
        changes_kept: int = CHANGES_KEPT,
    ) -> None:
        self._plan_fn = plan_fn
        self._fresh_contexts = fresh_contexts
        self._contexts = _CarriedContext()
        self._keep = keep
        self._on_verdict = on_verdict
        # The observations are not shared with anything else: no copies with shared strings.
        self.projection = Projection(share_strings=False)
        self.findings = ReadingsAsOf(self.projection.findings, kept=changes_kept)
        self.scale_requests = ReadingsAsOf(self.projection.scale_requests, kept=changes_kept)
        self._as_of: tuple[ClusterState, ClusterState] | None = None
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
        """Take in findings in sequence order (those at or below a sequence already taken
        change nothing), as the planner takes them in."""
        findings = self.findings
        for sequence, finding in items:
            before = findings.latest
            self.projection.apply_finding(finding, sequence=sequence)
            findings.took(sequence, finding.uid, before)

    def apply_scale_requests(self, items: Iterable[tuple[int, ScaleRequest]]) -> None:
        """Take in scale decisions in sequence order, as :meth:`apply_findings` findings."""
        requests = self.scale_requests
        for sequence, request in items:
            before = requests.latest
            self.projection.apply_scale_request(request, sequence=sequence)
            requests.took(sequence, request.uid, before)

    def judge(self, event: StoredEvent, decided: PlanDecidedV1 | None) -> PlanReplay:
        state = self._state_as_of(decided) if decided is not None else None
        if decided is None:
            verdict = skipped_verdict(event, UNPARSABLE)
        elif state is None:
            verdict = skipped_verdict(event, self._let_go_reason(decided), decided)
        else:

            def fresh(_projection: Projection) -> PlanningContext:
                return PlanningContext.of(state)

            def carried(projection: Projection) -> PlanningContext:
                return self._contexts.context(projection, state)

            context_of = fresh if self._fresh_contexts else carried
            verdict = judge_plan(event, decided, self.projection, self._plan_fn, context_of)
            if verdict.outcome == "differs" and not self._fresh_contexts:
                # Confirmed from scratch: the reference.
                verdict = judge_plan(event, decided, self.projection, self._plan_fn, fresh)
        self.record(verdict)
        return verdict

    def _state_as_of(self, decided: PlanDecidedV1) -> ClusterState | None:
        """The projection's cluster state with the findings and scale decisions as of the
        plan's sequences; None when the replay let go of what it would take to go back."""
        findings = self.findings.as_of(decided.mon_sequence)
        requests = self.scale_requests.as_of(decided.scale_sequence)
        if findings is None or requests is None:
            return None
        state = self.projection.cluster_state()
        if state.findings is findings and state.scale_requests is requests:
            return state  # the latest of each, as one planner's plans have them
        held = self._as_of
        if (
            held is not None
            and held[0] is state
            and held[1].findings is findings
            and held[1].scale_requests is requests
        ):
            return held[1]
        as_of = replace(state, findings=findings, scale_requests=requests)
        self._as_of = (state, as_of)
        return as_of

    def _let_go_reason(self, decided: PlanDecidedV1) -> str:
        behind = [
            f"{name} up to {sequence}, and the replay keeps them as of {kept.floor} on"
            for name, sequence, kept in (
                ("monitor findings", decided.mon_sequence, self.findings),
                ("scale decisions", decided.scale_sequence, self.scale_requests),
            )
            if sequence < kept.floor
        ]
        return f"its planner had read {' and '.join(behind)} (too far behind to go back to)"

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


class _CarriedContext:
    """One planning context carried from plan to plan, as the planner service's
    :class:`~kaiwo_planner.domain.state.context_keeper.PlanningContextKeeper` carries it along
    its projection, over states whose findings and scale decisions are those as of each
    plan's sequences: moved to each new state, told the kinds the projection changed since,
    and the findings and the scale decisions when they are not the same as the last."""

    __slots__ = ("_context", "_version")

    def __init__(self) -> None:
        self._context: PlanningContext | None = None
        self._version = -1

    def context(self, projection: Projection, state: ClusterState) -> PlanningContext:
        context = self._context
        if context is None:
            context = PlanningContext.of(state)
        elif context.cluster is not state:
            last = context.cluster
            changed = set(projection.kinds_changed_since(self._version))
            if last.findings is not state.findings:
                changed.add(FINDINGS)
            if last.scale_requests is not state.scale_requests:
                changed.add(SCALE_REQUESTS)
            context = context.moved_to(state, changed=changed)
        self._context, self._version = context, projection.version
        return context
