"""Least privilege, measured on a real API server.

The whole operator runs as ``kaiwo up`` runs it, but each service authenticates as its own
ServiceAccount (a TokenRequest token), bound to the roles of deploy/k8s/base/rbac.yaml and, for
the executor, its admission policies, while
the test drives scenarios that reach the code's API calls broadly: the default KaiwoConfig and
KaiwoQueueConfig created on an empty cluster, GPU node labels and taint, the administrator's
KaiwoQueueConfig replacing discovered flavors and adding queues, then losing some (pruning), a
KaiwoJob with a download through to COMPLETE, a Ray KaiwoJob turned into a batch one and then
deleted, a KaiwoService behind a gateway (Deployment, Service, HTTPRoute) whose Deployment is
deleted by hand, turned into a Ray service and back, and a KaiwoJob terminated for running past
its duration while another waits (its PVC pruned); a KubeAI Model with adapters rolled and
stripped of them, one with a cache loaded, deleted and evicted, and one scaled from zero by an
autoscaler's decision (the scale subresource); an AIMNamespaceConfig naming a Secret no Secret
can be named is told so by an Event on it; the monitor leads (through its lease in NATS,
as the planner and the executor do) and scrapes a Prometheus stub, which reports idle GPUs for
GPU workloads no Kaiwo kind owns, one of each root kind (a bare Pod, a Job, a Deployment, a
StatefulSet, a RayJob and a RayCluster, the test making the Ray clusters and pods KubeRay
would): the monitor finds their roots, the planner records them as GpuWorkloads and preempts
them, the executor deletes or scales them to zero and, their TTL over, deletes the records of
the deleted ones (decision 0047).

The audit log holds every request of those ServiceAccounts (``tests.real_cluster``), and says:

* no request of any service was refused, and every scenario got where it should: the roles
  are sufficient;
* every grant was used in the run, except those in :data:`UNUSED_IN_THIS_RUN`, each with the
  reason: a grant the code no longer needs fails the test;
* the executor's admission policies (deploy/k8s/base/admission-policy.yaml) refused none of
  the operator's own writes (they would show as refused requests);
* nobody wrote where it should not: the watcher wrote nothing, the planner and the recorder
  made no request at all, the monitor wrote nothing, the executor only in the test's
  namespace, in ``default`` (Events about the cluster-scoped KaiwoQueueConfig) and to
  cluster-scoped objects, and on the node only Kaiwo's own labels and taint.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import pytest
from aiohttp import web
from kaiwo_cli.stack.local import LocalStack, StackOptions
from kaiwo_contracts.confinement import GPU_TAINT_RECORD_ANNOTATION
from kaiwo_contracts.events.permissions import ADMIN, LEASE_BUCKET, MONITOR
from kaiwo_contracts.events.streams import bus_topology
from kaiwo_envtest import AuditEvent
from kaiwo_kube import NotFound, Retryable, resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_runtime.leases import NatsLeaseStore
from kaiwo_runtime.nats_connection import connect_client
from kaiwo_runtime.nats_server import free_port

from tests.integration.pipeline import cluster_actors as actors
from tests.integration.pipeline import model_actors as models
from tests.integration.pipeline.harness import (
    SERVICE_ENV,
    Pending,
    Pipeline,
    clean_up_real_cluster,
    eventually,
)
from tests.integration.rbac.service_accounts import (
    REFUSED,
    Grant,
    granted,
    rbac_installed,
    service_kubeconfig,
    service_user,
    usage_table,
    used,
)
from tests.real_cluster import RealCluster

pytestmark = [pytest.mark.k8s, pytest.mark.nats, pytest.mark.slow, pytest.mark.timeout(300)]

SERVICES: Final = ("watcher", "planner", "executor", "monitor", "recorder")
WITH_ROLES: Final = ("watcher", "executor", "monitor")
KAIWO_API: Final = actors.KAIWO_API
GPU_TAINT: Final = "kaiwo.silogen.ai/gpu"
RENAMED: Final = "example.com/gpu-node"

FINALIZERS: Final = (
    "checked by the OwnerReferencesPermissionEnforcement admission plugin within each write of "
    "a child (they name their owner with blockOwnerDeletion), not a request of its own, so the "
    "audit log never shows it; the session's API server runs that plugin, so without this "
    "grant the children's writes would be refused and this test would fail"
)
CRD_WAIT: Final = (
    "only while a custom kind is not served yet (Kueue or KubeRay installed after the watcher "
    "started; watcher.served_kinds.until_served); here every CRD is there before the operator "
    "starts"
)
NAME_TAKEN: Final = (
    "a plan's one new child is created by an apply that only creates, and read only when its "
    "name is taken or the planner saw it changed (decision 0105); the run's AppWrapper is "
    "created once, its name free, and pruned"
)
WRAPPED_ONLY: Final = (
    "asked of the executor by the AppWrapper webhook's SubjectAccessReview of a Ray service's "
    "component, never a request of its own (the admission policy kaiwo-executor-wrapped-only "
    "refuses every RayService it would create itself; decision 0184); this test's API server "
    "runs no AppWrapper webhook, the real stack's does"
)
APPLY_CREATES: Final = (
    "authorized within the server-side apply that creates the default singleton (the API "
    "server checks create as well as patch), which the audit log records as a patch"
)
UNUSED_IN_THIS_RUN: Final[dict[str, dict[Grant, str]]] = {
    "watcher": {
        ("apiextensions.k8s.io", "customresourcedefinitions", "list"): CRD_WAIT,
        ("apiextensions.k8s.io", "customresourcedefinitions", "watch"): CRD_WAIT,
    },
    "executor": {
        ("kaiwo.silogen.ai", "kaiwojobs/finalizers", "update"): FINALIZERS,
        ("kaiwo.silogen.ai", "kaiwoservices/finalizers", "update"): FINALIZERS,
        ("kaiwo.silogen.ai", "kaiwoqueueconfigs/finalizers", "update"): FINALIZERS,
        ("kubeai.org", "models/finalizers", "update"): FINALIZERS,
        ("config.kaiwo.silogen.ai", "kaiwoconfigs", "create"): APPLY_CREATES,
        ("kaiwo.silogen.ai", "kaiwoqueueconfigs", "create"): APPLY_CREATES,
        ("kaiwo.silogen.ai", "gpuworkloads", "create"): APPLY_CREATES,
        ("workload.codeflare.dev", "appwrappers", "get"): NAME_TAKEN,
        ("ray.io", "rayservices", "create"): WRAPPED_ONLY,
    },
    "monitor": {},
}
"""Grants the run does not use, by service, with the reason each is in the role anyway."""


# ---------------------------------------------------------------------- the cluster around


@dataclass
class PrometheusStub:
    """Answers the monitor's instant queries: one idle GPU (1 %) for each pod of ``pods``
    (namespace, name); none while it is empty."""

    port: int = field(default_factory=free_port)
    queries: list[str] = field(default_factory=list)
    pods: list[tuple[str, str]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def answer(self, request: web.Request) -> web.Response:
        query = request.query.get("query", "")
        self.queries.append(query)
        now = time.time()
        # The monitor's second query asks when each sample was taken (decision 0177): now.
        sampled = query.startswith("timestamp(")
        result = [
            {
                "metric": {
                    **({} if sampled else {"__name__": "gpu_gfx_activity"}),
                    "namespace": namespace,
                    "pod": pod,
                    "gpu_id": "0",
                },
                "value": [now, str(now) if sampled else "1.0"],
            }
            for namespace, pod in self.pods
        ]
        return web.json_response(
            {"status": "success", "data": {"resultType": "vector", "result": result}}
        )


@contextlib.asynccontextmanager
async def prometheus_stub() -> AsyncIterator[PrometheusStub]:
    stub = PrometheusStub()
    app = web.Application()
    app.router.add_get("/api/v1/query", stub.answer)
    runner = web.AppRunner(app)
    await runner.setup()
    try:
        await web.TCPSite(runner, "127.0.0.1", stub.port).start()
        yield stub
    finally:
        await runner.cleanup()


async def forget_kaiwo_config(kube: KubernetesAsyncioAdapter) -> None:
    with contextlib.suppress(NotFound):
        await kube.delete(resources.KAIWO_CONFIG, "kaiwo")


async def forget_singletons(kube: KubernetesAsyncioAdapter) -> None:
    """No KaiwoConfig and no KaiwoQueueConfig (an earlier test's operator made them)."""

    async def attempt() -> bool | Pending:
        try:
            await actors.remove_queue_config(kube)
            await forget_kaiwo_config(kube)
        except Retryable as error:  # first in a session: a new CRD's storage may still start
            return Pending(error.message)
        return True

    await eventually(attempt, what="no KaiwoConfig and no KaiwoQueueConfig", interval=0.5)


def stack_options(
    state_dir: Path, admin: Path, kubeconfigs: dict[str, Path], metrics: str
) -> StackOptions:
    by_service = {name: {"KAIWO_KUBECONFIG": str(path)} for name, path in kubeconfigs.items()}
    by_service["monitor"] |= {"KAIWO_MONITOR_POLLING_INTERVAL_SECONDS": "1"}
    return StackOptions(
        state_dir=state_dir,
        kubeconfig=admin,  # kaiwo up's own look at the cluster; each service has its own
        scheduler="existing",  # the operator's roles are measured, not the installer's
        seed_fake_cluster=False,
        metrics_endpoint=metrics,
        service_env=SERVICE_ENV,
        env_by_service=by_service,
        ready_timeout=90.0,
    )


# ---------------------------------------------------------------------- checks


async def gone(
    p: Pipeline, resource: resources.ResourceType, name: str, *, namespace: str | None = None
) -> None:
    """Wait until the object is deleted or being deleted (a finalizer may hold it a while)."""

    async def check() -> bool | Pending:
        found = await actors.get_or_none(p.kube, resource, name, namespace=namespace)
        if found is None or found["metadata"].get("deletionTimestamp"):
            return True
        return Pending("still there")

    await eventually(check, what=f"{resource.kind} {name} deleted")


async def holds(
    what: str, read: Callable[[], Awaitable[Any]], condition: Callable[[Any], bool]
) -> Any:
    async def check() -> tuple[Any] | Pending:
        value = await read()
        # Boxed: the value that satisfies the condition may be None (an object gone), which
        # ``eventually`` would take for "not yet".
        return (value,) if condition(value) else Pending(f"now {value!r}")

    [value] = await eventually(check, what=what)
    return value


async def events_about(p: Pipeline, name: str, *, namespace: str) -> list[dict[str, Any]]:
    """The Events in ``namespace`` about the object named ``name`` (a cluster-scoped
    object's are in ``default``)."""
    listed = await p.kube.list(resources.EVENT, namespace=namespace)
    return [e for e in listed.items if (e.get("involvedObject") or {}).get("name") == name]


async def kueue_names(p: Pipeline, resource: resources.ResourceType) -> set[str]:
    selector = f"{actors.QUEUE_CONFIG_LABEL}={actors.QUEUE_CONFIG}"
    listed = await p.kube.list(resource, label_selector=selector)
    return {item["metadata"]["name"] for item in listed.items}


# ---------------------------------------------------------------------- scenarios


async def defaults_on_an_empty_cluster(p: Pipeline) -> None:
    """The operator creates the KaiwoConfig and KaiwoQueueConfig ``kaiwo``; the default queue,
    flavor and topology follow, and the GPU node gets its pool labels. The administrator then
    asks for the GPU taint (and quick preemption), and the node gets it; then renames its key,
    and the taint moves."""
    await p.appears(resources.KAIWO_CONFIG, "kaiwo")
    await p.appears(resources.KAIWO_QUEUE_CONFIG, "kaiwo")
    await p.appears(resources.KUEUE_CLUSTER_QUEUE, actors.QUEUE)
    await holds(
        "the discovered flavor and the default topology",
        lambda: asyncio.gather(
            kueue_names(p, resources.KUEUE_RESOURCE_FLAVOR),
            kueue_names(p, resources.KUEUE_TOPOLOGY),
        ),
        all,
    )
    await p.kube.merge_patch(
        resources.KAIWO_CONFIG,
        "kaiwo",
        {
            "spec": {
                "nodes": {"addTaintsToGpuNodes": True},
                "scheduling": {"pendingThresholdForPreemption": "1s"},
            }
        },
    )
    await holds(
        "the GPU node tainted and labelled by Kaiwo",
        lambda: p.kube.get(resources.NODE, actors.GPU_NODE),
        lambda node: (
            any(t["key"] == GPU_TAINT for t in node["spec"].get("taints") or ())
            and any(k.startswith("kaiwo/") for k in node["metadata"]["labels"])
        ),
    )
    # The key renamed: the nodes' policy reads it from the KaiwoConfig (decision 0211), so
    # the executor moves its taint; with the key written into the policy it was refused.
    await p.kube.merge_patch(
        resources.KAIWO_CONFIG, "kaiwo", {"spec": {"nodes": {"defaultGpuTaintKey": RENAMED}}}
    )
    await holds(
        "the GPU node's taint moved to the renamed key",
        lambda: p.kube.get(resources.NODE, actors.GPU_NODE),
        lambda node: (
            {t["key"] for t in node["spec"].get("taints") or ()} & {GPU_TAINT, RENAMED} == {RENAMED}
        ),
    )


def queue_config(namespace: str, *, extra: bool) -> dict[str, Any]:
    """The administrator's KaiwoQueueConfig: a flavor of its own (so the discovered one and the
    default topology go), queue ``kaiwo`` for ``namespace``, and with ``extra`` a second queue
    and a priority class."""
    queues = [{"name": actors.QUEUE, "namespaces": [namespace], "spec": {}}]
    spec: dict[str, Any] = {
        "resourceFlavors": [{"name": "rbac-flavor", "nodeLabels": {"kaiwo/nodepool": "rbac"}}],
        "clusterQueues": queues,
    }
    if extra:
        queues.append({"name": "rbac-extra", "namespaces": [namespace], "spec": {}})
        spec["workloadPriorityClasses"] = [
            {
                "apiVersion": "kueue.x-k8s.io/v1beta1",
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": "rbac-priority"},
                "value": 10,
            }
        ]
    return {
        "apiVersion": KAIWO_API,
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": actors.QUEUE_CONFIG},
        "spec": spec,
    }


async def the_administrators_queue_config(p: Pipeline) -> None:
    """Applied over the default one, then without its extra queue and priority class: the
    executor creates, then prunes, objects of every Kueue kind it manages."""
    assert await kueue_names(p, resources.KUEUE_RESOURCE_FLAVOR), "a flavor was discovered"
    await p.kube.apply(
        queue_config(p.namespace, extra=True), field_manager="cluster-admin", force=False
    )
    await p.appears(resources.KUEUE_LOCAL_QUEUE, "rbac-extra")
    await p.appears(resources.KUEUE_WORKLOAD_PRIORITY_CLASS, "rbac-priority")
    await holds(
        "the administrator's flavor only, and no topology",
        lambda: asyncio.gather(
            kueue_names(p, resources.KUEUE_RESOURCE_FLAVOR),
            kueue_names(p, resources.KUEUE_TOPOLOGY),
        ),
        lambda found: found[0] == {"rbac-flavor"} and not found[1],
    )
    await p.kube.apply(
        queue_config(p.namespace, extra=False), field_manager="cluster-admin", force=False
    )
    await gone(p, resources.KUEUE_CLUSTER_QUEUE, "rbac-extra")
    await gone(p, resources.KUEUE_LOCAL_QUEUE, "rbac-extra", namespace=p.namespace)
    await gone(p, resources.KUEUE_WORKLOAD_PRIORITY_CLASS, "rbac-priority")


async def a_queue_config_of_another_name_is_told_on_its_status(p: Pipeline) -> None:
    """Decision 0210: only the KaiwoQueueConfig ``kaiwo`` is acted on; one of another name is
    told so on its status, which the executor writes under its own role (a role that named
    ``kaiwo`` alone refused it). Nothing of Kueue's is made for it."""
    other = {**queue_config(p.namespace, extra=False), "metadata": {"name": "rbac-team"}}
    await p.kube.apply(other, field_manager="cluster-admin", force=False)

    async def ready() -> dict[str, Any] | None:
        found = await p.kube.get(resources.KAIWO_QUEUE_CONFIG, "rbac-team")
        conditions = (found.get("status") or {}).get("conditions") or ()
        return next((c for c in conditions if c.get("type") == "Ready"), None)

    condition = await holds("the queue config rbac-team told it is not acted on", ready, bool)
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "False",
        "UnsupportedName",
        "only a KaiwoQueueConfig named 'kaiwo' is acted on",
    )
    assert await kueue_names(p, resources.KUEUE_RESOURCE_FLAVOR) == {"rbac-flavor"}
    await p.kube.delete(resources.KAIWO_QUEUE_CONFIG, "rbac-team")
    await gone(p, resources.KAIWO_QUEUE_CONFIG, "rbac-team")


