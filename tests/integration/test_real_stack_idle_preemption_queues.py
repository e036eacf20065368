"""GPU idle preemption on the real stack frees quota only where Kueue can give it to the
waiting workload (decision 0236): the real Kueue admits under the KaiwoQueueConfig's two
ClusterQueues (no cohort), the kube-scheduler binds, kwok runs the pods, the monitor reads a
small exporter of chosen GPU series. Nothing of Kueue is played by the test.

An idle opted-in KaiwoJob of queue ``qb`` is not preempted for a KaiwoJob waiting in the full
queue ``qa``: Kueue would give the freed quota back to ``qb`` only, and the waiting job would
still wait (before the fix it was terminated, and the waiting job stayed PENDING). Once the
job holding ``qa``'s quota idles too, it is the one preempted, and the waiting job runs.

The same holds for GPU workloads no Kaiwo kind owns (decision 0260): plain Jobs queued by
their ``kueue.x-k8s.io/queue-name`` label in two LocalQueues of one namespace (``qc`` and
``qd``, no cohort). An idle opted-in plain Job of ``qd`` is kept for a plain Job waiting in the
full ``qc`` (before the fix it matched any queue: it was deleted for the waiting Job, which
Kueue still did not admit). And so it is for a Job waiting in a LocalQueue and ClusterQueue a
platform team made, which the operator did not watch before decision 0270. Two ClusterQueues
of two cohorts under one Cohort do share (decision 0271): an idle Job of one goes for a Job
waiting in the other, which Kueue then admits on what it freed; but not where the idle
Job's ClusterQueue lends nothing (``lendingLimit: 0``, decision 0272), nor for a Job of a
queue that already borrows all its ``borrowingLimit`` lets it (decision 0281), nor where the
idle Job's queue uses no more than its ``lendingLimit`` keeps for it (decision 0282), or uses
less beyond that than the waiting Job wants (decision 0284), nor for a Job of its own queue
that selects the nodes of another flavor (decision 0283).

A serving KaiwoService scaled up in the full queue ``qs`` (a Kueue-managed namespace: Kueue
admits its pods one by one) is READY, then RUNNING with one pod gated: that pod waits for
quota, and an idle opted-in job of ``qs`` is preempted for it (before the fix the service,
RUNNING, was no pressure, and its new replica waited for ever).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Final

import pytest
import pytest_asyncio
from kaiwo_kube import AlreadyExists, NotFound, resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_sandbox.fleet import NODE_TYPES, NodeSpec

from tests.integration.pipeline import cluster_actors as actors
from tests.integration.pipeline.harness import Pending, Pipeline, eventually, running_pipeline
from tests.integration.test_real_stack import (
    RUN_SECONDS,
    flavor,
    kaiwo_job,
    queue,
    vllm_service,
)
from tests.prometheus_server import GpuExporter, GpuSeries
from tests.real_cluster import RealCluster
from tests.real_stack import kwok_fleet

pytestmark = [
    pytest.mark.k8s,
    pytest.mark.nats,
    pytest.mark.slow,
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.timeout(600),
]

MI300X: Final = NODE_TYPES["amd-mi300x"]
MI250X: Final = NODE_TYPES["amd-mi250x"]
FLEET: Final = (
    *(NodeSpec(f"idle-q-mi300x-{i}", MI300X) for i in range(1, 8)),
    NodeSpec("idle-q-mi250x-1", MI250X),
)
STEP: Final = 90.0
OPT_IN: Final = "kaiwo.silogen.ai/gpu-preemption."
ON_PRESSURE: Final = {
    f"{OPT_IN}policy": "OnPressure",
    f"{OPT_IN}grace-period": "2s",
    f"{OPT_IN}threshold": "50",
}
LONG_RUN: Final = 900.0
KUEUE_API: Final = "kueue.x-k8s.io/v1beta1"
POLLING_SECONDS: Final = 1.0
QUIET_TICKS: Final = 8
"""How many of the monitor's ticks (one scrape of the exporter each) an idle job that stays is
watched through: the pending threshold (1 s), its grace period (2 s) and the way from the
monitor's verdict to a deletion pass twice over. Counted in ticks, not seconds alone, so that
a loaded machine that slows the monitor lengthens the watch with it."""
KUEUE_QUIET_SECONDS: Final = 10.0
"""How long a Job that waits is watched for a pod: Kueue's requeue and admission (a few
seconds) pass several times over."""


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stack(
    real_stack: RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[Pipeline, GpuExporter]]:
    async with contextlib.AsyncExitStack() as exits:
        admin = await KubernetesAsyncioAdapter.from_kubeconfig(real_stack.kubeconfig)
        exits.push_async_callback(admin.close)
        await exits.enter_async_context(kwok_fleet(admin, FLEET))
        exporter = await exits.enter_async_context(GpuExporter().serving())
        pipeline = await exits.enter_async_context(
            running_pipeline(
                tmp_path_factory.mktemp("kaiwo"),
                real=real_stack,
                gpu_cluster=False,
                service_env={"KAIWO_MONITOR_POLLING_INTERVAL_SECONDS": str(POLLING_SECONDS)},
                metrics_endpoint=f"http://{exporter.target}/metrics",
            )
        )
        team_a, team_b = namespaces(pipeline)
        serving = serving_namespace(pipeline)
        plain = plain_namespace(pipeline)
        for namespace in (team_a, team_b, serving, plain):
            await actors.create_namespace(admin, namespace)
        await admin.merge_patch(
            resources.NAMESPACE,
            serving,
            {"metadata": {"labels": {"kueue-managed": "true"}}},
            field_manager="cluster-admin",
        )
        await admin.apply(
            {
                "apiVersion": actors.KAIWO_API,
                "kind": "KaiwoQueueConfig",
                "metadata": {"name": actors.QUEUE_CONFIG},
                "spec": {
                    "resourceFlavors": [
                        {
                            "name": "mi300x",
                            "nodeLabels": {"amd.com/gpu.product-name": MI300X.product},
                        }
                    ],
                    "clusterQueues": [
                        queue("qa", team_a, flavor("mi300x", amd=8)),
                        queue("qb", team_b, flavor("mi300x", amd=8)),
                        queue("qs", serving, flavor("mi300x", amd=16)),
                        queue("qc", plain, flavor("mi300x", amd=8)),
                        queue("qd", plain, flavor("mi300x", amd=8)),
                    ],
                },
            },
            field_manager="cluster-admin",
            force=False,
        )
        await short_pending_threshold(admin)
        yield pipeline, exporter


def namespaces(pipeline: Pipeline) -> tuple[str, str]:
    return f"{pipeline.namespace}-a", f"{pipeline.namespace}-b"


def serving_namespace(pipeline: Pipeline) -> str:
    return f"{pipeline.namespace}-svc"


def plain_namespace(pipeline: Pipeline) -> str:
    return f"{pipeline.namespace}-plain"


async def short_pending_threshold(kube: KubernetesAsyncioAdapter) -> None:
    """A workload waiting 1 s is pressure (the default is minutes)."""
    spec = {"scheduling": {"pendingThresholdForPreemption": "1s"}}
    try:
        await kube.create(
            {
                "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
                "kind": "KaiwoConfig",
                "metadata": {"name": "kaiwo"},
                "spec": spec,
            },
            field_manager="cluster-admin",
        )
    except AlreadyExists:
        await kube.merge_patch(
            resources.KAIWO_CONFIG, "kaiwo", {"spec": spec}, field_manager="cluster-admin"
        )


def opted_in_job(name: str, namespace: str, queue_name: str) -> dict[str, Any]:
    job = kaiwo_job(name, namespace, queue_name=queue_name, gpus=8, run_seconds=LONG_RUN)
    job["metadata"]["annotations"].update(ON_PRESSURE)
    return job


async def running_pod(pipeline: Pipeline, namespace: str, job: str) -> str:
    async def check() -> str | Pending:
        listed = await pipeline.kube.list(
            resources.POD, namespace=namespace, label_selector=f"{actors.JOB_NAME_LABEL}={job}"
        )
        running = [p for p in listed.items if p["status"].get("phase") == "Running"]
        return str(running[0]["metadata"]["name"]) if running else Pending("no pod runs")

    return await eventually(check, what=f"a running pod of {namespace}/{job}", within=STEP)


def readings(namespace: str, pod: str, percent: float) -> list[GpuSeries]:
    return [GpuSeries(namespace, pod, str(gpu), percent) for gpu in range(8)]


def terminated_early(workload: dict[str, Any]) -> dict[str, Any] | None:
    conditions = (workload.get("status") or {}).get("conditions") or ()
    return next((c for c in conditions if c.get("type") == "WorkloadTerminatedEarly"), None)


def plain_job(
    name: str,
    namespace: str,
    local_queue: str,
    pod: Mapping[str, Any] | None = None,
    **annotations: str,
) -> dict[str, Any]:
    """A batch Job no Kaiwo kind owns, queued by Kueue in ``local_queue``: 8 GPUs for an hour
    (its pod spec with ``pod``, if given)."""
    job: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"kueue.x-k8s.io/queue-name": local_queue},
            "annotations": annotations,
        },
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": {RUN_SECONDS: "3600"}},
                "spec": {
                    "schedulerName": "kaiwo-scheduler",
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "resources": {"limits": {"amd.com/gpu": "8"}},
                        }
                    ],
                },
            },
        },
    }
    job["spec"]["template"]["spec"].update(pod or {})
    return job


async def record_phase(pipeline: Pipeline, namespace: str, name: str) -> str | None:
    """The phase the GpuWorkload of the Job ``name`` says (None: no record yet)."""
    listed = await pipeline.kube.list(resources.GPU_WORKLOAD, namespace=namespace)
    for record in listed.items:
        if record["spec"]["workloadRef"]["name"] == name:
            return (record.get("status") or {}).get("phase")
    return None


async def idle_beside_a_full_queue(
    pipeline: Pipeline,
    exporter: GpuExporter,
    namespace: str,
    *,
    holder: tuple[str, str],
    idle: tuple[str, str],
    pod: Mapping[str, Any] | None = None,
) -> None:
    """Plain Jobs (name, LocalQueue): ``holder`` (its pod spec with ``pod``) fills its queue,
    ``idle`` (opted in) runs idle until its GpuWorkload says ``Idle``."""
    holder_name, holder_queue = holder
    await pipeline.kube.create(
        plain_job(holder_name, namespace, holder_queue, pod=pod), field_manager="carol"
    )
    name, queue_name = idle
    await pipeline.kube.create(
        plain_job(name, namespace, queue_name, **ON_PRESSURE), field_manager="dave"
    )
    idle_pod = await running_pod(pipeline, namespace, name)
    await running_pod(pipeline, namespace, holder_name)
    exporter.series = readings(namespace, idle_pod, 1.0)
    await record_says(pipeline, namespace, name, "Idle")


async def waiting_for_gpus(
    pipeline: Pipeline,
    namespace: str,
    name: str,
    queue_name: str,
    pod: Mapping[str, Any] | None = None,
) -> None:
    """A plain Job (opted in; its pod spec with ``pod``) in a full queue: Kueue does not
    admit it for GPUs, and its GpuWorkload says ``PendingGpu``."""
    await pipeline.kube.create(
        plain_job(name, namespace, queue_name, pod=pod, **ON_PRESSURE), field_manager="carol"
    )
    await record_says(pipeline, namespace, name, "PendingGpu")


async def record_says(pipeline: Pipeline, namespace: str, name: str, phase: str) -> None:
    async def check() -> str | Pending:
        found = await record_phase(pipeline, namespace, name)
        return found if found == phase else Pending(f"{name}'s record says {found}")

    await eventually(check, what=f"{name}'s record saying {phase}", within=STEP)


async def kept_idle(pipeline: Pipeline, exporter: GpuExporter, namespace: str, name: str) -> None:
    """The idle Job is not preempted while the monitor ticks ``QUIET_TICKS`` times."""

    async def kept() -> None:
        job = await pipeline.kube.get(resources.JOB, name, namespace=namespace)
        assert "deletionTimestamp" not in job["metadata"]
        assert await record_phase(pipeline, namespace, name) == "Idle"

    await through_monitor_ticks(exporter, kept)


async def through_monitor_ticks(
    exporter: GpuExporter, check: Callable[[], Awaitable[None]]
) -> None:
    """``check`` once a second, until the monitor has scraped ``exporter`` ``QUIET_TICKS``
    times more and at least as many polling intervals have passed, and once after. A monitor
    that stops scraping fails the test after ``STEP`` seconds, not at its timeout."""
    loop = asyncio.get_running_loop()
    first = exporter.scrapes
    not_before = loop.time() + QUIET_TICKS * POLLING_SECONDS
    while exporter.scrapes < first + QUIET_TICKS or loop.time() < not_before:
        ticked = exporter.scrapes - first
        assert loop.time() < not_before + STEP, f"the monitor ticked {ticked} of {QUIET_TICKS}"
        await check()
        await asyncio.sleep(1.0)
    await check()


async def test_an_idle_plain_job_of_another_local_queues_cluster_queue_is_kept(
    stack: tuple[Pipeline, GpuExporter],
) -> None:
    pipeline, exporter = stack
    plain = plain_namespace(pipeline)
    await idle_beside_a_full_queue(
        pipeline, exporter, plain, holder=("holder-c", "qc"), idle=("idle-d", "qd")
    )
    await waiting_for_gpus(pipeline, plain, "waiter-c", "qc")
    # What idle-d frees goes back to qd: it is kept, and the waiting Job waits.
    await kept_idle(pipeline, exporter, plain, "idle-d")
    for name in ("holder-c", "idle-d", "waiter-c"):
        await pipeline.kube.delete(resources.JOB, name, namespace=plain)


def platform_cluster_queue(
    name: str,
    cohort: str | None = None,
    *,
    spare: dict[str, int] | None = None,
    second: str = "",
    **limits: int,
) -> dict[str, Any]:
    """A ClusterQueue a platform team made (not Kaiwo): 8 MI300X GPUs of Kaiwo's flavor, for
    every namespace, in ``cohort`` if given, with ``limits`` (``lendingLimit``..., or another
    ``nominalQuota``) on them; and 8 more of the flavor ``second`` (:data:`SPARE` unless
    named) after it, with ``spare``'s limits, if given."""
    gpus = {"name": "amd.com/gpu", "nominalQuota": 8, **limits}
    flavors = [{"name": "mi300x", "resources": [gpus]}]
    if spare is not None:
        more = {"name": "amd.com/gpu", "nominalQuota": 8, **spare}
        flavors.append({"name": second or SPARE, "resources": [more]})
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [{"coveredResources": ["amd.com/gpu"], "flavors": flavors}],
    }
    if cohort is not None:
        spec["cohort"] = cohort
    return {
        "apiVersion": KUEUE_API,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": spec,
    }


