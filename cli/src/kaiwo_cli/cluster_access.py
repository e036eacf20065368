"""How the scientist's commands reach the cluster and read a workload's world.

Which cluster: ``--kubeconfig``, else the kubeconfig of the stack ``kaiwo up`` runs (its
``stack.json``), else ``$KUBECONFIG`` / ``~/.kube/config``; ``--context`` picks a context.
Reads go through :class:`~kaiwo_cli.cluster_port.ClusterReader` (the kubernetes_asyncio adapter,
over a plain aiohttp session when the kubeconfig allows: the client library is slow to import).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from kaiwo_kube import KubeError, NotFound, resources
from kaiwo_kube.resources import ResourceType

from kaiwo_cli.stack.state import read_state_if_any

if TYPE_CHECKING:
    from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter

    from kaiwo_cli.cluster_port import ClusterReader

OWNER_UID_LABEL: Final = "kaiwo.silogen.ai/owner-uid"
"""What the planner labels every child with (``kaiwo_planner.domain.children.labels``)."""
RUN_ID_LABEL: Final = "kaiwo.silogen.ai/run-id"
"""What the planner puts on every pod template of a workload: its uid. A Deployment's pods
carry only this (a Job's carry the Job's name as well)."""
JOB_NAME_LABEL: Final = "batch.kubernetes.io/job-name"
FORBIDDEN: Final = 403
WORKLOAD_TYPES: Final = (resources.KAIWO_JOB, resources.KAIWO_SERVICE)
CHILD_TYPES: Final = (
    resources.PERSISTENT_VOLUME_CLAIM,
    resources.JOB,
    resources.DEPLOYMENT,
    resources.RAY_JOB,
    resources.RAY_SERVICE,
    resources.APP_WRAPPER,
    resources.SERVICE,
    resources.HTTP_ROUTE,
)


class ClusterError(RuntimeError):
    """The cluster cannot be reached or answers no; the message is one line for the user."""


class NothingToShowError(ClusterError):
    """The cluster answered, and has nothing the command could show or act on: no such
    workload, or one with no pods yet. Exit 1, as the docs promise, not 2: the cluster was
    reached and refused nothing (decision 0141)."""


@dataclass(frozen=True, slots=True)
class ClusterTarget:
    kubeconfig: Path | None
    context: str | None = None


def cluster_target(
    *, kubeconfig: Path | None, context: str | None, state_dir: Path
) -> ClusterTarget:
    """Flags first, then the stack's kubeconfig, then the client's defaults (None)."""
    if kubeconfig is None:
        state = read_state_if_any(state_dir)
        kubeconfig = state.kubeconfig if state is not None else None
    return ClusterTarget(kubeconfig=kubeconfig, context=context)


async def connect(target: ClusterTarget, *, user_agent: str) -> KubernetesAsyncioAdapter:
    from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter

    # The client library logs "Config not found" itself; the error below says it.
    logging.getLogger("kubernetes_asyncio.config").setLevel(logging.ERROR)
    try:
        return await KubernetesAsyncioAdapter.from_kubeconfig_quickly(
            target.kubeconfig, context=target.context, user_agent=user_agent
        )
    except Exception as error:  # a missing or broken kubeconfig, in any of its forms
        reason = " ".join(str(error).split())
        where = target.kubeconfig or "$KUBECONFIG / ~/.kube/config"
        raise ClusterError(
            f"no usable kubeconfig ({where}: {reason}); start a stack with kaiwo up (make "
            "demo), or pass --kubeconfig"
        ) from error


def context_namespace(target: ClusterTarget) -> str:
    """The namespace of the kubeconfig's (current or given) context; ``default`` otherwise."""
    import os

    import yaml

    path = target.kubeconfig or Path(
        os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or Path.home() / ".kube" / "config"
    )
    try:
        config = yaml.safe_load(Path(path).read_text()) or {}
        name = target.context or config.get("current-context")
        for entry in config.get("contexts") or []:
            if entry.get("name") == name:
                return str((entry.get("context") or {}).get("namespace") or "default")
    except (OSError, yaml.YAMLError, AttributeError):
        pass
    return "default"


KIND_PREFIXES: Final = {
    "job": resources.KAIWO_JOB.kind,
    "kaiwojob": resources.KAIWO_JOB.kind,
    "service": resources.KAIWO_SERVICE.kind,
    "kaiwoservice": resources.KAIWO_SERVICE.kind,
}
"""A workload reference may start with its kind, as upstream's ``<job|service>/<name>``."""


