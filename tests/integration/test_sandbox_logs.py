"""Container logs from the sandbox's simulated kubelets, read as on a cluster: through the API
server's ``pods/log`` (``container``, ``follow``, ``tailLines``, ``timestamps``), which the real
kube-apiserver and the fake both forward to the kubelet of the pod's node, found from the
Node's status. Read with the operator's Kubernetes adapter and with ``kubectl logs``.

Pods are created bare (no Job controller needed); the sandbox schedules them (binding them
on the real API server), runs them for their ``run-seconds`` and fails the one asked to.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kaiwo_kube import BadRequest, KubeError, NotFound, resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_sandbox import NodeSpec, Sandbox, SandboxOptions
from kaiwo_sandbox.fleet import NODE_TYPES
from kaiwo_sandbox.lifecycle import Timing

from tests.integration.conftest import SandboxCluster
from tests.stack_programs import stack_program
from tests.waiting import eventually

RUN_SECONDS = "sandbox.kaiwo.silogen.ai/run-seconds"
FAIL = "sandbox.kaiwo.silogen.ai/fail"
pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]
HANG_SECONDS = 60.0
"""How long a wait may last before the test calls it hung: a guard, not a measure (the
simulated pods run for seconds), generous for a loaded machine."""


@pytest.fixture
def cluster(sandbox_cluster: SandboxCluster) -> SandboxCluster:
    return sandbox_cluster


def pod(
    name: str, namespace: str, *, containers: list[str], annotations: dict[str, str], gpus: int = 1
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": container,
                    "image": "busybox",
                    "command": ["sh", "-c"],
                    "args": [f"echo {container}"],
                    "resources": {
                        "requests": {"amd.com/gpu": str(gpus)},
                        "limits": {"amd.com/gpu": str(gpus)},
                    },
                }
                for container in containers
            ],
        },
    }


async def create_pod(kube: KubernetesAsyncioAdapter, manifest: dict[str, Any]) -> None:
    """Create, retrying while a new namespace's default ServiceAccount is not there yet (the
    real API server's admission refuses pods until the controller manager has made it)."""
    deadline = time.monotonic() + HANG_SECONDS
    while True:
        try:
            await kube.create(manifest)
            return
        except KubeError as error:
            if error.code != 403 or time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.3)


async def log_lines(
    kube: KubernetesAsyncioAdapter, name: str, namespace: str, **how: Any
) -> list[str]:
    return [line async for line in kube.pod_log_lines(name, namespace=namespace, **how)]


async def kubectl(kubeconfig: Path, *args: str) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        stack_program("kubectl"),
        f"--kubeconfig={kubeconfig}",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await process.communicate()
    assert process.returncode is not None
    return process.returncode, output.decode()


DONE = re.compile(r"^\[sandbox\] done after \d+ s: exit code 0$")