def platform_local_queue(name: str, namespace: str, cluster_queue: str) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE_API,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cluster_queue},
    }


SPARE: Final = "mi300x-spare"
"""A platform team's second flavor of the same MI300X nodes."""


def platform_flavor(name: str, product: str = MI300X.product) -> dict[str, Any]:
    """A ResourceFlavor a platform team made, of the fleet's MI300X nodes (or another
    ``product``'s)."""
    labels = {"amd.com/gpu.product-name": product}
    return {
        "apiVersion": KUEUE_API,
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": {"nodeLabels": labels},
    }


def platform_cohort(name: str, parent: str | None = None) -> dict[str, Any]:
    spec = {"parentName": parent} if parent else {}
    return {"apiVersion": KUEUE_API, "kind": "Cohort", "metadata": {"name": name}, "spec": spec}


KINDS: Final = {
    "ResourceFlavor": resources.KUEUE_RESOURCE_FLAVOR,
    "ClusterQueue": resources.KUEUE_CLUSTER_QUEUE,
    "LocalQueue": resources.KUEUE_LOCAL_QUEUE,
    "Cohort": resources.KUEUE_COHORT,
}


@contextlib.asynccontextmanager
async def platform_queues_made(
    pipeline: Pipeline, namespace: str, *objects: dict[str, Any], jobs: tuple[str, ...]
) -> AsyncIterator[None]:
    """The platform team's Kueue ``objects`` while the block runs; then the ``jobs`` of
    ``namespace`` and the objects are deleted whatever happened (a ClusterQueue left behind
    would hold Kaiwo's flavor, which the module's clean-up waits to see gone)."""
    for found in objects:
        await pipeline.kube.create(found, field_manager="platform")
    try:
        yield
    finally:
        for name in jobs:
            with contextlib.suppress(NotFound):
                await pipeline.kube.delete(resources.JOB, name, namespace=namespace)
        for found in reversed(objects):
            meta = found["metadata"]
            await pipeline.kube.delete(
                KINDS[found["kind"]], meta["name"], namespace=meta.get("namespace")
            )


