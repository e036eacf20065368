"""The operator started as ``kaiwo up`` starts it, against the fake API server (``--fake``) or
the session's real one, and what the tests do with it."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar

from kaiwo_cli.stack.local import LocalStack, StackOptions
from kaiwo_cli.stack.readiness import wait_until_ready
from kaiwo_contracts.events.permissions import ADMIN
from kaiwo_contracts.events.streams import BusTopology, bus_topology
from kaiwo_envtest import AuditLog
from kaiwo_eventstore import EventStore, open_event_store
from kaiwo_kube import NotFound, resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_runtime.nats_connection import connect_client
from kaiwo_sandbox.controller_status import job_is_finished
from kaiwo_sandbox.fleet import NodeSpec
from nats.aio.client import Client
from nats.js import JetStreamContext

from tests.integration.pipeline import cluster_actors as actors
from tests.integration.pipeline.ledger import (
    StreamLedger,
    dead_letters,
    ledgers,
    unsettled_consumers,
)
from tests.integration.pipeline.trail import cluster_trail, stall_explained, workload_trail
from tests.real_cluster import RealCluster
from tests.real_stack import kwok_fleet
from tests.waiting import NotConvergedError, Pending, eventually

T = TypeVar("T")

SERVICE_ENV: Final[Mapping[str, str]] = {
    # Short pulls: a stopping recorder answers SIGTERM quickly.
    "KAIWO_RECORDER_FETCH_WAIT_SECONDS": "0.5",
    # Snapshots often, so a killed planner restarts from a recent one and catches up.
    "KAIWO_SNAPSHOT_EVERY_SECONDS": "2",
    # A killed planner or executor holds its lease until it runs out; its restart waits.
    "KAIWO_LEASE_SECONDS": "2",
    "KAIWO_LOG_LEVEL": "INFO",
}
STEP_SECONDS: Final = 60.0
"""Longest wait for one step of a workload before the test calls it hung: seconds when idle
(a fault may cost a redelivery: 5 s ack wait), far more on a loaded 2-core machine running
the whole operator."""
OPERATOR_USER: Final = "kaiwo-operator"
"""Who the operator is on a real API server: its writes are told apart in the audit log."""
NAMESPACE_GONE_SECONDS: Final = 60.0
QUIET_SECONDS: Final = 5.0
"""How long an idle operator is watched for writes it should not make."""


@dataclass
class Pipeline:
    """A running operator: the stack, an API client, a NATS client, the store's URL, the
    namespace of the test's workloads and who moves their Jobs on."""

    stack: LocalStack
    kube: KubernetesAsyncioAdapter
    nats: Client
    js: JetStreamContext
    store_url: str
    topology: BusTopology
    namespace: str
    jobs: actors.JobDriver
    audit_log: AuditLog | None
    """The real API server's audit log (the operator writes as ``OPERATOR_USER``)."""
    started_at: float
    """``time.monotonic()`` when ``kaiwo up`` began (before NATS started)."""
    ready_at: float
    """``time.monotonic()`` when every service answered ready."""

    @property
    def real(self) -> bool:
        return isinstance(self.jobs, actors.Kubelet)

    # ------------------------------------------------------------------ reading the cluster

    async def kaiwo_job(self, name: str) -> dict[str, Any]:
        return await self.kube.get(resources.KAIWO_JOB, name, namespace=self.namespace)

    async def child(self, resource: resources.ResourceType, name: str) -> dict[str, Any] | None:
        return await actors.get_or_none(self.kube, resource, name, namespace=self.namespace)

    async def reaches(
        self,
        name: str,
        phase: str,
        *,
        within: float = STEP_SECONDS,
        kind: resources.ResourceType = resources.KAIWO_JOB,
        namespace: str | None = None,
    ) -> dict[str, Any]:
        """Wait until the workload's (a KaiwoJob unless ``kind`` says otherwise, in the
        pipeline's namespace unless ``namespace`` says otherwise) ``status.status`` is
        ``phase``; returns the workload. On the real stack a wait in vain fails with what the
        cluster holds for the namespace (:func:`.trail.cluster_trail`)."""
        namespace = namespace or self.namespace

        async def check() -> dict[str, Any] | Pending:
            workload = await actors.get_or_none(self.kube, kind, name, namespace=namespace)
            if workload is None:
                return Pending("not created yet")
            found = (workload.get("status") or {}).get("status", "")
            return workload if found == phase else Pending(f"phase {found or '(none)'}")

        try:
            return await eventually(check, what=f"{kind.kind} {name} in {phase}", within=within)
        except NotConvergedError as error:
            if not self.real:
                raise
            # On the real stack the wait is usually for Kueue, the scheduler or a kubelet.
            held = await cluster_trail(self.kube, namespace=namespace)
            raise NotConvergedError(f"{error}\n{held}") from error

    async def appears(
        self, resource: resources.ResourceType, name: str, *, within: float = STEP_SECONDS
    ) -> dict[str, Any]:
        async def check() -> dict[str, Any] | Pending:
            return await self.child(resource, name) or Pending("absent")

        return await eventually(check, what=f"{resource.kind} {name} exists", within=within)

    async def finished_job(
        self, name: str, *, namespace: str | None = None, within: float = STEP_SECONDS
    ) -> dict[str, Any]:
        """The Job ``name`` (in the pipeline's namespace unless ``namespace`` says otherwise)
        once its controller wrote ``Complete`` or ``Failed``. Its
        ``SuccessCriteriaMet``, which the workload's COMPLETE follows, comes before the last
        pods are counted (they wait in ``status.uncountedTerminatedPods``): a count read
        at COMPLETE may be short by them."""

        async def check() -> dict[str, Any] | Pending:
            job = await actors.get_or_none(
                self.kube, resources.JOB, name, namespace=namespace or self.namespace
            )
            if job is None:
                return Pending("absent")
            return job if job_is_finished(job) else Pending(f"not ended: {job.get('status')}")

        return await eventually(check, what=f"Job {name} ended", within=within)

    # ------------------------------------------------------------------ one workload's life

    async def run_to_completion(self, name: str) -> dict[str, Any]:
        """Create a KaiwoJob with a download and play the Job controller and Kueue through its
        whole life, waiting for the phase each step causes; returns the finished KaiwoJob.
        A step that does not come fails with the KaiwoJob's trail (:mod:`.trail`)."""
        ns = self.namespace
        await self.kube.create(actors.training_job(name, namespace=ns))
        async with self.stall_explained(name):
            await self.reaches(name, "DOWNLOADING")
            await self.appears(resources.JOB, f"{name}-download")
            await self.jobs.pod_succeeded(f"{name}-download", namespace=ns)
            main = await self.appears(resources.JOB, name)
            await self.reaches(name, "PENDING")
            await actors.kueue_admits(self.kube, main)
            await self.jobs.pod_running(name, namespace=ns, ready=False)
            await self.reaches(name, "STARTING")
            await self.jobs.pod_running(name, namespace=ns, ready=True)
            await self.reaches(name, "RUNNING")
            await self.jobs.pod_succeeded(name, namespace=ns)
            return await self.reaches(name, "COMPLETE")

    def stall_explained(self, name: str) -> contextlib.AbstractAsyncContextManager[None]:
        """A wait inside that fails says where the KaiwoJob ``name`` stands (:mod:`.trail`)."""
        return stall_explained(
            lambda: workload_trail(
                self.kube,
                self.js,
                self.topology,
                self.stack.services,
                namespace=self.namespace,
                name=name,
            )
        )

    # ------------------------------------------------------------------ its processes

    async def restart_with(
        self, service: str, settings: Mapping[str, str | None], *, within: float = STEP_SECONDS
    ) -> None:
        """Restart ``service`` with its environment changed by ``settings`` (None: unset), as
        a Deployment's pods restart when its environment is edited, and wait until it is
        ready again. Only the process's own variables change; it still inherits the test's."""
        process = self.stack.services[service]
        for name, value in settings.items():
            if value is None:
                process.env.pop(name, None)
            else:
                process.env[name] = value
        pid = process.pid
        await process.kill()  # its supervisor starts it again with the new environment

        async def restarted() -> bool | Pending:
            return True if process.running and process.pid != pid else Pending("not yet")

        await eventually(restarted, what=f"{service} restarted", within=within)
        await wait_until_ready(service, process, within=within)

    # ------------------------------------------------------------------ the event log

    @contextlib.asynccontextmanager
    async def store(self) -> AsyncIterator[EventStore]:
        store = await open_event_store(self.store_url, migrate=False)
        try:
            yield store
        finally:
            await store.close()

    async def settled(self, *, within: float = STEP_SECONDS) -> dict[str, StreamLedger]:
        """Wait until every consumer is idle and the store holds every message exactly once;
        returns the ledgers (raises with what is still off)."""

        async def check() -> dict[str, StreamLedger] | Pending:
            unsettled = await unsettled_consumers(self.js, self.topology)
            if unsettled:
                return Pending(f"consumers not idle: {unsettled}")
            async with self.store() as store:
                found = await ledgers(self.js, store)
            off = {
                name: f"missing {len(ledger.missing)}, unexpected {len(ledger.unexpected)}, "
                f"twice {len(ledger.recorded_twice)}"
                for name, ledger in found.items()
                if not ledger.exact
            }
            return Pending(f"the store differs from the streams: {off}") if off else found

        return await eventually(check, what="the pipeline settles", within=within, interval=0.3)

    async def dead_letters(self) -> int:
        return await dead_letters(self.js)

    # ------------------------------------------------------------------ the API server's view

    async def operator_writes_while_idle(self, seconds: float = QUIET_SECONDS) -> Counter[Any]:
        """The operator's write requests (per verb, resource and name) during ``seconds`` of
        an idle cluster, from the real API server's audit log."""
        assert self.audit_log is not None, "only a real API server keeps an audit log"
        mark = self.audit_log.mark()
        await asyncio.sleep(seconds)
        return Counter(
            (e.verb, e.resource, e.subresource, e.name)
            for e in self.audit_log.events(since=mark)
            if e.user == OPERATOR_USER
        )

    def writes_to(self, names: Iterable[str], *, since: int) -> str:
        """The write requests to objects of these names since ``since`` (an audit log mark),
        in order: who deleted or patched what, for a failure message."""
        assert self.audit_log is not None, "only a real API server keeps an audit log"
        wanted = set(names)
        return "; ".join(
            f"{e.verb} {e.resource}{'/' + e.subresource if e.subresource else ''} {e.name}"
            f" by {e.user} ({e.user_agent.split(' ')[0]}) {e.code}"
            for e in self.audit_log.events(since=since)
            if e.name in wanted
        )