async def a_kaiwo_config_of_another_name_is_told_it_is_never_read(p: Pipeline) -> None:
    """Decision 0209: only the KaiwoConfig ``kaiwo`` is read; one of another name gets a
    Warning Event saying so (in ``default``: it is cluster-scoped), which the executor admits
    by reading it under its own role."""
    await p.kube.apply(
        {
            "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
            "kind": "KaiwoConfig",
            "metadata": {"name": "rbac-settings"},
            "spec": {"ray": {"headPodMemory": "8Gi"}},
        },
        field_manager="cluster-admin",
        force=False,
    )

    [event] = await holds(
        "the NotInForce Event on KaiwoConfig rbac-settings",
        lambda: events_about(p, "rbac-settings", namespace="default"),
        bool,
    )
    assert (event["type"], event["reason"], event["involvedObject"]["kind"]) == (
        "Warning",
        "NotInForce",
        "KaiwoConfig",
    )
    assert event["message"].startswith("Only the KaiwoConfig named 'kaiwo' is read"), event
    await p.kube.delete(resources.KAIWO_CONFIG, "rbac-settings")
    await gone(p, resources.KAIWO_CONFIG, "rbac-settings")


def kaiwo_job(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    job = actors.training_job(name, namespace=namespace, download=bool(spec.pop("download")))
    job["spec"] |= spec
    return job


async def a_ray_job_turned_into_a_batch_job_then_deleted(p: Pipeline) -> None:
    name = "ray-then-batch"
    await p.kube.create(kaiwo_job(name, p.namespace, download=False, ray=True))
    await p.appears(resources.RAY_JOB, name)
    patch = {"spec": {"ray": False}}
    await p.kube.merge_patch(resources.KAIWO_JOB, name, patch, namespace=p.namespace)
    await p.appears(resources.JOB, name)
    await gone(p, resources.RAY_JOB, name, namespace=p.namespace)
    await p.kube.delete(resources.KAIWO_JOB, name, namespace=p.namespace)
    await gone(p, resources.KAIWO_JOB, name, namespace=p.namespace)


async def a_service_behind_a_gateway_changed_every_way(p: Pipeline) -> None:
    """Deployment, Service and HTTPRoute; the Deployment deleted by hand comes back; as a Ray
    service it is an AppWrapper (the Deployment and Service pruned); without the gateway its
    HTTPRoute is pruned; back to a Deployment, the AppWrapper is pruned."""
    name, ns = "svc", p.namespace
    await p.kube.create(
        {
            "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
            "kind": "AIMNamespaceConfig",
            "metadata": {"name": "aim", "namespace": ns},
            "spec": {"gateway": {"name": "gateway", "namespace": ns}},
        }
    )
    await p.kube.create(
        {
            "apiVersion": KAIWO_API,
            "kind": "KaiwoService",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"image": "rocm/vllm:latest", "entrypoint": "vllm serve m", "gpus": 1},
        }
    )
    deployment = await p.appears(resources.DEPLOYMENT, name)
    await p.appears(resources.SERVICE, name)
    await p.appears(resources.HTTP_ROUTE, name)

    await p.kube.delete(resources.DEPLOYMENT, name, namespace=ns)
    await holds(
        "the Deployment deleted by hand created again",
        lambda: p.child(resources.DEPLOYMENT, name),
        lambda found: (
            found is not None and found["metadata"]["uid"] != deployment["metadata"]["uid"]
        ),
    )

    await p.kube.merge_patch(resources.KAIWO_SERVICE, name, {"spec": {"ray": True}}, namespace=ns)
    await p.appears(resources.APP_WRAPPER, name)
    await gone(p, resources.DEPLOYMENT, name, namespace=ns)
    await gone(p, resources.SERVICE, name, namespace=ns)

    await p.kube.delete(resources.AIM_NAMESPACE_CONFIG, "aim", namespace=ns)
    await gone(p, resources.HTTP_ROUTE, name, namespace=ns)

    await p.kube.merge_patch(resources.KAIWO_SERVICE, name, {"spec": {"ray": False}}, namespace=ns)
    await p.appears(resources.DEPLOYMENT, name)
    await gone(p, resources.APP_WRAPPER, name, namespace=ns)


