"""``RouteAccepted``: what the Gateway answered for a KaiwoService's HTTPRoute (decision 0269).

Before, a KaiwoService whose Gateway refused its route (a Gateway in another namespace whose
listeners allow only their own, the Gateway API's default) said READY with nothing about the
route: its users met 404s from the gateway and nothing told them why.
"""

from __future__ import annotations

from typing import Any

import pytest
from kaiwo_contracts.plans import EventIntent
from kaiwo_planner.domain.status.conditions import ConditionSpec
from kaiwo_planner.domain.status.route_acceptance import route_condition

from tests.planning_calls import planned
from tests.unit.planner.test_planning import (
    NOW,
    TRAIN_SPEC,
    aim_namespace_config,
    condition,
    kaiwo_job,
    kaiwo_service,
)

GATEWAY_REF = {
    "group": "gateway.networking.k8s.io",
    "kind": "Gateway",
    "name": "kgw",
    "namespace": "gateway-system",
}
GATEWAY_GONE = ConditionSpec(
    "RouteAccepted",
    "False",
    "NoGateway",
    "The namespace's AIMNamespaceConfig names no gateway: no HTTPRoute exposes the service",
)
NOT_ANSWERED = ConditionSpec(
    "RouteAccepted",
    "Unknown",
    "GatewayNotAnswered",
    "The Gateway gateway-system/kgw has not answered for generation 2 of the HTTPRoute chat "
    "yet: no controller serves that Gateway, or it has not seen the route",
)
REFUSED_MESSAGE = (
    "The Gateway gateway-system/kgw does not accept the HTTPRoute chat: no listener allows "
    "routes from namespace team-a"
)


def desired_route() -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "chat", "namespace": "team-a"},
        "spec": {"parentRefs": [dict(GATEWAY_REF)]},
    }


def answer(
    *conditions: tuple[str, str, str, str],
    parent: dict[str, Any] | None = None,
    seen: int | None = 2,
) -> dict[str, Any]:
    """One entry of ``status.parents``; each condition is (type, status, reason, message)."""
    return {
        "parentRef": GATEWAY_REF if parent is None else parent,
        "controllerName": "example.com/gateway",
        "conditions": [
            {
                "type": kind,
                "status": status,
                "reason": reason,
                "message": message,
                **({} if seen is None else {"observedGeneration": seen}),
            }
            for kind, status, reason, message in conditions
        ],
    }


def observed_route(*answers: dict[str, Any], generation: int = 2) -> dict[str, Any]:
    route = desired_route()
    route["metadata"] = {
        "name": "chat",
        "namespace": "team-a",
        "uid": "route-uid",
        "generation": generation,
        "ownerReferences": [{"uid": "svc-uid", "controller": True}],
    }
    route["status"] = {"parents": list(answers)}
    return route


ACCEPTED = ("Accepted", "True", "Accepted", "")
RESOLVED = ("ResolvedRefs", "True", "ResolvedRefs", "")
REFUSED = (
    "Accepted",
    "False",
    "NotAllowedByListeners",
    "no listener allows\n routes from namespace team-a",
)


def test_a_service_without_a_gateway_never_says_anything_of_a_route():
    assert route_condition(None, None, {}) is None


def test_a_gateway_taken_out_of_the_config_turns_what_was_said_false():
    said = {"conditions": [{"type": "RouteAccepted", "status": "True", "reason": "Accepted"}]}

    assert route_condition(None, None, said) == GATEWAY_GONE


def test_a_route_not_made_yet_is_unknown():
    assert route_condition(desired_route(), None, {}) == ConditionSpec(
        "RouteAccepted",
        "Unknown",
        "GatewayNotAnswered",
        "The HTTPRoute chat for the Gateway gateway-system/kgw is not made yet",
    )


