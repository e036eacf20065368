"""Every metric of the executor (``kaiwo_executor_*``); labels carry kinds, never names or uids."""

from __future__ import annotations

from typing import Literal

from kaiwo_contracts.events.results import ResultOutcome
from kaiwo_runtime.metrics import MetricsRegistry

PlanOutcome = ResultOutcome | Literal["owner_deleted", "stale", "superseded", "skipped", "retry"]
"""What became of a delivered plan: the ``outcome`` label values of ``kaiwo_executor_plans``."""

_APPLY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class ExecutorMetrics:
    """The executor's counters and histograms, created in ``registry``."""

    def __init__(self, registry: MetricsRegistry | None = None) -> None:
        self.registry = registry or MetricsRegistry()
        self.actions = self.registry.counter(
            "executor_actions",
            "Actions taken for plans, by target kind and outcome "
            "(applied, unchanged, deleted, failed)",
            ("kind", "outcome"),
        )
        self.apply_duration = self.registry.histogram(
            "executor_apply_duration_seconds",
            "Time to apply (or patch) one desired object, retries included, by kind",
            ("kind",),
            buckets=_APPLY_BUCKETS,
        )
        self.api_retries = self.registry.counter(
            "executor_api_retries",
            "API calls retried, by the HTTP code that caused it (0: no answer)",
            ("code",),
        )
        self.plans = self.registry.counter(
            "executor_plans",
            "Plans handled: applied, failed (an action failed), skipped (already executed), "
            "owner_deleted (its owner was deleted while the plan was on its way), "
            "superseded (a later plan of the owner was started), "
            "stale (made from an older version of its owner or a configuration), "
            "retry (the API server kept failing; JetStream redelivers)",
            ("outcome",),
        )
        self.plans_refused = self.registry.counter(
            "executor_plans_refused",
            "Plans refused by admission (an owner that does not exist, a source that differs "
            "from the live object, an object outside the owner's confinement) and "
            "dead-lettered, by owner kind",
            ("owner_kind",),
        )
        self.source_mismatches = self.registry.counter(
            "executor_source_mismatches",
            "Sources of plans (the owner, a configuration object) that did not match the live "
            "object, by source kind and verdict: stale (the object changed since; the plan is "
            "dropped) or refused (the API server never held it so: forged, or the planner's "
            "copy is wrong; the plan is refused and the object observed again)",
            ("source_kind", "verdict"),
        )
        self.writes_skipped = self.registry.counter(
            "executor_writes_skipped",
            "Desired objects not written because their manifest equals the last one applied",
            ("kind",),
        )
        self.partitions_held = self.registry.gauge(
            "executor_partitions_held",
            "Plan partitions whose lease this replica holds and reads (active-active only)",
        )

    def plan_handled(self, outcome: PlanOutcome) -> None:
        """Count one delivered plan by what became of it."""
        self.plans.labels(outcome=outcome).inc()