async def a_job_past_its_duration_terminated_for_a_waiting_one(p: Pipeline) -> None:
    """Running past ``duration`` while another waits for GPUs longer than the threshold: the
    expired one is TERMINATED and every child of it pruned, its data volume included."""
    name, ns = "expiring", p.namespace
    await p.kube.create(kaiwo_job(name, ns, download=True, duration="2s"))
    await p.reaches(name, "DOWNLOADING")
    await p.appears(resources.JOB, f"{name}-download")
    await p.jobs.pod_succeeded(f"{name}-download", namespace=ns)
    main = await p.appears(resources.JOB, name)
    await p.reaches(name, "PENDING")
    await actors.kueue_admits(p.kube, main)
    await p.jobs.pod_running(name, namespace=ns, ready=True)
    await p.reaches(name, "RUNNING")
    await p.kube.create(kaiwo_job("waiting", ns, download=False))
    await p.reaches("waiting", "PENDING")
    await p.reaches(name, "TERMINATED")
    for resource, child in (
        (resources.JOB, name),
        (resources.JOB, f"{name}-download"),
        (resources.CONFIG_MAP, f"{name}-download"),
        (resources.PERSISTENT_VOLUME_CLAIM, f"{name}-data"),
    ):
        await gone(p, resource, child, namespace=ns)


