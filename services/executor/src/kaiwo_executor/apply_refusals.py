"""The owner's status tells when the API server refused to apply one of its objects.

A plan's status is decided before the executor writes anything; only the executor learns that
the API server refused a manifest for good (422 Invalid: a CEL rule of the CRD, a webhook;
403 Forbidden: a policy). The status it writes then carries the condition ``ApplyRefused``
(:func:`with_refusals`), naming each refused object and quoting the API server, which names
the field and the rule: ``ResourceFlavor gpu: ResourceFlavor.kueue.x-k8s.io "gpu" is invalid:
spec: Invalid value: "object": nodeLabels are immutable when topologyName is set``. The
executor alone writes it, and drops it from the next status it writes once every apply of a
plan went through (a refused object is never remembered as applied, so each later plan tries
it again). The Warning Event ``ApplyFailed`` says the same once per plan and object.

An apply of a kind the API server does not serve (Kueue, KubeRay or AppWrapper not installed)
is answered "404 page not found" by its router; that refusal names the component to install
instead (:func:`not_served_message`, decision 0265).

Pure: the caller passes the refusals and the time.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from kaiwo_contracts.plans import ObjectRef

APPLY_REFUSED: Final = "ApplyRefused"
"""The condition type."""
MAX_NAMED: Final = 3
"""Refused objects quoted in the condition's message (the Events name each one)."""
MAX_QUOTED: Final = 400
"""Characters of one API message kept (a webhook may answer at length)."""
_REASON: Final = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")
NOT_SERVED: Final = "NotServed"
"""The reason of a refusal of a kind the API server does not serve."""
COMPONENTS: Final = {
    "kueue.x-k8s.io": "Kueue",
    "ray.io": "KubeRay",
    "workload.codeflare.dev": "AppWrapper",
}
"""The third-party components whose kinds the operator writes, by API group."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """An apply the API server refused for good: the object, its reason, its message."""

    target: ObjectRef
    reason: str
    """The API server's reason (``Invalid``, ``Forbidden``...), or empty."""
    message: str

    def describe(self) -> str:
        kind_and_name = f"{self.target.kind} " + (
            f"{self.target.namespace}/{self.target.name}"
            if self.target.namespace
            else self.target.name
        )
        quoted = " ".join(self.message.split())
        if len(quoted) > MAX_QUOTED:
            quoted = quoted[: MAX_QUOTED - 3] + "..."
        return f"{kind_and_name}: {quoted}"


def not_served_message(api_version: str, kind: str) -> str:
    """What a refusal of ``kind`` says when the API server does not serve it: the component
    to install, by the kind's API group."""
    group = api_version.rpartition("/")[0]
    component = COMPONENTS.get(group, "the component that defines it")
    return (
        f"the API server does not serve {api_version} {kind}: install {component} "
        "(docs/operations.md, What the cluster needs)"
    )


def with_refusals(
    status: Mapping[str, Any], refusals: Sequence[Refusal], *, now: datetime
) -> dict[str, Any]:
    """``status`` with the ``ApplyRefused`` condition when there are ``refusals``, and without
    it when there are none. Its ``lastTransitionTime`` is the one ``status`` carries over
    (the planner keeps conditions it does not set) while it stays true, else ``now``."""
    kept = []
    before: Mapping[str, Any] | None = None
    for condition in status.get("conditions") or ():
        if isinstance(condition, Mapping) and condition.get("type") == APPLY_REFUSED:
            before = condition
            continue
        kept.append(dict(condition))
    if refusals:
        named = "; ".join(refusal.describe() for refusal in refusals[:MAX_NAMED])
        more = len(refusals) - MAX_NAMED
        since = (
            before.get("lastTransitionTime")
            if before is not None and before.get("status") == "True"
            else None
        )
        kept.append(
            {
                "type": APPLY_REFUSED,
                "status": "True",
                "lastTransitionTime": since or _format_time(now),
                "reason": _condition_reason(refusals[0].reason),
                "message": "the API server refused: "
                + named
                + (f"; and {more} more" if more > 0 else ""),
            }
        )
    if not kept and "conditions" not in status:
        return dict(status)
    return {**status, "conditions": kept}


def _condition_reason(api_reason: str) -> str:
    """A condition reason must be CamelCase-like; the API's ``Invalid`` or ``Forbidden`` are."""
    return api_reason if _REASON.match(api_reason or "") else "Refused"


def _format_time(moment: datetime) -> str:
    """RFC 3339 in UTC, whole seconds: what ``metav1.Time`` holds."""
    return moment.astimezone(UTC).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")
