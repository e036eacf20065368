"""One planning context kept along a projection, for a planner that plans as it observes.

:class:`PlanningContextKeeper` gives the context of the projection's current state: the
one it gave last, moved to the new state and told which kinds changed since
(:meth:`~kaiwo_planner.domain.state.projection.Projection.kinds_changed_since`), so values
that read none of them are kept. A projection replaced (a snapshot restored) starts a fresh
context.
"""

from __future__ import annotations

from kaiwo_planner.domain.state.planning_context import PlanningContext
from kaiwo_planner.domain.state.projection import Projection


class PlanningContextKeeper:
    """The planning context of a projection, moved along with it."""

    __slots__ = ("_context", "_projection", "_version")

    def __init__(self) -> None:
        self._context: PlanningContext | None = None
        self._projection: Projection | None = None
        self._version = -1

    def context(self, projection: Projection) -> PlanningContext:
        """The context of ``projection``'s current state."""
        context = self._context
        if context is None or projection is not self._projection:
            context = PlanningContext.of(projection.cluster_state())
        elif projection.version != self._version:
            context = context.moved_to(
                projection.cluster_state(),
                changed=projection.kinds_changed_since(self._version),
            )
        self._context, self._projection, self._version = context, projection, projection.version
        return context