async def test_an_idle_job_is_kept_for_a_job_waiting_in_a_queue_a_platform_team_made(
    stack: tuple[Pipeline, GpuExporter],
) -> None:
    """Decision 0270: the waiting Job is queued in a LocalQueue and ClusterQueue the operator
    did not make. Before, the watcher saw neither: the waiting Job's queue was unknown, so it
    matched any, and the idle Job of Kaiwo's ``qd`` was deleted for it, though Kueue gives
    what it frees back to ``qd`` and the waiting Job kept waiting."""
    pipeline, exporter = stack
    plain = plain_namespace(pipeline)
    async with platform_queues_made(
        pipeline,
        plain,
        platform_cluster_queue("uq"),
        platform_local_queue("mine", plain, "uq"),
        jobs=("holder-u", "idle-u", "waiter-u"),
    ):
        await idle_beside_a_full_queue(
            pipeline, exporter, plain, holder=("holder-u", "mine"), idle=("idle-u", "qd")
        )
        await waiting_for_gpus(pipeline, plain, "waiter-u", "mine")
        await kept_idle(pipeline, exporter, plain, "idle-u")


async def test_an_idle_job_goes_for_a_job_waiting_in_another_cohort_of_its_tree(
    stack: tuple[Pipeline, GpuExporter],
) -> None:
    """Decision 0271: ClusterQueues ``ux`` (cohort ``research``) and ``uy`` (cohort ``prod``),
    both cohorts children of the Cohort ``org``: Kueue lends ``ux``'s unused quota to ``uy``
    across the tree. An idle opted-in Job of ``ux`` goes for a Job waiting in the full ``uy``,
    which then runs on what it freed. Before, two cohort names never shared: the idle Job was
    kept, and the waiting Job waited for ever."""
    pipeline, exporter = stack
    plain = plain_namespace(pipeline)
    async with platform_queues_made(
        pipeline,
        plain,
        platform_cohort("org"),
        platform_cohort("research", "org"),
        platform_cohort("prod", "org"),
        platform_cluster_queue("ux", "research"),
        platform_cluster_queue("uy", "prod"),
        platform_local_queue("lx", plain, "ux"),
        platform_local_queue("ly", plain, "uy"),
        jobs=("holder-y", "idle-x", "waiter-y"),
    ):
        await idle_beside_a_full_queue(
            pipeline, exporter, plain, holder=("holder-y", "ly"), idle=("idle-x", "lx")
        )
        # uy is full, and ux lends nothing while idle-x holds it.
        await waiting_for_gpus(pipeline, plain, "waiter-y", "ly")

        async def gone() -> bool | Pending:
            try:
                job = await pipeline.kube.get(resources.JOB, "idle-x", namespace=plain)
            except NotFound:
                return True
            return True if job["metadata"].get("deletionTimestamp") else Pending("idle-x runs")

        await eventually(gone, what="idle-x preempted for waiter-y", within=STEP)
        await running_pod(pipeline, plain, "waiter-y")


