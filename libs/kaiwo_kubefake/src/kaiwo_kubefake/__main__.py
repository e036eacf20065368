"""``python -m kaiwo_kubefake --port 0 --kubeconfig OUT``: serve until SIGINT/SIGTERM.

Prints one line ``listening on http://127.0.0.1:<port>`` once the kubeconfig is written, so a
parent process can wait for it.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path

from kaiwo_kubefake.server import FakeKubeServer


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m kaiwo_kubefake", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--kubeconfig", type=Path, required=True, help="where to write it")
    parser.add_argument("--history-limit", type=int, default=10_000)
    parser.add_argument("--bookmark-interval", type=float, default=1.0)
    parser.add_argument(
        "--auto-namespaces",
        action="store_true",
        help="accept objects in namespaces that do not exist (the real server refuses them)",
    )
    return parser.parse_args(argv)


async def serve(arguments: argparse.Namespace) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    server = FakeKubeServer(
        host=arguments.host,
        port=arguments.port,
        history_limit=arguments.history_limit,
        bookmark_interval=arguments.bookmark_interval,
        require_namespaces=not arguments.auto_namespaces,
        kubeconfig_path=arguments.kubeconfig,
    )
    async with server:
        sys.stdout.write(f"listening on {server.url}\n")
        sys.stdout.flush()
        await stop.wait()


def main(argv: list[str] | None = None) -> None:
    asyncio.run(serve(_arguments(argv)))


if __name__ == "__main__":
    main()
