"""``python -m kaiwo_envtest [--controller-manager] [--audit] [--assets DIR]``: start a control
plane, print its kubeconfig path, run until SIGINT or SIGTERM, then remove everything.

With ``--scheduler-config FILE`` the kube-scheduler runs with that KubeSchedulerConfiguration,
with ``--kwok-node-selector SELECTOR`` kwok runs the pods of the nodes it selects (timing from
the ``--kwok-*`` flags), with ``--kueue``, ``--kuberay`` and ``--appwrapper`` the Kueue manager,
the KubeRay operator and the AppWrapper controller (with its webhooks) run, after the built
stack's third-party CRDs are installed (``kaiwo demo --cluster kwok`` starts all of them).

``python -m kaiwo_envtest build``: build the stack from ``tools/k8s`` (a no-op once built);
``python -m kaiwo_envtest where``: print the built stack's directory, or say it is not built."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

import yaml

from kaiwo_envtest.assets import AssetsNotFoundError, binaries_in, find_binaries
from kaiwo_envtest.control_plane import ControlPlane, ControlPlaneOptions
from kaiwo_envtest.kueue import KueueOptions
from kaiwo_envtest.kwok import KwokOptions
from kaiwo_envtest.processes import ControlPlaneError
from kaiwo_envtest.stack import StackBuildError, StackNotBuiltError, build_stack, built_stack

KWOK_DEFAULTS = KwokOptions()


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    if arguments[:1] == ["build"]:
        return _build()
    if arguments[:1] == ["where"]:
        return _where()
    return _run(arguments)


def _say(line: str) -> None:
    sys.stderr.write(f"stack: {line}\n")
    sys.stderr.flush()


def _build() -> int:
    try:
        stack = build_stack(progress=_say)
    except StackBuildError as error:
        _say(str(error))
        return 1
    sys.stdout.write(f"{stack.directory}\n")
    return 0


def _where() -> int:
    try:
        stack = built_stack()
    except (StackNotBuiltError, StackBuildError) as error:
        _say(str(error))
        return 1
    sys.stdout.write(f"{stack.directory}\n")
    return 0


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m kaiwo_envtest", description=__doc__)
    parser.add_argument(
        "--assets",
        help="directory of the binaries (default: $KAIWO_ENVTEST_ASSETS, else the built stack)",
    )
    parser.add_argument("--controller-manager", action="store_true")
    parser.add_argument("--audit", action="store_true", help="write an audit log of writes")
    parser.add_argument(
        "--scheduler-config", help="run the kube-scheduler with this KubeSchedulerConfiguration"
    )
    parser.add_argument("--kwok-node-selector", help="run kwok for the nodes this selects")
    parser.add_argument("--kwok-start-seconds", type=float, default=KWOK_DEFAULTS.start_seconds)
    parser.add_argument("--kwok-run-seconds", type=float, default=KWOK_DEFAULTS.run_seconds)
    parser.add_argument(
        "--kwok-download-seconds", type=float, default=KWOK_DEFAULTS.download_seconds
    )
    parser.add_argument("--kwok-time-scale", type=float, default=KWOK_DEFAULTS.time_scale)
    parser.add_argument("--kueue", action="store_true", help="run the Kueue manager")
    parser.add_argument("--kuberay", action="store_true", help="run the KubeRay operator")
    parser.add_argument(
        "--appwrapper", action="store_true", help="run the AppWrapper controller and its webhooks"
    )
    arguments = parser.parse_args(argv)
    stopping = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stopping.set())
    try:
        binaries = binaries_in(Path(arguments.assets)) if arguments.assets else find_binaries()
        options = ControlPlaneOptions(
            binaries=binaries,
            controller_manager=arguments.controller_manager,
            audit=arguments.audit,
            scheduler_configuration=(
                yaml.safe_load(Path(arguments.scheduler_config).read_text())
                if arguments.scheduler_config
                else None
            ),
            kwok=_kwok(arguments),
            kueue=KueueOptions() if arguments.kueue else None,
            kuberay=arguments.kuberay,
            appwrapper=arguments.appwrapper,
            manifests=(
                built_stack().manifests
                if arguments.kueue or arguments.kuberay or arguments.appwrapper
                else None
            ),
            ready_timeout=120.0,
        )
        with ControlPlane(options) as plane:
            sys.stdout.write(f"kubeconfig {plane.kubeconfig}\n")
            if plane.audit_log is not None:
                sys.stdout.write(f"audit log {plane.audit_log.path}\n")
            sys.stdout.flush()
            stopping.wait()
    except (AssetsNotFoundError, ControlPlaneError, StackNotBuiltError, OSError) as error:
        sys.stderr.write(f"{error}\n")
        return 1
    return 0


def _kwok(arguments: argparse.Namespace) -> KwokOptions | None:
    if not arguments.kwok_node_selector:
        return None
    return KwokOptions(
        node_selector=arguments.kwok_node_selector,
        start_seconds=arguments.kwok_start_seconds,
        run_seconds=arguments.kwok_run_seconds,
        download_seconds=arguments.kwok_download_seconds,
        time_scale=arguments.kwok_time_scale,
    )


if __name__ == "__main__":
    sys.exit(main())