@pytest.mark.parametrize(
    "answers",
    [
        (),
        # Another Gateway's answer says nothing of ours.
        (answer(ACCEPTED, RESOLVED, parent={**GATEWAY_REF, "name": "other"}),),
        (answer(ACCEPTED, RESOLVED, parent={**GATEWAY_REF, "namespace": "team-a"}),),
        # An answer about the route's previous generation.
        (answer(ACCEPTED, RESOLVED, seen=1),),
        # An answer without its Accepted condition.
        (answer(RESOLVED),),
    ],
    ids=["none", "another-gateway", "another-namespace", "old-generation", "no-accepted"],
)
def test_no_answer_of_the_gateway_for_the_routes_generation_is_unknown(answers):
    assert route_condition(desired_route(), observed_route(*answers), {}) == NOT_ANSWERED


def test_a_route_the_gateway_refuses_is_false_with_the_gateways_reason_and_words():
    assert route_condition(desired_route(), observed_route(answer(REFUSED, RESOLVED)), {}) == (
        ConditionSpec("RouteAccepted", "False", "NotAllowedByListeners", REFUSED_MESSAGE)
    )


def test_an_accepted_route_whose_backend_is_not_found_is_false():
    unresolved = ("ResolvedRefs", "False", "BackendNotFound", "service team-a/chat not found")

    assert route_condition(desired_route(), observed_route(answer(ACCEPTED, unresolved)), {}) == (
        ConditionSpec(
            "RouteAccepted",
            "False",
            "BackendNotFound",
            "The Gateway gateway-system/kgw accepted the HTTPRoute chat but cannot send to its "
            "backend: service team-a/chat not found",
        )
    )


@pytest.mark.parametrize(
    "entry",
    [
        answer(ACCEPTED, RESOLVED),
        answer(ACCEPTED),  # no ResolvedRefs said
        answer(ACCEPTED, RESOLVED, seen=None),  # no generation said (older Gateway API)
        answer(ACCEPTED, RESOLVED, seen=3),
        # The Gateway API's defaults: the group, the kind, the route's own namespace.
        answer(ACCEPTED, RESOLVED, parent={"name": "kgw", "namespace": "gateway-system"}),
    ],
    ids=["both", "accepted-alone", "no-generation", "newer-generation", "defaults"],
)
def test_a_route_the_gateway_accepted_and_routes_is_true(entry):
    assert route_condition(desired_route(), observed_route(entry), {}) == ConditionSpec(
        "RouteAccepted",
        "True",
        "Accepted",
        "The Gateway gateway-system/kgw accepted the HTTPRoute chat",
    )


def test_a_parent_ref_without_a_namespace_is_the_routes_own():
    local = {**GATEWAY_REF, "namespace": "team-a"}
    route = desired_route()
    route["spec"]["parentRefs"] = [local]
    entry = answer(ACCEPTED, RESOLVED, parent={"name": "kgw"})

    verdict = route_condition(route, observed_route(entry), {})

    assert verdict is not None and verdict.status == "True"


def test_a_reason_the_api_server_would_refuse_is_replaced():
    odd = ("Accepted", "False", "not allowed!", "")

    assert route_condition(desired_route(), observed_route(answer(odd)), {}) == ConditionSpec(
        "RouteAccepted",
        "False",
        "NotAccepted",
        "The Gateway gateway-system/kgw does not accept the HTTPRoute chat",
    )


def gateway(*programmed: tuple[str, str, str]) -> dict[str, Any]:
    """The Gateway ``kgw`` as observed; ``programmed`` its ``Programmed`` condition (status,
    reason, message), if it says one."""
    conditions = [
        {"type": "Accepted", "status": "True", "reason": "Accepted", "message": ""},
        *(
            {"type": "Programmed", "status": status, "reason": reason, "message": message}
            for status, reason, message in programmed
        ),
    ]
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": "kgw", "namespace": "gateway-system", "uid": "gw-uid"},
        "spec": {"gatewayClassName": "example", "listeners": []},
        "status": {"conditions": conditions, "listeners": []},
    }


NOT_PROGRAMMED = ("False", "AddressNotAssigned", "no address\n could be assigned")


