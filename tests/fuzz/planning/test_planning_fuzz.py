"""Fuzzing planning: every served kind through the one planning entry point
(:func:`~kaiwo_planner.domain.planning.plan_object`), against clusters drawn at
random and taken in the way the planner service takes them (through its projection).

An owner is drawn from its kind's CRD schema (:mod:`tests.fuzz.schema_strategies`): valid
ones mostly, some the model refuses. The cluster holds Nodes of either GPU vendor (their
capacities and labels drawn, sometimes damaged), namespaces, the configuration objects
(KaiwoConfig, AIMNamespaceConfig, a KaiwoQueueConfig, other workloads: drawn from their
schemas too), and the owner's own children: the objects of a first plan, as if the executor
had applied them, each given a status drawn from what their controllers report, with
Kueue Workloads for some. Malformed objects are dropped by the projection as the service
drops them (a poison observation); the planner then plans the owner again.

Properties of every plan:

* planning raises nothing;
* the plan is strict JSON (no NaN, no infinity) and survives its own model;
* the executor's confinement takes it (:func:`~kaiwo_contracts.confinement.refusals` is
  empty): every object in the owner's namespace and of a kind the owner may write;
* every object it writes has a name the API server takes (a DNS-1123 subdomain; a Service a
  DNS-1035 label), and every label key and value is one Kubernetes takes (values of at most
  63 characters).

Cases: 300 in CI, 100,000 with ``make fuzz`` (:mod:`tests.fuzz.profiles`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from kaiwo_contracts.confinement import refusals
from kaiwo_contracts.crds.config_v1alpha1 import AIMNamespaceConfig, KaiwoConfig
from kaiwo_contracts.crds.kaiwo_v1alpha1 import KaiwoJob, KaiwoQueueConfig, KaiwoService
from kaiwo_contracts.crds.kubeai_v1 import Model
from kaiwo_contracts.events import ObservedObjectV1
from kaiwo_contracts.plans import Plan
from kaiwo_planner.domain.state.projection import Projection
from pydantic import BaseModel, ValidationError

from tests.fuzz.profiles import PROFILE
from tests.fuzz.schema_strategies import (
    dns_labels,
    hostile,
    manifests,
    names,
    quantities,
    timestamps,
    uids,
)
from tests.planning_calls import planning

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
OWNER_KINDS: tuple[type[BaseModel], ...] = (
    KaiwoJob,
    KaiwoService,
    KaiwoQueueConfig,
    Model,
    KaiwoConfig,
    AIMNamespaceConfig,
)
# A Model's name is at most 40 characters (its CRD's rule); the queue config that acts is
# the one named kaiwo.
OWNER_NAMES: Mapping[type[BaseModel], st.SearchStrategy[str]] = {
    Model: dns_labels | st.just("m" * 40),
    KaiwoQueueConfig: st.sampled_from(["kaiwo", "kaiwo", "other"]),
    KaiwoConfig: st.just("kaiwo"),
}
OWNERS = {model: manifests(model, name=OWNER_NAMES.get(model, names)) for model in OWNER_KINDS}

# -------------------------------------------------------------------- the cluster

GPU_LABELS = {
    "amd": ("amd.com/gpu.product-name", "beta.amd.com/gpu.family.AI", "amd.com/gpu"),
    "nvidia": ("nvidia.com/gpu.product", "nvidia.com/gpu.count", "nvidia.com/gpu"),
}
products = st.sampled_from(["AMD_Instinct_MI300X_OAM", "MI250", "Tesla-K80", "NVIDIA-A100", ""])


@st.composite
def nodes(draw: st.DrawFn) -> dict[str, Any]:
    vendor = draw(st.sampled_from(["amd", "nvidia", "none"]))
    labels: dict[str, str] = {"kubernetes.io/hostname": draw(dns_labels)}
    capacity: dict[str, Any] = {"cpu": draw(quantities), "memory": draw(quantities)}
    if vendor != "none":
        product, count, resource = GPU_LABELS[vendor]
        labels[product] = draw(products)
        gpus = draw(st.integers(min_value=0, max_value=16))
        if draw(st.booleans()):
            labels[count] = draw(st.sampled_from([str(gpus), "x", ""]))
        capacity[resource] = draw(st.sampled_from([gpus, str(gpus), "0"]))
    if draw(st.booleans()):
        labels["node-role.kubernetes.io/control-plane"] = ""
    if draw(st.booleans()):
        labels["kaiwo/nodepool"] = draw(dns_labels)
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": draw(dns_labels), "uid": draw(uids), "labels": labels},
        "spec": {
            "unschedulable": draw(st.booleans()),
            "taints": draw(
                st.lists(
                    st.fixed_dictionaries(
                        {
                            "key": st.sampled_from(["kaiwo.silogen.ai/gpu", "other"]),
                            "effect": st.sampled_from(["NoSchedule", "NoExecute"]),
                        },
                        optional={"value": st.sampled_from(["true", ""])},
                    ),
                    max_size=2,
                )
            ),
        },
        "status": {
            "capacity": capacity,
            "allocatable": capacity,
            "conditions": [
                {"type": "Ready", "status": draw(st.sampled_from(["True", "False", "Unknown"]))}
            ],
        },
    }
    damaged = hostile(node, rounds=1)
    return draw(damaged) if draw(st.integers(0, 9)) == 0 else node


conditions = st.lists(
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(
                [
                    "Complete",
                    "Failed",
                    "Suspended",
                    "Available",
                    "Progressing",
                    "Ready",
                    "Admitted",
                    "QuotaReserved",
                    "Evicted",
                    "Finished",
                    "PodsReady",
                ]
            ),
            "status": st.sampled_from(["True", "False", "Unknown"]),
        },
        optional={
            "reason": st.sampled_from(["Preempted", "BackoffLimitExceeded", "x"]),
            "message": st.text(max_size=20),
            "lastTransitionTime": timestamps,
        },
    ),
    max_size=3,
)
small_counts = st.integers(min_value=0, max_value=8)
# What controllers write in the status of the objects the operator creates.
statuses = st.fixed_dictionaries(
    {},
    optional={
        "conditions": conditions,
        "phase": st.sampled_from(["Pending", "Running", "Succeeded", "Failed", "Unknown", "Bound"]),
        "active": small_counts,
        "succeeded": small_counts,
        "failed": small_counts,
        "ready": small_counts,
        "replicas": small_counts,
        "readyReplicas": small_counts,
        "availableReplicas": small_counts,
        "updatedReplicas": small_counts,
        "startTime": timestamps,
        "completionTime": timestamps,
        "jobStatus": st.sampled_from(["PENDING", "RUNNING", "SUCCEEDED", "FAILED", "STOPPED"]),
        "jobDeploymentStatus": st.sampled_from(["Initializing", "Running", "Complete", "Failed"]),
        "podIP": st.sampled_from(["10.0.0.1", ""]),
        "containerStatuses": st.lists(
            st.fixed_dictionaries(
                {"name": dns_labels, "ready": st.booleans(), "restartCount": small_counts}
            ),
            max_size=2,
        ),
    },
)


def _object_with_uid(manifest: Mapping[str, Any], uid: str, version: int) -> dict[str, Any]:
    meta = dict(manifest.get("metadata") or {})
    meta.update(uid=uid, resourceVersion=str(version), creationTimestamp="2026-03-01T11:00:00Z")
    return {**manifest, "metadata": meta}


@st.composite
def children_of(draw: st.DrawFn, plan: Plan) -> list[dict[str, Any]]:
    """The plan's objects as the API server would hold them once applied, with statuses;
    some missing, some damaged, some with the Kueue Workload that admits them."""
    found: list[dict[str, Any]] = []
    for manifest in (*plan.desired, *plan.shared):
        if manifest.get("kind") == "Node" or draw(st.integers(0, 4)) == 0:
            continue
        child = _object_with_uid(manifest, draw(uids), draw(st.integers(1, 10**6)))
        child["status"] = draw(statuses)
        if draw(st.integers(0, 9)) == 0:
            damaged = draw(hostile({k: v for k, v in child.items() if k != "metadata"}, rounds=1))
            if isinstance(damaged, dict):
                child = {**damaged, "metadata": child["metadata"]}
        if draw(st.integers(0, 9)) == 0:
            # A child in another namespace that names the owner in its ownerReferences: a
            # reference across namespaces is ignored (decision 0022).
            other = draw(st.sampled_from(["team-a", "team-b", "elsewhere"]))
            child = {**child, "metadata": {**child["metadata"], "namespace": other}}
        found.append(child)
        if draw(st.integers(0, 2)) == 0:
            found.append(_kueue_workload(draw, child))
    return found


def _kueue_workload(draw: st.DrawFn, child: Mapping[str, Any]) -> dict[str, Any]:
    meta = child["metadata"]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {
            "name": f"job-{draw(dns_labels)}",
            "namespace": meta.get("namespace") or "team-a",
            "uid": draw(uids),
            "ownerReferences": [
                {
                    "apiVersion": child.get("apiVersion"),
                    "kind": child.get("kind"),
                    "name": meta.get("name"),
                    "uid": meta["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": {"queueName": draw(st.sampled_from(["kaiwo", "research"]))},
        "status": {
            "conditions": draw(conditions),
            "admission": draw(
                st.one_of(st.none(), st.fixed_dictionaries({"clusterQueue": dns_labels}))
            ),
        },
    }


namespaces = st.lists(
    st.sampled_from(["team-a", "team-b", "vision", "kube-system"]), unique=True, max_size=4
).map(
    lambda found: [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "uid": f"ns-{name}"}}
        for name in found
    ]
)
others = st.lists(st.sampled_from(OWNER_KINDS).flatmap(lambda model: OWNERS[model]), max_size=2)


def _observations(objects: list[Any]) -> Iterator[ObservedObjectV1]:
    for version, obj in enumerate(objects, start=1):
        try:
            # The API server's answers are JSON: no NaN or infinity reaches the watcher (its
            # decoder refuses numbers out of range, tests/fuzz/kube).
            json.dumps(obj, allow_nan=False)
            meta = obj["metadata"]
            yield ObservedObjectV1(
                kind=obj["kind"],
                api_version=obj["apiVersion"],
                namespace=meta.get("namespace"),
                name=meta["name"],
                uid=meta["uid"],
                resource_version=str(version),
                event_type="ADDED",
                object=obj,
            )
        except (KeyError, TypeError, ValueError, AttributeError):
            continue  # the watcher cannot publish it: it never reaches the planner


def _projection(objects: list[Any]) -> Projection:
    projection = Projection()
    for sequence, observed in enumerate(_observations(objects), start=1):
        try:
            projection.apply(observed, sequence=sequence)
        except (TypeError, ValueError, KeyError, AttributeError):
            continue  # what the planner service dead-letters as poison
    return projection


# -------------------------------------------------------------------- well-formed plans

DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS_1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


def label_problems(labels: Mapping[str, Any]) -> list[str]:
    """What Kubernetes would refuse in a label map (``metadata.labels``, a selector)."""
    problems = []
    for key, value in labels.items():
        prefix, _, name = str(key).rpartition("/")
        if prefix and (len(prefix) > 253 or not DNS_SUBDOMAIN.match(prefix)):
            problems.append(f"label key {key!r}: bad prefix")
        if len(name) > 63 or not LABEL_NAME.match(name):
            problems.append(f"label key {key!r}: bad name")
        if not isinstance(value, str) or len(value) > 63 or not LABEL_VALUE.match(value):
            problems.append(f"label {key!r}: bad value {value!r}")
    return problems


def _label_maps(value: Any) -> Iterator[Mapping[str, Any]]:
    """Every ``labels`` and ``matchLabels`` map inside a manifest (pod templates too)."""
    if isinstance(value, Mapping):
        for key, child in value.items():
            if key in ("labels", "matchLabels") and isinstance(child, Mapping):
                yield child
            else:
                yield from _label_maps(child)
    elif isinstance(value, list):
        for child in value:
            yield from _label_maps(child)


def manifest_problems(manifest: Mapping[str, Any]) -> list[str]:
    meta = manifest.get("metadata") or {}
    name = str(meta.get("name") or "")
    kind = manifest.get("kind")
    problems = []
    if kind == "Service":
        if len(name) > 63 or not DNS_1035_LABEL.match(name):
            problems.append(f"Service name {name!r}")
    elif kind != "Node" and (len(name) > 253 or not DNS_SUBDOMAIN.match(name)):
        problems.append(f"{kind} name {name!r}")
    for labels in _label_maps(manifest):
        problems += label_problems(labels)
    return problems


@st.composite
def cases(draw: st.DrawFn) -> tuple[dict[str, Any], list[Any], list[Any]]:
    """An owner, the cluster around it, and (once planned) the owner's children."""
    model = draw(st.sampled_from(OWNER_KINDS))
    owner = draw(OWNERS[model])
    cluster = [
        *draw(namespaces),
        *draw(st.lists(nodes(), max_size=3)),
        *draw(others),
    ]
    return owner, cluster, [draw(st.data())]


