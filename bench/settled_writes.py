"""API writes of a settled operator on a real API server, per minute, over a quiet window.

A throw-away control plane (etcd, kube-apiserver v1.36 and kube-controller-manager from the
stack ``make stack`` builds or ``KAIWO_ENVTEST_ASSETS``, with an audit log) gets the project's
CRDs and the third-party ones, the example KaiwoConfig (``dynamicallyUpdateDefaultClusterQueue``
and ``addTaintsToGpuNodes`` on) and KaiwoQueueConfig with the namespaces they name, and three
8-GPU nodes that register the way kubelets do: the Node first, its status a moment later,
then a Lease renewed every 10 s. The operator (``kaiwo up``) runs as its own user; the audit
log counts its write requests (create, update, patch, delete) while it settles and then,
minute by minute, over ``--minutes`` of quiet. The target is 0 writes per quiet minute.

Run: ``uv run python bench/settled_writes.py [--minutes 10]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from kaiwo_cli.stack.local import LocalStack, StackOptions
from kaiwo_contracts.crds.registry import SERVED_KINDS
from kaiwo_contracts.crds.schema import custom_resource_definitions
from kaiwo_envtest import (
    AuditLog,
    ControlPlane,
    ControlPlaneOptions,
    built_stack,
    crds,
    find_binaries,
)
from kaiwo_kube import resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
OPERATOR = "kaiwo-operator"
ADMIN = "kaiwo-bench"
NODES = ("gpu-node-1", "gpu-node-2", "gpu-node-3")
SETTLE_SECONDS = 60.0


def third_party_crds() -> list[dict[str, Any]]:
    return crds.third_party_crds(built_stack().crds, kueue_version=resources.KUEUE_WORKLOAD.version)


def example(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((EXAMPLES / name).read_text())
    return loaded


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def gpu_node(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "amd.com/gpu.product-name": "AMD_Instinct_MI300X_OAM",
                "beta.amd.com/gpu.family.AI": "8",
            },
        },
    }


def node_status() -> dict[str, Any]:
    capacity = {"cpu": "128", "memory": "2Ti", "amd.com/gpu": "8", "pods": "110"}
    return {
        "capacity": capacity,
        "allocatable": capacity,
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "kubelet is posting ready status",
                "lastHeartbeatTime": now(),
                "lastTransitionTime": now(),
            }
        ],
    }


async def renew_leases(kube: KubernetesAsyncioAdapter) -> None:
    """What each kubelet does every 10 s: renew its node's Lease, so the node stays Ready."""
    while True:
        for name in NODES:
            lease = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": name, "namespace": "kube-node-lease"},
                "spec": {
                    "holderIdentity": name,
                    "leaseDurationSeconds": 40,
                    "renewTime": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
                },
            }
            await kube.apply(lease, field_manager="kubelet", force=True)
        await asyncio.sleep(10)


async def prepare_cluster(kube: KubernetesAsyncioAdapter) -> None:
    crds = [*third_party_crds(), *custom_resource_definitions(SERVED_KINDS)]
    await kube.ensure_crds(crds, field_manager=ADMIN, within=120)
    queue_config = example("kaiwoqueueconfig.yaml")
    wanted = {ns for q in queue_config["spec"]["clusterQueues"] for ns in q.get("namespaces", [])}
    for namespace in sorted(
        wanted
        | set(
            example("kaiwoconfig.yaml")["spec"]
            .get("resourceMonitoring", {})
            .get("targetNamespaces", [])
        )
    ):
        await kube.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
        )
    for name in NODES:
        await kube.create(gpu_node(name))
    await asyncio.sleep(2)  # the kubelet reports its status a moment after registering
    for name in NODES:
        await kube.patch_status(
            resources.NODE, name, node_status(), field_manager="kubelet", method="merge"
        )
    for manifest in (example("kaiwoconfig.yaml"), queue_config):
        await kube.apply(manifest, field_manager=ADMIN, force=False)


def operator_writes(log: AuditLog, *, since: int) -> Counter[tuple[str, str, str]]:
    return Counter(
        (event.verb, event.resource, event.subresource)
        for event in log.events(since=since)
        if event.user == OPERATOR
    )


@contextlib.asynccontextmanager
async def operator(plane: ControlPlane, state: Path) -> AsyncIterator[LocalStack]:
    # The operator's own writes are measured: the scheduler is left as the cluster has it.
    options = StackOptions(
        state_dir=state, kubeconfig=plane.kubeconfig_for(OPERATOR), scheduler="existing"
    )
    async with LocalStack(options) as stack:
        yield stack


async def measure(minutes: int) -> None:
    options = ControlPlaneOptions(binaries=find_binaries(), controller_manager=True, audit=True)
    with ControlPlane(options) as plane, tempfile.TemporaryDirectory() as state:
        log = plane.audit_log
        assert log is not None
        async with await KubernetesAsyncioAdapter.from_kubeconfig(plane.kubeconfig) as kube:
            await prepare_cluster(kube)
            heartbeat = asyncio.create_task(renew_leases(kube))
            start = log.mark()
            started = time.monotonic()
            async with operator(plane, Path(state)):
                await asyncio.sleep(max(0.0, SETTLE_SECONDS - (time.monotonic() - started)))
                settling = operator_writes(log, since=start)
                print(f"settling ({SETTLE_SECONDS:.0f} s from start): {sum(settling.values())}")
                for (verb, resource, sub), count in sorted(settling.items()):
                    print(f"  {count:4d} {verb} {resource}{'/' + sub if sub else ''}")
                print("quiet minute   operator writes")
                total = 0
                for minute in range(1, minutes + 1):
                    mark = log.mark()
                    await asyncio.sleep(60)
                    writes = operator_writes(log, since=mark)
                    total += sum(writes.values())
                    detail = ", ".join(
                        f"{v} {r}{'/' + s if s else ''}: {n}"
                        for (v, r, s), n in sorted(writes.items())
                    )
                    print(f"{minute:>12}   {sum(writes.values()):>15}   {detail}")
                print(f"writes per quiet minute: {total / minutes:.2f} ({total} in {minutes} min)")
            heartbeat.cancel()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=int, default=10)
    args = parser.parse_args()
    asyncio.run(measure(args.minutes))


if __name__ == "__main__":
    main()
