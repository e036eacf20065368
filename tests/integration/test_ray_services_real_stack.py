"""A Ray KaiwoService on the whole real stack with the AppWrapper controller and its webhooks
(decision 0184): what Kueue admits, the AppWrapper controller makes, KubeRay runs and the
AppWrapper webhook refuses is the real components' doing.

Before this decision the stack ran no AppWrapper controller, so a Ray service's RayService
and pods were never seen, and nothing asked the AppWrapper webhook's question of the
executor: may its creator create the components directly? A stand-in answers KubeRay for the
Ray processes kwok does not run (``kaiwo_envtest.ray_head``, decision 0186), so Ray Serve
deploys a service's applications.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import AsyncIterator
from typing import Any, Final

import pytest
import pytest_asyncio
from kaiwo_cli.cluster_access import children_of
from kaiwo_cli.workload_views import child_state
from kaiwo_kube import AlreadyExists, KubeError, NotFound, resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_sandbox.fleet import NODE_TYPES, NodeSpec

from tests.integration.pipeline import cluster_actors as actors
from tests.integration.pipeline.harness import (
    Pending,
    Pipeline,
    eventually,
    pipeline_on_kwok_nodes,
)
from tests.integration.rbac.service_accounts import (
    admission_objects,
    rbac_objects,
    service_account,
    service_kubeconfig,
)
from tests.integration.test_real_stack import (
    app_wrapper_made,
    condition,
    has_events,
    kueue_workload_owned,
    ray_pods_running,
)
from tests.real_cluster import OPERATOR_NAMESPACE, RealCluster

pytestmark = [
    pytest.mark.k8s,
    pytest.mark.nats,
    pytest.mark.slow,
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.timeout(600),
]

MI300X: Final = NODE_TYPES["amd-mi300x"]
FLEET: Final = tuple(NodeSpec(name, MI300X) for name in ("rs-1", "rs-2"))
STEP: Final = 90.0
NODEPOOL_LABEL: Final = "kaiwo/nodepool"
APPWRAPPER_LABEL: Final = "workload.codeflare.dev/appwrapper"
MANAGER: Final = "kaiwo-tests"
QUEUE_LABEL: Final = "kueue.x-k8s.io/queue-name"
OBSERVED: Final = "ai.silogen.kaiwo.obs.observed.v1"


def ray_service(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": actors.KAIWO_API,
        "kind": "KaiwoService",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "user": "dave@example.com",
            "image": "rayproject/ray:2.40.0",
            "gpuVendor": "amd",
            "gpus": 2,
            "ray": True,
        },
    }


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(
    real_stack: RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Pipeline]:
    async with pipeline_on_kwok_nodes(
        real_stack, FLEET, tmp_path_factory.mktemp("kaiwo")
    ) as pipeline:
        yield pipeline


async def test_a_ray_services_pods_run_in_the_pool_kueue_admitted_its_appwrapper_into(
    stack: Pipeline,
) -> None:
    """Kueue admits the operator's AppWrapper; the AppWrapper controller makes its RayService
    with Kueue's node selector in the pod templates; KubeRay makes the Ray cluster, whose head
    and GPU worker run, the worker on a node of the admitted pool with its 2 GPUs. With no
    ``serveConfigV2`` Ray Serve has no application to serve, so the service is RUNNING once
    its cluster is up (KubeRay's first cluster, which it keeps pending: decision 0186).
    Deleted, the service goes with its AppWrapper, RayService and pods."""
    name, ns = "serve-wrapped", stack.namespace
    await stack.kube.create(ray_service(name, ns))

    pods = await ray_pods_running(stack, ns, name, ["default-worker-group", "headgroup"])
    # Its pods run, so Kueue has admitted the AppWrapper: the flavor of its GPU pod set.
    workload = await kueue_workload_owned(stack, resources.APP_WRAPPER, name, ns)
    [flavor] = [
        a["flavors"]["amd.com/gpu"]
        for a in workload["status"]["admission"]["podSetAssignments"]
        if (a.get("resourceUsage") or {}).get("amd.com/gpu")
    ]
    made = await stack.kube.get(resources.RAY_SERVICE, name, namespace=ns)
    [owner] = made["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"]) == ("AppWrapper", name)
    [worker] = [p for p in pods if p["metadata"]["labels"]["ray.io/group"] != "headgroup"]
    limits = worker["spec"]["containers"][0]["resources"]["limits"]
    assert limits["amd.com/gpu"] == "2"
    assert worker["spec"]["nodeSelector"][NODEPOOL_LABEL] == flavor
    node = await stack.kube.get(resources.NODE, worker["spec"]["nodeName"])
    assert node["metadata"]["labels"][NODEPOOL_LABEL] == flavor

    found = await stack.kube.get(resources.KAIWO_SERVICE, name, namespace=stack.namespace)
    conditions = {c["type"]: c["status"] for c in found["status"]["conditions"]}
    assert conditions["Admitted"] == "True"
    assert conditions["ChildSpecApplied"] == "True"
    await ray_service_observed(stack, found["metadata"]["uid"])
    await serves_as(stack, name, "RUNNING")
    # kaiwo status names it among the children, by the run-id it carries (decision 0185).
    children = await children_of(stack.kube, found)
    assert sorted(c["kind"] for c in children.objects) == ["AppWrapper", "RayService"]

    # Deleted, it goes with everything made for it: the AppWrapper controller's finalizer
    # removes the RayService before the AppWrapper goes.
    await stack.kube.delete(resources.KAIWO_SERVICE, name, namespace=stack.namespace)

    async def gone() -> bool | Pending:
        for kind in (resources.KAIWO_SERVICE, resources.APP_WRAPPER, resources.RAY_SERVICE):
            if await actors.get_or_none(stack.kube, kind, name, namespace=stack.namespace):
                return Pending(f"the {kind.kind} is still there")
        pods = await stack.kube.list(
            resources.POD, namespace=stack.namespace, label_selector=f"{APPWRAPPER_LABEL}={name}"
        )
        return True if not pods.items else Pending(f"{len(pods.items)} pods left")

    await eventually(gone, what=f"{name} and what was made for it gone", within=STEP)


def serving(name: str, namespace: str, import_path: str) -> dict[str, Any]:
    """A Ray service with one Serve application, ``chat``, importing ``import_path``."""
    service = ray_service(name, namespace)
    service["spec"]["serveConfigV2"] = (
        f"applications:\n  - name: chat\n    import_path: {import_path}\n    route_prefix: /\n"
    )
    return service


async def serves_as(pipeline: Pipeline, name: str, phase: str) -> dict[str, Any]:
    return await pipeline.reaches(name, phase, kind=resources.KAIWO_SERVICE, within=STEP)


async def test_a_ray_service_serves_once_ray_serve_runs_it_and_one_failing_to_deploy_says_why(
    stack: Pipeline,
) -> None:
    """KubeRay asks the stand-in of the Ray processes (``kaiwo_envtest.ray_head``) for the
    Serve applications, as it would a real cluster's dashboard (decision 0186). One that
    deploys makes the service READY, with KubeRay's ``Ready``. One that cannot be imported is
    ``DEPLOY_FAILED`` in the RayService's first cluster, which KubeRay keeps as its pending
    one until it serves: the service is ERROR and ``ChildHealthy`` names the application and
    Ray's message. Before, read from the serving cluster alone, it said STARTING for good."""
    ns = stack.namespace
    await stack.kube.create(serving("serve-chat", ns, "chat:app"))
    await stack.kube.create(serving("serve-broken", ns, "not_installed.chat:app"))
    try:
        ready = await serves_as(stack, "serve-chat", "READY")
        assert condition(ready, "ChildSpecApplied")["status"] == "True"
        made = await stack.kube.get(resources.RAY_SERVICE, "serve-chat", namespace=ns)
        assert condition(made, "Ready")["status"] == "True"
        assert made["status"]["activeServiceStatus"]["applicationStatuses"]["chat"]["status"] == (
            "RUNNING"
        )

        broken = await serves_as(stack, "serve-broken", "ERROR")
        cause = (
            "application chat is DEPLOY_FAILED: ModuleNotFoundError: No module named "
            "'not_installed.chat'"
        )
        health = condition(broken, "ChildHealthy")
        assert (health["status"], health["reason"], health["message"]) == (
            "False",
            "ApplicationsFailed",
            cause,
        )

        events = await has_events(stack, ns, "serve-broken", "WorkloadError", kind="KaiwoService")
        assert ("WorkloadError", cause) in events
        # kaiwo status shows the application where KubeRay keeps it, on the first cluster.
        [ray] = [
            c for c in (await children_of(stack.kube, broken)).objects if c["kind"] == "RayService"
        ]
        first = ray["status"]["pendingServiceStatus"]["rayClusterName"]
        assert child_state(ray) == f"not serving; starting {first}: chat DEPLOY_FAILED"
    finally:
        for name in ("serve-chat", "serve-broken"):
            await stack.kube.delete(resources.KAIWO_SERVICE, name, namespace=ns)


async def test_a_ray_service_whose_ray_service_someone_deleted_runs_again(
    stack: Pipeline,
) -> None:
    """Decision 0185: the AppWrapper controller fails an AppWrapper whose RayService someone
    deleted, at once and for good, and never makes the RayService again. The operator makes
    the AppWrapper anew: its new RayService's cluster runs, told by one ``ChildReplacing``
    and no ``ChildDeleted``. Before, the service said STARTING for good, with nothing of it
    running."""
    name, ns = "serve-restored", stack.namespace
    await stack.kube.create(ray_service(name, ns))
    try:
        await ray_pods_running(stack, ns, name, ["default-worker-group", "headgroup"])
        first = await stack.kube.get(resources.APP_WRAPPER, name, namespace=ns)
        deleted = await stack.kube.get(resources.RAY_SERVICE, name, namespace=ns)
        await stack.kube.delete(resources.RAY_SERVICE, name, namespace=ns)

        async def made_again() -> dict[str, Any] | Pending:
            found = await actors.get_or_none(stack.kube, resources.RAY_SERVICE, name, namespace=ns)
            if found is None or found["metadata"]["uid"] == deleted["metadata"]["uid"]:
                return Pending("no new RayService")
            return found

        await eventually(made_again, what="a new RayService", within=STEP)
        again = await stack.kube.get(resources.APP_WRAPPER, name, namespace=ns)
        assert again["metadata"]["uid"] != first["metadata"]["uid"]
        await ray_pods_running(stack, ns, name, ["default-worker-group", "headgroup"])
        events = await stack.kube.list(resources.EVENT, namespace=ns)
        told = [
            (e["type"], e["reason"], e["message"])
            for e in events.items
            if e["involvedObject"]["name"] == name
            and e["involvedObject"]["kind"] == "KaiwoService"
            and e["reason"] in ("ChildReplacing", "ChildDeleted")
        ]
        assert told == [
            (
                "Normal",
                "ChildReplacing",
                f"AppWrapper {name}: its RayService was deleted, and the AppWrapper controller "
                "failed it for good (Only found 0 deployed components, but was expecting 1): "
                "the AppWrapper is made anew, and Kueue admits it again",
            )
        ]
    finally:
        await stack.kube.delete(resources.KAIWO_SERVICE, name, namespace=ns)


async def ray_service_observed(pipeline: Pipeline, uid: str) -> None:
    """The watcher published the AppWrapper's RayService in the workload's story: it carries
    the workload's run-id, not the managed-by label of what the operator creates itself, and
    was never seen before decision 0185 (so the service's phase, which it tells, could not
    leave STARTING)."""

    async def observed() -> bool | Pending:
        async with pipeline.store() as store:
            story = await store.read_stream(f"workload/{uid}")
        kinds = {e.data.get("kind") for e in story if e.type == OBSERVED}
        return True if "RayService" in kinds else Pending(f"observed {sorted(map(str, kinds))}")

    await eventually(observed, what="the RayService observed", within=STEP)


@contextlib.asynccontextmanager
async def executor_under_its_role(real: RealCluster, directory: Any) -> AsyncIterator[Any]:
    """A client authenticated as the executor's ServiceAccount, bound to its ClusterRole and
    its admission policies. Only the executor's cluster-wide objects are installed and
    removed: ``kaiwo-system`` may hold the session's other objects, so it is never deleted."""
    async with await KubernetesAsyncioAdapter.from_kubeconfig(real.kubeconfig) as admin:
        with contextlib.suppress(AlreadyExists):
            await admin.create(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": OPERATOR_NAMESPACE}}
            )
        account = next(
            o
            for o in rbac_objects()
            if o["kind"] == "ServiceAccount"
            and o["metadata"]["name"] == service_account("executor")
        )
        installed = [
            account,
            *(
                o
                for o in rbac_objects()
                if o["kind"] in ("ClusterRole", "ClusterRoleBinding")
                and o["metadata"]["name"] == service_account("executor")
            ),
            *admission_objects(),
        ]
        for obj in installed:
            await admin.apply(obj, field_manager=MANAGER, force=True)
        try:
            kubeconfig = await service_kubeconfig(real.kubeconfig, "executor", directory)
            async with await KubernetesAsyncioAdapter.from_kubeconfig(kubeconfig) as executor:
                yield executor
        finally:
            for obj in reversed(installed):
                resource = await admin.resolve(obj["apiVersion"], obj["kind"])
                with contextlib.suppress(NotFound):
                    await admin.delete(
                        resource,
                        obj["metadata"]["name"],
                        namespace=obj["metadata"].get("namespace"),
                    )


async def test_the_executor_may_wrap_a_ray_service_and_may_not_make_one(
    stack: Pipeline, real_stack: RealCluster, tmp_path: Any
) -> None:
    """The AppWrapper webhook asks whether the AppWrapper's creator could create its
    RayService; the executor's role says yes, and its admission policy refuses every RayService
    the executor would create itself. Checked with the operator's own AppWrapper, created again
    by the executor under another name, suspended and queued nowhere (nothing runs)."""
    name = "serve-checked"
    await stack.kube.create(ray_service(name, stack.namespace))
    made = await app_wrapper_made(stack, name, stack.namespace)
    again = {
        "apiVersion": made["apiVersion"],
        "kind": "AppWrapper",
        "metadata": {
            "name": f"{name}-again",
            "namespace": stack.namespace,
            "labels": {k: v for k, v in made["metadata"]["labels"].items() if k != QUEUE_LABEL},
            "ownerReferences": made["metadata"]["ownerReferences"],
        },
        "spec": {**copy.deepcopy(made["spec"]), "suspend": True},
    }
    [component] = again["spec"]["components"]
    bare = {
        **copy.deepcopy(component["template"]),
        "metadata": {
            "name": f"{name}-bare",
            "namespace": stack.namespace,
            "labels": again["metadata"]["labels"],
            "ownerReferences": made["metadata"]["ownerReferences"],
        },
    }
    async with executor_under_its_role(real_stack, tmp_path) as executor:

        async def refused() -> str | Pending:
            """The policy's refusal, once the API server enforces it (its informer picks up
            a new binding within seconds): a RayService made before that is removed."""
            try:
                await executor.create(bare, field_manager=MANAGER)
            except KubeError as error:
                return f"{error.code} {error}"
            await stack.kube.delete(
                resources.RAY_SERVICE, f"{name}-bare", namespace=stack.namespace
            )
            return Pending("created: the policy not in force yet")

        refusal = await eventually(refused, what="the bare RayService refused", within=STEP)
        created = await executor.create(again, field_manager=MANAGER)
    assert refusal.startswith("403 ")
    assert "kaiwo-executor-wrapped-only" in refusal
    assert "only inside AppWrappers" in refusal
    # The mutating webhook ran too: it labels an AppWrapper with its creator.
    assert created["metadata"]["labels"]["workload.codeflare.dev/user"] == (
        f"system_serviceaccount_{OPERATOR_NAMESPACE}_{service_account('executor')}"
    )
    await stack.kube.delete(resources.APP_WRAPPER, f"{name}-again", namespace=stack.namespace)
    await stack.kube.delete(resources.KAIWO_SERVICE, name, namespace=stack.namespace)