async def test_an_idle_job_is_kept_for_a_job_of_its_cohort_when_its_queue_lends_nothing(
    stack: tuple[Pipeline, GpuExporter],
) -> None:
    """Decision 0272: ClusterQueues ``ul`` (``lendingLimit: 0``) and ``um``, both of the
    cohort ``lab``. Kueue lends none of ``ul``'s quota, so an idle opted-in Job of ``ul`` is
    kept for a Job waiting in the full ``um``. Before, one cohort was taken to share all: the
    idle Job was deleted, and the waiting Job kept waiting."""
    pipeline, exporter = stack
    plain = plain_namespace(pipeline)
    async with platform_queues_made(
        pipeline,
        plain,
        platform_cluster_queue("ul", "lab", lendingLimit=0),
        platform_cluster_queue("um", "lab"),
        platform_local_queue("ll", plain, "ul"),
        platform_local_queue("lm", plain, "um"),
        jobs=("holder-m", "idle-l", "waiter-m"),
    ):
        await idle_beside_a_full_queue(
            pipeline, exporter, plain, holder=("holder-m", "lm"), idle=("idle-l", "ll")
        )
        await waiting_for_gpus(pipeline, plain, "waiter-m", "lm")
        await kept_idle(pipeline, exporter, plain, "idle-l")


