"""Whether the Gateway a KaiwoService's HTTPRoute is attached to routes to it (decision 0269).

The operator makes the route (:mod:`kaiwo_planner.domain.children.http_route`); the Gateway's
controller answers in the route's ``status.parents``: an entry per Gateway it serves, with the
Gateway API's ``Accepted`` (the Gateway takes the route: its listeners allow the route's
namespace and kind) and ``ResolvedRefs`` (the backend Service was found) conditions, each
stamped with the route generation it judged. ``RouteAccepted`` carries that answer onto the
workload, so that a service whose pods serve but whose route is refused does not look
reachable: True once the Gateway accepted the route of today's generation and found its
backend; False, with the Gateway's own reason and words, when it refused either; Unknown while
no answer for today's generation is there (no controller serves the Gateway, or it has not
seen the route yet). A namespace whose config no longer names a gateway turns an earlier
condition False (``NoGateway``): conditions are never removed, and a stale True would say the
service is still routed.

An accepted route serves only through a Gateway that is programmed (its data plane set up:
the Gateway's own ``Programmed`` condition, decision 0273). A route accepted by a Gateway that
says it is not programmed, or not yet, is False or Unknown with ``GatewayNotProgrammed`` and
the Gateway's own reason and words; a Gateway the planner does not see, or one that says
nothing of it (older controllers), leaves the route's answer as it is. The route names no
listener (no ``sectionName``): it is served by every listener of the Gateway that takes
HTTPRoutes, so a Gateway programmed as a whole none of whose such listeners is programmed (a
certificate not found on its one HTTPS listener) serves it nowhere, and says so the same way,
naming the listener (decision 0277). A listener that says nothing of it leaves the answer.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Final

from kaiwo_contracts.crds.meta import CONDITION_REASON_PATTERN

from kaiwo_planner.domain.children.http_route import GATEWAY_GROUP
from kaiwo_planner.domain.status.conditions import ConditionSpec, condition_of

ROUTE_ACCEPTED: Final = "RouteAccepted"
REASON_ACCEPTED: Final = "Accepted"
REASON_NOT_ACCEPTED: Final = "NotAccepted"
REASON_REFS_NOT_RESOLVED: Final = "RefsNotResolved"
REASON_GATEWAY_NOT_ANSWERED: Final = "GatewayNotAnswered"
REASON_NO_GATEWAY: Final = "NoGateway"
REASON_GATEWAY_NOT_PROGRAMMED: Final = "GatewayNotProgrammed"
ROUTE_NOT_ACCEPTED_EVENT: Final = "RouteNotAccepted"

_MESSAGE_LIMIT: Final = 512
_REASON: Final = re.compile(CONDITION_REASON_PATTERN)


def route_condition(
    desired: Mapping[str, Any] | None,
    observed: Mapping[str, Any] | None,
    previous_status: Mapping[str, Any],
    gateway_object: Mapping[str, Any] | None = None,
) -> ConditionSpec | None:
    """``RouteAccepted`` for a workload whose plan makes the HTTPRoute ``desired`` (None: it
    makes none), given the route as observed (None: not made yet) and the Gateway it names as
    observed (None: not seen). None when there is no route and the workload never said
    anything of one."""
    if desired is None:
        if condition_of(previous_status, ROUTE_ACCEPTED) is None:
            return None
        return ConditionSpec(
            ROUTE_ACCEPTED,
            "False",
            REASON_NO_GATEWAY,
            "The namespace's AIMNamespaceConfig names no gateway: no HTTPRoute exposes the service",
        )
    name = str(desired["metadata"]["name"])
    parent = desired["spec"]["parentRefs"][0]
    gateway = f"{parent['namespace']}/{parent['name']}"
    if observed is None:
        return ConditionSpec(
            ROUTE_ACCEPTED,
            "Unknown",
            REASON_GATEWAY_NOT_ANSWERED,
            f"The HTTPRoute {name} for the Gateway {gateway} is not made yet",
        )
    generation = int((observed.get("metadata") or {}).get("generation") or 0)
    namespace = str((observed.get("metadata") or {}).get("namespace") or "")
    answers = [
        _conditions_by_type(answer)
        for answer in (observed.get("status") or {}).get("parents") or ()
        if isinstance(answer, Mapping) and _same_parent(answer.get("parentRef"), parent, namespace)
    ]
    verdict = _verdict(answers, generation=generation, route=name, gateway=gateway)
    if verdict.status != "True" or gateway_object is None:
        return verdict
    return _unless_not_programmed(verdict, gateway_object, route=name, gateway=gateway)


def _unless_not_programmed(
    accepted: ConditionSpec, gateway_object: Mapping[str, Any], *, route: str, gateway: str
) -> ConditionSpec:
    """``accepted``, unless the Gateway says it is not programmed, or not yet, or none of its
    listeners that take the route is."""
    took = f"The Gateway {gateway} accepted the HTTPRoute {route} but"
    programmed = _programmed_condition(gateway_object)
    if programmed is not None and _status(programmed) in ("False", "Unknown"):
        return _not_programmed(programmed, lambda yet: f"{took} is not programmed{yet}")
    listeners = _http_listeners_programmed(gateway_object)
    said = [(name, condition) for name, condition in listeners if condition is not None]
    if not said or len(said) < len(listeners) or any(_status(c) == "True" for _, c in said):
        return accepted
    name, condition = next(((n, c) for n, c in said if _status(c) == "False"), said[0])
    return _not_programmed(
        condition,
        lambda yet: (
            f"{took} none of its listeners that take HTTPRoutes is programmed{yet}: listener {name}"
        ),
    )


def _not_programmed(programmed: Mapping[str, Any], told: Callable[[str], str]) -> ConditionSpec:
    """False (or Unknown, not yet) ``GatewayNotProgrammed``: ``told`` given " yet" or not,
    then the condition's own reason and words."""
    refused = _status(programmed) == "False"
    reason = str(programmed.get("reason") or "")
    why = f" ({reason})" if _REASON.match(reason) else ""
    return ConditionSpec(
        ROUTE_ACCEPTED,
        "False" if refused else "Unknown",
        REASON_GATEWAY_NOT_PROGRAMMED,
        f"{told('' if refused else ' yet')}{why}{_told(programmed)}",
    )


