"""The executor with 1, 2 and 4 partitions: CPU per plan of each replica, on a real API server.

For each partition count P: a fresh nats-server whose streams are partitioned P ways
(``KAIWO_BUS_PARTITIONS``, a subject transform by uid), ``WORKLOADS`` KaiwoJobs created in
the envtest API server, and for each the plan the planner's own function makes on a
16-node cluster (its Job, its status, an Event), published to ``KAIWO_PLAN`` ahead. Then P
executor processes start, share the partitions by lease (decision 0030: one each once all
are up, which the run waits for) and carry every plan out; the run ends when every plan
consumer is drained. Reported per replica: plans carried out (its ``/metrics``) and user + system
CPU per plan (``/proc``), from start to drained (start-up included); and for the whole:
executor CPU per plan summed over replicas, nats-server and kube-apiserver CPU per plan, and
plans per second of wall time (on this machine's two cores, shared by every process).

Run: ``uv run python bench/executor_partitions.py [--workloads N] [--partitions 1,2,4]``
(needs the built stack, ``make stack``, or ``KAIWO_ENVTEST_ASSETS``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shutil
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
from kaiwo_cli.stack.processes import ServiceProcess
from kaiwo_cli.stack.third_party import driven_kind_crds
from kaiwo_contracts.crds.registry import SERVED_KINDS
from kaiwo_contracts.crds.schema import custom_resource_definitions
from kaiwo_contracts.events.envelope import Envelope, object_subject
from kaiwo_contracts.events.observed import ObservedObjectV1
from kaiwo_contracts.events.permissions import ADMIN, EXECUTOR, inbox_prefix, operator_identities
from kaiwo_contracts.events.plans import PlanDecidedV1
from kaiwo_contracts.events.streams import PLAN_STREAM, bus_topology
from kaiwo_contracts.events.subjects import plan_subject
from kaiwo_envtest import ControlPlane, ControlPlaneOptions, find_binaries
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_planner.domain.planning import plan_object
from kaiwo_planner.domain.state.context_keeper import PlanningContextKeeper
from kaiwo_planner.domain.state.projection import Projection
from kaiwo_runtime.nats_bus import NatsBus
from kaiwo_runtime.nats_connection import NatsConnection
from kaiwo_runtime.nats_credentials import write_credentials
from kaiwo_runtime.nats_server import NatsServer, free_port
from pipeline import cpu_seconds
from planner import KAIWO_CONFIG, NODES

WORKLOADS = 300
PARTITIONS = (1, 2, 4)
PLANNER = "/kaiwo/planner"
SERVICE_ENV = {"KAIWO_LOG_LEVEL": "WARNING", "KAIWO_LOG_FORMAT": "json"}


@dataclass(frozen=True, slots=True)
class Figures:
    partitions: int
    plans_per_replica: tuple[int, ...]
    cpu_ms_per_replica: tuple[float, ...]
    """CPU of each replica divided by the plans it carried out."""
    executor_ms_per_plan: float
    nats_ms_per_plan: float
    apiserver_ms_per_plan: float
    plans_per_second: float


def kaiwo_job(namespace: str, index: int) -> dict[str, Any]:
    return {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoJob",
        "metadata": {"name": f"job-{index}", "namespace": namespace},
        "spec": {
            "image": "ghcr.io/silogen/rocm-ray:6.4",
            "entrypoint": "python train.py",
            "gpus": 1,
            "gpuVendor": "amd",
        },
    }


def queue_config(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "kaiwo.silogen.ai/v1alpha1",
        "kind": "KaiwoQueueConfig",
        "metadata": {"name": "kaiwo", "uid": "kqc"},
        "spec": {"clusterQueues": [{"name": "kaiwo", "namespaces": [namespace], "spec": {}}]},
    }


def observed(obj: dict[str, Any], sequence: int) -> ObservedObjectV1:
    meta = obj["metadata"]
    version = meta.get("resourceVersion") or str(sequence)
    return ObservedObjectV1(
        kind=obj["kind"],
        api_version=obj["apiVersion"],
        namespace=meta.get("namespace"),
        name=meta["name"],
        uid=meta["uid"],
        resource_version=version,
        event_type="ADDED",
        object={**obj, "metadata": {**meta, "resourceVersion": version}},
    )


async def plans_for(
    kube: KubernetesAsyncioAdapter, namespace: str, workloads: int
) -> list[tuple[str, Envelope[PlanDecidedV1]]]:
    """Create the KaiwoJobs; plan each as the planner would (subject, envelope)."""
    projection = Projection()
    contexts = PlanningContextKeeper()
    sequence = 0
    # The KaiwoConfig the plans read exists in the cluster too: the executor compares every
    # plan with the objects it was made from (decision 0038).
    wanted = {**KAIWO_CONFIG, "metadata": {"name": KAIWO_CONFIG["metadata"]["name"]}}
    config = await kube.apply(wanted, field_manager="kaiwo-bench", force=True)
    for obj in (*NODES, config, queue_config(namespace)):
        sequence += 1
        projection.apply(observed(obj, sequence), sequence=sequence)
    semaphore = asyncio.Semaphore(16)

    async def create(index: int) -> dict[str, Any]:
        async with semaphore:
            return await kube.create(kaiwo_job(namespace, index))

    created = await asyncio.gather(*(create(index) for index in range(workloads)))
    now = datetime.now(UTC)
    planned = []
    for owner in created:
        sequence += 1
        projection.apply(observed(owner, sequence), sequence=sequence)
        plan = plan_object(
            owner=projection.by_uid(owner["metadata"]["uid"]),
            context=contexts.context(projection),
            now=now,
        ).plan
        assert plan is not None and plan.desired, "the KaiwoJob got no plan"
        meta = owner["metadata"]
        envelope = Envelope.new(
            data=PlanDecidedV1.of(plan, planned_at=now, obs_sequence=sequence),
            source=PLANNER,
            time=now,
            correlationid=meta["uid"],
            subject=object_subject(namespace=namespace, name=meta["name"]),
        )
        planned.append(
            (plan_subject(kind="KaiwoJob", namespace=namespace, uid=meta["uid"]), envelope)
        )
    return planned


async def drained(bus: NatsBus, *, within: float) -> bool:
    js = bus.client.jetstream()
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        infos = await js.consumers_info(PLAN_STREAM)
        executors = [i for i in infos if i.name.startswith("executor-plan")]
        if executors and all(i.num_pending == 0 and i.num_ack_pending == 0 for i in executors):
            return True
        await asyncio.sleep(0.2)
    return False


async def measure(
    plane: ControlPlane,
    kube: KubernetesAsyncioAdapter,
    partitions: int,
    scratch: Path,
    *,
    workloads: int,
) -> Figures:
    namespace = f"partitions-{partitions}"
    await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    topology = bus_topology(partitions=partitions)
    credentials = write_credentials(
        scratch / f"credentials-{partitions}", operator_identities(topology), tls=None
    )
    nats = NatsServer(
        port=None,
        store_dir=scratch / f"nats-{partitions}",
        config=credentials.server_config.read_text(),
    )
    await nats.start()
    replicas: list[ServiceProcess] = []
    try:
        admin = NatsConnection(
            url=nats.url,
            credentials_file=credentials.seed(ADMIN),
            inbox_prefix=inbox_prefix(ADMIN),
            name="kaiwo-bench",
        )
        bus = await NatsBus.connect(admin, topology=topology)
        try:
            await bus.ensure_streams()
            planned = await plans_for(kube, namespace, workloads)
            replicas.extend(
                [
                    await start_replica(
                        plane, nats, credentials, scratch, replica=replica, partitions=partitions
                    )
                    for replica in range(partitions)
                ]
            )
            for process in replicas:
                await until_ready(process)
            await until_shared(replicas, partitions)
            # Start-up (imports, connections, the lease) is not a plan's cost.
            apiserver = {c.name: c.process.pid for c in plane.components}
            pids = {p.name: p.pid or 0 for p in replicas}
            before = cpu_seconds({**pids, "nats-server": nats.pid or 0, **apiserver})
            started = time.perf_counter()
            for subject, envelope in planned:
                await bus.publish(envelope, subject)
            if not await drained(bus, within=600):
                print(f"  {partitions} partitions: not drained within 600 s")
            wall = time.perf_counter() - started
            used = cpu_seconds({**pids, "nats-server": nats.pid or 0, **apiserver})
            handled = [await metric_sum(p, "kaiwo_executor_plans_total") for p in replicas]
        finally:
            await bus.close()
    finally:
        await asyncio.gather(*(p.stop() for p in replicas))
        await nats.stop()
    replica_cpu = [used[p.name] - before[p.name] for p in replicas]
    return Figures(
        partitions=partitions,
        plans_per_replica=tuple(handled),
        cpu_ms_per_replica=tuple(
            1000 * cpu / max(count, 1) for cpu, count in zip(replica_cpu, handled, strict=True)
        ),
        executor_ms_per_plan=1000 * sum(replica_cpu) / workloads,
        nats_ms_per_plan=1000 * (used["nats-server"] - before["nats-server"]) / workloads,
        apiserver_ms_per_plan=1000
        * (used["kube-apiserver"] - before["kube-apiserver"])
        / workloads,
        plans_per_second=workloads / wall,
    )


async def start_replica(
    plane: ControlPlane,
    nats: NatsServer,
    credentials: Any,
    scratch: Path,
    *,
    replica: int,
    partitions: int,
) -> ServiceProcess:
    port = free_port()
    process = ServiceProcess(
        name=f"executor-{replica}",
        module="kaiwo_executor",
        env={
            **SERVICE_ENV,
            "KAIWO_NATS_URL": nats.url,
            "KAIWO_NATS_CREDENTIALS_FILE": str(credentials.seed(EXECUTOR)),
            "KAIWO_NATS_DECLARE_STREAMS": "false",
            "KAIWO_KUBECONFIG": str(plane.kubeconfig),
            "KAIWO_HEALTH_HOST": "127.0.0.1",
            "KAIWO_HEALTH_PORT": str(port),
            "KAIWO_BUS_PARTITIONS": str(partitions),
            "KAIWO_REPLICA": str(replica),
            "KAIWO_LEASE_SECONDS": "5",
        },
        log_path=scratch / "logs" / f"executor-{partitions}-{replica}.log",
        health_port=port,
    )
    await process.start()
    return process


async def until_ready(process: ServiceProcess, *, within: float = 60) -> None:
    """``/readyz`` answers 200 (the replica holds its lease and reads its partitions)."""
    deadline = time.monotonic() + within
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as http:
        while time.monotonic() < deadline:
            with contextlib.suppress(aiohttp.ClientError, TimeoutError):
                url = f"http://127.0.0.1:{process.health_port}/readyz"
                async with http.get(url) as response:
                    if response.status == 200:
                        return
            await asyncio.sleep(0.2)
    raise RuntimeError(f"{process.name} was not ready within {within:.0f} s")


async def metric_sum(process: ServiceProcess, name: str) -> int:
    """The sum of a metric's samples (every label) on the replica's ``/metrics``."""
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http:
        url = f"http://127.0.0.1:{process.health_port}/metrics"
        async with http.get(url) as response:
            text = await response.text()
    return int(
        sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith((f"{name}{{", f"{name} "))
        )
    )


async def until_shared(replicas: list[ServiceProcess], partitions: int) -> None:
    """Every replica holds its share: with as many replicas as partitions, one each."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        held = [await metric_sum(p, "kaiwo_executor_partitions_held") for p in replicas]
        if partitions == 1 or held == [1] * partitions:
            return
        await asyncio.sleep(0.5)
    raise RuntimeError(f"the replicas did not share the {partitions} partitions within 60 s")


