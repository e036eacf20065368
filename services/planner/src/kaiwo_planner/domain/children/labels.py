"""The labels and annotations Kaiwo puts on children and pod templates."""

from __future__ import annotations

from collections.abc import Mapping

from kaiwo_planner.domain.children.naming import bounded_label
from kaiwo_planner.domain.state.workload_identity import WorkloadIdentity

LABEL_USER = "kaiwo.silogen.ai/user"
LABEL_NAME = "kaiwo.silogen.ai/name"
LABEL_TYPE = "kaiwo.silogen.ai/type"
LABEL_RUN_ID = "kaiwo.silogen.ai/run-id"
LABEL_MANAGED = "kaiwo.silogen.ai/managed"
LABEL_QUEUE_NAME = "kueue.x-k8s.io/queue-name"
LABEL_PRIORITY_CLASS = "kueue.x-k8s.io/priority-class"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_OWNER_UID = "kaiwo.silogen.ai/owner-uid"
LABEL_APP = "app"

MANAGED_BY_KAIWO = "kaiwo"
DOWNLOADER_TYPE = "downloader"

ANNOTATION_REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
ANNOTATION_PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"


def inventory_labels(owner_uid: str) -> dict[str, str]:
    """The labels that find every child of one owner again (the prune selector)."""
    return {LABEL_MANAGED_BY: MANAGED_BY_KAIWO, LABEL_OWNER_UID: owner_uid}


def system_labels(identity: WorkloadIdentity) -> dict[str, str]:
    """``kaiwo.silogen.ai/*`` labels; they win over user labels of the same key."""
    labels = {
        LABEL_USER: bounded_label(identity.user, keep_valid=False),
        LABEL_NAME: bounded_label(identity.name),
        LABEL_TYPE: identity.workload_type,
        LABEL_RUN_ID: identity.uid,
    }
    managed = identity.labels.get(LABEL_MANAGED, "")
    if managed:
        labels[LABEL_MANAGED] = managed
    return labels


def inherited_labels(existing: Mapping[str, str], identity: WorkloadIdentity) -> dict[str, str]:
    """``existing`` plus the workload's own labels (never its queue label) plus system labels.

    The workload's labels only fill keys ``existing`` lacks; system labels always win.
    """
    merged = dict(existing)
    for key, value in identity.labels.items():
        if key != LABEL_QUEUE_NAME:
            merged.setdefault(key, value)
    merged.update(system_labels(identity))
    return merged


def queue_labels(queue_name: str, priority_class: str | None) -> dict[str, str]:
    """The Kueue labels: the LocalQueue to submit to and, when set, the priority class."""
    labels = {LABEL_QUEUE_NAME: queue_name}
    if priority_class:
        labels[LABEL_PRIORITY_CLASS] = priority_class
    return labels


def topology_annotations(
    *, required_topology: str | None, preferred_topology: str | None
) -> dict[str, str]:
    """Kueue topology-aware scheduling annotation; a required level wins over a preferred."""
    if required_topology:
        return {ANNOTATION_REQUIRED_TOPOLOGY: required_topology}
    if preferred_topology:
        return {ANNOTATION_PREFERRED_TOPOLOGY: preferred_topology}
    return {}
