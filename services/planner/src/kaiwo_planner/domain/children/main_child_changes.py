"""What of a changed workload can reach its existing RayJob, AppWrapper or Deployment.

(The batch Job's rules are :mod:`kaiwo_planner.domain.children.job_changes`.) Each child has
parts that, once it exists, the cluster refuses to change or turns a change of into a restart.
Applied as desired, such an edit was refused on every plan (``ApplyRefused`` for good, and the
rest of the update lost with it) or silently started a running workload over. So the observed
value is kept, and the paths left out are named for the ``ChildSpecApplied`` condition
(decision 0123):

* a running RayJob keeps its spec: Kueue compares an admitted RayJob's pod sets (its cluster,
  its submitter) with its Workload, and on any difference suspends it, deletes the Workload
  and queues it again, and KubeRay deletes the Ray cluster and starts the job over. Its
  deadline and the time its finished cluster is kept are no part of those pod sets and
  KubeRay reads them on each reconcile, so they follow the spec, taken away too when the spec
  no longer sets them (decision 0133);
* an AppWrapper keeps ``spec.components``: the AppWrapper operator's webhook refuses any
  change to them, suspended or not. One still waiting in its queue (suspended) is replaced
  instead (decision 0129): nothing of it runs yet, and re-created by hand it would lose its
  place in the queue all the same;
* a Deployment with Ready pods keeps Kueue's labels as Kueue's webhook for Deployments lets
  them change (the rules of :func:`~kaiwo_planner.domain.children.job_changes.kueue_label_update`
  with "running" meaning a Ready replica), on the Deployment and, so that Kueue's defaulting
  does not rewrite them on every apply, on its pod template;
* a Deployment whose only change is its ``replicas`` keeps the replica counts in its pods'
  env (``NUM_REPLICAS``, ``NUM_GPUS``) as they were made, so it scales without replacing
  every serving pod (decision 0163).

Pure; the desired manifest is not modified.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kaiwo_contracts.child_spec_fields import RAY_JOB_LIVE_SPEC_FIELDS

from kaiwo_planner.domain.children.job_changes import (
    KUEUE_LABELS_HELD,
    KUEUE_OWNED_SPEC_FIELDS,
    keep_observed_fields,
    kueue_label_update,
    not_applied_message,
    replacing_message,
    waits_in_its_queue,
)
from kaiwo_planner.domain.children.labels import LABEL_PRIORITY_CLASS, LABEL_QUEUE_NAME
from kaiwo_planner.domain.scheduling.gpu_allocation import SPLIT_MADE_FROM_ANNOTATION
from kaiwo_planner.domain.state.manifest_comparison import contains, removed_paths

RAY_JOB_KEEPS_ITS_SPEC = (
    "a running RayJob keeps the spec it started with (changed, Kueue would stop it and queue "
    "it again, and Ray would start the job over): "
)
APP_WRAPPER_COMPONENTS_FIXED = "an AppWrapper's components cannot change after it is created: "


@dataclass(frozen=True, slots=True)
class ChildUpdate:
    """The manifest to apply to an existing main child, and why parts of it were kept.

    ``replace``: the child must go and be made anew from ``manifest`` (the spec as edited):
    left out of the desired children, it is pruned, and created once it is gone.
    """

    manifest: dict[str, Any]
    kind: str
    spec_not_applied: tuple[str, ...] = ()
    spec_reason: str = ""
    labels_not_applied: tuple[str, ...] = ()
    replace: bool = False
    spec_not_applied_told: str = ""
    """``spec_not_applied`` as the message names them, with the configuration each comes
    from (:func:`~kaiwo_planner.domain.children.change_causes.kept_paths_text`); empty: the
    paths as they are."""

    @property
    def applied_whole(self) -> bool:
        return not (self.replace or self.spec_not_applied or self.labels_not_applied)

    @property
    def message(self) -> str:
        if self.replace:
            return replacing_message(
                self.kind, self.spec_not_applied, told=self.spec_not_applied_told
            )
        if self.applied_whole:
            return ""
        reasons = []
        if self.spec_not_applied:
            told = self.spec_not_applied_told or ", ".join(self.spec_not_applied)
            reasons.append(self.spec_reason + told)
        if self.labels_not_applied:
            reasons.append(KUEUE_LABELS_HELD + ", ".join(self.labels_not_applied))
        return not_applied_message(self.kind, reasons, recreate="workload")


def _spec_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def ray_job_update(
    desired: Mapping[str, Any], observed: Mapping[str, Any], *, admitted: bool = False
) -> ChildUpdate:
    """``desired`` as it may be applied to the ``observed`` RayJob, whose Kueue Workload is
    ``admitted`` or not.

    ``suspend`` is Kueue's once the RayJob exists, so it is left out. A RayJob waiting in its
    queue (:func:`waits_in_its_queue`) takes the whole edit: Kueue updates its Workload to
    match. One Kueue let run, or admitted and about to run, keeps every spec field it has
    but those KubeRay reads as they are (``RAY_JOB_LIVE_SPEC_FIELDS``): those are applied.
    """
    spec = {k: v for k, v in _spec_of(desired).items() if k not in KUEUE_OWNED_SPEC_FIELDS}
    observed_spec = _spec_of(observed)
    waiting = waits_in_its_queue(observed, admitted=admitted)
    not_applied: list[str] = []
    if not waiting:
        kept = sorted(name for name in spec if name not in RAY_JOB_LIVE_SPEC_FIELDS)
        not_applied = keep_observed_fields(spec, observed_spec, kept)
    manifest, labels_kept = kueue_label_update(
        {**desired, "spec": spec}, observed, running=not waiting
    )
    if not waiting:  # its cluster is kept as observed, changed or not
        manifest = _split_mark_as_observed(manifest, observed)
    return ChildUpdate(
        manifest=manifest,
        kind="RayJob",
        spec_not_applied=tuple(not_applied),
        spec_reason=RAY_JOB_KEEPS_ITS_SPEC,
        labels_not_applied=labels_kept,
    )


def app_wrapper_update(
    desired: Mapping[str, Any], observed: Mapping[str, Any], *, admitted: bool = False
) -> ChildUpdate:
    """``desired`` as it may be applied to the ``observed`` AppWrapper (its Kueue Workload
    ``admitted`` or not): its components as they were created, Kueue's labels as Kueue
    allows; or, when it still waits in its queue and its components changed, replaced by
    ``desired``."""
    spec = dict(_spec_of(desired))
    observed_spec = _spec_of(observed)
    not_applied = keep_observed_fields(spec, observed_spec, ("components",))
    waiting = waits_in_its_queue(observed, admitted=admitted)
    if not_applied and waiting:
        return ChildUpdate(
            manifest=dict(desired),
            kind="AppWrapper",
            spec_not_applied=tuple(not_applied),
            replace=True,
        )
    manifest, labels_kept = kueue_label_update(
        {**desired, "spec": spec}, observed, running=not waiting
    )
    manifest = _split_mark_as_observed(manifest, observed)  # its components are kept
    return ChildUpdate(
        manifest=manifest,
        kind="AppWrapper",
        spec_not_applied=tuple(not_applied),
        spec_reason=APP_WRAPPER_COMPONENTS_FIXED,
        labels_not_applied=labels_kept,
    )


def _split_mark_as_observed(
    manifest: dict[str, Any], observed: Mapping[str, Any]
) -> dict[str, Any]:
    """``manifest`` with the ``spec.gpus`` its GPUs were split from as the ``observed`` child
    says: the worker groups are kept as they are, so is what they were split from; marked
    from the edited spec, the kept split would pass for one of the new ``spec.gpus``, and
    the edit that is not applied would be told as applied (decision 0137)."""
    meta = observed.get("metadata")
    given = meta.get("annotations") if isinstance(meta, Mapping) else None
    mark = given.get(SPLIT_MADE_FROM_ANNOTATION) if isinstance(given, Mapping) else None
    metadata = dict(manifest.get("metadata") or {})
    annotations = {
        k: v
        for k, v in (metadata.get("annotations") or {}).items()
        if k != SPLIT_MADE_FROM_ANNOTATION
    }
    if isinstance(mark, str):
        annotations[SPLIT_MADE_FROM_ANNOTATION] = mark
    if annotations:
        metadata["annotations"] = annotations
    else:
        metadata.pop("annotations", None)
    return {**manifest, "metadata": metadata}


def deployment_update(desired: dict[str, Any], observed: Mapping[str, Any]) -> ChildUpdate:
    """``desired`` as it may be applied to the ``observed`` Deployment.

    Kueue's webhook for Deployments counts one as admitted (its queue fixed, no priority class
    to be added) once it has a Ready replica (``status.readyReplicas``), and refuses the
    removal of a priority class always. The labels Kueue's rules keep are kept on the pod
    template too: Kueue's defaulting copies the Deployment's onto it anyway.
    """
    status = observed.get("status")
    ready = status.get("readyReplicas") if isinstance(status, Mapping) else None
    running = isinstance(ready, int) and ready > 0
    manifest, labels_kept = kueue_label_update(desired, observed, running=running)
    if labels_kept:
        manifest = _template_with_kueue_labels_of(manifest)
    manifest = _replica_counts_as_observed(manifest, observed)
    return ChildUpdate(manifest=manifest, kind="Deployment", labels_not_applied=labels_kept)


REPLICA_COUNT_ENV = frozenset({"NUM_REPLICAS", "NUM_GPUS"})
"""The variables of a pod that count every replica: the only part of a Deployment's pod
template an edit of ``replicas`` alone changes."""


def _replica_counts_as_observed(
    deployment: dict[str, Any], observed: Mapping[str, Any]
) -> dict[str, Any]:
    """``deployment`` scaled without a rollout (decision 0163): when its pod template differs
    from the ``observed`` one only in :data:`REPLICA_COUNT_ENV`, those keep the values the
    running pods were made with. Applied, they changed the template, and the Deployment
    controller replaced every serving pod to scale it, whose new pods wait for the quota the
    old ones hold. Any other change rolls the pods anyway, and they get the new counts."""
    wanted = _spec_of(deployment).get("template")
    seen = _spec_of(observed).get("template")
    if not isinstance(wanted, Mapping) or not isinstance(seen, Mapping):
        return deployment
    kept = _with_counts_of(wanted, seen)
    if kept == wanted or not contains(seen, kept) or removed_paths(seen, kept, path="template"):
        return deployment
    return {**deployment, "spec": {**_spec_of(deployment), "template": kept}}


def _with_counts_of(template: Mapping[str, Any], seen: Mapping[str, Any]) -> dict[str, Any]:
    """``template`` with each container's :data:`REPLICA_COUNT_ENV` values as the container
    of the same name in ``seen`` has them."""
    seen_values = {
        (container.get("name"), var.get("name")): var.get("value")
        for container in _spec_of(seen).get("containers") or ()
        if isinstance(container, Mapping)
        for var in container.get("env") or ()
        if isinstance(var, Mapping) and var.get("name") in REPLICA_COUNT_ENV
    }
    containers = []
    for container in _spec_of(template).get("containers") or ():
        env = [
            {**var, "value": seen_values[(container.get("name"), var.get("name"))]}
            if (container.get("name"), var.get("name")) in seen_values
            else var
            for var in container.get("env") or ()
        ]
        containers.append({**container, "env": env} if "env" in container else container)
    return {**template, "spec": {**_spec_of(template), "containers": containers}}


def _template_with_kueue_labels_of(deployment: dict[str, Any]) -> dict[str, Any]:
    labels = deployment["metadata"].get("labels") or {}
    spec = dict(deployment["spec"])
    template = dict(spec.get("template") or {})
    metadata = dict(template.get("metadata") or {})
    template_labels = dict(metadata.get("labels") or {})
    for key in (LABEL_QUEUE_NAME, LABEL_PRIORITY_CLASS):
        if key in labels:
            template_labels[key] = labels[key]
        else:
            template_labels.pop(key, None)
    spec["template"] = {**template, "metadata": {**metadata, "labels": template_labels}}
    return {**deployment, "spec": spec}
