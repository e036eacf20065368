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
  every serving pod (decision 0163);
* a Deployment keeps its ``spec.selector``: apps/v1 refuses any change of it ("field is
  immutable"), and the pods' labels it reads keep their observed values where the edited pod
  template would no longer match it, which the API server refuses too (decision 0216).

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
from kaiwo_planner.domain.state.json_trees import copy_tree
from kaiwo_planner.domain.state.manifest_comparison import contains, removed_paths

RAY_JOB_KEEPS_ITS_SPEC = (
    "a running RayJob keeps the spec it started with (changed, Kueue would stop it and queue "
    "it again, and Ray would start the job over): "
)
APP_WRAPPER_COMPONENTS_FIXED = "an AppWrapper's components cannot change after it is created: "
DEPLOYMENT_SELECTOR_FIXED = (
    "a Deployment's selector cannot change after it is created, and its pods' labels must "
    "match it (deleted, the Deployment is made again from the spec as it is now): "
)


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
    template too: Kueue's defaulting copies the Deployment's onto it anyway. Its selector is
    kept as observed, and the template's labels match it (:func:`_selector_as_observed`).
    """
    status = observed.get("status")
    ready = status.get("readyReplicas") if isinstance(status, Mapping) else None
    running = isinstance(ready, int) and ready > 0
    manifest, labels_kept = kueue_label_update(desired, observed, running=running)
    if labels_kept:
        manifest = _template_with_kueue_labels_of(manifest)
    manifest, spec_kept = _selector_as_observed(manifest, observed)
    manifest = _replica_counts_as_observed(manifest, observed)
    return ChildUpdate(
        manifest=manifest,
        kind="Deployment",
        spec_not_applied=spec_kept,
        spec_reason=DEPLOYMENT_SELECTOR_FIXED,
        labels_not_applied=labels_kept,
    )


def _selector_as_observed(
    deployment: dict[str, Any], observed: Mapping[str, Any]
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """``deployment`` with the ``observed`` Deployment's ``spec.selector``, and its pod
    template's labels matching it, and the paths so kept (decision 0216).

    apps/v1 refuses any change of a Deployment's selector, and a pod template whose labels
    the selector does not match: applied as desired, an edit of ``spec.deployment.spec.
    selector`` (or a return to the default template from one of the user's) was refused on
    every plan, and every later edit of the Deployment with it. So the observed selector is
    kept; where the edited template's labels would not match it, the labels it reads take
    their observed values (those matched it, or the Deployment would not exist). A selector
    as observed, and a template that matches it, leave ``deployment`` itself (its bytes):
    nothing is written for a settled service. No selector observed: nothing to keep."""
    held = _spec_of(observed).get("selector")
    spec = _spec_of(deployment)
    if not isinstance(held, Mapping) or not held:
        return deployment, ()
    kept = list(_selector_changes(held, spec.get("selector")))
    template = spec.get("template")
    template = template if isinstance(template, Mapping) else {}
    labels = _labels_of(template)
    matched = labels
    if not _selects(held, labels):
        seen = _labels_of(_spec_of(observed).get("template"))
        matched = dict(labels)
        for key in sorted(_selector_keys(held)):
            if key in seen:
                matched[key] = seen[key]
            else:
                matched.pop(key, None)
        if not _selects(held, matched):  # an observation that does not match itself
            match_labels = held.get("matchLabels")
            if isinstance(match_labels, Mapping):
                matched.update({str(k): str(v) for k, v in match_labels.items()})
        kept += [
            f"spec.template.metadata.labels[{key}]"
            for key in sorted(set(labels) | set(matched))
            if labels.get(key) != matched.get(key)
        ]
    if not kept:
        return deployment, ()
    new_spec = {**spec, "selector": copy_tree(dict(held))}
    if matched is not labels:
        metadata = template.get("metadata")
        metadata = metadata if isinstance(metadata, Mapping) else {}
        new_spec["template"] = {**template, "metadata": {**metadata, "labels": matched}}
    return {**deployment, "spec": new_spec}, tuple(kept)


def _selector_changes(held: Mapping[str, Any], wanted: Any) -> list[str]:
    """The paths where the selector ``wanted`` differs from the ``held`` one, each label
    of ``matchLabels`` named (``spec.selector.matchLabels[tier]``); none when both select
    alike. Compared as written (``contains`` would take label values "1" and "1.0" for one
    quantity), but for the empty maps and lists the API server leaves out."""
    had, asked = _written(held), _written(wanted)
    paths: list[str] = []
    for name in sorted(set(had) | set(asked)):
        was, now = had.get(name), asked.get(name)
        if was == now:
            continue
        if name == "matchLabels" and isinstance(was or {}, dict) and isinstance(now or {}, dict):
            was, now = was or {}, now or {}
            paths += [
                f"spec.selector.matchLabels[{key}]"
                for key in sorted(set(was) | set(now))
                if was.get(key) != now.get(key)
            ]
        else:
            paths.append(f"spec.selector.{name}")
    return paths


def _written(selector: Any) -> dict[str, Any]:
    """``selector`` as the API server stores it: label values as text, and no field (of the
    selector or of a requirement) that holds nothing."""
    if not isinstance(selector, Mapping):
        return {}
    written: dict[str, Any] = {}
    for name, given in selector.items():
        value = given
        if name == "matchLabels" and isinstance(value, Mapping):
            value = {str(k): str(v) for k, v in given.items()}
        elif name == "matchExpressions" and isinstance(value, list):
            value = [
                {k: v for k, v in item.items() if v not in (None, "", [])}
                if isinstance(item, Mapping)
                else item
                for item in given
            ]
        if value in (None, "", [], {}):
            continue
        written[str(name)] = value
    return written


def _labels_of(template: Any) -> dict[str, Any]:
    metadata = template.get("metadata") if isinstance(template, Mapping) else None
    labels = metadata.get("labels") if isinstance(metadata, Mapping) else None
    return dict(labels) if isinstance(labels, Mapping) else {}


def _selector_keys(selector: Mapping[str, Any]) -> set[str]:
    """The label keys ``selector`` reads."""
    match_labels = selector.get("matchLabels")
    keys = {str(k) for k in match_labels} if isinstance(match_labels, Mapping) else set()
    for requirement in selector.get("matchExpressions") or ():
        if isinstance(requirement, Mapping) and isinstance(requirement.get("key"), str):
            keys.add(requirement["key"])
    return keys


def _selects(selector: Mapping[str, Any], labels: Mapping[str, Any]) -> bool:
    """Whether the label selector ``selector`` (``matchLabels`` and ``matchExpressions``, as
    apimachinery's ``LabelSelectorAsSelector`` reads them) matches ``labels``."""
    match_labels = selector.get("matchLabels")
    if isinstance(match_labels, Mapping):
        for key, value in match_labels.items():
            if key not in labels or str(labels[key]) != str(value):
                return False
    for requirement in selector.get("matchExpressions") or ():
        key = requirement.get("key") if isinstance(requirement, Mapping) else None
        if not isinstance(key, str):
            return False
        operator = requirement.get("operator")
        values = {str(v) for v in requirement.get("values") or ()}
        has = key in labels
        value = str(labels[key]) if has else None
        if operator == "In":
            ok = has and value in values
        elif operator == "NotIn":
            ok = not has or value not in values
        elif operator == "Exists":
            ok = has
        elif operator == "DoesNotExist":
            ok = not has
        else:  # no other operator is valid: the API server refuses such a selector
            ok = False
        if not ok:
            return False
    return True


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