def parse_reference(text: str, *, default_namespace: str) -> tuple[str, str, str | None]:
    """``[KIND/][NS/]NAME`` -> (namespace, name, kind or None): ``NAME`` is in
    ``default_namespace``; ``KIND`` is ``job`` or ``service`` (or ``kaiwojob``,
    ``kaiwoservice``), which a KaiwoJob and a KaiwoService of one name need. A first part
    that names a kind is the kind: ``kaiwojob/job/NAME`` reaches a namespace called ``job``."""
    parts = text.split("/")
    kind = KIND_PREFIXES.get(parts[0].lower()) if len(parts) > 1 else None
    if kind is not None:
        parts = parts[1:]
    if len(parts) == 1 and parts[0]:
        return default_namespace, parts[0], kind
    if len(parts) == 2 and all(parts):
        return parts[0], parts[1], kind
    raise ClusterError(f"expected [job/|service/]NAMESPACE/NAME or NAME, got {text!r}")


async def optional_list(
    kube: ClusterReader,
    resource: ResourceType,
    *,
    namespace: str | None,
    label_selector: str | None = None,
) -> list[dict[str, Any]]:
    """The objects, or none when the cluster does not serve the kind (no CRD installed)."""
    try:
        return (await kube.list(resource, namespace=namespace, label_selector=label_selector)).items
    except NotFound:
        return []


def is_forbidden(error: KubeError) -> bool:
    """403: RBAC lets the caller not do it (a scientist's ``edit`` in their namespace grants
    no Kueue Workloads, RayJobs or AppWrappers, nor any list across namespaces)."""
    return error.code == FORBIDDEN


async def readable_list(
    kube: ClusterReader,
    resource: ResourceType,
    *,
    namespace: str | None,
    label_selector: str | None = None,
) -> list[dict[str, Any]] | None:
    """As :func:`optional_list`, but None when the caller may not list the kind (403): a
    command goes on with what it may read and says what it could not, instead of failing."""
    try:
        return await optional_list(
            kube, resource, namespace=namespace, label_selector=label_selector
        )
    except KubeError as error:
        if not is_forbidden(error):
            raise
        return None


async def find_workload(
    kube: ClusterReader, namespace: str, name: str, *, kind: str | None = None
) -> dict[str, Any]:
    """The KaiwoJob or KaiwoService of that name (of ``kind`` when given). When both exist
    and no kind is given, neither: which one a command acts on (``delete``) must not be a
    guess, so the error says how to name it."""
    found = []
    for resource in WORKLOAD_TYPES:
        if kind is not None and resource.kind != kind:
            continue
        try:
            found.append(await kube.get(resource, name, namespace=namespace))
        except NotFound:
            continue
    if len(found) > 1:
        raise NothingToShowError(
            f"both a KaiwoJob and a KaiwoService {namespace}/{name} exist: say which, as "
            f"job/{namespace}/{name} or service/{namespace}/{name}"
        )
    if found:
        return found[0]
    looked_for = kind or "KaiwoJob or KaiwoService"
    hint = _OTHER_COMMANDS.get(name, "")
    raise NothingToShowError(f"no {looked_for} {namespace}/{name}{hint}")


_OTHER_COMMANDS: Final = {
    "queues": " (the queues: kaiwo queues)",
    "amd": " (the nodes and their GPUs: kaiwo nodes)",
    "nvidia": " (the nodes and their GPUs: kaiwo nodes)",
}
"""What upstream's ``kaiwo status queues|amd|nvidia`` is here, said when no workload of that
name exists."""


async def list_workloads(kube: ClusterReader, *, namespace: str | None) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for resource in WORKLOAD_TYPES:
        # Lists leave out kind and apiVersion on each item.
        found.extend(
            {"apiVersion": resource.api_version, "kind": resource.kind, **item}
            for item in await optional_list(kube, resource, namespace=namespace)
        )
    return found