async def test_an_idle_job_is_kept_for_a_job_of_its_cohort_where_its_flavor_lends_nothing(
    stack: tuple[Pipeline, GpuExporter],
) -> None:
    """Decision 0279: ClusterQueues ``un`` and ``uo`` of the cohort ``shelf``. ``un`` lends
    none of its ``mi300x`` quota and all of its ``mi300x-spare``; ``uo`` has ``mi300x``
    only. Kueue admits an idle opted-in Job of ``un`` into ``mi300x``, and lends ``uo``
    nothing of it, so the idle Job is kept for a Job waiting in the full ``uo``. Before,
    ``mi300x-spare``'s lending counted for every flavor: the idle Job was deleted, and the
    waiting Job kept waiting."""
    pipeline, exporter = stack
    plain = plain_namespace(pipeline)
    async with platform_queues_made(
        pipeline,
        plain,
        platform_flavor(SPARE),
        platform_cluster_queue("un", "shelf", spare={}, lendingLimit=0),
        platform_cluster_queue("uo", "shelf"),
        platform_local_queue("ln", plain, "un"),
        platform_local_queue("lo", plain, "uo"),
        jobs=("holder-o", "idle-n", "waiter-o"),
    ):
        await idle_beside_a_full_queue(
            pipeline, exporter, plain, holder=("holder-o", "lo"), idle=("idle-n", "ln")
        )
        assert await admitted_into(pipeline, plain, "idle-n") == "mi300x"
        await waiting_for_gpus(pipeline, plain, "waiter-o", "lo")
        await kept_idle(pipeline, exporter, plain, "idle-n")


async def test_an_idle_job_is_kept_for_a_job_of_a_queue_that_borrows_all_its_limit_lets_it(
    stack: tuple[Pipeline, GpuExporter],
) -> None:
    """Decision 0281: ClusterQueues ``ur`` (8 GPUs, ``borrowingLimit: 8``) and ``us`` (16
    GPUs) of the cohort ``loan``. Two Jobs of ``ur`` run, the second on 8 GPUs borrowed from
    ``us``'s unused quota; an idle opted-in Job of ``us`` runs on its own. Kueue would admit a
    third Job of ``ur`` only on more borrowed quota than ``ur``'s limit, so the idle Job is
    kept for it. Before, a borrowing limit above 0 was open however much of it was used: the
    idle Job was deleted, and the waiting Job kept waiting."""
    pipeline, exporter = stack
    plain = plain_namespace(pipeline)
    async with platform_queues_made(
        pipeline,
        plain,
        platform_cluster_queue("ur", "loan", borrowingLimit=8),
        platform_cluster_queue("us", "loan", nominalQuota=16),
        platform_local_queue("lr", plain, "ur"),
        platform_local_queue("ls", plain, "us"),
        jobs=("holder-r", "borrower-r", "idle-s", "waiter-r"),
    ):
        await borrowing_beside_an_idle_job(
            pipeline, exporter, plain, ("holder-r", "borrower-r", "lr"), idle=("idle-s", "ls")
        )
        await reserved(pipeline, "ur", borrowed="8")
        await waiting_for_gpus(pipeline, plain, "waiter-r", "lr")
        await kept_idle(pipeline, exporter, plain, "idle-s")