async def a_model_with_adapters_rolled_and_a_cached_one_deleted(p: Pipeline) -> None:
    """A Model with adapters gets its Pod, the loaders' Role and RoleBinding and the adapter
    labels; a changed ``args`` replaces the Pod; without adapters the Role and RoleBinding are
    pruned. A Model with a cache gets its finalizer, and deleted, evicts and lets go."""
    ns = p.namespace
    await models.apply_models_config(p.kube)
    await p.kube.create(
        models.a_model(
            "lora",
            ns,
            url="hf://org/base",
            engine="VLLM",
            adapters=[{"name": "sql", "url": "hf://org/sql-lora"}],
            replicas=1,
            autoscalingDisabled=True,
        )
    )
    await models.serving(p, "lora", 1)
    [pod] = await models.model_pods(p.kube, ns, "lora")
    await p.appears(resources.ROLE_BINDING, "model-lora-adapter-loader")
    patch = {"spec": {"args": ["--max-model-len=4096"]}}
    await p.kube.merge_patch(resources.KUBEAI_MODEL, "lora", patch, namespace=ns)
    await holds(
        "the Pod replaced (the test its kubelet)",
        lambda: replaced(p, "lora", pod["metadata"]["uid"]),
        bool,
    )
    await models.serving(p, "lora", 1)
    await p.kube.merge_patch(
        resources.KUBEAI_MODEL, "lora", {"spec": {"adapters": None}}, namespace=ns
    )
    await gone(p, resources.ROLE, "model-lora-adapter-loader", namespace=ns)
    await gone(p, resources.ROLE_BINDING, "model-lora-adapter-loader", namespace=ns)

    await p.kube.create(
        models.a_model(
            "cached",
            ns,
            url="hf://org/cached",
            engine="VLLM",
            cacheProfile="shared",
            minReplicas=1,
        )
    )
    await p.appears(resources.JOB, "load-cache-cached")
    await a_model_scaled_from_zero_by_a_decision(p)
    await models.bound_cache_volume(p)  # a load pod runs on a bound volume only (0202)
    await p.jobs.pod_succeeded("load-cache-cached", namespace=ns)
    await models.serving(p, "cached", 1)
    await p.kube.delete(resources.KUBEAI_MODEL, "cached", namespace=ns)
    await p.appears(resources.JOB, "evict-cache-cached")
    await p.jobs.pod_succeeded("evict-cache-cached", namespace=ns)
    await holds(
        "the cached Model evicted, its finalizer dropped and so deleted",
        lambda: actors.get_or_none(p.kube, resources.KUBEAI_MODEL, "cached", namespace=ns),
        lambda found: found is None,
    )


