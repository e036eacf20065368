"""``python -m kaiwo_envtest [--controller-manager] [--audit] [--assets DIR]``: start a control
plane, print its kubeconfig path, run until SIGINT or SIGTERM, then remove everything."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from kaiwo_envtest.assets import AssetsNotFoundError, find_assets
from kaiwo_envtest.control_plane import ControlPlane, ControlPlaneOptions
from kaiwo_envtest.processes import ControlPlaneError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kaiwo_envtest", description=__doc__)
    parser.add_argument(
        "--assets", help="directory of the .xz binaries (default: $KAIWO_ENVTEST_ASSETS)"
    )
    parser.add_argument("--controller-manager", action="store_true")
    parser.add_argument("--audit", action="store_true", help="write an audit log of writes")
    arguments = parser.parse_args(argv)
    stopping = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stopping.set())
    try:
        assets = (
            find_assets(fallback=Path(arguments.assets), environ={})
            if arguments.assets
            else find_assets(fallback=None)
        )
        options = ControlPlaneOptions(
            assets=assets,
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