async def test_an_idle_job_within_the_quota_its_queue_keeps_from_lending_is_kept(
    stack: tuple[Pipeline, GpuExporter],
) -> None:
    """Decision 0282: ClusterQueues ``ug`` (16 GPUs, ``lendingLimit: 8``) and ``uh`` (8 GPUs)
    of the cohort ``keep``. Two Jobs of ``uh`` run, the second on the 8 GPUs ``ug`` lends; an
    idle opted-in Job of ``ug`` runs on the 8 that ``ug`` keeps for itself. Kueue counts in
    the cohort only what ``ug`` uses beyond those 8, so stopping the idle Job frees nothing a
    third Job of ``uh`` could borrow: it is kept. Before, a lending limit above 0 lent
    whatever was freed: the idle Job was deleted, and the waiting Job kept waiting."""
    await idle_job_kept_for_a_borrowing_queue(*stack, ("ug", 8), "uh", cohort="keep")


async def test_an_idle_job_is_kept_when_its_queue_lends_less_than_the_waiting_job_wants(
    stack: tuple[Pipeline, GpuExporter],
) -> None:
    """Decision 0284: ClusterQueues ``ui`` (16 GPUs, ``lendingLimit: 12``: it keeps 4) and
    ``uj`` (8 GPUs) of the cohort ``part``. Two Jobs of ``uj`` run, the second on 8 GPUs
    borrowed; an idle opted-in Job of ``ui`` runs on 8, 4 of them beyond what ``ui`` keeps.
    Kueue counts only those 4 in the cohort, so stopping the idle Job frees 4, and a third
    Job of ``uj`` waits for 8: the idle Job is kept. Before, a queue that used anything
    beyond what it keeps lent all its freed GPUs: the idle Job was deleted, and the waiting
    Job kept waiting."""
    await idle_job_kept_for_a_borrowing_queue(*stack, ("ui", 12), "uj", cohort="part")


async def idle_job_kept_for_a_borrowing_queue(
    pipeline: Pipeline,
    exporter: GpuExporter,
    lender: tuple[str, int],
    borrower: str,
    *,
    cohort: str,
) -> None:
    """ClusterQueues ``lender`` (its name, and its ``lendingLimit`` of 16 GPUs) and
    ``borrower`` (8 GPUs) of ``cohort``, their LocalQueues named ``l`` and the queue's last
    letter. Two Jobs of ``borrower`` run, the second on 8 GPUs borrowed; an idle opted-in
    Job of ``lender`` runs on 8; a third Job of ``borrower`` waits. The idle Job is kept, and
    deleted by hand, Kueue admits nothing on what it freed."""
    plain = plain_namespace(pipeline)
    (lender_queue, lending), mine, theirs = lender, lender[0][-1], borrower[-1]
    idle, waiter = f"idle-{mine}", f"waiter-{theirs}"
    async with platform_queues_made(
        pipeline,
        plain,
        platform_cluster_queue(lender_queue, cohort, nominalQuota=16, lendingLimit=lending),
        platform_cluster_queue(borrower, cohort),
        platform_local_queue(f"l{mine}", plain, lender_queue),
        platform_local_queue(f"l{theirs}", plain, borrower),
        jobs=(f"holder-{theirs}", f"borrower-{theirs}", idle, waiter),
    ):
        await borrowing_beside_an_idle_job(
            pipeline,
            exporter,
            plain,
            (f"holder-{theirs}", f"borrower-{theirs}", f"l{theirs}"),
            idle=(idle, f"l{mine}"),
        )
        await reserved(pipeline, borrower, borrowed="8")
        await reserved(pipeline, lender_queue, total="8")
        await waiting_for_gpus(pipeline, plain, waiter, f"l{theirs}")
        await kept_idle(pipeline, exporter, plain, idle)
        await kueue_admits_nothing_once_deleted(pipeline, plain, idle, lender_queue, waiter)


