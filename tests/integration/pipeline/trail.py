"""Where a workload that did not converge stands, for the failure message.

A pipeline test that waits for a KaiwoJob's next phase in vain fails with the KaiwoJob and
its children as the API server holds them, every event of theirs on the bus (what the
watcher observed, what the planner planned, what the executor did), the durable consumers'
counts and the services' processes: enough to tell which message, plan or write it waits
for, from one failed run on a loaded machine.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Final

import nats.js.errors
from kaiwo_contracts.events.decoding import decode_event
from kaiwo_contracts.events.observed import ObservedObjectV1
from kaiwo_contracts.events.partitions import stored_subject
from kaiwo_contracts.events.plans import PlanDecidedV1
from kaiwo_contracts.events.results import ApplyResultV1, PlanRefusedV1
from kaiwo_contracts.events.streams import (
    OBSERVED_STREAM,
    PLAN_STREAM,
    RESULT_STREAM,
    BusTopology,
)
from kaiwo_contracts.events.subjects import (
    ANY_TOKEN,
    ROOT,
    Family,
    kind_token,
    observed_subject,
    plan_subject,
    scope_token,
    uid_token,
)
from kaiwo_kube import KubernetesPort, NotFound, resources
from nats.js import JetStreamContext

from tests.waiting import NotConvergedError

EVENTS_PER_STREAM: Final = 40
"""The first events of each stream quoted (a workload's whole life has about a dozen)."""


@contextlib.asynccontextmanager
async def stall_explained(trail_of: Callable[[], Awaitable[str]]) -> AsyncIterator[None]:
    """Raise a failed wait inside (:class:`NotConvergedError`, or an actor's assertion that
    the cluster did not do its part) as a :class:`NotConvergedError` with ``trail_of()``
    (:func:`workload_trail`) appended."""
    try:
        yield
    except AssertionError as error:
        try:
            trail = await trail_of()
        except Exception as failure:  # the failure it was to explain still stands
            trail = f"(its trail could not be read: {failure!r})"
        raise NotConvergedError(f"{error}\n{trail}") from error


async def workload_trail(
    kube: KubernetesPort,
    js: JetStreamContext,
    topology: BusTopology,
    services: Mapping[str, Any],
    *,
    namespace: str,
    name: str,
) -> str:
    """The KaiwoJob ``namespace/name``, its Jobs and their events, as lines of text. Never
    raises: what cannot be read is named as such."""
    lines = [f"where KaiwoJob {namespace}/{name} stands:"]
    owner = await _quietly(kube.get(resources.KAIWO_JOB, name, namespace=namespace))
    lines.append(f"  KaiwoJob: {_object_line(owner)}")
    if isinstance(owner, dict):
        uid = owner["metadata"]["uid"]
        subject = observed_subject(kind="KaiwoJob", namespace=namespace, uid=uid)
        lines += await _events(js, topology, OBSERVED_STREAM, subject, uid)
        subject = plan_subject(kind="KaiwoJob", namespace=namespace, uid=uid)
        lines += await _events(js, topology, PLAN_STREAM, subject, uid)
        tokens = (ANY_TOKEN, kind_token("KaiwoJob"), scope_token(namespace), uid_token(uid))
        subject = ".".join((ROOT, Family.RESULT.value, *tokens))  # every outcome
        lines += await _events(js, topology, RESULT_STREAM, subject, uid)
    for job_name in (f"{name}-download", name):
        job = await _quietly(kube.get(resources.JOB, job_name, namespace=namespace))
        lines.append(f"  Job {job_name}: {_object_line(job)}")
        if isinstance(job, dict):
            uid = job["metadata"]["uid"]
            subject = observed_subject(kind="Job", namespace=namespace, uid=uid)
            lines += await _events(js, topology, OBSERVED_STREAM, subject, uid)
    lines.append(f"  consumers: {await _consumers(js, topology)}")
    lines.append(f"  services: {_services(services)}")
    return "\n".join(lines)


async def _quietly(read: Any) -> Any:
    """The awaited value, or the error's text (None when the object does not exist)."""
    try:
        return await read
    except NotFound:
        return None
    except Exception as error:  # a diagnosis must not hide the failure it explains
        return f"unreadable: {error!r}"


def _object_line(obj: object, *, identity: bool = True) -> str:
    """Its uid and version (unless ``identity`` is False), suspension, phase and conditions."""
    if obj is None:
        return "absent"
    if not isinstance(obj, dict):
        return str(obj)
    metadata, spec, status = (obj.get(key) or {} for key in ("metadata", "spec", "status"))
    identified = (f"uid={metadata.get('uid')}", f"rv={metadata.get('resourceVersion')}")
    facts = list(identified) if identity else []
    if "suspend" in spec:
        facts.append(f"suspend={spec['suspend']}")
    shown = [key for key in ("status", "active", "ready", "succeeded") if key in status]
    facts += [f"{key}={status[key]}" for key in shown]
    conditions = [f"{c.get('type')}={c.get('status')}" for c in status.get("conditions") or () if c]
    if conditions:
        facts.append(f"conditions {', '.join(conditions)}")
    return " ".join(facts)


async def _events(
    js: JetStreamContext, topology: BusTopology, stream: str, subject: str, uid: str
) -> list[str]:
    stored = stored_subject(subject, uid=uid, partitions=topology.partitions)
    lines = []
    sequence = 1
    try:
        while len(lines) < EVENTS_PER_STREAM:
            try:
                message = await js.get_msg(stream, seq=sequence, subject=stored, next=True)
            except nats.js.errors.NotFoundError:
                break
            assert message.seq is not None
            lines.append(f"    {stream} #{message.seq} {_event_line(message)}")
            sequence = message.seq + 1
    except Exception as error:  # the rest of the trail still helps
        lines.append(f"    {stream}: unreadable ({error!r})")
    return lines or [f"    {stream}: nothing on {stored}"]


def _event_line(message: Any) -> str:
    try:
        envelope = decode_event(message.headers, message.data).envelope
    except Exception as error:  # quoted as it is
        return f"undecodable ({error!r})"
    data = envelope.data
    when = envelope.time.strftime("%H:%M:%S.%f")[:-3]
    if isinstance(data, ObservedObjectV1):
        facts = _object_line(data.object, identity=False)
        return f"{when} {data.event_type} rv={data.resource_version} {facts}".rstrip()
    if isinstance(data, PlanDecidedV1):
        plan = data.plan
        names = [f"{m.get('kind')}/{(m.get('metadata') or {}).get('name')}" for m in plan.desired]
        desired = ", ".join(names)
        phase = (plan.status or {}).get("status")
        return (
            f"{when} plan from obs #{data.obs_sequence} rv={plan.observed_resource_version} "
            f"status={phase} desired [{desired}] fingerprint {data.fingerprint[:12]}"
        )
    if isinstance(data, ApplyResultV1):
        actions = ", ".join(
            f"{a.operation} {a.target.kind}/{a.target.name} {a.outcome}"
            + "".join(f" ({fact})" for fact in (a.http_status, a.reason) if fact)
            for a in data.actions
        )
        return f"{when} {data.outcome} plan {data.plan_fingerprint[:12]}: {actions}"
    if isinstance(data, PlanRefusedV1):
        return f"{when} refused plan {data.plan_fingerprint[:12]}: {'; '.join(data.reasons)}"
    return f"{when} {envelope.type}"


async def _consumers(js: JetStreamContext, topology: BusTopology) -> str:
    counts = []
    for spec in topology.consumers:
        try:
            info = await js.consumer_info(spec.stream, spec.durable_name)
        except Exception as error:  # named, and the others still read
            counts.append(f"{spec.durable_name} unreadable ({error!r})")
            continue
        counts.append(
            f"{spec.durable_name} pending={info.num_pending} ack_pending={info.num_ack_pending}"
            f" redelivered={info.num_redelivered}"
        )
    return "; ".join(counts)


def _services(services: Mapping[str, Any]) -> str:
    return "; ".join(
        f"{name} pid={getattr(process, 'pid', '?')} restarts={getattr(process, 'restarts', '?')}"
        f" running={getattr(process, 'running', '?')}"
        for name, process in services.items()
    )


async def cluster_trail(kube: KubernetesPort, *, namespace: str) -> str:
    """What the real cluster's controllers hold for ``namespace``: its Jobs (suspended or
    not), pods (phase, node, scheduling gates, why unscheduled), Kueue's Workloads (flavors,
    conditions with their messages), the ClusterQueues and ResourceFlavors, the GPU nodes'
    pool labels and the namespace's Events; so that a wait that failed on a loaded CI machine
    says whether Kueue, the Job controller, the scheduler or a kubelet held it. Never
    raises."""
    lines = [f"what the cluster holds for {namespace}:"]
    readings = (
        (resources.JOB, namespace, _job_line),
        (resources.POD, namespace, _pod_line),
        (resources.KUEUE_WORKLOAD, namespace, _kueue_workload_line),
        (resources.KUEUE_CLUSTER_QUEUE, None, _cluster_queue_line),
        (resources.KUEUE_RESOURCE_FLAVOR, None, _flavor_line),
        (resources.NODE, None, _node_line),
        (resources.EVENT, namespace, _kubernetes_event_line),
    )
    for resource, scope, line in readings:
        listed = await _quietly(kube.list(resource, namespace=scope))
        items = getattr(listed, "items", None)
        if items is None:
            lines.append(f"  {resource.kind}: {listed}")
            continue
        lines += [f"  {resource.kind} {line(item)}" for item in items] or [
            f"  {resource.kind}: none"
        ]
    return "\n".join(lines)


def _conditions(status: Mapping[str, Any]) -> str:
    return "; ".join(
        f"{c.get('type')}={c.get('status')}"
        + (f" {c.get('reason')}: {str(c.get('message'))[:160]}" if c.get("message") else "")
        for c in status.get("conditions") or ()
        if isinstance(c, Mapping)
    )


def _job_line(job: Mapping[str, Any]) -> str:
    spec, status = job.get("spec") or {}, job.get("status") or {}
    return (
        f"{job['metadata']['name']} suspend={spec.get('suspend')} active={status.get('active')} "
        f"selector={(spec.get('template') or {}).get('spec', {}).get('nodeSelector')} "
        f"deleting={'deletionTimestamp' in job['metadata']} [{_conditions(status)}]"
    )


def _kubernetes_event_line(event: Mapping[str, Any]) -> str:
    """Why a controller held something (a Job's FailedCreate, a Pod's FailedScheduling)."""
    regarding = event.get("involvedObject") or {}
    return (
        f"{event.get('type')} {event.get('reason')} {regarding.get('kind')}/"
        f"{regarding.get('name')} x{event.get('count') or 1}: {str(event.get('message'))[:200]}"
    )


def _pod_line(pod: Mapping[str, Any]) -> str:
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    gates = [g.get("name") for g in spec.get("schedulingGates") or ()]
    limits = [(c.get("resources") or {}).get("limits") for c in spec.get("containers") or ()]
    return (
        f"{pod['metadata']['name']} phase={status.get('phase')} node={spec.get('nodeName')} "
        f"selector={spec.get('nodeSelector')} gates={gates} limits={limits} "
        f"deleting={'deletionTimestamp' in pod['metadata']} [{_conditions(status)}]"
    )


def _kueue_workload_line(workload: Mapping[str, Any]) -> str:
    status = workload.get("status") or {}
    assignments = (status.get("admission") or {}).get("podSetAssignments") or ()
    flavors = [a.get("flavors") for a in assignments]
    return f"{workload['metadata']['name']} flavors={flavors} [{_conditions(status)}]"


def _cluster_queue_line(queue: Mapping[str, Any]) -> str:
    groups = (queue.get("spec") or {}).get("resourceGroups") or ()
    quotas = {
        flavor.get("name"): {r.get("name"): r.get("nominalQuota") for r in flavor.get("resources")}
        for group in groups
        for flavor in group.get("flavors") or ()
    }
    status = queue.get("status") or {}
    return (
        f"{queue['metadata']['name']} quotas={quotas} pending={status.get('pendingWorkloads')} "
        f"admitted={status.get('admittedWorkloads')} [{_conditions(status)}]"
    )


def _flavor_line(flavor: Mapping[str, Any]) -> str:
    metadata = flavor["metadata"]
    return (
        f"{metadata['name']} nodeLabels={(flavor.get('spec') or {}).get('nodeLabels')} "
        f"deleting={'deletionTimestamp' in metadata} finalizers={metadata.get('finalizers')}"
    )


def _node_line(node: Mapping[str, Any]) -> str:
    labels = node["metadata"].get("labels") or {}
    shown = {k: v for k, v in labels.items() if k.startswith("kaiwo/") or "gpu" in k}
    status = node.get("status") or {}
    allocatable = {k: v for k, v in (status.get("allocatable") or {}).items() if "gpu" in k}
    taints = (node.get("spec") or {}).get("taints")
    ready = next(
        (c.get("status") for c in status.get("conditions") or () if c.get("type") == "Ready"), None
    )
    return (
        f"{node['metadata']['name']} ready={ready} labels={shown} allocatable={allocatable} "
        f"taints={taints}"
    )
