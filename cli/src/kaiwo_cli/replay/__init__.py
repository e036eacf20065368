"""Replay: re-run the pure planner over recorded observations and compare with recorded plans.

Every recorded plan (``PlanDecidedV1``) says what it was computed from: ``obs_sequence``, the
``KAIWO_OBS`` stream sequence of the last observation the planner's projection had applied,
and ``planned_at``, the ``now`` it planned with. So, for each plan in order of
``obs_sequence``:

1. apply to a fresh :class:`~kaiwo_planner.domain.state.projection.Projection` every recorded
   observation — of *all* objects: nodes, configuration, other workloads, children — in order
   of its recorded stream sequence (the recorder keeps it in the event's metadata), up to and
   including ``obs_sequence``;
   and, likewise, every recorded monitor finding (``UtilizationV1`` of ``KAIWO_MON``) up to
   and including the plan's ``mon_sequence``, so decisions that depended on findings (the
   ``ResourceUnderutilization`` condition, terminations, idle preemption) are reproduced;
   and every recorded autoscaler decision (``ScaleDecidedV1`` of ``KAIWO_GATEWAY``) up to and
   including the plan's ``scale_sequence``, so a Model's plan scales it as it did. Exactly
   those, and none later, even when a plan judged before had read later ones: each planner
   replica reads those streams on its own (decision 0220);
2. call :func:`~kaiwo_planner.domain.planning.plan_object` with the plan's owner as the
   projection holds it, the planning context of the projection's cluster state and
   ``now = planned_at``. The context is carried from plan to plan as the planner service
   carries it, and a plan that differs is judged again from a fresh one; with
   ``fresh_contexts`` every plan gets a fresh one, so a value the planner service kept when
   it should have worked it out again shows as a difference (decision 0052);
3. compare the replayed plan with the recorded one: equal fingerprints (the SHA-256 of the
   plan's canonical JSON) and observed resourceVersion, and every object the recorded plan
   named ``absent`` (``drifted``) is also one the projection does not hold (holds without
   what the plan asks): *reproduced*. (A plan names only the gaps that are new since its
   owner was last planned, which depends on that history; the projection confirms each.)
   Otherwise: *differs*, with a unified diff of the two as canonical YAML.

Plans without ``planned_at`` (made outside the planner service) and plans whose owner the
projection does not hold are *skipped*, with the reason.

Every planner replica, with partitions too, holds a projection of the whole cluster: it
reads the whole of ``KAIWO_OBS``, ``KAIWO_MON`` and ``KAIWO_GATEWAY`` (decision 0030), and
plans only the owners of its partitions. So one projection serves the plans of every
replica, each judged with the inputs its own replica had read (decision 0220).

Modules: ``recorded`` (reading the store's events in stream order), ``readings_as_of`` (the
findings and scale decisions as of any plan's sequences), ``replanning`` (the pure
replay, :func:`~kaiwo_cli.replay.replanning.replay_recorded`: events in, verdicts out, for
tests and benchmarks), ``comparison`` (verdicts and diffs), ``store``
(:func:`~kaiwo_cli.replay.store.replay_from_store`, which reads the events as it goes) and
``processes`` (:func:`~kaiwo_cli.replay.processes.replay_in_processes`: one process per
part of the workloads, the verdicts merged in publishing order).
"""