@contextlib.asynccontextmanager
async def pipeline_on_kwok_nodes(
    real: RealCluster,
    nodes: Iterable[NodeSpec],
    state_dir: Path,
    *,
    service_env: Mapping[str, str] | None = None,
) -> AsyncIterator[Pipeline]:
    """:func:`running_pipeline` on the whole real stack ``real``, its nodes and queues left to
    the test (``gpu_cluster=False``), with the kwok ``nodes`` registered around it: they go
    last, once the pipeline's namespace is gone (a pod on a removed node has no kubelet to
    stop it)."""
    async with (
        await KubernetesAsyncioAdapter.from_kubeconfig(real.kubeconfig) as admin,
        kwok_fleet(admin, nodes),
        running_pipeline(
            state_dir, real=real, gpu_cluster=False, service_env=service_env
        ) as pipeline,
    ):
        yield pipeline


@contextlib.asynccontextmanager
async def running_pipeline(
    state_dir: Path,
    *,
    store_url: str | None = None,
    real: RealCluster | None = None,
    service_env: Mapping[str, str] | None = None,
    gpu_cluster: bool = True,
    gateway_port: int | None = None,
    metrics_endpoint: str | None = None,
    partitions: int = 1,
    replicas: Mapping[str, int] | None = None,
    messenger_tenant: bool = False,
    console_port: int | None = None,
    one_process: bool = False,
) -> AsyncIterator[Pipeline]:
    """``kaiwo up`` with ``state_dir`` against a fresh fake API server (``--fake``), or against
    ``real`` in a namespace of its own.

    ``service_env``: more ``KAIWO_*`` settings for every service, over :data:`SERVICE_ENV`.
    ``gpu_cluster``: set the cluster up for GPU workloads (a GPU node and the KaiwoQueueConfig
    with queue ``kaiwo`` for the namespace); without it the test sets up nodes and queues.
    ``metrics_endpoint``: a Prometheus URL; the monitor runs too.
    On a real API server the Leases of every node the tests register are kept renewed.
    ``gateway_port``: start the OpenAI gateway too, on this port (with the messenger, as
    ``kaiwo up`` runs it). ``messenger_tenant``: the namespace gets a messenger tenant key
    (``tenant-<namespace>``, ``kaiwo up --tenant``).
    ``partitions`` and ``replicas``: the stack's (:class:`StackOptions`); active-active
    planners and executors with ``partitions`` > 1.
    ``console_port``: start the web console too (anonymous on loopback, as ``kaiwo up``).
    ``one_process``: the core services in one process (``kaiwo up --one-process``).
    """
    scale = {"partitions": partitions, "replicas": dict(replicas or {}), "one_process": one_process}
    env = {**SERVICE_ENV, **(service_env or {})}
    async with contextlib.AsyncExitStack() as exits:
        if real is None:
            namespace = actors.NAMESPACE
            started_at = time.monotonic()
            options = _stack_options(
                state_dir,
                store_url,
                kubeconfig=None,
                env=env,
                metrics=metrics_endpoint,
                gateway_port=gateway_port,
                tenants=(namespace,) if messenger_tenant else (),
                console_port=console_port,
                **scale,
            )
            stack = await exits.enter_async_context(LocalStack(options))
            assert stack.kubeconfig is not None
            kube = await _client(exits, stack.kubeconfig)
            jobs: actors.JobDriver = actors.FakeJobController(kube)
        else:
            namespace = f"{actors.NAMESPACE}-{uuid.uuid4().hex[:6]}"
            kube = await _client(exits, real.kubeconfig)
            # Registered before the operator starts, so it runs after the operator stopped.
            exits.push_async_callback(clean_up_real_cluster, kube, namespace)
            kubeconfig = real.kubeconfig_for(OPERATOR_USER)
            started_at = time.monotonic()
            options = _stack_options(
                state_dir,
                store_url,
                kubeconfig=kubeconfig,
                env=env,
                metrics=metrics_endpoint,
                gateway_port=gateway_port,
                tenants=(namespace,) if messenger_tenant else (),
                console_port=console_port,
                **scale,
            )
            stack = await exits.enter_async_context(LocalStack(options))
            jobs = actors.Kubelet(kube)
        ready_at = time.monotonic()
        assert stack.nats is not None
        # The administrator's identity: the tests read every stream and re-publish copies.
        client = await connect_client(stack.nats_connection(ADMIN), max_reconnect_attempts=-1)
        exits.push_async_callback(client.close)
        await actors.create_namespace(kube, namespace)
        if gpu_cluster:
            await actors.register_gpu_node(kube, not_ready_taint=real is not None)
        if real is not None:
            await exits.enter_async_context(actors.node_heartbeat(kube))
        if gpu_cluster:
            await actors.create_queue_config(kube, namespace=namespace)
        yield Pipeline(
            stack=stack,
            kube=kube,
            nats=client,
            js=client.jetstream(),
            store_url=options.event_store_url,
            topology=bus_topology(partitions=partitions),
            namespace=namespace,
            jobs=jobs,
            audit_log=real.audit_log if real is not None else None,
            started_at=started_at,
            ready_at=ready_at,
        )