async def run(workloads: int, partition_counts: list[int], scratch: Path) -> list[Figures]:
    binaries = find_binaries()
    results = []
    with ControlPlane(ControlPlaneOptions(binaries=binaries)) as plane:
        async with await KubernetesAsyncioAdapter.from_kubeconfig(plane.kubeconfig) as kube:
            crds = [*custom_resource_definitions(SERVED_KINDS), *driven_kind_crds()]
            await kube.ensure_crds(crds, field_manager="kaiwo-bench", within=120)
            for partitions in partition_counts:
                figures = await measure(plane, kube, partitions, scratch, workloads=workloads)
                results.append(figures)
                print(
                    f"  {partitions} partition(s): {figures.plans_per_second:.0f} plans/s; "
                    f"executor {figures.executor_ms_per_plan:.2f} ms/plan in all (per replica "
                    + ", ".join(
                        f"{ms:.2f} ms x {n}"
                        for ms, n in zip(
                            figures.cpu_ms_per_replica, figures.plans_per_replica, strict=True
                        )
                    )
                    + f"); nats-server {figures.nats_ms_per_plan:.2f}, kube-apiserver "
                    f"{figures.apiserver_ms_per_plan:.2f} ms/plan"
                )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workloads", type=int, default=WORKLOADS)
    parser.add_argument("--partitions", default=",".join(map(str, PARTITIONS)))
    arguments = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="kaiwo-partitions-"))
    try:
        asyncio.run(
            run(arguments.workloads, [int(p) for p in arguments.partitions.split(",")], scratch)
        )
    finally:
        with contextlib.suppress(OSError):
            shutil.rmtree(scratch)


if __name__ == "__main__":
    main()