def test_a_route_accepted_by_a_gateway_not_programmed_is_false_with_the_gateways_words():
    """Decision 0273: the Gateway's data plane is not set up, so nothing reaches the route."""
    route = observed_route(answer(ACCEPTED, RESOLVED))

    verdict = route_condition(desired_route(), route, {}, gateway(NOT_PROGRAMMED))

    assert verdict == ConditionSpec(
        "RouteAccepted",
        "False",
        "GatewayNotProgrammed",
        "The Gateway gateway-system/kgw accepted the HTTPRoute chat but is not programmed "
        "(AddressNotAssigned): no address could be assigned",
    )
    pending = gateway(("Unknown", "Pending", ""))
    assert route_condition(desired_route(), route, {}, pending) == ConditionSpec(
        "RouteAccepted",
        "Unknown",
        "GatewayNotProgrammed",
        "The Gateway gateway-system/kgw accepted the HTTPRoute chat but is not programmed yet "
        "(Pending)",
    )


@pytest.mark.parametrize(
    "seen",
    [gateway(("True", "Programmed", "")), gateway(), None],
    ids=["programmed", "says-nothing-of-it", "not-seen"],
)
def test_a_gateway_programmed_not_seen_or_silent_leaves_the_routes_answer(seen):
    route = observed_route(answer(ACCEPTED, RESOLVED))

    verdict = route_condition(desired_route(), route, {}, seen)

    assert verdict is not None and (verdict.status, verdict.reason) == ("True", "Accepted")


def listener(name: str, programmed: tuple[str, str, str], *kinds: str) -> dict[str, Any]:
    """A listener of the Gateway's status: its ``Programmed`` condition, the route kinds it
    takes (HTTPRoute unless named)."""
    status, reason, message = programmed
    return {
        "name": name,
        "supportedKinds": [
            {"group": "gateway.networking.k8s.io", "kind": kind} for kind in kinds or ("HTTPRoute",)
        ],
        "attachedRoutes": 1,
        "conditions": [
            {"type": "Programmed", "status": status, "reason": reason, "message": message}
        ],
    }


def with_listeners(*listeners: dict[str, Any]) -> dict[str, Any]:
    programmed = gateway(("True", "Programmed", ""))
    programmed["status"]["listeners"] = list(listeners)
    return programmed


BAD_CERTIFICATE = ("False", "Invalid", "Secret gateway-system/tls not found")


def test_a_route_none_of_whose_listeners_is_programmed_is_false_with_the_listeners_words():
    """Decision 0277: the Gateway is programmed as a whole (its TCP listener), but the one
    listener that takes HTTPRoutes is not: nothing reaches the route."""
    route = observed_route(answer(ACCEPTED, RESOLVED))
    tcp = listener("tcp", ("True", "Programmed", ""), "TCPRoute")

    verdict = route_condition(
        desired_route(), route, {}, with_listeners(listener("https", BAD_CERTIFICATE), tcp)
    )

    assert verdict == ConditionSpec(
        "RouteAccepted",
        "False",
        "GatewayNotProgrammed",
        "The Gateway gateway-system/kgw accepted the HTTPRoute chat but none of its listeners "
        "that take HTTPRoutes is programmed: listener https (Invalid): Secret "
        "gateway-system/tls not found",
    )
    pending = with_listeners(listener("http", ("Unknown", "Pending", "")))
    assert route_condition(desired_route(), route, {}, pending) == ConditionSpec(
        "RouteAccepted",
        "Unknown",
        "GatewayNotProgrammed",
        "The Gateway gateway-system/kgw accepted the HTTPRoute chat but none of its listeners "
        "that take HTTPRoutes is programmed yet: listener http (Pending)",
    )


@pytest.mark.parametrize(
    "listeners",
    [
        (listener("https", BAD_CERTIFICATE), listener("http", ("True", "Programmed", ""))),
        (listener("https", BAD_CERTIFICATE), {"name": "http", "conditions": []}),
        (listener("tcp", BAD_CERTIFICATE, "TCPRoute"),),
    ],
    ids=["one-programmed", "one-silent", "only-other-kinds"],
)
def test_a_route_one_listener_may_serve_keeps_its_answer(listeners):
    route = observed_route(answer(ACCEPTED, RESOLVED))

    verdict = route_condition(desired_route(), route, {}, with_listeners(*listeners))

    assert verdict is not None and (verdict.status, verdict.reason) == ("True", "Accepted")