async def a_model_scaled_from_zero_by_a_decision(p: Pipeline) -> None:
    """The autoscaler's decision (published as the gateway would) sets a Model's replicas
    through its scale subresource, and its Pod follows."""
    ns = p.namespace
    await p.kube.create(
        models.a_model("scaled", ns, url="hf://org/scaled", engine="VLLM", resourceProfile="cpu:1")
    )
    await holds(
        "the Model at zero planned (its status written, its unset replicas written down: 0223)",
        lambda: models.model(p, "scaled"),
        lambda found: (
            (found.get("status") or {}).get("replicas") == {"all": 0, "ready": 0}
            and found["spec"].get("replicas") == 0
        ),
    )
    await models.decide_scale(p, "scaled", replicas=1)
    await models.serving(p, "scaled", 1)


async def replaced(p: Pipeline, model: str, uid: str) -> bool:
    await models.run_pods(p.kube, p.namespace, model)
    uids = {pod["metadata"]["uid"] for pod in await models.model_pods(p.kube, p.namespace, model)}
    return bool(uids) and uid not in uids


# ---------------------------------------------------------------------- GPU idle preemption

IDLE_AND_GONE: Final = {
    "kaiwo.silogen.ai/gpu-preemption.policy": "Always",
    "kaiwo.silogen.ai/gpu-preemption.grace-period": "1s",
    "kaiwo.silogen.ai/gpu-preemption.ttl": "1s",
}
"""Preempted once idle for a second; the record of a deleted workload kept a second."""


def gpu_pod_spec() -> dict[str, Any]:
    gpu = {"limits": {"amd.com/gpu": "1"}}
    return {"containers": [{"name": "main", "image": "busybox:1.36", "resources": gpu}]}