async def borrowing_beside_an_idle_job(
    pipeline: Pipeline,
    exporter: GpuExporter,
    namespace: str,
    borrowing: tuple[str, str, str],
    *,
    idle: tuple[str, str],
) -> None:
    """Plain Jobs: ``borrowing``'s holder and borrower (names, then their LocalQueue, of 8
    GPUs), the borrower on quota borrowed from the cohort; ``idle`` (name, LocalQueue, opted
    in) runs idle until its GpuWorkload says ``Idle``."""
    holder, borrower, queue_name = borrowing
    await pipeline.kube.create(plain_job(holder, namespace, queue_name), field_manager="carol")
    await running_pod(pipeline, namespace, holder)
    await idle_beside_a_full_queue(
        pipeline, exporter, namespace, holder=(borrower, queue_name), idle=idle
    )


async def kueue_admits_nothing_once_deleted(
    pipeline: Pipeline, namespace: str, idle: str, cluster_queue: str, waiter: str
) -> None:
    """Kueue agrees the idle Job was of no use to the waiting one: deleted by hand, its
    ``cluster_queue`` comes to hold no MI300X GPUs, and the ``waiter`` still waits."""
    await pipeline.kube.delete(resources.JOB, idle, namespace=namespace)
    await reserved(pipeline, cluster_queue, total="0")
    await still_waits(pipeline, namespace, waiter)


async def still_waits(pipeline: Pipeline, namespace: str, name: str) -> None:
    """The Job ``name`` gets no running pod while Kueue's requeue and admission pass (a
    few seconds) several times over."""
    deadline = asyncio.get_running_loop().time() + KUEUE_QUIET_SECONDS
    while asyncio.get_running_loop().time() < deadline:
        listed = await pipeline.kube.list(
            resources.POD, namespace=namespace, label_selector=f"{actors.JOB_NAME_LABEL}={name}"
        )
        assert not [p for p in listed.items if p["status"].get("phase") == "Running"]
        await asyncio.sleep(1.0)


async def test_an_idle_job_is_kept_for_a_job_of_its_queue_that_selects_another_flavor(
    stack: tuple[Pipeline, GpuExporter],
) -> None:
    """Decision 0283: the ClusterQueue ``uv`` has 8 GPUs of ``mi300x`` and 8 of
    ``mi250x-nodes`` (the fleet's MI250X node). A Job selecting MI250X nodes holds the MI250X
    quota; an idle opted-in Job without a selector runs on ``mi300x``. A second Job selecting
    MI250X waits: Kueue admits it only into ``mi250x-nodes``, so the idle Job is kept for it.
    Before, one queue was all it took: the idle Job was deleted, and the waiting Job kept
    waiting."""
    pipeline, exporter = stack
    plain = plain_namespace(pipeline)
    mi250x = {"nodeSelector": {"amd.com/gpu.product-name": MI250X.product}}
    async with platform_queues_made(
        pipeline,
        plain,
        platform_flavor("mi250x-nodes", MI250X.product),
        platform_cluster_queue("uv", spare={}, second="mi250x-nodes"),
        platform_local_queue("lv", plain, "uv"),
        jobs=("holder-v", "idle-v", "waiter-v"),
    ):
        await idle_beside_a_full_queue(
            pipeline, exporter, plain, holder=("holder-v", "lv"), idle=("idle-v", "lv"), pod=mi250x
        )
        assert await admitted_into(pipeline, plain, "holder-v") == "mi250x-nodes"
        assert await admitted_into(pipeline, plain, "idle-v") == "mi300x"
        await waiting_for_gpus(pipeline, plain, "waiter-v", "lv", pod=mi250x)
        await kept_idle(pipeline, exporter, plain, "idle-v")
        await kueue_admits_nothing_once_deleted(pipeline, plain, "idle-v", "uv", "waiter-v")


async def reserved(pipeline: Pipeline, cluster_queue: str, **gpus: str) -> None:
    """Kueue's status of ``cluster_queue`` comes to say it has reserved ``gpus`` MI300X GPUs
    (``total=``, ``borrowed=``)."""

    async def check() -> bool | Pending:
        found = await pipeline.kube.get(resources.KUEUE_CLUSTER_QUEUE, cluster_queue)
        usage = (found.get("status") or {}).get("flavorsReservation") or ()
        said = [
            {key: resource.get(key) for key in gpus}
            for flavor in usage
            if flavor.get("name") == "mi300x"
            for resource in flavor.get("resources") or ()
            if resource.get("name") == "amd.com/gpu"
        ]
        return True if said == [gpus] else Pending(f"{cluster_queue} says {said}")

    await eventually(check, what=f"{cluster_queue} reserving {gpus}", within=STEP)


