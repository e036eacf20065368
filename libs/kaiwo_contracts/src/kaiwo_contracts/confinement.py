"""What a plan may touch: the confinement the executor checks before it carries a plan out.

The bus is authenticated and only the planner may publish plans (decision 0012); this is the
second line. A plan is carried out only when everything it writes or prunes belongs to its
owner:

* the owner is one of the kinds that own children (:data:`CONFINEMENTS`), and exists with the
  plan's uid; or the plan creates a missing cluster singleton (``createOnly``) and nothing
  else;
* every desired object is of a kind that owner may produce, in the owner's namespace (the
  KaiwoQueueConfig, cluster-scoped, owns cluster-scoped Kueue objects, LocalQueues in any
  namespace and node labels), and names the owner as its controller;
* a Node intent carries nothing but Kaiwo's own labels (``kaiwo/…``) and Kaiwo's GPU taint;
* prune rules name only those kinds, with a selector that asks for the owner's own
  inventory label;
* explicit deletions (``Plan.delete``) name objects of those kinds, with a uid, in the
  owner's namespace (the executor also checks each one carries the owner's inventory labels
  before it deletes it); finalizers released (``Plan.release_finalizers``) are the owner
  kind's releasable ones, from objects the plan deletes;
* shared objects (``Plan.shared``, a Model cache's PVC) are of the kinds the owner may
  share, in its namespace, managed by Kaiwo and controlled by nobody;
* the finalizers a plan sets are the owner kind's own (``kubeai.org/cache-eviction``), and
  so are the owner labels (``features.kubeai.org/…`` on a Model);
* a plan scales (``Plan.scale``) only its owner, and only an owner of a kind with a scale
  the operator manages (a Model: its autoscaler), that has not switched autoscaling off, and
  no higher than the owner's ``maxReplicas`` (as the API server holds the owner);
* a Model's Role grants only ``get``/``patch`` of named Pods (its adapter loaders report
  what they loaded on their own Pod) and its RoleBinding binds only that Role to service
  accounts of its namespace;
* no plan deletes its owner, but a GpuWorkload's, once its workload is gone and its TTL
  has passed; a KaiwoQueueConfig not named ``kaiwo`` gets only its status;
* a plan preempts (``Plan.preempt``) only as a GpuWorkload's plan, only the workload that
  GpuWorkload's spec names (its root object, by uid, in its namespace), only in the way
  preemption works for that kind (``kaiwo_contracts.gpu_workloads``: delete a Pod, Job, RayJob
  or RayCluster, scale a Deployment or StatefulSet to zero), and only when the workload or its
  Namespace carries the GPU-preemption opt-in annotations as the API server holds them now
  (decision 0047): nothing that did not opt in is ever preempted, whatever a plan says;
* a plan creating a GpuWorkload (``createOnly``) creates that one object, named after the
  opted-in root it names, and nothing else.

Pure: the caller supplies the owner as observed, the GPU taint key in force, and for a plan
that preempts or creates a GpuWorkload the workload and its Namespace as the API server holds
them (:class:`PreemptionTarget`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from kaiwo_contracts.gpu_preemption import opted_in
from kaiwo_contracts.gpu_workloads import gpu_workload_name, preempt_action
from kaiwo_contracts.plans import ObjectRef, Plan, ScaleIntent

KAIWO_API: Final = "kaiwo.silogen.ai/v1alpha1"
KUBEAI_API: Final = "kubeai.org/v1"
RBAC_API: Final = "rbac.authorization.k8s.io/v1"
CACHE_EVICTION_FINALIZER: Final = "kubeai.org/cache-eviction"
MODEL_FEATURE_LABEL_PREFIX: Final = "features.kubeai.org/"
"""A Model carries ``features.kubeai.org/<feature>: "true"`` for each of its
``spec.features`` (upstream's contract: ``kubectl get models -l ...`` finds them)."""
CONFIG_API: Final = "config.kaiwo.silogen.ai/v1alpha1"
KUEUE_API: Final = "kueue.x-k8s.io/v1beta1"
MANAGED_BY_LABEL: Final = "app.kubernetes.io/managed-by"
OWNER_UID_LABEL: Final = "kaiwo.silogen.ai/owner-uid"
QUEUE_CONFIG_LABEL: Final = "kaiwo.silogen.ai/queue-config"
SINGLETON: Final = "kaiwo"
KAIWO_NODE_LABEL_PREFIX: Final = "kaiwo/"
DEFAULT_GPU_TAINT_KEY: Final = "kaiwo.silogen.ai/gpu"

Kind = tuple[str, str]
"""(apiVersion, kind)."""

KUEUE_RESOURCE_IN_USE_FINALIZER: Final = "kueue.x-k8s.io/resource-in-use"
"""Kueue's finalizer on its objects while something refers to them (decision 0048)."""

WORKLOAD_CHILDREN: Final[frozenset[Kind]] = frozenset(
    {
        ("batch/v1", "Job"),
        ("apps/v1", "Deployment"),
        ("v1", "ConfigMap"),
        ("v1", "PersistentVolumeClaim"),
        ("v1", "Service"),
        ("ray.io/v1", "RayJob"),
        # A RayService goes inside the AppWrapper that Kueue admits, never on its own.
        ("workload.codeflare.dev/v1beta2", "AppWrapper"),
        ("gateway.networking.k8s.io/v1", "HTTPRoute"),
    }
)
KUEUE_CLUSTER_KINDS: Final[frozenset[Kind]] = frozenset(
    {
        (KUEUE_API, "ClusterQueue"),
        (KUEUE_API, "ResourceFlavor"),
        (KUEUE_API, "WorkloadPriorityClass"),
        (KUEUE_API, "Topology"),
    }
)
LOCAL_QUEUE: Final[Kind] = (KUEUE_API, "LocalQueue")
NODE: Final[Kind] = ("v1", "Node")
POD: Final[Kind] = ("v1", "Pod")
PVC: Final[Kind] = ("v1", "PersistentVolumeClaim")
ROLE: Final[Kind] = (RBAC_API, "Role")
ROLE_BINDING: Final[Kind] = (RBAC_API, "RoleBinding")
MODEL_CHILDREN: Final[frozenset[Kind]] = frozenset(
    {
        POD,
        ("v1", "ConfigMap"),
        ("batch/v1", "Job"),
        ROLE,
        ROLE_BINDING,
    }
)
ROLE_VERBS: Final = frozenset({"get", "patch"})
GPU_WORKLOAD: Final[Kind] = (KAIWO_API, "GpuWorkload")


@dataclass(frozen=True, slots=True)
class PreemptionTarget:
    """The workload a GpuWorkload names and its Namespace, as the API server holds them now
    (None: not found)."""

    workload: Mapping[str, Any] | None
    namespace: Mapping[str, Any] | None


@dataclass(frozen=True, slots=True)
class Confinement:
    """What plans of one owner kind may write."""

    children: frozenset[Kind]
    namespaced: bool
    """The owner is namespaced, and so must every namespaced child be, in its namespace."""
    may_delete_itself: bool = False
    shared: frozenset[Kind] = frozenset()
    """Kinds the owner may create for others to use as well (``Plan.shared``)."""
    finalizers: frozenset[str] = frozenset()
    """The operator's finalizers on owners of this kind (``Plan.finalizers``)."""
    scalable: bool = False
    """Plans may set the owner's replicas through its scale subresource (``Plan.scale``)."""
    label_prefixes: tuple[str, ...] = ()
    """Label key prefixes the operator owns on owners of this kind (``Plan.owner_labels``)."""
    releasable_finalizers: frozenset[str] = frozenset()
    """Other controllers' finalizers a plan may take off children it deletes."""
    preempts: bool = False
    """Plans may preempt the workload the owner's spec names (``Plan.preempt``)."""

    def owns_label(self, key: str) -> bool:
        return key.startswith(self.label_prefixes) if self.label_prefixes else False


CONFINEMENTS: Final[Mapping[Kind, Confinement]] = {
    # No plan deletes its owner (a workload past its duration is TERMINATED, its children
    # removed, as upstream), and the executor's role cannot delete workloads.
    (KAIWO_API, "KaiwoJob"): Confinement(children=WORKLOAD_CHILDREN, namespaced=True),
    (KAIWO_API, "KaiwoService"): Confinement(children=WORKLOAD_CHILDREN, namespaced=True),
    (KAIWO_API, "KaiwoQueueConfig"): Confinement(
        children=KUEUE_CLUSTER_KINDS | {LOCAL_QUEUE, NODE},
        namespaced=False,
        releasable_finalizers=frozenset({KUEUE_RESOURCE_IN_USE_FINALIZER}),
    ),
    (KUBEAI_API, "Model"): Confinement(
        children=MODEL_CHILDREN,
        namespaced=True,
        shared=frozenset({PVC}),
        finalizers=frozenset({CACHE_EVICTION_FINALIZER}),
        scalable=True,
        label_prefixes=(MODEL_FEATURE_LABEL_PREFIX,),
    ),
    # The record of a GPU workload no Kaiwo kind owns: its status, the preemption of the
    # workload it names, and its own deletion once that workload is gone (its TTL).
    GPU_WORKLOAD: Confinement(
        children=frozenset(), namespaced=True, may_delete_itself=True, preempts=True
    ),
}
SINGLETON_KINDS: Final[frozenset[Kind]] = frozenset(
    {(KAIWO_API, "KaiwoQueueConfig"), (CONFIG_API, "KaiwoConfig")}
)


def refusals(
    plan: Plan,
    *,
    owner: Mapping[str, Any] | None,
    gpu_taint_key: str = DEFAULT_GPU_TAINT_KEY,
    target: PreemptionTarget | None = None,
) -> tuple[str, ...]:
    """Why ``plan`` must not be carried out (empty: it may). ``owner`` is the owner as the
    API server holds it now (None: it does not exist); ``target``, for a plan that preempts
    or creates a GpuWorkload, the workload it names (:func:`preemption_target_ref`)."""
    if plan.create_only and (plan.owner.api_version, plan.owner.kind) == GPU_WORKLOAD:
        return _gpu_workload_creation_refusals(plan, target=target)
    if plan.create_only:
        return _singleton_refusals(plan)
    ref = plan.owner
    confinement = CONFINEMENTS.get((ref.api_version, ref.kind))
    if confinement is None:
        return (f"a {ref.kind} owns no children",)
    found = _owner_refusals(ref, owner, confinement=confinement)
    if found:
        return found
    if not confinement.namespaced and ref.name != SINGLETON and (plan.desired or plan.prune):
        # Another KaiwoQueueConfig only gets the status that says it is not acted on.
        return (f"only the {SINGLETON!r} {ref.kind} owns children",)
    reasons: list[str] = []
    for manifest in plan.desired:
        reasons += _object_refusals(manifest, ref, confinement=confinement)
        kind = (manifest.get("apiVersion"), manifest.get("kind"))
        if kind == NODE:
            reasons += _node_refusals(manifest, gpu_taint_key=gpu_taint_key)
        elif kind == ROLE:
            reasons += _role_refusals(manifest)
        elif kind == ROLE_BINDING:
            reasons += _role_binding_refusals(manifest, ref, plan=plan)
    reasons += _prune_refusals(plan, confinement=confinement)
    reasons += _deletion_refusals(plan, confinement=confinement)
    reasons += _release_refusals(plan, confinement=confinement)
    reasons += _shared_refusals(plan, confinement=confinement)
    reasons += _scale_refusals(plan, confinement=confinement, owner=owner)
    reasons += _preempt_refusals(plan, owner, confinement=confinement, target=target)
    reasons += _owner_change_refusals(plan, confinement=confinement)
    return tuple(reasons)


def _owner_change_refusals(plan: Plan, *, confinement: Confinement) -> list[str]:
    """What a plan changes of its owner itself: finalizers, labels, its deletion."""
    kind = plan.owner.kind
    reasons = []
    if plan.finalizers is not None:
        foreign = sorted(set(plan.finalizers) - confinement.finalizers)
        if foreign:
            reasons.append(f"finalizers a {kind} may not set: {', '.join(foreign)}")
    foreign_labels = sorted(k for k in plan.owner_labels or {} if not confinement.owns_label(k))
    if foreign_labels:
        reasons.append(f"labels a {kind} may not set: {', '.join(foreign_labels)}")
    if plan.delete_owner and not confinement.may_delete_itself:
        reasons.append(f"a {kind} may not be deleted by a plan")
    return reasons


def preemption_target_ref(plan: Plan) -> ObjectRef | None:
    """The workload whose live state admission needs for ``plan``: the one it preempts, or
    the one a GpuWorkload it creates names; None for every other plan."""
    if plan.preempt is not None:
        return plan.preempt.target
    if plan.create_only and (plan.owner.api_version, plan.owner.kind) == GPU_WORKLOAD:
        for manifest in plan.desired:
            reference = ((manifest.get("spec") or {}).get("workloadRef")) or {}
            if isinstance(reference, Mapping):
                return ObjectRef(
                    api_version=str(reference.get("apiVersion") or ""),
                    kind=str(reference.get("kind") or ""),
                    name=str(reference.get("name") or ""),
                    namespace=(manifest.get("metadata") or {}).get("namespace"),
                    uid=str(reference.get("uid") or "") or None,
                )
    return None


def inventory_selector(owner: ObjectRef) -> dict[str, str]:
    """The labels that mark the owner's children: a prune selector must ask for them (and
    may ask for more, which only narrows it)."""
    if owner.kind == "KaiwoQueueConfig":
        return {QUEUE_CONFIG_LABEL: owner.name}
    return {OWNER_UID_LABEL: owner.uid or ""}


def _singleton_refusals(plan: Plan) -> tuple[str, ...]:
    ref = plan.owner
    manifests = [
        (m.get("apiVersion"), m.get("kind"), (m.get("metadata") or {}).get("name"))
        for m in plan.desired
    ]
    wanted = [(ref.api_version, ref.kind, ref.name)]
    if (ref.api_version, ref.kind) not in SINGLETON_KINDS or ref.name != SINGLETON:
        return (f"only the {SINGLETON!r} KaiwoConfig and KaiwoQueueConfig are created by a plan",)
    extra = (
        plan.prune
        or plan.delete
        or plan.shared
        or plan.finalizers is not None
        or plan.scale is not None
        or plan.owner_labels is not None
        or plan.release_finalizers
    )
    if manifests != wanted or extra or plan.delete_owner or plan.status is not None:
        return (f"a plan creating {ref.display()} may create that object and nothing else",)
    return ()


def _owner_refusals(
    ref: ObjectRef, owner: Mapping[str, Any] | None, *, confinement: Confinement
) -> tuple[str, ...]:
    if owner is None:
        return (f"the owner {ref.display()} does not exist",)
    uid = (owner.get("metadata") or {}).get("uid")
    if not ref.uid or uid != ref.uid:
        return (f"the owner {ref.display()} has uid {uid}, not the plan's {ref.uid}",)
    if confinement.namespaced != bool(ref.namespace):
        return (f"the owner {ref.display()} is in the wrong scope",)
    return ()


def _object_refusals(
    manifest: Mapping[str, Any], owner: ObjectRef, *, confinement: Confinement
) -> list[str]:
    kind: Kind = (str(manifest.get("apiVersion", "")), str(manifest.get("kind", "")))
    metadata = manifest.get("metadata") or {}
    what = f"{kind[1]} {metadata.get('namespace', '')}/{metadata.get('name', '')}".replace(
        " /", " "
    )
    if kind not in confinement.children:
        return [f"{what}: a {owner.kind} may not write a {kind[1]} of {kind[0]}"]
    if confinement.namespaced and metadata.get("namespace") != owner.namespace:
        return [f"{what}: outside the owner's namespace {owner.namespace}"]
    if kind == NODE:
        return []  # a node intent names no owner: it is checked field by field
    if not confinement.namespaced and kind != LOCAL_QUEUE and metadata.get("namespace"):
        return [f"{what}: a cluster-scoped kind with a namespace"]
    if not _controlled_by(metadata, owner):
        return [f"{what}: does not name {owner.display()} as its controller"]
    return []


def _controlled_by(metadata: Mapping[str, Any], owner: ObjectRef) -> bool:
    return any(
        isinstance(reference, Mapping)
        and reference.get("uid") == owner.uid
        and reference.get("kind") == owner.kind
        and reference.get("controller") is True
        for reference in metadata.get("ownerReferences") or ()
    )


def _node_refusals(manifest: Mapping[str, Any], *, gpu_taint_key: str) -> list[str]:
    metadata = manifest.get("metadata") or {}
    name = metadata.get("name", "")
    reasons = []
    extra_top = set(manifest) - {"apiVersion", "kind", "metadata", "spec"}
    extra_meta = set(metadata) - {"name", "labels"}
    extra_spec = set(manifest.get("spec") or {}) - {"taints"}
    if extra_top or extra_meta or extra_spec:
        fields = sorted(
            extra_top | {f"metadata.{f}" for f in extra_meta} | {f"spec.{f}" for f in extra_spec}
        )
        reasons.append(
            f"Node {name}: may set only Kaiwo's labels and taint, not {', '.join(fields)}"
        )
    foreign = sorted(
        k for k in metadata.get("labels") or {} if not k.startswith(KAIWO_NODE_LABEL_PREFIX)
    )
    if foreign:
        reasons.append(f"Node {name}: labels that are not Kaiwo's: {', '.join(foreign)}")
    ours = (gpu_taint_key, "NoSchedule")
    taints = (manifest.get("spec") or {}).get("taints") or ()
    reasons.extend(
        f"Node {name}: a taint that is not Kaiwo's {gpu_taint_key}:NoSchedule"
        for taint in taints
        if not isinstance(taint, Mapping) or (taint.get("key"), taint.get("effect")) != ours
    )
    return reasons


def _prune_refusals(plan: Plan, *, confinement: Confinement) -> list[str]:
    reasons = [
        f"prune of {rule.kind} of {rule.api_version}: not a kind the owner writes"
        for rule in plan.prune
        if (rule.api_version, rule.kind) not in confinement.children
        or (rule.api_version, rule.kind) == NODE
    ]
    required = inventory_selector(plan.owner)
    if plan.prune and not required.items() <= plan.prune_selector.items():
        reasons.append(
            f"prune selector {plan.prune_selector} does not ask for the owner's own {required}"
        )
    return reasons


def _what(manifest: Mapping[str, Any]) -> str:
    metadata = manifest.get("metadata") or {}
    return f"{manifest.get('kind', '')} {metadata.get('namespace', '')}/{metadata.get('name', '')}"


def _deletion_refusals(plan: Plan, *, confinement: Confinement) -> list[str]:
    reasons = []
    for target in plan.delete:
        what = f"deletion of {target.display()}"
        if (target.api_version, target.kind) not in confinement.children or (
            target.api_version,
            target.kind,
        ) == NODE:
            reasons.append(f"{what}: not a kind the owner writes")
        elif confinement.namespaced and target.namespace != plan.owner.namespace:
            reasons.append(f"{what}: outside the owner's namespace {plan.owner.namespace}")
        elif not target.uid:
            reasons.append(f"{what}: names no uid")
    return reasons


def _release_refusals(plan: Plan, *, confinement: Confinement) -> list[str]:
    deleted = {(t.api_version, t.kind, t.namespace, t.name, t.uid) for t in plan.delete}
    reasons = []
    for release in plan.release_finalizers:
        target = release.target
        what = f"finalizers of {target.display()}"
        if (target.api_version, target.kind, target.namespace, target.name, target.uid) not in (
            deleted
        ):
            reasons.append(f"{what}: not an object the plan deletes")
        foreign = sorted(set(release.finalizers) - confinement.releasable_finalizers)
        if foreign:
            reasons.append(f"{what}: may not release {', '.join(foreign)}")
    return reasons


def _scale_refusals(
    plan: Plan, *, confinement: Confinement, owner: Mapping[str, Any] | None
) -> list[str]:
    if plan.scale is None:
        return []
    wrong_target = _scale_target_refusals(plan, plan.scale, confinement=confinement)
    if wrong_target:
        return wrong_target
    live = (owner or {}).get("spec")
    live = live if isinstance(live, Mapping) else {}
    if live.get("autoscalingDisabled") is True:
        return [f"a {plan.owner.kind} with autoscalingDisabled is scaled by its users only"]
    maximum = live.get("maxReplicas")
    if isinstance(maximum, int) and plan.scale.replicas > maximum:
        return [f"scale to {plan.scale.replicas} replicas: above the owner's maxReplicas {maximum}"]
    return []


def _scale_target_refusals(
    plan: Plan, scale: ScaleIntent, *, confinement: Confinement
) -> list[str]:
    owner, target = plan.owner, scale.target
    if not confinement.scalable:
        return [f"a {owner.kind} may not be scaled by a plan"]
    same = (target.api_version, target.kind, target.namespace, target.name, target.uid) == (
        owner.api_version,
        owner.kind,
        owner.namespace,
        owner.name,
        owner.uid,
    )
    if not same:
        return [f"scale of {target.display()}: a plan scales only its owner {owner.display()}"]
    return []


def _shared_refusals(plan: Plan, *, confinement: Confinement) -> list[str]:
    reasons = []
    for manifest in plan.shared:
        kind: Kind = (str(manifest.get("apiVersion", "")), str(manifest.get("kind", "")))
        metadata = manifest.get("metadata") or {}
        what = f"shared {_what(manifest)}"
        if kind not in confinement.shared:
            reasons.append(f"{what}: a {plan.owner.kind} may not share a {kind[1]}")
        elif metadata.get("namespace") != plan.owner.namespace:
            reasons.append(f"{what}: outside the owner's namespace {plan.owner.namespace}")
        elif metadata.get("ownerReferences"):
            reasons.append(f"{what}: a shared object has no owner")
        elif (metadata.get("labels") or {}).get(MANAGED_BY_LABEL) != "kaiwo":
            reasons.append(f"{what}: not labelled {MANAGED_BY_LABEL}=kaiwo")
    return reasons


def _role_refusals(manifest: Mapping[str, Any]) -> list[str]:
    rules = manifest.get("rules") or ()
    allowed = all(
        isinstance(rule, Mapping)
        and list(rule.get("apiGroups") or ()) == [""]
        and list(rule.get("resources") or ()) == ["pods"]
        and set(rule.get("verbs") or ()) <= ROLE_VERBS
        and bool(rule.get("resourceNames"))
        and set(rule) <= {"apiGroups", "resources", "verbs", "resourceNames"}
        for rule in rules
    )
    if allowed and rules:
        return []
    return [f"{_what(manifest)}: may only grant get and patch of named Pods"]


def _role_binding_refusals(
    manifest: Mapping[str, Any], owner: ObjectRef, *, plan: Plan
) -> list[str]:
    roles = {
        (m.get("metadata") or {}).get("name")
        for m in plan.desired
        if (m.get("apiVersion"), m.get("kind")) == ROLE
    }
    role_ref = manifest.get("roleRef") or {}
    subjects = manifest.get("subjects") or ()
    own_role = (
        role_ref.get("apiGroup") == "rbac.authorization.k8s.io"
        and role_ref.get("kind") == "Role"
        and role_ref.get("name") in roles
    )
    local_accounts = all(
        isinstance(subject, Mapping)
        and subject.get("kind") == "ServiceAccount"
        and subject.get("namespace") == owner.namespace
        for subject in subjects
    )
    if own_role and local_accounts and subjects:
        return []
    return [
        f"{_what(manifest)}: may only bind a Role of the same plan to service accounts of "
        f"{owner.namespace}"
    ]


def _preempt_refusals(
    plan: Plan,
    owner: Mapping[str, Any] | None,
    *,
    confinement: Confinement,
    target: PreemptionTarget | None,
) -> list[str]:
    intent = plan.preempt
    if intent is None:
        return []
    if not confinement.preempts:
        return [f"a {plan.owner.kind} may not preempt anything"]
    wanted = intent.target
    what = f"preemption of {wanted.display()}"
    named = ((owner or {}).get("spec") or {}).get("workloadRef") or {}
    if (named.get("apiVersion"), named.get("kind"), named.get("name"), named.get("uid")) != (
        wanted.api_version,
        wanted.kind,
        wanted.name,
        wanted.uid,
    ) or wanted.namespace != plan.owner.namespace:
        return [f"{what}: not the workload {plan.owner.display()} names"]
    if preempt_action(wanted.api_version, wanted.kind) != intent.action:
        return [f"{what}: a {wanted.kind} is not preempted by {intent.action}"]
    return _opt_in_refusals(what, wanted, target)


def _opt_in_refusals(what: str, wanted: ObjectRef, target: PreemptionTarget | None) -> list[str]:
    live = target.workload if target is not None else None
    if live is None or (live.get("metadata") or {}).get("uid") != wanted.uid:
        return [f"{what}: the workload does not exist with uid {wanted.uid}"]
    namespace = target.namespace if target is not None else None
    if not opted_in(
        workload_annotations=_annotations_of(live),
        namespace_annotations=_annotations_of(namespace or {}),
    ):
        return [f"{what}: neither the workload nor its namespace opted in to GPU idle preemption"]
    return []


def _annotations_of(obj: Mapping[str, Any]) -> dict[str, str]:
    found = (obj.get("metadata") or {}).get("annotations") or {}
    return (
        {str(key): str(value) for key, value in found.items()} if isinstance(found, Mapping) else {}
    )


def _gpu_workload_creation_refusals(
    plan: Plan, *, target: PreemptionTarget | None
) -> tuple[str, ...]:
    ref = plan.owner
    extra = (
        plan.prune
        or plan.delete
        or plan.shared
        or plan.finalizers is not None
        or plan.scale is not None
        or plan.owner_labels is not None
        or plan.preempt is not None
        or plan.delete_owner
        or plan.status is not None
    )
    identities = [
        (
            m.get("apiVersion"),
            m.get("kind"),
            (m.get("metadata") or {}).get("namespace"),
            (m.get("metadata") or {}).get("name"),
        )
        for m in plan.desired
    ]
    if extra or identities != [(ref.api_version, ref.kind, ref.namespace, ref.name)]:
        return (f"a plan creating {ref.display()} may create that object and nothing else",)
    wanted = preemption_target_ref(plan)
    if wanted is None or not wanted.uid or preempt_action(wanted.api_version, wanted.kind) is None:
        return (f"{ref.display()} names no workload of a kind GPU idle preemption tracks",)
    expected = gpu_workload_name(kind=wanted.kind, name=wanted.name, uid=wanted.uid)
    if ref.name != expected or not ref.namespace:
        return (f"{ref.display()} must be named {expected} in its workload's namespace",)
    return tuple(_opt_in_refusals(f"tracking of {wanted.display()}", wanted, target))
