"""A field removed from a workload's spec leaves its child on the real API server, after the
child was made again and while a RayJob waits in its queue (decision 0225): the whole
operator on the whole real stack (kube-apiserver's server-side apply and field ownership,
Kueue's manager and webhooks, KubeRay, kwok). Nothing of them is played by the test.

Before: a child made again by POST had its fields owned by ``kaiwo``'s ``Update`` entry,
which the later applies under ``kaiwo`` never clear; and a RayJob's creation manager
(``kaiwo-create``) held every field of its creation while the RayJob waited. Either way a
variable removed from the spec stayed on the child.

Also here, for its namespace's gateway: what a KaiwoService says of its HTTPRoute (decision
0269) and of a Gateway not programmed (decision 0273), the test playing the Gateway controller
the stack does not run.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

import pytest
import pytest_asyncio
from kaiwo_kube import resources
from kaiwo_sandbox.fleet import NODE_TYPES, NodeSpec

from tests.integration.pipeline import cluster_actors as actors
from tests.integration.pipeline.harness import (
    Pending,
    Pipeline,
    eventually,
    pipeline_on_kwok_nodes,
)
from tests.integration.test_real_stack import (
    condition,
    events_of,
    flavor,
    has_events,
    kaiwo_job,
    queue,
    vllm_service,
)
from tests.real_cluster import RealCluster

pytestmark = [
    pytest.mark.k8s,
    pytest.mark.nats,
    pytest.mark.slow,
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.timeout(600),
]

MI300X: Final = NODE_TYPES["amd-mi300x"]
FLEET: Final = (NodeSpec("cf-mi300x-1", MI300X), NodeSpec("cf-mi300x-2", MI300X))
STEP: Final = 90.0
QUEUE: Final = "cf"
KEPT: Final = {"name": "KEPT", "value": "1"}
DROPPED: Final = {"name": "DROPPED", "value": "2"}
ROUTE: Final = "RouteAccepted"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(
    real_stack: RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Pipeline]:
    """One operator, two MI300X nodes (16 GPUs), and a queue of 8 for the pipeline's
    namespace: a job of 16 GPUs is not refused by the operator, and waits in Kueue."""
    async with pipeline_on_kwok_nodes(
        real_stack, FLEET, tmp_path_factory.mktemp("kaiwo")
    ) as pipeline:
        config = {
            "apiVersion": actors.KAIWO_API,
            "kind": "KaiwoQueueConfig",
            "metadata": {"name": actors.QUEUE_CONFIG},
            "spec": {
                "resourceFlavors": [
                    {"name": "mi300x", "nodeLabels": {"amd.com/gpu.product-name": MI300X.product}}
                ],
                "clusterQueues": [
                    queue(QUEUE, pipeline.namespace, flavor("mi300x", amd=8)),
                ],
            },
        }
        await pipeline.kube.apply(config, field_manager="cluster-admin", force=True)
        # A gateway for the namespace: a KaiwoService gets a Service (and an HTTPRoute) beside
        # its Deployment, so two of its children can go at once.
        await pipeline.kube.create(
            {
                "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
                "kind": "AIMNamespaceConfig",
                "metadata": {"name": "tenant", "namespace": pipeline.namespace},
                "spec": {"gateway": {"name": "gw"}},
            }
        )
        yield pipeline


def env_names(template: Mapping[str, Any]) -> set[str]:
    """The variable names of a pod template's containers, each container's together."""
    return {
        variable["name"]
        for container in template["spec"]["containers"]
        for variable in container.get("env") or ()
    }


def ray_templates(ray_job: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    cluster = ray_job["spec"]["rayClusterSpec"]
    groups = cluster.get("workerGroupSpecs") or []
    return [cluster["headGroupSpec"]["template"], *(group["template"] for group in groups)]


async def dropped_everywhere(
    stack: Pipeline, kind: resources.ResourceType, name: str, templates: Any
) -> dict[str, Any]:
    """The child once no pod template of it has ``DROPPED`` and each has ``KEPT``."""

    async def check() -> dict[str, Any] | Pending:
        found = await stack.kube.get(kind, name, namespace=stack.namespace)
        names = [env_names(template) for template in templates(found)]
        if any("DROPPED" in each or "KEPT" not in each for each in names):
            return Pending(f"variables {names}")
        return found

    return await eventually(check, what=f"DROPPED gone from the {kind.kind}", within=STEP)


async def test_a_variable_removed_after_the_services_children_were_made_again_leaves_them(
    stack: Pipeline,
) -> None:
    """The Deployment and Service of a KaiwoService are deleted together: the plan made after
    the deletions (they wait a grace of 5 s for the owner's own deletion) finds both gone,
    reads each, and makes them again. Then a variable is removed from the service's spec."""
    ns, name = stack.namespace, "remade"
    service = vllm_service(name, ns, clusterQueue=QUEUE, replicas=1, env=[KEPT, DROPPED])
    await stack.kube.create(service)

    async def children() -> tuple[dict[str, Any], dict[str, Any]] | Pending:
        deployment = await stack.child(resources.DEPLOYMENT, name)
        made = await stack.child(resources.SERVICE, name)
        if deployment and made:
            return deployment, made
        owner = await stack.kube.get(resources.KAIWO_SERVICE, name, namespace=ns)
        return Pending(f"not both made; the service's status {owner.get('status')}")

    first = await eventually(children, what="the Deployment and Service", within=STEP)
    await stack.settled(within=STEP)
    for kind in (resources.DEPLOYMENT, resources.SERVICE):
        await stack.kube.delete(kind, name, namespace=ns)

    first_uids = {child["metadata"]["uid"] for child in first}

    async def made_again() -> dict[str, Any] | Pending:
        found = await children()
        if isinstance(found, Pending):
            return found
        if first_uids & {child["metadata"]["uid"] for child in found}:
            return Pending("not both made again yet")
        return found[0]

    remade = await eventually(made_again, what="both made again", within=STEP)
    assert env_names(remade["spec"]["template"]) >= {"KEPT", "DROPPED"}
    await stack.settled(within=STEP)

    await stack.kube.merge_patch(
        resources.KAIWO_SERVICE,
        name,
        {"spec": {"env": [KEPT]}},
        namespace=ns,
        field_manager="kubectl-edit",
    )

    found = await dropped_everywhere(
        stack, resources.DEPLOYMENT, name, lambda d: [d["spec"]["template"]]
    )
    assert found["metadata"]["uid"] == remade["metadata"]["uid"]  # updated, not made again
    owners = {(e["manager"], e["operation"]) for e in found["metadata"]["managedFields"]}
    assert ("kaiwo", "Update") not in owners, owners
    workload = await stack.kube.get(resources.KAIWO_SERVICE, name, namespace=ns)
    assert "ApplyRefused" not in [c["type"] for c in workload["status"].get("conditions") or ()]
    await stack.kube.delete(resources.KAIWO_SERVICE, name, namespace=ns)


async def test_a_variable_removed_from_a_ray_job_waiting_in_its_queue_leaves_it(
    stack: Pipeline,
) -> None:
    """16 GPUs asked of the queue's 8: Kueue keeps the RayJob waiting, and a waiting RayJob
    takes the whole edit in place (decision 0123), a removal too."""
    ns, name = stack.namespace, "ray-waiting"
    await stack.kube.create(
        kaiwo_job(name, ns, queue_name=QUEUE, gpus=16, ray=True, env=[KEPT, DROPPED])
    )

    async def waiting() -> dict[str, Any] | Pending:
        found = await stack.child(resources.RAY_JOB, name)
        if found is None or found["spec"].get("suspend") is not True:
            owner = await stack.kube.get(resources.KAIWO_JOB, name, namespace=ns)
            return Pending(f"RayJob {found and found['spec']}; the job's {owner.get('status')}")
        return found

    first = await eventually(waiting, what="the RayJob waiting", within=STEP)
    assert all({"KEPT", "DROPPED"} <= env_names(t) for t in ray_templates(first))
    await stack.settled(within=STEP)

    await stack.kube.merge_patch(
        resources.KAIWO_JOB,
        name,
        {"spec": {"env": [KEPT]}},
        namespace=ns,
        field_manager="kubectl-edit",
    )

    found = await dropped_everywhere(stack, resources.RAY_JOB, name, ray_templates)
    assert found["metadata"]["uid"] == first["metadata"]["uid"]  # edited in place
    assert found["spec"]["suspend"] is True  # still waiting, still Kueue's to start
    await stack.settled(within=STEP)
    workload = await stack.kube.get(resources.KAIWO_JOB, name, namespace=ns)
    assert workload["status"]["status"] == "PENDING"
    assert condition(workload, "ChildSpecApplied")["status"] == "True"
    assert "ApplyRefused" not in [c["type"] for c in workload["status"]["conditions"]]
    await stack.kube.delete(resources.KAIWO_JOB, name, namespace=ns)


def gateway_answer(namespace: str, generation: int, *, accepted: bool) -> dict[str, Any]:
    """What a Gateway controller writes on a route attached to ``gw`` (the test plays it: the
    stack runs no Gateway controller)."""
    moment = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    said = (
        ("True", "Accepted", "")
        if accepted
        else ("False", "NotAllowedByListeners", "no listener of gw allows this route")
    )
    return {
        "parents": [
            {
                "parentRef": {
                    "group": "gateway.networking.k8s.io",
                    "kind": "Gateway",
                    "name": "gw",
                    "namespace": namespace,
                },
                "controllerName": "example.com/gateway-controller",
                "conditions": [
                    {
                        "type": "Accepted",
                        "status": said[0],
                        "reason": said[1],
                        "message": said[2],
                        "observedGeneration": generation,
                        "lastTransitionTime": moment,
                    },
                    {
                        "type": "ResolvedRefs",
                        "status": "True",
                        "reason": "ResolvedRefs",
                        "message": "",
                        "observedGeneration": generation,
                        "lastTransitionTime": moment,
                    },
                ],
            }
        ]
    }


async def gateway_answers(stack: Pipeline, route: str, generation: int, *, accepted: bool) -> None:
    await stack.kube.patch_status(
        resources.HTTP_ROUTE,
        route,
        gateway_answer(stack.namespace, generation, accepted=accepted),
        namespace=stack.namespace,
        field_manager="gateway-controller",
        method="merge",
    )


async def route_says(
    stack: Pipeline, name: str, status: str, reason: str
) -> dict[str, Any] | Pending:
    """The service's ``RouteAccepted`` condition once it says ``status`` for ``reason``."""
    owner = await stack.kube.get(resources.KAIWO_SERVICE, name, namespace=stack.namespace)
    said = next(
        (c for c in owner.get("status", {}).get("conditions") or () if c["type"] == ROUTE), None
    )
    if said is None or (said["status"], said["reason"]) != (status, reason):
        return Pending(f"{ROUTE} {said}")
    return said


async def test_a_service_tells_what_its_gateway_answered_for_its_route(stack: Pipeline) -> None:
    """``RouteAccepted`` follows the route's ``status.parents`` (decision 0269): Unknown while
    no Gateway controller answered, False with the Gateway's reason and a Warning when it
    refuses the route, True once it accepts it. Before, the service said nothing of its route
    (READY behind a refused one)."""
    ns, name = stack.namespace, "routed"
    await stack.kube.create(vllm_service(name, ns, clusterQueue=QUEUE, replicas=1))

    def route_said(status: str, reason: str) -> Awaitable[dict[str, Any] | Pending]:
        return route_says(stack, name, status, reason)

    route = await eventually(
        lambda: stack.child(resources.HTTP_ROUTE, name), what="the HTTPRoute", within=STEP
    )
    await eventually(
        lambda: route_said("Unknown", "GatewayNotAnswered"), what="not answered", within=STEP
    )

    generation = route["metadata"]["generation"]
    await gateway_answers(stack, name, generation, accepted=False)
    refused = await eventually(
        lambda: route_said("False", "NotAllowedByListeners"), what="refused", within=STEP
    )
    assert refused["message"] == (
        f"The Gateway {ns}/gw does not accept the HTTPRoute {name}: no listener of gw allows "
        "this route"
    )
    await has_events(stack, ns, name, "RouteNotAccepted", kind="KaiwoService")

    await gateway_answers(stack, name, generation, accepted=True)
    await eventually(lambda: route_said("True", "Accepted"), what="accepted", within=STEP)
    await stack.settled(within=STEP)
    warned = [r for r, _ in await events_of(stack, ns, name, kind="KaiwoService")]
    assert warned.count("RouteNotAccepted") == 1, warned
    await stack.kube.delete(resources.KAIWO_SERVICE, name, namespace=ns)


def programmed(generation: int, status: str, reason: str, message: str) -> dict[str, Any]:
    """The Gateway's ``Programmed`` condition as its controller writes it (the test plays it)."""
    return {
        "type": "Programmed",
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
        "lastTransitionTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


async def test_a_service_behind_a_gateway_not_programmed_says_so(stack: Pipeline) -> None:
    """Decision 0273: an accepted route serves only through a programmed Gateway. The
    Gateway ``gw`` the namespace's config names is made: the API server gives it the Gateway
    API's default conditions (``Programmed`` Unknown, ``Pending``), and the service's route,
    accepted, is Unknown; its controller says it is not programmed, and the route is False with
    a Warning; then programmed, and True. Before, the route said True whatever the Gateway.
    Decision 0277: its one listener then says it is not programmed, and the route is False
    again, naming the listener; then programmed, and True."""
    ns, name = stack.namespace, "behind"
    await stack.kube.create(vllm_service(name, ns, clusterQueue=QUEUE, replicas=1))
    route = await eventually(
        lambda: stack.child(resources.HTTP_ROUTE, name), what="the HTTPRoute", within=STEP
    )
    await gateway_answers(stack, name, route["metadata"]["generation"], accepted=True)
    await eventually(
        lambda: route_says(stack, name, "True", "Accepted"), what="accepted", within=STEP
    )

    gateway = await stack.kube.create(
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": ns},
            "spec": {
                "gatewayClassName": "example",
                "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
            },
        },
        field_manager="platform",
    )
    try:
        pending = await eventually(
            lambda: route_says(stack, name, "Unknown", "GatewayNotProgrammed"),
            what="a Gateway not programmed yet",
            within=STEP,
        )
        assert pending["message"].startswith(
            f"The Gateway {ns}/gw accepted the HTTPRoute {name} but is not programmed yet (Pending)"
        )
        generation = gateway["metadata"]["generation"]

        async def controller_writes(status: dict[str, Any]) -> None:
            await stack.kube.patch_status(
                resources.GATEWAY,
                "gw",
                status,
                namespace=ns,
                field_manager="gateway-controller",
                method="merge",
            )

        async def gateway_says(status: str, reason: str, message: str) -> None:
            await controller_writes(
                {"conditions": [programmed(generation, status, reason, message)]}
            )

        await gateway_says("False", "AddressNotAssigned", "no address for gw")
        down = await eventually(
            lambda: route_says(stack, name, "False", "GatewayNotProgrammed"),
            what="a Gateway not programmed",
            within=STEP,
        )
        assert down["message"] == (
            f"The Gateway {ns}/gw accepted the HTTPRoute {name} but is not programmed "
            "(AddressNotAssigned): no address for gw"
        )
        await has_events(stack, ns, name, "GatewayNotProgrammed", kind="KaiwoService")

        await gateway_says("True", "Programmed", "")
        await eventually(
            lambda: route_says(stack, name, "True", "Accepted"), what="programmed", within=STEP
        )

        async def listener_says(status: str, reason: str, message: str) -> None:
            http = {
                "name": "http",
                "supportedKinds": [{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}],
                "attachedRoutes": 1,
                "conditions": [programmed(generation, status, reason, message)],
            }
            await controller_writes({"listeners": [http]})

        # Decision 0277: programmed as a whole, but not its one listener of HTTPRoutes.
        await listener_says("False", "Invalid", "Secret tls not found")
        unserved = await eventually(
            lambda: route_says(stack, name, "False", "GatewayNotProgrammed"),
            what="a listener not programmed",
            within=STEP,
        )
        assert unserved["message"] == (
            f"The Gateway {ns}/gw accepted the HTTPRoute {name} but none of its listeners that "
            "take HTTPRoutes is programmed: listener http (Invalid): Secret tls not found"
        )
        await listener_says("True", "Programmed", "")
        await eventually(
            lambda: route_says(stack, name, "True", "Accepted"),
            what="its listener programmed",
            within=STEP,
        )
    finally:
        await stack.kube.delete(resources.GATEWAY, "gw", namespace=ns)
        await stack.kube.delete(resources.KAIWO_SERVICE, name, namespace=ns)
