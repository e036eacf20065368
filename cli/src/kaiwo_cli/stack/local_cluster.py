"""``kaiwo up --fake``'s cluster: the fake API server, or a real control plane from the built
stack (``envtest``; with ``kwok``, the scheduler, Kueue, KubeRay, the AppWrapper controller and
kwok too), in a child process of its own session, which removes what it started when it
stops."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

import yaml
from kaiwo_sandbox import SandboxOptions
from kaiwo_sandbox.fleet import SIMULATED_LABEL

from kaiwo_cli.stack.options import StackError, StackOptions
from kaiwo_cli.stack.scheduler import scheduler_configuration, scheduler_manifests

ENVTEST_START_SECONDS = 240.0
"""The whole stack (``kwok``) takes 20-40 s on a busy 2-core machine; a cold disk more."""


class LocalCluster:
    """The child process serving the local cluster; :meth:`start` returns its kubeconfig."""

    def __init__(self, options: StackOptions) -> None:
        self._options = options
        self._process: asyncio.subprocess.Process | None = None

    @property
    def pid(self) -> int | None:
        """The child's process id while it runs."""
        running = self._process is not None and self._process.returncode is None
        return self._process.pid if running and self._process is not None else None

    async def start(self) -> Path:
        if self._options.local_cluster in ("envtest", "kwok"):
            return await self._start_envtest()
        return await self._start_fake()

    async def stop(self) -> None:
        if self._process is not None and self._process.returncode is None:
            self._process.send_signal(signal.SIGTERM)
            await self._process.wait()
        self._process = None

    async def _start_fake(self) -> Path:
        state_dir = self._options.state_dir
        kubeconfig = state_dir / "fake-cluster" / "kubeconfig"
        kubeconfig.parent.mkdir(parents=True, exist_ok=True)
        (state_dir / "logs").mkdir(exist_ok=True)
        with (state_dir / "logs" / "fake-cluster.log").open("ab") as log_file:
            self._process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "kaiwo_kubefake",
                "--port",
                "0",
                "--kubeconfig",
                str(kubeconfig),
                stdout=asyncio.subprocess.PIPE,
                stderr=log_file,
                start_new_session=True,
            )
        assert self._process.stdout is not None
        try:
            line = await asyncio.wait_for(self._process.stdout.readline(), 30)
        except TimeoutError as error:
            raise StackError("the fake Kubernetes API server did not start in 30 s") from error
        if not line.startswith(b"listening on"):
            raise StackError("the fake Kubernetes API server did not start (see its log)")
        return kubeconfig

    async def _start_envtest(self) -> Path:
        """etcd, kube-apiserver and kube-controller-manager (with ``kwok``, the whole stack) in
        a child process, which removes them when it stops; its first line names the
        administrator's kubeconfig."""
        state_dir = self._options.state_dir
        (state_dir / "logs").mkdir(exist_ok=True)
        assets = self._options.envtest_assets
        arguments = ["--controller-manager", *(["--assets", str(assets)] if assets else [])]
        if self._options.local_cluster == "kwok":
            arguments += self._whole_stack_arguments()
        with (state_dir / "logs" / "envtest.log").open("ab") as log_file:
            self._process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "kaiwo_envtest",
                *arguments,
                stdout=asyncio.subprocess.PIPE,
                stderr=log_file,
                start_new_session=True,
            )
        assert self._process.stdout is not None
        try:
            line = await asyncio.wait_for(self._process.stdout.readline(), ENVTEST_START_SECONDS)
        except TimeoutError as error:
            raise StackError(
                f"the envtest control plane did not start in {ENVTEST_START_SECONDS:g} s"
            ) from error
        if not line.startswith(b"kubeconfig "):
            log = state_dir / "logs" / "envtest.log"
            raise StackError(f"the envtest control plane did not start (see {log})")
        return Path(line.decode().removeprefix("kubeconfig ").strip())

    def _whole_stack_arguments(self) -> list[str]:
        """The kaiwo-scheduler's configuration (the manifest this package carries), kwok for
        the sandbox's nodes with the sandbox's timing, Kueue, KubeRay and the AppWrapper
        controller (a Ray KaiwoService's RayService is made by it)."""
        configuration = self._options.state_dir / "kaiwo-scheduler-config.yaml"
        configuration.write_text(
            yaml.safe_dump(scheduler_configuration(scheduler_manifests()), sort_keys=False)
        )
        timing = (self._options.sandbox or SandboxOptions()).timing
        return [
            f"--scheduler-config={configuration}",
            f"--kwok-node-selector={SIMULATED_LABEL}=true",
            f"--kwok-start-seconds={timing.start_seconds:g}",
            f"--kwok-run-seconds={timing.run_seconds:g}",
            f"--kwok-download-seconds={timing.download_seconds:g}",
            f"--kwok-time-scale={timing.scale:g}",
            "--kueue",
            "--kuberay",
            "--appwrapper",
        ]