def _uid(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


@dataclass(frozen=True, slots=True)
class Children:
    """The objects the operator made for a workload that the caller may read, and the kinds
    it may not list (403), so that those are named rather than shown as none."""

    objects: tuple[dict[str, Any], ...]
    unreadable: tuple[str, ...] = ()


async def children_of(kube: ClusterReader, workload: dict[str, Any]) -> Children:
    """Every object made for the workload: what the operator made (labelled with its uid as
    their owner), and a Ray service's RayService, which the AppWrapper controller makes from
    the operator's template (labelled with its uid as the run-id only, decision 0185)."""
    namespace = workload["metadata"]["namespace"]
    found = await asyncio.gather(
        *(
            readable_list(
                kube,
                resource,
                namespace=namespace,
                label_selector=f"{_child_label(resource)}={_uid(workload)}",
            )
            for resource in CHILD_TYPES
        )
    )
    return Children(
        objects=tuple(
            {"apiVersion": resource.api_version, "kind": resource.kind, **item}
            for resource, items in zip(CHILD_TYPES, found, strict=True)
            for item in items or ()
        ),
        unreadable=tuple(
            resource.kind
            for resource, items in zip(CHILD_TYPES, found, strict=True)
            if items is None
        ),
    )


def _child_label(resource: ResourceType) -> str:
    return RUN_ID_LABEL if resource == resources.RAY_SERVICE else OWNER_UID_LABEL


async def pods_of(
    kube: ClusterReader, workload: dict[str, Any], children: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The workload's pods: labelled with its uid (as a child or by its pod templates), or
    made by one of its Jobs."""
    namespace = workload["metadata"]["namespace"]
    selectors = [
        f"{OWNER_UID_LABEL}={_uid(workload)}",
        f"{RUN_ID_LABEL}={_uid(workload)}",
    ] + [
        f"{JOB_NAME_LABEL}={child['metadata']['name']}"
        for child in children
        if child.get("kind") == "Job"
    ]
    by_uid: dict[str, dict[str, Any]] = {}
    for selector in selectors:
        for pod in await optional_list(
            kube, resources.POD, namespace=namespace, label_selector=selector
        ):
            by_uid.setdefault(_uid(pod), {"apiVersion": "v1", "kind": "Pod", **pod})
    return sorted(by_uid.values(), key=lambda pod: str(pod["metadata"]["name"]))


async def events_about(
    kube: ClusterReader, namespace: str, objects: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The namespace's Events whose object is one of ``objects``."""
    listed = await optional_list(kube, resources.EVENT, namespace=namespace)
    return [event for event in listed if _is_about(event, objects)]


def _is_about(event: Mapping[str, Any], objects: Sequence[Mapping[str, Any]]) -> bool:
    """Whether ``event`` is about one of ``objects``: the same uid, or, for an Event that
    names none, the same kind and name.

    An Event that names a uid is about that object only: a workload deleted and submitted
    again under its name (and its children, named after it) had another uid, and its Events
    stay in the namespace for an hour; matched by name, they were shown as the new run's
    (decision 0165)."""
    involved = event.get("involvedObject") or {}
    uid = involved.get("uid")
    if uid:
        return any(_uid(obj) == uid for obj in objects)
    return any(
        (involved.get("kind"), involved.get("name")) == (obj.get("kind"), obj["metadata"]["name"])
        for obj in objects
    )


async def kueue_workloads(kube: ClusterReader, *, namespace: str | None) -> list[dict[str, Any]]:
    return await optional_list(kube, resources.KUEUE_WORKLOAD, namespace=namespace)


async def readable_kueue_workloads(
    kube: ClusterReader, *, namespace: str | None
) -> list[dict[str, Any]] | None:
    """The namespace's Kueue Workloads, or None when the caller may not list them (Kueue's
    roles are not part of ``edit``): a workload's place in its queue is then unknown."""
    return await readable_list(kube, resources.KUEUE_WORKLOAD, namespace=namespace)


def one_line(error: KubeError | Exception) -> str:
    message = getattr(error, "message", "") or str(error) or type(error).__name__
    return " ".join(str(message).split())


@dataclass(frozen=True, slots=True)
class QueueWorld:
    """What the estimates of a ClusterQueue read: its queues, every Workload that competes in
    it, and the workloads that declare durations."""

    cluster_queues: list[dict[str, Any]]
    local_queues: list[dict[str, Any]]
    kueue_workloads: list[dict[str, Any]]
    workloads: list[dict[str, Any]]
    whole: bool
    """False when the caller may not list every namespace: the estimate then counts only the
    Workloads of ``namespace`` (others' would hold it up, so it is optimistic)."""


async def queue_world(kube: ClusterReader, *, namespace: str | None) -> QueueWorld:
    """Every namespace's Kueue Workloads, LocalQueues and workloads (a queue is shared: what
    waits ahead in other namespaces counts), else, refused those (403), ``namespace``'s."""
    cluster_queues = await optional_list(kube, resources.KUEUE_CLUSTER_QUEUE, namespace=None)
    try:
        return QueueWorld(
            cluster_queues,
            await optional_list(kube, resources.KUEUE_LOCAL_QUEUE, namespace=None),
            await kueue_workloads(kube, namespace=None),
            await list_workloads(kube, namespace=None),
            whole=True,
        )
    except KubeError as error:
        if not is_forbidden(error) or namespace is None:
            raise
    return QueueWorld(
        cluster_queues,
        await optional_list(kube, resources.KUEUE_LOCAL_QUEUE, namespace=namespace),
        await kueue_workloads(kube, namespace=namespace),
        await list_workloads(kube, namespace=namespace),
        whole=False,
    )
