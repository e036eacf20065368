"""Watch streams with bookmarks over HTTP: a bookmark falling due never holds events back."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from kaiwo_kube import resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_kubefake import FakeKubeServer


async def test_queued_events_are_sent_while_a_bookmark_is_due(tmp_path: Path) -> None:
    # Interval 0: a bookmark is due at every turn of the stream loop. Watching from before two
    # creations queues both events at once; they used to wait forever behind a get with a
    # zero timeout (which cancels the get even when an item is there).
    server = FakeKubeServer(kubeconfig_path=tmp_path / "kubeconfig", bookmark_interval=0.0)
    async with server:
        kube = await KubernetesAsyncioAdapter.from_kubeconfig(server.kubeconfig_path)
        async with kube:
            before = (await kube.list(resources.NAMESPACE)).resource_version
            for name in ("team-a", "team-b"):
                await kube.create(
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
                )
            events = kube.watch(
                resources.NAMESPACE, resource_version=before, timeout_seconds=10, bookmarks=True
            )

            async def first_two_added() -> list[str]:
                names: list[str] = []
                async for event in events:
                    if event.type == "ADDED":
                        names.append(event.object["metadata"]["name"])
                    if len(names) == 2:
                        break
                return names

            async with contextlib.aclosing(events):
                assert await asyncio.wait_for(first_two_added(), 5) == ["team-a", "team-b"]