async def admitted_into(pipeline: Pipeline, namespace: str, job: str) -> str:
    """The flavor of the GPUs Kueue admitted the running Job ``job`` into."""
    listed = await pipeline.kube.list(resources.KUEUE_WORKLOAD, namespace=namespace)
    for workload in listed.items:
        owners = workload["metadata"].get("ownerReferences") or ()
        admission = (workload.get("status") or {}).get("admission")
        if admission and any(o.get("name") == job for o in owners):
            [assignment] = admission["podSetAssignments"]
            return str(assignment["flavors"]["amd.com/gpu"])
    raise AssertionError(f"no admitted Workload of {job}")


async def test_an_idle_job_of_another_queue_is_kept_and_one_of_the_waiting_jobs_queue_goes(
    stack: tuple[Pipeline, GpuExporter],
) -> None:
    pipeline, exporter = stack
    team_a, team_b = namespaces(pipeline)
    await pipeline.kube.create(opted_in_job("idle-b", team_b, "qb"), field_manager="bob")
    await pipeline.kube.create(opted_in_job("holder-a", team_a, "qa"), field_manager="alice")
    await pipeline.reaches("idle-b", "RUNNING", namespace=team_b)
    await pipeline.reaches("holder-a", "RUNNING", namespace=team_a)
    idle_pod = await running_pod(pipeline, team_b, "idle-b")
    holder_pod = await running_pod(pipeline, team_a, "holder-a")
    exporter.series = [*readings(team_b, idle_pod, 1.0), *readings(team_a, holder_pod, 95.0)]

    # qa is full: the waiting job is PENDING in Kueue's words.
    waiter = kaiwo_job("waiter-a", team_a, queue_name="qa", gpus=8, run_seconds=LONG_RUN)
    await pipeline.kube.create(waiter, field_manager="alice")
    await pipeline.reaches("waiter-a", "PENDING", namespace=team_a)

    # The idle job of qb frees nothing qa could use: it is kept, and the waiting job waits.
    async def kept() -> None:
        idle_b = await pipeline.kube.get(resources.KAIWO_JOB, "idle-b", namespace=team_b)
        assert idle_b["status"]["status"] == "RUNNING", idle_b["status"]
        assert terminated_early(idle_b) is None

    await through_monitor_ticks(exporter, kept)
    idle_b = await pipeline.kube.get(resources.KAIWO_JOB, "idle-b", namespace=team_b)
    gpu_idle = next(c for c in idle_b["status"]["conditions"] if c["type"] == "GpuIdle")
    assert gpu_idle["status"] == "True"  # idle all along: only the queue kept it

    # The job holding qa's quota idles: it goes for the waiting job, which then runs.
    exporter.series = [*readings(team_b, idle_pod, 1.0), *readings(team_a, holder_pod, 1.0)]
    holder = await pipeline.reaches("holder-a", "TERMINATED", namespace=team_a)
    reason = terminated_early(holder)
    assert reason is not None and reason["reason"] == "GpuIdlePreemption"
    assert f"for pending workload KaiwoJob/{team_a}/waiter-a" in reason["message"]
    await pipeline.reaches("waiter-a", "RUNNING", namespace=team_a)
    idle_b = await pipeline.kube.get(resources.KAIWO_JOB, "idle-b", namespace=team_b)
    assert idle_b["status"]["status"] == "RUNNING"


async def test_a_serving_scale_up_waiting_for_quota_gets_an_idle_job_of_its_queue_preempted(
    stack: tuple[Pipeline, GpuExporter],
) -> None:
    pipeline, exporter = stack
    serving = serving_namespace(pipeline)
    await pipeline.kube.create(opted_in_job("idle-s", serving, "qs"), field_manager="alice")
    service = vllm_service("chat", serving, clusterQueue="qs", gpusPerReplica=8)
    await pipeline.kube.create(service, field_manager="erin")
    await pipeline.reaches("idle-s", "RUNNING", namespace=serving)
    await pipeline.reaches("chat", "READY", kind=resources.KAIWO_SERVICE, namespace=serving)
    idle_pod = await running_pod(pipeline, serving, "idle-s")
    exporter.series = [*exporter.series, *readings(serving, idle_pod, 1.0)]

    # qs is full: the second replica's pod waits at Kueue's gate.
    await pipeline.kube.merge_patch(
        resources.KAIWO_SERVICE,
        "chat",
        {"spec": {"replicas": 2}},
        namespace=serving,
        field_manager="erin",
    )
    idle = await pipeline.reaches("idle-s", "TERMINATED", namespace=serving)
    reason = terminated_early(idle)
    assert reason is not None and reason["reason"] == "GpuIdlePreemption"
    assert f"for pending workload KaiwoService/{serving}/chat" in reason["message"]
    assert idle["status"]["preemptedFor"]["name"] == "chat"
    await pipeline.reaches("chat", "READY", kind=resources.KAIWO_SERVICE, namespace=serving)
    deployment = await pipeline.kube.get(resources.DEPLOYMENT, "chat", namespace=serving)
    assert deployment["status"]["availableReplicas"] == 2