def _programmed_condition(gateway: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The Gateway's own ``Programmed`` condition (None: it says none)."""
    status = gateway.get("status")
    return _conditions_by_type(status).get("Programmed") if isinstance(status, Mapping) else None


def _http_listeners_programmed(
    gateway: Mapping[str, Any],
) -> tuple[tuple[str, Mapping[str, Any] | None], ...]:
    """Each listener of the Gateway's status that takes HTTPRoutes (all kinds, when it names
    none: older controllers), with its ``Programmed`` condition (None: it says none)."""
    status = gateway.get("status")
    listeners = status.get("listeners") if isinstance(status, Mapping) else None
    return tuple(
        (str(listener.get("name") or ""), _conditions_by_type(listener).get("Programmed"))
        for listener in listeners or ()
        if isinstance(listener, Mapping) and _takes_http_routes(listener)
    )


def gateway_programming(gateway: Mapping[str, Any]) -> object:
    """What a route's condition reads of a Gateway: its ``Programmed`` condition and its
    HTTPRoute listeners' (not the routes they count, which move with every route)."""
    return _programmed_condition(gateway), _http_listeners_programmed(gateway)


def _takes_http_routes(listener: Mapping[str, Any]) -> bool:
    kinds = listener.get("supportedKinds")
    if kinds is None:
        return True  # older controllers name no kinds
    return isinstance(kinds, list) and any(
        isinstance(kind, Mapping)
        and kind.get("kind") == "HTTPRoute"
        and (kind.get("group") or GATEWAY_GROUP) == GATEWAY_GROUP
        for kind in kinds
    )


def _verdict(
    answers: list[dict[str, Mapping[str, Any]]], *, generation: int, route: str, gateway: str
) -> ConditionSpec:
    current = [a for a in answers if _judged(a.get("Accepted"), generation)]
    accepted = [a for a in current if a["Accepted"].get("status") == "True"]
    routed = [a for a in accepted if _status(a.get("ResolvedRefs")) != "False"]
    if routed:
        return ConditionSpec(
            ROUTE_ACCEPTED,
            "True",
            REASON_ACCEPTED,
            f"The Gateway {gateway} accepted the HTTPRoute {route}",
        )
    refused = next((a["Accepted"] for a in current if a["Accepted"].get("status") == "False"), None)
    if refused is not None:
        return ConditionSpec(
            ROUTE_ACCEPTED,
            "False",
            _reason(refused, REASON_NOT_ACCEPTED),
            f"The Gateway {gateway} does not accept the HTTPRoute {route}{_told(refused)}",
        )
    if accepted:
        unresolved = accepted[0]["ResolvedRefs"]
        return ConditionSpec(
            ROUTE_ACCEPTED,
            "False",
            _reason(unresolved, REASON_REFS_NOT_RESOLVED),
            f"The Gateway {gateway} accepted the HTTPRoute {route} but cannot send to its "
            f"backend{_told(unresolved)}",
        )
    return ConditionSpec(
        ROUTE_ACCEPTED,
        "Unknown",
        REASON_GATEWAY_NOT_ANSWERED,
        f"The Gateway {gateway} has not answered for generation {generation} of the HTTPRoute "
        f"{route} yet: no controller serves that Gateway, or it has not seen the route",
    )


def _same_parent(ref: object, parent: Mapping[str, Any], route_namespace: str) -> bool:
    """A ``parentRef`` of the route's status naming ``parent``, with the Gateway API's
    defaults (the group, kind ``Gateway``, the route's own namespace)."""
    if not isinstance(ref, Mapping):
        return False
    return bool(
        (ref.get("group") or GATEWAY_GROUP) == parent["group"]
        and (ref.get("kind") or "Gateway") == parent["kind"]
        and ref.get("name") == parent["name"]
        and (ref.get("namespace") or route_namespace) == parent["namespace"]
    )


def _conditions_by_type(answer: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    return {str(c.get("type")): c for c in answer.get("conditions") or () if isinstance(c, Mapping)}


def _judged(condition: Mapping[str, Any] | None, generation: int) -> bool:
    """An answer about the route's generation of today (an answer without its generation is
    taken as current: the field is optional in older Gateway API versions)."""
    if condition is None:
        return False
    seen = condition.get("observedGeneration")
    return not isinstance(seen, int) or seen >= generation


def _status(condition: Mapping[str, Any] | None) -> str | None:
    return None if condition is None else str(condition.get("status"))


def _reason(condition: Mapping[str, Any], fallback: str) -> str:
    reason = str(condition.get("reason") or "")
    return reason if _REASON.match(reason) else fallback


def _told(condition: Mapping[str, Any]) -> str:
    message = " ".join(str(condition.get("message") or "").split())[:_MESSAGE_LIMIT]
    return f": {message}" if message else ""