def test_a_refused_route_is_told_as_refused_whatever_its_gateway_says():
    route = observed_route(answer(REFUSED, RESOLVED))

    verdict = route_condition(desired_route(), route, {}, gateway(NOT_PROGRAMMED))

    assert verdict is not None and verdict.reason == "NotAllowedByListeners"


# ------------------------------------------------------------------ in a KaiwoService's plan


SERVICE_SPEC = {"user": "bo@example.com", "image": "vllm:1", "replicas": 1, "entrypoint": "serve"}


def service_plan(
    one_node_cluster_with,
    route: dict[str, Any] | None,
    status: dict[str, Any] | None,
    *others: dict[str, Any],
):
    owner = kaiwo_service(SERVICE_SPEC, status=status)
    config = aim_namespace_config({"gateway": {"name": "kgw", "namespace": "gateway-system"}})
    objects = [owner, config, *([route] if route is not None else []), *others]
    plan = planned(owner=owner, cluster=one_node_cluster_with(*objects), now=NOW)
    assert plan is not None
    return plan


def test_a_service_whose_gateway_refuses_its_route_says_so_and_is_warned_once(
    one_node_cluster_with,
):
    route = observed_route(answer(REFUSED, RESOLVED), generation=1)
    refused = REFUSED_MESSAGE

    plan = service_plan(one_node_cluster_with, route, status=None)

    said = condition(plan, "RouteAccepted")
    assert (said["status"], said["reason"], said["message"]) == (
        "False",
        "NotAllowedByListeners",
        refused,
    )
    assert EventIntent(type="Warning", reason="RouteNotAccepted", message=refused) in plan.events

    again = service_plan(one_node_cluster_with, route, status=plan.status)
    assert [e for e in again.events if e.reason == "RouteNotAccepted"] == []


def test_a_service_whose_route_is_accepted_says_so_without_an_event(one_node_cluster_with):
    route = observed_route(answer(ACCEPTED, RESOLVED, seen=1), generation=1)

    plan = service_plan(one_node_cluster_with, route, status=None)

    assert condition(plan, "RouteAccepted")["status"] == "True"
    assert [e for e in plan.events if e.reason == "RouteNotAccepted"] == []


def test_a_job_says_nothing_of_a_route(one_node_cluster_with):
    owner = kaiwo_job(TRAIN_SPEC)
    config = aim_namespace_config({"gateway": {"name": "kgw", "namespace": "gateway-system"}})

    plan = planned(owner=owner, cluster=one_node_cluster_with(owner, config), now=NOW)

    assert plan is not None and plan.status is not None
    assert "RouteAccepted" not in [c["type"] for c in plan.status["conditions"]]


def test_a_service_behind_a_gateway_not_programmed_says_so_and_is_warned_once(
    one_node_cluster_with,
):
    route = observed_route(answer(ACCEPTED, RESOLVED, seen=1), generation=1)
    down = gateway(NOT_PROGRAMMED)

    plan = service_plan(one_node_cluster_with, route, None, down)

    said = condition(plan, "RouteAccepted")
    assert (said["status"], said["reason"]) == ("False", "GatewayNotProgrammed")
    warned = EventIntent(type="Warning", reason="GatewayNotProgrammed", message=said["message"])
    assert warned in plan.events
    assert [e for e in plan.events if e.reason == "RouteNotAccepted"] == []
    again = service_plan(one_node_cluster_with, route, plan.status, down)
    assert [e for e in again.events if e.type == "Warning"] == []
    up = service_plan(
        one_node_cluster_with, route, plan.status, gateway(("True", "Programmed", ""))
    )
    assert condition(up, "RouteAccepted")["status"] == "True"
