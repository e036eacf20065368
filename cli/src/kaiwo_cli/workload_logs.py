"""``kaiwo logs``: the logs of a workload's pods, printed once or followed (``-f``) while
pods come and go until the workload ends. Imported only when ``kaiwo logs`` runs."""

from __future__ import annotations

import asyncio
import sys

import click

from kaiwo_cli.cluster_port import PodLogReader

POLL_SECONDS = 1.0
"""How often ``-f`` looks again for pods and containers that started."""


async def print_logs(
    kube: PodLogReader,
    ns: str,
    name: str,
    *,
    kind: str | None = None,
    container: str | None,
    tail: int | None,
) -> int:
    from kaiwo_cli import cluster_access as access
    from kaiwo_cli.cluster_access import NothingToShowError
    from kaiwo_cli.workload_views import log_streams

    found = await access.find_workload(kube, ns, name, kind=kind)
    pods = await access.pods_of(kube, found, (await access.children_of(kube, found)).objects)
    streams = log_streams(pods, container=container)
    if not streams and pods:
        # -c names no container its pods have: say which they have, not "no pods yet".
        have = sorted({stream.container for stream in log_streams(pods, container=None)})
        click.echo(
            f"kaiwo logs: no container {container} in the pods of {found['kind']} {ns}/{name} "
            f"(they have: {', '.join(have)})",
            err=True,
        )
        return 1
    if not streams:
        phase = (found.get("status") or {}).get("status") or "NEW"
        raise NothingToShowError(f"{found['kind']} {ns}/{name} has no pods yet (phase {phase})")
    results = await asyncio.gather(
        *(
            _stream_log(
                kube,
                ns,
                stream.pod,
                stream.container,
                phase=stream.phase,
                prefixed=len(streams) > 1,
                tail=tail,
                follow=False,
            )
            for stream in streams
        )
    )
    return 0 if any(results) else 1


async def follow_logs(
    kube: PodLogReader,
    ns: str,
    name: str,
    *,
    kind: str | None = None,
    container: str | None,
    tail: int | None,
) -> int:
    """Follow every container of the workload once it has started, pods that appear later
    too (a KaiwoJob's download pod, then its workers), until the workload reaches a final
    phase and every followed container has ended."""
    from kaiwo_cli import cluster_access as access
    from kaiwo_cli.cluster_access import NothingToShowError
    from kaiwo_cli.workload_views import FINAL_PHASES, log_streams, phase_of

    following: dict[tuple[str, str], asyncio.Task[bool]] = {}
    said_waiting = False
    found = await access.find_workload(kube, ns, name, kind=kind)  # not there: one line, exit 1
    try:
        while True:
            pods = await access.pods_of(
                kube, found, (await access.children_of(kube, found)).objects
            )
            for stream in log_streams(pods, container=container):
                key = (stream.pod, stream.container)
                if stream.started and key not in following:
                    following[key] = asyncio.create_task(
                        _stream_log(
                            kube,
                            ns,
                            stream.pod,
                            stream.container,
                            phase=stream.phase,
                            prefixed=True,
                            tail=tail,
                            follow=True,
                        )
                    )
            final = phase_of(found) in FINAL_PHASES
            if not following and final:
                raise NothingToShowError(
                    f"{found['kind']} {ns}/{name} ended ({phase_of(found)}) with no container "
                    "started"
                )
            if not following and not said_waiting:
                said_waiting = True
                click.echo(
                    f"kaiwo logs: waiting for a container of {found['kind']} {ns}/{name} to "
                    f"start (phase {phase_of(found)})",
                    err=True,
                )
            if final and all(task.done() for task in following.values()):
                break
            await asyncio.sleep(POLL_SECONDS)
            try:
                # The kind found first: a workload of the other kind made under the same
                # name meanwhile neither is followed nor makes the name ambiguous (one GET).
                found = await access.find_workload(kube, ns, name, kind=found["kind"])
            except NothingToShowError:
                break  # deleted while followed: its containers' streams end on their own
        results = [await task for task in following.values()]
    finally:
        for task in following.values():
            task.cancel()
    return 0 if any(results) else 1


async def _stream_log(
    kube: PodLogReader,
    namespace: str,
    pod: str,
    container: str,
    *,
    phase: str,
    prefixed: bool,
    tail: int | None,
    follow: bool,
) -> bool:
    """Print one container's log; False (and a line on stderr saying why) when unreadable.
    A container that wrote nothing says so on stderr, so that no pod goes unmentioned."""
    from kaiwo_kube import KubeError

    from kaiwo_cli.cluster_access import one_line

    prefix = f"[{pod}/{container}] " if prefixed else ""
    where = f"kaiwo logs: pod {pod} ({phase}), container {container}"
    written = 0
    try:
        async for line in kube.pod_log_lines(
            pod, namespace=namespace, container=container, tail_lines=tail, follow=follow
        ):
            written += 1
            sys.stdout.write(f"{prefix}{line}\n")
            sys.stdout.flush()
    except KubeError as error:
        click.echo(f"{where}: {one_line(error)}", err=True)
        return False
    if not written:
        click.echo(f"{where}: no output", err=True)
    return True
