"""``python -m kaiwo_envtest [--controller-manager] [--audit] [--assets DIR]``: start a control
plane, print its kubeconfig path, run until SIGINT or SIGTERM, then remove everything.

``python -m kaiwo_envtest build``: build the stack from ``tools/k8s`` (a no-op once built);
``python -m kaiwo_envtest where``: print the built stack's directory, or say it is not built."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from kaiwo_envtest.assets import AssetsNotFoundError, binaries_in, find_binaries
from kaiwo_envtest.control_plane import ControlPlane, ControlPlaneOptions
from kaiwo_envtest.processes import ControlPlaneError
from kaiwo_envtest.stack import StackBuildError, StackNotBuiltError, build_stack, built_stack


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
        )
        with ControlPlane(options) as plane:
            sys.stdout.write(f"kubeconfig {plane.kubeconfig}\n")
            if plane.audit_log is not None:
                sys.stdout.write(f"audit log {plane.audit_log.path}\n")
            sys.stdout.flush()
            stopping.wait()
    except (AssetsNotFoundError, ControlPlaneError) as error:
        sys.stderr.write(f"{error}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