def _stack_options(
    state_dir: Path,
    store_url: str | None,
    *,
    kubeconfig: Path | None,
    env: Mapping[str, str],
    gateway_port: int | None = None,
    metrics: str | None = None,
    partitions: int = 1,
    replicas: Mapping[str, int] | None = None,
    tenants: tuple[str, ...] = (),
    console_port: int | None = None,
    one_process: bool = False,
) -> StackOptions:
    return StackOptions(
        state_dir=state_dir,
        kubeconfig=kubeconfig,
        fake_cluster=kubeconfig is None,
        seed_fake_cluster=False,
        # The tests play the scheduler (and the kubelet); the KaiwoConfig keeps its default.
        scheduler="existing",
        store_url=store_url,
        service_env=env,
        ready_timeout=90.0,
        gateway_port=gateway_port,
        metrics_endpoint=metrics,
        partitions=partitions,
        replicas=dict(replicas or {}),
        messenger_tenants=tenants,
        console_port=console_port,
        one_process=one_process,
    )


async def _client(exits: contextlib.AsyncExitStack, kubeconfig: Path) -> KubernetesAsyncioAdapter:
    kube = await KubernetesAsyncioAdapter.from_kubeconfig(kubeconfig)
    exits.push_async_callback(kube.close)
    return kube