async def test_logs_follow_tail_containers_and_failures_through_the_api_server(
    cluster: SandboxCluster,
) -> None:
    kube = cluster.kube
    run = uuid.uuid4().hex[:6]
    namespace, node = f"sandbox-logs-{run}", f"sandbox-logs-node-{run}"
    await kube.create(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": namespace, "labels": {"kaiwo-tests/namespace": "true"}},
        }
    )
    options = SandboxOptions(
        fleet=(NodeSpec(node, NODE_TYPES["amd-mi300x"]),),
        timing=Timing(admit_seconds=0, start_seconds=0.5, run_seconds=3),
        tick=0.2,
        play_controllers=not cluster.real,
        only_namespaces=(namespace,),
    )
    try:
        async with Sandbox(kube, options):
            await create_pod(
                kube,
                pod(
                    "two", namespace, containers=["main", "sidecar"], annotations={RUN_SECONDS: "4"}
                ),
            )
            await create_pod(
                kube,
                pod(
                    "broken",
                    namespace,
                    containers=["main"],
                    annotations={RUN_SECONDS: "1", FAIL: "FileNotFoundError: /data/tokenizer.json"},
                ),
            )
            # More GPUs than any node has: never placed, so nothing was ever written.
            await create_pod(
                kube, pod("nowhere", namespace, containers=["main"], annotations={}, gpus=64)
            )

            async def running(name: str) -> bool:
                found = await kube.get(resources.POD, name, namespace=namespace)
                return (found.get("status") or {}).get("phase") == "Running"

            await eventually(lambda: running("two"), within=HANG_SECONDS, what="pod two runs")
            found = await kube.get(resources.POD, "two", namespace=namespace)
            assert found["spec"]["nodeName"] == node  # bound: the API server knows its kubelet

            # Followed from the start, the log ends when the container does.
            followed = await asyncio.wait_for(
                log_lines(kube, "two", namespace, container="main", follow=True), 60
            )
            # Two containers of one GPU each: two of the node's GPU ids (which ones depends
            # on the order the scheduler met the pods in).
            assert re.fullmatch(
                rf"\[sandbox\] container main of pod {namespace}/two started on node {node} "
                r"with GPUs \d,\d; a simulation: nothing really runs",
                followed[0],
            ), followed[0]
            assert followed[1:5] == [
                "[sandbox] image busybox: sh -c echo main",
                "[sandbox] 25% of the planned 4 s",
                "[sandbox] 50% of the planned 4 s",
                "[sandbox] 75% of the planned 4 s",
            ]
            assert DONE.match(followed[5]), followed
            assert len(followed) == 6

            # The last line only; the other container's own log.
            tail = await log_lines(kube, "two", namespace, container="main", tail_lines=1)
            assert tail == [followed[5]]
            sidecar = await log_lines(kube, "two", namespace, container="sidecar")
            assert sidecar[0].startswith("[sandbox] container sidecar of pod")
            assert sidecar[1] == "[sandbox] image busybox: sh -c echo sidecar"

            # Two containers and none named, or a container the pod does not have: refused
            # with the real API server's words.
            with pytest.raises(BadRequest) as refused:
                await log_lines(kube, "two", namespace)
            assert refused.value.message == (
                "a container name must be specified for pod two, choose one of: [main sidecar]"
            )
            with pytest.raises(BadRequest) as refused:
                await log_lines(kube, "two", namespace, container="nope")
            assert refused.value.message == "container nope is not valid for pod two"

            async def failed() -> bool:
                found = await kube.get(resources.POD, "broken", namespace=namespace)
                return (found.get("status") or {}).get("phase") == "Failed"

            await eventually(failed, within=HANG_SECONDS, what="pod broken fails")
            broken = await log_lines(kube, "broken", namespace)
            assert broken[-2] == "FileNotFoundError: /data/tokenizer.json"
            assert re.fullmatch(r"\[sandbox\] exited with code 1 after \d+ s", broken[-1])

            assert await log_lines(kube, "nowhere", namespace) == []

            code, output = await kubectl(
                cluster.kubeconfig, "logs", "-n", namespace, "two", "-c", "main", "--tail=2"
            )
            assert code == 0, output
            assert output.splitlines()[0] == "[sandbox] 75% of the planned 4 s"
            assert DONE.match(output.splitlines()[1]), output
            code, output = await kubectl(
                cluster.kubeconfig, "logs", "-n", namespace, "broken", "--timestamps"
            )
            assert code == 0, output
            assert re.fullmatch(
                r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z FileNotFoundError: /data/tokenizer.json",
                output.splitlines()[-2],
            ), output
            code, output = await kubectl(
                cluster.kubeconfig, "logs", "-n", namespace, "two", "-c", "nope"
            )
            assert code != 0
            assert "container nope is not valid for pod two" in output

            # kubectl logs -f on a pod that is running: it streams until the container ends.
            await create_pod(
                kube, pod("late", namespace, containers=["main"], annotations={RUN_SECONDS: "3"})
            )
            await eventually(lambda: running("late"), within=HANG_SECONDS, what="pod late runs")
            code, output = await asyncio.wait_for(
                kubectl(cluster.kubeconfig, "logs", "-f", "-n", namespace, "late"), 60
            )
            assert code == 0, output
            lines = output.splitlines()
            assert lines[2:5] == [
                "[sandbox] 25% of the planned 3 s",
                "[sandbox] 50% of the planned 3 s",
                "[sandbox] 75% of the planned 3 s",
            ]
            assert DONE.match(lines[-1]), output
    finally:
        with contextlib.suppress(NotFound):
            await kube.delete(resources.NAMESPACE, namespace)
        with contextlib.suppress(NotFound):
            await kube.delete(resources.NODE, node)
        with contextlib.suppress(NotFound):
            await kube.delete(resources.LEASE, node, namespace="kube-node-lease")
