"""How long the scientist's commands take to start and answer: CPU seconds (user + system of
the process, which the machine's other load barely changes) and wall seconds, medians of
several runs, against a fake API server holding one KaiwoJob.

Run: ``uv run python bench/cli_start.py [RUNS]`` (default 7). Each command is its own process,
as typed in a shell: ``kaiwo --help``, ``kaiwo list``, ``kaiwo status NS/NAME``,
``kaiwo logs NS/NAME`` (its pod has no node: an empty log) and ``kaiwo queues``.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kaiwo_contracts.crds.registry import SERVED_KINDS
from kaiwo_contracts.crds.schema import custom_resource_definitions
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter

KAIWO = str(Path(sys.executable).parent / "kaiwo")
COMMANDS = (
    ("kaiwo --help", ["--help"]),
    ("kaiwo list", ["list"]),
    ("kaiwo status", ["status", "bench/job"]),
    ("kaiwo logs", ["logs", "bench/job"]),
    ("kaiwo queues", ["queues"]),
)


async def seed(kubeconfig: Path) -> None:
    async with await KubernetesAsyncioAdapter.from_kubeconfig(kubeconfig) as kube:
        await kube.ensure_crds(custom_resource_definitions(SERVED_KINDS), field_manager="bench")
        await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}})
        job = await kube.create(
            {
                "apiVersion": "kaiwo.silogen.ai/v1alpha1",
                "kind": "KaiwoJob",
                "metadata": {"name": "job", "namespace": "bench"},
                "spec": {"user": "alice@example.com", "image": "busybox", "entrypoint": "true"},
            }
        )
        await kube.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": "job-0",
                    "namespace": "bench",
                    "labels": {"kaiwo.silogen.ai/owner-uid": job["metadata"]["uid"]},
                },
                "spec": {"containers": [{"name": "workload", "image": "busybox"}]},
            }
        )


def measure(arguments: list[str], *, env: dict[str, str]) -> tuple[float, float]:
    """CPU and wall seconds of one run of ``kaiwo ARGUMENTS``."""
    started = time.perf_counter()
    process = subprocess.Popen(
        [KAIWO, *arguments], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    assert process.returncode in (0, 1), f"kaiwo {' '.join(arguments)} exited {process.returncode}"
    return usage.ru_utime + usage.ru_stime, wall


def main(runs: int) -> None:
    with tempfile.TemporaryDirectory() as directory:
        kubeconfig = Path(directory) / "kubeconfig"
        fake = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kaiwo_kubefake",
                "--port",
                "0",
                "--kubeconfig",
                str(kubeconfig),
            ],
            stdout=subprocess.PIPE,
        )
        try:
            assert fake.stdout is not None
            fake.stdout.readline()  # "listening on ..."
            asyncio.run(seed(kubeconfig))
            env = {
                **os.environ,
                "KUBECONFIG": str(kubeconfig),
                "KAIWO_STATE": directory,  # no stack here: the kubeconfig names the cluster
                "HOME": directory,
            }
            print(f"{'command':<14} {'CPU s (median)':>15} {'wall s (median)':>16}  runs={runs}")
            for label, arguments in COMMANDS:
                figures = [measure(arguments, env=env) for _ in range(runs)]
                cpu = statistics.median(f[0] for f in figures)
                wall = statistics.median(f[1] for f in figures)
                print(f"{label:<14} {cpu:>15.3f} {wall:>16.3f}")
            print(f"load average: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
        finally:
            fake.terminate()
            fake.wait()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 7)
