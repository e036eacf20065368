"""This replica's requests per Model: what its load reports say.

A request counts as *active* from the moment it is routed to its Model until its answer is
sent (waiting for an endpoint included, as upstream counts it), and as *waiting* while it
waits for a ready endpoint. Requests for an adapter count for their Model: they load its
servers (upstream counts them under ``<model>_<adapter>``, which its autoscaler never reads).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from kaiwo_contracts.plans import ObjectRef

MODEL_API_VERSION: Final = "kubeai.org/v1"


def model_ref(*, uid: str, namespace: str, name: str) -> ObjectRef:
    """A Model as a load report names it (the one reference type, frozen and hashable, so it
    keys the counts below and goes on the wire as it is)."""
    return ObjectRef(
        api_version=MODEL_API_VERSION, kind="Model", name=name, namespace=namespace, uid=uid
    )


@dataclass(frozen=True, slots=True)
class ModelRequests:
    model: ObjectRef
    active: int
    waiting: int
    messages: int = 0
    """Of ``active``, messenger requests (the sample of the stream's backlog, decision 0057)."""


@dataclass
class RequestCounts:
    """Active and waiting requests per Model at this replica."""

    _active: dict[ObjectRef, int] = field(default_factory=dict)
    _waiting: dict[ObjectRef, int] = field(default_factory=dict)
    _messages: dict[ObjectRef, int] = field(default_factory=dict)

    def started(self, model: ObjectRef, *, message: bool = False) -> None:
        """Count a request; ``message``: one of the messenger's."""
        self._active[model] = self._active.get(model, 0) + 1
        if message:
            self._messages[model] = self._messages.get(model, 0) + 1

    def finished(self, model: ObjectRef, *, message: bool = False) -> None:
        _decrement(self._active, model)
        if message:
            _decrement(self._messages, model)

    def wait_started(self, model: ObjectRef) -> bool:
        """Count a request waiting for an endpoint; True when it is the Model's first (the
        replica reports at once, so a Model at zero is scaled up without waiting a tick)."""
        waiting = self._waiting.get(model, 0) + 1
        self._waiting[model] = waiting
        return waiting == 1

    def wait_ended(self, model: ObjectRef) -> None:
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
                self._active.items(), key=lambda item: (item[0].namespace or "", item[0].name)
            )
        )


def _decrement(counts: dict[ObjectRef, int], model: ObjectRef) -> None:
    left = counts.get(model, 0) - 1
    if left > 0:
        counts[model] = left
    else:
        counts.pop(model, None)
