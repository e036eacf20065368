"""This replica's requests per Model: what its load reports say.

A request counts as *active* from the moment it is routed to its Model until its answer is
sent (waiting for an endpoint included, as upstream counts it), and as *waiting* while it
waits for a ready endpoint. Requests for an adapter count for their Model: they load its
servers (upstream counts them under ``<model>_<adapter>``, which its autoscaler never reads).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class ModelKey:
    """A Model as a load report names it."""

    uid: str
    namespace: str
    name: str


@dataclass(frozen=True, slots=True)
class ModelRequests:
    model: ModelKey
    active: int
    waiting: int
    messages: int = 0
    """Of ``active``, messenger requests (the sample of the stream's backlog, decision 0057)."""


@dataclass
class RequestCounts:
    """Active and waiting requests per Model at this replica."""

    _active: dict[ModelKey, int] = field(default_factory=dict)
    _waiting: dict[ModelKey, int] = field(default_factory=dict)
    _messages: dict[ModelKey, int] = field(default_factory=dict)

    def started(self, model: ModelKey, *, message: bool = False) -> None:
        """Count a request; ``message``: one of the messenger's."""
        self._active[model] = self._active.get(model, 0) + 1
        if message:
            self._messages[model] = self._messages.get(model, 0) + 1

    def finished(self, model: ModelKey, *, message: bool = False) -> None:
        _decrement(self._active, model)
        if message:
            _decrement(self._messages, model)

    def wait_started(self, model: ModelKey) -> bool:
        """Count a request waiting for an endpoint; True when it is the Model's first (the
        replica reports at once, so a Model at zero is scaled up without waiting a tick)."""
        waiting = self._waiting.get(model, 0) + 1
        self._waiting[model] = waiting
        return waiting == 1

    def wait_ended(self, model: ModelKey) -> None:
        _decrement(self._waiting, model)

    def current(self) -> tuple[ModelRequests, ...]:
        """The Models with requests, sorted by namespace and name."""
        return tuple(
            ModelRequests(
                model=model,
                active=count,
                waiting=self._waiting.get(model, 0),
                messages=self._messages.get(model, 0),
            )
            for model, count in sorted(
                self._active.items(), key=lambda item: (item[0].namespace, item[0].name)
            )
        )


def _decrement(counts: dict[ModelKey, int], model: ModelKey) -> None:
    left = counts.get(model, 0) - 1
    if left > 0:
        counts[model] = left
    else:
        counts.pop(model, None)