async def clean_up_real_cluster(kube: KubernetesAsyncioAdapter, namespace: str) -> None:
    """What this pipeline's tests put into the shared cluster, removed once its operator
    stopped (it would put the singletons back): the KaiwoQueueConfig and its Kueue objects,
    the KaiwoConfig, the nodes the tests registered, and this pipeline's namespace with every
    other namespace the tests created, waited for until gone (the next operator would
    otherwise see this test's workloads)."""
    await actors.remove_queue_config(kube)
    await actors.remove_kaiwo_config(kube)
    await actors.remove_test_nodes(kube)
    labelled = await kube.list(resources.NAMESPACE, label_selector=actors.TEST_NAMESPACE_LABEL)
    namespaces = {namespace} | {item["metadata"]["name"] for item in labelled.items}
    for name in sorted(namespaces):
        with contextlib.suppress(NotFound):
            await kube.delete(resources.NAMESPACE, name)
    for name in sorted(namespaces):
        await _release_claims(kube, name)

    async def gone() -> bool | Pending:
        left = [
            found
            for name in sorted(namespaces)
            if (found := await actors.get_or_none(kube, resources.NAMESPACE, name, namespace=None))
        ]
        return True if not left else Pending(f"still terminating: {_what_holds(left)}")

    await eventually(
        gone,
        what=f"namespaces {', '.join(sorted(namespaces))} deleted",
        within=NAMESPACE_GONE_SECONDS,
    )
    await _queue_config_objects_gone(kube)