def _plan(owner: dict[str, Any], objects: list[Any]) -> Plan | None:
    cluster = _projection(objects).cluster_state()
    return planning(owner=owner, cluster=cluster, now=NOW).plan


def _check(plan: Plan, owner: dict[str, Any]) -> None:
    body = plan.model_dump(mode="json")
    json.dumps(body, allow_nan=False)
    assert Plan.model_validate(body) == plan
    assert refusals(plan, owner=owner) == ()
    for manifest in (*plan.desired, *plan.shared):
        assert manifest_problems(manifest) == [], manifest
    assert label_problems(plan.prune_selector) == []


@PROFILE
@given(cases())
def test_every_plan_is_confined_and_well_formed(
    case: tuple[dict[str, Any], list[Any], list[Any]],
) -> None:
    owner, cluster, (data,) = case

    first = _plan(owner, cluster)
    if first is None:
        return
    _check(first, owner)
    children = data.draw(children_of(first))
    second = _plan(owner, [*cluster, *children])
    assert second is not None
    _check(second, owner)


def test_the_owners_drawn_are_mostly_valid() -> None:
    """The walk reaches planning proper, not only the invalid-owner report."""
    valid = 0
    examples = 0

    @PROFILE.__class__(PROFILE, max_examples=200)
    @given(
        st.sampled_from(OWNER_KINDS).flatmap(lambda model: st.tuples(st.just(model), OWNERS[model]))
    )
    def count(drawn: tuple[type[BaseModel], dict[str, Any]]) -> None:
        nonlocal valid, examples
        model, owner = drawn
        examples += 1
        try:
            model.model_validate(owner)
        except ValidationError:
            return
        valid += 1

    count()
    assert valid >= examples // 2, (valid, examples)