def gpu_root(kind: str, name: str, namespace: str) -> dict[str, Any]:
    """An opted-in GPU workload of ``kind`` (apiVersion/kind) no Kaiwo kind owns."""
    api_version, _, kind_name = kind.rpartition("/")
    labels = {"app": name}
    template = {"metadata": {"labels": labels}, "spec": gpu_pod_spec()}
    meta = {"name": name, "namespace": namespace, "annotations": IDLE_AND_GONE}
    ray = {"headGroupSpec": {"rayStartParams": {}, "template": {"spec": gpu_pod_spec()}}}
    spec: dict[str, Any] = {
        "v1/Pod": gpu_pod_spec(),
        "batch/v1/Job": {"template": {"spec": {**gpu_pod_spec(), "restartPolicy": "Never"}}},
        "apps/v1/Deployment": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": template,
        },
        "apps/v1/StatefulSet": {
            "replicas": 1,
            "serviceName": name,
            "selector": {"matchLabels": labels},
            "template": template,
        },
        "ray.io/v1/RayJob": {"entrypoint": "python train.py", "rayClusterSpec": ray},
        "ray.io/v1/RayCluster": ray,
    }[kind]
    return {"apiVersion": api_version, "kind": kind_name, "metadata": meta, "spec": spec}


async def controlled_by(p: Pipeline, owner: dict[str, Any], manifest: dict[str, Any]) -> Any:
    """Create ``manifest`` controlled by ``owner``, as KubeRay makes a RayJob's cluster and a
    cluster's pods."""
    meta = owner["metadata"]
    reference = {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    manifest["metadata"]["ownerReferences"] = [reference]
    manifest["metadata"].pop("annotations", None)
    return await p.kube.create(manifest)


async def runs(p: Pipeline, selector: str) -> str:
    """The kubelet's word that the one pod with ``selector`` runs; its name."""

    async def found() -> list[dict[str, Any]] | Pending:
        listed = await p.kube.list(resources.POD, namespace=p.namespace, label_selector=selector)
        return listed.items or Pending(f"no pod with {selector} yet")

    [pod] = await eventually(found, what=f"the pod with {selector}")
    name = pod["metadata"]["name"]
    await p.kube.patch_status(
        resources.POD,
        name,
        {"phase": "Running", "startTime": actors.now()},
        namespace=p.namespace,
        field_manager="kubelet",
        method="merge",
    )
    return str(name)


async def gpu_workloads_no_kaiwo_kind_owns_preempted(p: Pipeline, metrics: PrometheusStub) -> None:
    """One idle GPU workload of each root kind: found, recorded, preempted (module docstring)."""
    ns = p.namespace
    roots = {
        kind: await p.kube.create(gpu_root(kind, f"gpu-{kind.rpartition('/')[2].lower()}", ns))
        for kind in (
            "v1/Pod",
            "batch/v1/Job",
            "apps/v1/Deployment",
            "apps/v1/StatefulSet",
            "ray.io/v1/RayJob",
            "ray.io/v1/RayCluster",
        )
    }
    job_cluster = await controlled_by(
        p, roots["ray.io/v1/RayJob"], gpu_root("ray.io/v1/RayCluster", "gpu-rayjob-cluster", ns)
    )
    # A CronJob's run (decision 0056), made as the CronJob controller makes it: the template's
    # opt-in on the Job, the CronJob its controller; the CronJob stays suspended.
    run = gpu_root("batch/v1/Job", "gpu-cron-run", ns)
    cron = await p.kube.create(
        {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "metadata": {"name": "gpu-cron", "namespace": ns},
            "spec": {
                "schedule": "@yearly",
                "suspend": True,
                "jobTemplate": {
                    "metadata": {"annotations": IDLE_AND_GONE},
                    "spec": run["spec"],
                },
            },
        }
    )
    run["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "name": "gpu-cron",
            "uid": cron["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    await p.kube.create(run)
    for name, owner in (
        ("gpu-rayjob-head", job_cluster),
        ("gpu-raycluster-head", roots["ray.io/v1/RayCluster"]),
    ):
        head = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": {"app": name}},
            "spec": gpu_pod_spec(),
        }
        await controlled_by(p, owner, head)
    pods = [
        await runs(p, f"app={name}")
        for name in ("gpu-deployment", "gpu-statefulset", "gpu-rayjob-head", "gpu-raycluster-head")
    ]
    pods += [await runs(p, "job-name=gpu-job"), await runs(p, "job-name=gpu-cron-run")]
    await p.kube.patch_status(
        resources.POD,
        "gpu-pod",
        {"phase": "Running", "startTime": actors.now()},
        namespace=ns,
        field_manager="kubelet",
        method="merge",
    )
    metrics.pods[:] = [(ns, pod) for pod in [*pods, "gpu-pod"]]

    for resource, name in (
        (resources.POD, "gpu-pod"),
        (resources.JOB, "gpu-job"),
        (resources.JOB, "gpu-cron-run"),
        (resources.RAY_JOB, "gpu-rayjob"),
        (resources.RAY_CLUSTER, "gpu-raycluster"),
    ):
        await gone(p, resource, name, namespace=ns)
    for resource, name in (
        (resources.DEPLOYMENT, "gpu-deployment"),
        (resources.STATEFUL_SET, "gpu-statefulset"),
    ):
        await holds(
            f"{resource.kind} {name} scaled to zero",
            lambda resource=resource, name=name: p.kube.get(resource, name, namespace=ns),
            lambda found: found["spec"]["replicas"] == 0,
        )

    async def records() -> dict[str, str]:
        listed = await p.kube.list(resources.GPU_WORKLOAD, namespace=ns)
        return {
            item["spec"]["workloadRef"]["kind"]: (item.get("status") or {}).get("phase")
            for item in listed.items
        }

    # The deleted ones' records go after their TTL; the scaled ones' stay, Preempted.
    await holds(
        "the records of the deleted workloads gone, the scaled ones' Preempted",
        records,
        lambda found: found == {"Deployment": "Preempted", "StatefulSet": "Preempted"},
    )
    metrics.pods.clear()


# ---------------------------------------------------------------------- the run


@contextlib.asynccontextmanager
async def operator_under_its_roles(
    real: RealCluster, state_dir: Path, namespace: str, metrics: PrometheusStub
) -> AsyncIterator[Pipeline]:
    """``kaiwo up`` with each service on a kubeconfig of its own ServiceAccount."""
    async with contextlib.AsyncExitStack() as exits:
        kube = await KubernetesAsyncioAdapter.from_kubeconfig(real.kubeconfig)
        exits.push_async_callback(kube.close)
        (state_dir / "kubeconfigs").mkdir(parents=True)
        kubeconfigs = {
            name: await service_kubeconfig(real.kubeconfig, name, state_dir / "kubeconfigs")
            for name in SERVICES
        }
        options = stack_options(state_dir / "kaiwo", real.kubeconfig, kubeconfigs, metrics.url)
        started_at = time.monotonic()
        stack = await exits.enter_async_context(LocalStack(options))
        assert stack.nats is not None
        nats = await connect_client(stack.nats_connection(ADMIN), max_reconnect_attempts=-1)
        exits.push_async_callback(nats.close)
        yield Pipeline(
            stack=stack,
            kube=kube,
            nats=nats,
            js=nats.jetstream(),
            store_url=options.event_store_url,
            topology=bus_topology(),
            namespace=namespace,
            jobs=actors.Kubelet(kube),
            audit_log=real.audit_log,
            started_at=started_at,
            ready_at=time.monotonic(),
        )


async def a_namespace_config_with_a_name_no_secret_can_have_is_told(p: Pipeline) -> None:
    """Decision 0206: the Event on the AIMNamespaceConfig itself, which the executor writes
    under its own role and policies. Its one setting is an S3 credential for an endpoint no
    workload of the run downloads from: the service scenario deletes its own config (``aim``)
    on the way, and this one, then in force, must change nothing that runs. While ``aim``
    (first by name) is in force, this one is told only that it is not (decision 0209): its
    names are told once it is in force."""
    await p.kube.create(
        {
            "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
            "kind": "AIMNamespaceConfig",
            "metadata": {"name": "zz-typo", "namespace": p.namespace},
            "spec": {
                "credentials": {
                    "s3": [
                        {
                            "endpointUrl": "https://s3.nowhere.example",
                            "accessKeyId": {"secretName": "S3_Creds", "secretKey": "id"},
                        }
                    ]
                }
            },
        }
    )

    async def aim_gone() -> bool | Pending:
        found = await actors.get_or_none(
            p.kube, resources.AIM_NAMESPACE_CONFIG, "aim", namespace=p.namespace
        )
        return True if found is None else Pending("aim, first by name, is still in force")

    # Bounded by the module's timeout: the service scenario deletes it part way through.
    await eventually(aim_gone, what="the AIMNamespaceConfig aim deleted", within=280.0)

    async def about_it() -> list[dict[str, Any]]:
        return await events_about(p, "zz-typo", namespace=p.namespace)

    async def told() -> list[str]:
        return [
            str(event.get("message"))
            for event in await about_it()
            if event.get("reason") == "InvalidConfig"
        ]

    [message] = await holds("the InvalidConfig Event on the AIMNamespaceConfig", told, bool)
    assert message.startswith("The AIMNamespaceConfig gives names the children"), message
    assert "spec.credentials.s3[0].accessKeyId.secretName" in message, message
    assert {event.get("reason") for event in await about_it()} <= {"NotInForce", "InvalidConfig"}


async def scenarios(p: Pipeline, metrics: PrometheusStub) -> None:
    await defaults_on_an_empty_cluster(p)
    await the_administrators_queue_config(p)
    await asyncio.gather(
        gpu_workloads_no_kaiwo_kind_owns_preempted(p, metrics),
        p.run_to_completion("trained"),
        a_ray_job_turned_into_a_batch_job_then_deleted(p),
        a_service_behind_a_gateway_changed_every_way(p),
        a_job_past_its_duration_terminated_for_a_waiting_one(p),
        a_model_with_adapters_rolled_and_a_cached_one_deleted(p),
        a_namespace_config_with_a_name_no_secret_can_have_is_told(p),
        a_queue_config_of_another_name_is_told_on_its_status(p),
        a_kaiwo_config_of_another_name_is_told_it_is_never_read(p),
    )


@dataclass(frozen=True, slots=True)
class Run:
    namespace: str
    """The workloads' namespace."""
    requests: dict[str, list[AuditEvent]]
    """Each service's requests, from the audit log."""
    failure: Exception | None
    """How the scenarios failed (raised once the audit log has told what was refused)."""
    node: dict[str, Any]
    monitor_holder: str | None
    """Who held the monitor's lease (NATS) at the end of the scenarios."""
    scrapes: int
    seconds: float


async def run_the_scenarios(real: RealCluster, tmp_path: Path) -> Run:
    audit = real.audit_log
    assert audit is not None
    namespace = f"rbac-{uuid.uuid4().hex[:6]}"
    failure: Exception | None = None
    async with contextlib.AsyncExitStack() as exits:
        kube = await KubernetesAsyncioAdapter.from_kubeconfig(real.kubeconfig)
        exits.push_async_callback(kube.close)
        await exits.enter_async_context(rbac_installed(kube))
        # After the operator stopped: the node, the queue config, the namespace, and the
        # KaiwoConfig this test changed (the next operator creates a default one again).
        exits.push_async_callback(forget_kaiwo_config, kube)
        exits.push_async_callback(clean_up_real_cluster, kube, namespace)
        exits.push_async_callback(models.remove_models_config, kube)
        await forget_singletons(kube)
        await actors.create_namespace(kube, namespace)
        await actors.register_gpu_node(kube)
        await exits.enter_async_context(actors.node_heartbeat(kube))
        metrics = await exits.enter_async_context(prometheus_stub())
        mark = audit.mark()
        started = time.monotonic()
        async with operator_under_its_roles(real, tmp_path, namespace, metrics) as p:
            try:
                await scenarios(p, metrics)
            except Exception as error:  # a refused call shows as a step that never happens
                failure = error
            leases = await NatsLeaseStore.open(p.nats, LEASE_BUCKET, duration_seconds=5)
            monitor_holder = await leases.holder(MONITOR)
            node = await kube.get(resources.NODE, actors.GPU_NODE)
        seconds = time.monotonic() - started
        # The operator has stopped; its last requests are
        # written to the log just after they were answered.
        await asyncio.sleep(1.0)
        requests = audit.requests(since=mark)
    return Run(
        namespace=namespace,
        requests={name: [r for r in requests if r.user == service_user(name)] for name in SERVICES},
        failure=failure,
        node=node,
        monitor_holder=monitor_holder,
        scrapes=len(metrics.queries),
        seconds=seconds,
    )


def fields_of(obj: dict[str, Any], manager: str) -> dict[str, Any]:
    return next(
        (e["fieldsV1"] for e in obj["metadata"]["managedFields"] if e["manager"] == manager), {}
    )


async def test_each_service_needs_its_whole_role_and_nothing_more(
    real_cluster: RealCluster, tmp_path: Path
) -> None:
    if real_cluster.audit_log is None:
        pytest.skip("needs the audit log of the session's own control plane")
    run = await run_the_scenarios(real_cluster, tmp_path)
    print(f"\nscenarios ran in {run.seconds:.1f} s; what each service used:")
    for name in WITH_ROLES:
        print(f"  {name}:")
        for resource, verbs in sorted(usage_table(run.requests[name]).items()):
            print(f"    {resource}: {', '.join(sorted(verbs))}")

    # Sufficient: nothing refused, and every scenario got where it should.
    refused = [
        f"{r.user.rpartition(':')[2]}: {r.verb} {r.uri} -> {r.code}"
        for name in SERVICES
        for r in run.requests[name]
        if r.code in REFUSED
    ]
    assert not refused, "refused:\n" + "\n".join(refused)
    if run.failure is not None:
        raise run.failure
    assert run.monitor_holder, "the monitor led"
    assert run.scrapes >= 2, "the monitor scraped at start and on its ticks"

    # Necessary: every grant used, but for the few the run cannot reach, each with a reason.
    for name in WITH_ROLES:
        assert set(UNUSED_IN_THIS_RUN[name]) <= granted(name), f"{name}: a stale allow-list"
    unused = {
        name: sorted(granted(name) - used(run.requests[name]) - set(UNUSED_IN_THIS_RUN[name]))
        for name in WITH_ROLES
    }
    assert unused == {name: [] for name in WITH_ROLES}

    # Where each one wrote.
    writes = {name: [r for r in run.requests[name] if r.is_write] for name in SERVICES}
    assert run.requests["planner"] == [] and run.requests["recorder"] == []
    assert writes["watcher"] == []
    assert writes["monitor"] == []  # it leads through NATS, not a Lease (decision 0025)
    # The executor: in the workloads' namespace, Events about the cluster-scoped queue config
    # in "default", and cluster-scoped objects ("").
    assert {r.namespace for r in writes["executor"]} == {run.namespace, "default", ""}
    assert {r.name for r in writes["executor"] if r.resource == "nodes"} == {actors.GPU_NODE}
    # On the node, the executor owns Kaiwo's labels, the record of the GPU taint it added
    # (decision 0145) and the taint list it merged its taint into.
    kaiwo = fields_of(run.node, "kaiwo")
    assert set(kaiwo) == {"f:metadata", "f:spec"}
    assert set(kaiwo["f:metadata"]) == {"f:labels", "f:annotations"}
    assert set(kaiwo["f:metadata"]["f:annotations"]) == {f"f:{GPU_TAINT_RECORD_ANNOTATION}"}
    labels = kaiwo["f:metadata"]["f:labels"]
    assert labels and all(key.startswith("f:kaiwo/") for key in labels)
    assert set(kaiwo["f:spec"]) == {"f:taints"}