async def _queue_config_objects_gone(kube: KubernetesAsyncioAdapter) -> None:
    """Wait until the Kueue objects of the removed KaiwoQueueConfig are gone too; the next
    operator would otherwise find them terminating and wait for them (``PreviousRunRemoving``),
    with every other object of its queue config's plan held back, node taints included.

    Each goes once Kueue drops its finalizer: a ClusterQueue with no workload left (the
    namespaces are gone), a flavor with no ClusterQueue, a Topology with no flavor. Kueue
    0.17 looks at a Topology again a second after a flavor naming it is deleted, in its own
    cache: CI once saw a Topology stay terminating for good with no flavor left, and the next
    15 tests failed on it. A touch of such a Topology (an annotation) makes Kueue look again."""
    selector = f"{actors.QUEUE_CONFIG_LABEL}={actors.QUEUE_CONFIG}"

    async def gone() -> bool | Pending:
        left = {
            kind.kind: [item["metadata"]["name"] for item in listed.items]
            for kind in actors.KUEUE_CLUSTER_KINDS
            if (listed := await kube.list(kind, label_selector=selector)).items
        }
        if not left:
            return True
        named = {
            (flavor.get("spec") or {}).get("topologyName")
            for flavor in (await kube.list(resources.KUEUE_RESOURCE_FLAVOR)).items
        }
        for topology in left.get(resources.KUEUE_TOPOLOGY.kind, ()):
            if topology not in named:
                with contextlib.suppress(NotFound):
                    await kube.merge_patch(
                        resources.KUEUE_TOPOLOGY,
                        topology,
                        {
                            "metadata": {
                                "annotations": {"kaiwo-test/looked-again": str(time.time())}
                            }
                        },
                        field_manager="kaiwo-test",
                    )
        return Pending(f"left: {left}; topologies that flavors name: {sorted(map(str, named))}")

    await eventually(
        gone,
        what="the KaiwoQueueConfig's Kueue objects deleted",
        within=NAMESPACE_GONE_SECONDS,
        interval=1.0,
    )


async def _release_claims(kube: KubernetesAsyncioAdapter, namespace: str) -> None:
    """The namespace's pods removed at once and its volume claims deleted.

    The namespace controller first acts 5 s after the namespace's deletion (a fixed grace
    for HA API servers). In one pass it deletes the pods and the claims together, finds a
    claim still held by its protection finalizer (a pod used it a moment ago) and comes back
    5 s later. With the pods gone and the claims released before that pass, it removes the
    namespace in one. The namespace is terminating already, so no controller can create a
    pod that would hold a claim again."""
    now = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
    for resource in (resources.POD, resources.PERSISTENT_VOLUME_CLAIM):
        with contextlib.suppress(NotFound):
            await kube.transport.request("DELETE", resource.path(namespace=namespace), body=now)


def _what_holds(namespaces: list[dict[str, Any]]) -> str:
    """Each namespace with what its controller says is left in it."""
    return "; ".join(
        f"{n['metadata']['name']} ("
        + ", ".join(
            c.get("message", "")
            for c in (n.get("status") or {}).get("conditions") or ()
            if c.get("status") == "True"
        )
        + ")"
        for n in namespaces
    )
