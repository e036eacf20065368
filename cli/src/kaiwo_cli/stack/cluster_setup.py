"""Steps 2 and 3 of ``kaiwo up`` (:mod:`kaiwo_cli.stack.local`): the cluster answers, its
identity is read, the CRDs are installed when asked (with stand-ins and the demo's nodes on
the fake), and the scheduler is prepared. Each failure is one :class:`StackError` line."""

from __future__ import annotations

import asyncio
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from kaiwo_contracts.crds.registry import SERVED_KINDS
from kaiwo_contracts.crds.schema import custom_resource_definitions
from kaiwo_kube import KubeError, resources
from kaiwo_kube.cluster_identity import cluster_identity
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter

from kaiwo_cli.stack.demo_cluster import seed_demo_cluster
from kaiwo_cli.stack.options import StackError, StackOptions
from kaiwo_cli.stack.prerequisites import prerequisites_note, read_missing_prerequisites
from kaiwo_cli.stack.processes import log
from kaiwo_cli.stack.scheduler import SchedulerError, default_queue_setting, prepare_scheduler
from kaiwo_cli.stack.third_party import driven_kind_crds

FIELD_MANAGER = "kaiwo-installer"
CLUSTER_CHECK_SECONDS = 10.0


@dataclass(frozen=True, slots=True)
class PreparedCluster:
    uid: str
    """The cluster's identity: the uid of its kube-system namespace."""
    scheduler_note: str
    """What ``kaiwo up`` did about the scheduler, for its summary."""
    prerequisites_note: str = ""
    """Which third-party APIs a real cluster serves or lacks (empty on the fake, which gets
    stand-ins), for its summary."""


async def prepare_cluster(options: StackOptions, kubeconfig: Path | None) -> PreparedCluster:
    """Check that the cluster at ``kubeconfig`` answers, and make it ready for the operator."""
    where = str(kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config")
    missing = missing_kubeconfig(kubeconfig)
    if missing is not None:
        raise StackError(missing)
    try:
        # The client library logs "Config not found" itself; the error below says it.
        logging.getLogger("kubernetes_asyncio.config").setLevel(logging.ERROR)
        kube = await KubernetesAsyncioAdapter.from_environment(kubeconfig, user_agent="kaiwo-up")
    except Exception as error:  # a missing or broken kubeconfig, in any of its forms
        reason = " ".join(str(error).split())
        raise StackError(f"no reachable Kubernetes cluster ({where}: {reason})") from error
    async with kube:
        try:
            await asyncio.wait_for(kube.list(resources.NAMESPACE), CLUSTER_CHECK_SECONDS)
        except (TimeoutError, KubeError, OSError, aiohttp.ClientError) as error:
            reason = " ".join(str(error).split()) or type(error).__name__
            raise StackError(f"no reachable Kubernetes cluster ({where}: {reason})") from error
        uid = await _identity(kube, where)
        crds = list(custom_resource_definitions(SERVED_KINDS))
        # Stand-ins for the third-party kinds, unless the real ones are installed (kwok).
        if options.fake_cluster and options.local_cluster != "kwok":
            crds += driven_kind_crds()
        if options.install_crds or options.fake_cluster:
            await kube.ensure_crds(crds, field_manager=FIELD_MANAGER)
        if options.fake_cluster and options.seed_fake_cluster:
            await seed_demo_cluster(kube, options.sandbox)
        note = await _prepare_scheduler(options, kube)
        prerequisites = ""
        if not options.fake_cluster:
            unserved = await read_missing_prerequisites(kube)
            prerequisites = prerequisites_note(unserved)
            (log.warning if unserved else log.info)("prerequisites", what=prerequisites)
    return PreparedCluster(uid=uid, scheduler_note=note, prerequisites_note=prerequisites)


async def _identity(kube: KubernetesAsyncioAdapter, where: str) -> str:
    try:
        return await asyncio.wait_for(cluster_identity(kube), CLUSTER_CHECK_SECONDS)
    except (TimeoutError, KubeError, OSError, aiohttp.ClientError) as error:
        reason = " ".join(str(error).split()) or type(error).__name__
        raise StackError(
            f"cannot read the cluster's identity, the uid of namespace kube-system "
            f"({where}: {reason})"
        ) from error


async def _prepare_scheduler(options: StackOptions, kube: KubernetesAsyncioAdapter) -> str:
    if options.fake_cluster and options.local_cluster == "kwok":
        # Started with the control plane, serving the KaiwoConfig's default name.
        note = "the kaiwo-scheduler runs beside the local control plane"
        log.info("scheduler", what=note)
        return note
    try:
        note = await prepare_scheduler(
            kube,
            mode=options.scheduler,
            fake_cluster=options.fake_cluster,
            field_manager=FIELD_MANAGER,
            # The services read the same environment (kaiwo up passes it on).
            default_cluster_queue=default_queue_setting(os.environ),
        )
    except SchedulerError as error:
        raise StackError(str(error)) from error
    log.info("scheduler", what=note)
    return note


def default_kubeconfig() -> Path | None:
    """The kubeconfig file a client would read with none named: ``$KUBECONFIG``'s first
    entry, else ``~/.kube/config`` (None when neither exists)."""
    listed = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
    candidate = Path(listed).expanduser() if listed else Path.home() / ".kube" / "config"
    return candidate.resolve() if candidate.is_file() else None


def missing_kubeconfig(given: Path | None) -> str | None:
    """What is missing, in one line with what to do, when no kubeconfig file can be read
    (None when there is one, or when running in a pod with its service account)."""
    if given is not None:
        return None if given.is_file() else f"no kubeconfig at {given} (--kubeconfig)"
    if os.environ.get("KUBERNETES_SERVICE_HOST") or default_kubeconfig() is not None:
        return None
    where = (
        f"$KUBECONFIG ({os.environ['KUBECONFIG']})"
        if os.environ.get("KUBECONFIG")
        else "~/.kube/config"
    )
    return (
        f"no cluster to operate: {where} does not exist. Point --kubeconfig (make run "
        "ARGS=--kubeconfig=FILE) or $KUBECONFIG at a cluster, or try the simulated one: "
        "make demo"
    )
