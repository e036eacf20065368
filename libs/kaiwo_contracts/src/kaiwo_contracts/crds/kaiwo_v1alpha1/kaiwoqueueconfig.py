"""KaiwoQueueConfig: the cluster-wide singleton from which Kaiwo manages Kueue objects.

The controller keeps Kueue ResourceFlavors, ClusterQueues (with their LocalQueues),
WorkloadPriorityClasses and Topologies equal to this spec. Only the object named ``kaiwo`` is
acted on; that is a controller rule, not a validation, so other names still parse.

The Kueue sub-types (resource groups, preemption, fungibility, ...) follow Kueue v1beta1 field
for field, including the defaults, enums and limits Kueue's own CRDs declare (Kueue v0.17,
the release the project builds and tests with) and the rules Kueue's validation enforces on a
ClusterQueue, so that a spec accepted here is accepted by Kueue (decision 0227). Each rule is
checked twice: by the model (``kaiwo validate``, the planner) and as a CEL rule of the CRD, so
``kubectl apply`` refuses it naming the field; the rules of Kueue's webhook too, which would
otherwise only refuse the ClusterQueue when the operator applies it.
``topologies`` and ``resourceFlavors[].topologyName`` exist only in the upstream operator (not
in the API reference); they are kept for topology-aware scheduling.

Limits: the API reference's MaxItems win over upstream's where both exist (10 clusterQueues
instead of 1000, 5 workloadPriorityClasses instead of 20, no limit on resourceFlavors instead
of 20). Names of the listed objects must be unique, since two entries with one name would make
the controller overwrite one with the other.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from decimal import Decimal
from typing import Annotated, ClassVar, Final, Literal, Self

from pydantic import AfterValidator, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from kaiwo_contracts.crds.base import CrdInfo, KubeModel, PrinterColumn
from kaiwo_contracts.crds.cel_rules import (
    CEL_VALIDATIONS,
    CelRule,
    raise_broken_rules,
    raise_violations,
)
from kaiwo_contracts.crds.core_v1 import LabelSelector, Taint, Toleration
from kaiwo_contracts.crds.kaiwo_v1alpha1.common import (
    API_VERSION,
    CATEGORIES,
    GROUP,
    VERSION,
    Conditions,
    KaiwoObject,
    KaiwoObjectList,
    WorkloadStatus,
)
from kaiwo_contracts.crds.label_syntax import (
    QUALIFIED_NAME_MAX_LENGTH,
    QUALIFIED_NAME_PATTERN,
    checked_label_key,
)
from kaiwo_contracts.crds.meta import DNS_LABEL_PATTERN, DNS_SUBDOMAIN_PATTERN, ListMeta, ObjectMeta
from kaiwo_contracts.crds.quantity import Quantity, quantity_value
from kaiwo_contracts.crds.structural import NoCrdDefault

KAIWO_QUEUE_CONFIG_NAME = "kaiwo"
"""The only KaiwoQueueConfig the controller acts on."""

# ------------------------------------------------------------------ Kueue ClusterQueue spec

KUEUE_MAX_FLAVORS_PER_GROUP: Final = 64
"""Kueue's CRD: ``resourceGroups[].flavors``, ``coveredResources`` and a flavor's
``resources`` each take at most 64 entries."""
KUEUE_MAX_FLAVORS: Final = 256
KUEUE_MAX_COVERED_RESOURCES: Final = 256
KUEUE_MAX_QUOTAS_PER_GROUP: Final = 512
"""Kueue's ClusterQueue webhook: at most 256 flavors and 256 covered resources over all
resource groups, and 512 flavor-resource quotas in one group."""
KUEUE_MAX_NODE_LABELS: Final = 8
"""Kueue's ResourceFlavor CRD: ``nodeLabels`` maxProperties 8 (the API reference lets a flavor
list 10; the planner tells the flavors Kueue cannot take, decision 0227)."""
_INT32: Final = 2**31 - 1

ResourceName = Annotated[
    str,
    Field(pattern=QUALIFIED_NAME_PATTERN, max_length=QUALIFIED_NAME_MAX_LENGTH),
    AfterValidator(checked_label_key),
]
"""A resource name such as cpu or amd.com/gpu: Kueue's webhook wants a label key."""


def _quantity(value: int | str) -> Decimal:
    """A validated :data:`Quantity`'s value."""
    if isinstance(value, int):
        return Decimal(value)
    found = quantity_value(value)
    assert found is not None  # the Quantity type refused anything else
    return found


class ResourceQuota(KubeModel):
    """The quota of one resource within one flavor."""

    name: ResourceName = Field(description="Resource name, e.g. cpu or amd.com/gpu.")
    nominal_quota: Quantity = Field(description="Quantity available to this ClusterQueue.")
    borrowing_limit: Quantity | None = Field(
        default=None, description="Most this queue may borrow from its cohort."
    )
    lending_limit: Quantity | None = Field(
        default=None, description="Most of the nominal quota this queue lends to its cohort."
    )

    @model_validator(mode="after")
    def _lends_at_most_its_nominal_quota(self) -> Self:
        """Kueue's webhook rule. Not a CEL rule of the CRD: evaluated for each of up to
        10 x 16 x 64 x 64 quotas, its estimated cost is past the API server's budget for the
        whole schema (the real API server refuses the CRD), so the planner tells it
        (``InvalidSpec``)."""
        if self.lending_limit is not None and _quantity(self.lending_limit) > _quantity(
            self.nominal_quota
        ):
            raise_violations(
                "ResourceQuota",
                [
                    (
                        "lendingLimit",
                        "lendingLimit must be less than or equal to the nominalQuota",
                        None,
                    )
                ],
            )
        return self


class FlavorQuotas(KubeModel):
    """The quotas a ClusterQueue has in one ResourceFlavor."""

    name: str = Field(
        min_length=1,
        max_length=253,
        pattern=DNS_SUBDOMAIN_PATTERN,
        description="ResourceFlavor name.",
    )
    resources: list[ResourceQuota] = Field(min_length=1, max_length=KUEUE_MAX_FLAVORS_PER_GROUP)


_GROUP_RULES: tuple[CelRule[ResourceGroup], ...] = (
    # Kueue's webhook counts the quotas; each flavor has one per covered resource (Kueue's CRD
    # rule and the model's), so the product is that count.
    CelRule(
        rule=f"size(self.flavors) * size(self.coveredResources) <= {KUEUE_MAX_QUOTAS_PER_GROUP}",
        message=(
            "number of flavor-resource combinations in a resourceGroup must be ≤ "
            f"{KUEUE_MAX_QUOTAS_PER_GROUP} (flavors times coveredResources)"
        ),
        field="flavors",
        holds=lambda group: (
            sum(len(f.resources) for f in group.flavors) <= KUEUE_MAX_QUOTAS_PER_GROUP
        ),
        reported_at_field=True,
    ),
)


class ResourceGroup(KubeModel):
    """Resources that are assigned flavors together (tried in ``flavors`` order)."""

    model_config = ConfigDict(
        json_schema_extra={CEL_VALIDATIONS: [rule.schema_entry() for rule in _GROUP_RULES]}
    )

    covered_resources: list[ResourceName] = Field(
        min_length=1, max_length=KUEUE_MAX_FLAVORS_PER_GROUP
    )
    flavors: list[FlavorQuotas] = Field(min_length=1, max_length=KUEUE_MAX_FLAVORS_PER_GROUP)

    @model_validator(mode="after")
    def _flavors_cover_the_same_resources(self) -> Self:
        """Each flavor quotas exactly the covered resources, in any order: the ClusterQueue
        gets them in ``coveredResources`` order, as Kueue wants them (upstream reorders
        them too, and drops quotas of resources not covered, which this refuses)."""
        for flavor in self.flavors:
            names = [quota.name for quota in flavor.resources]
            if sorted(names) != sorted(self.covered_resources):
                raise PydanticCustomError(
                    "flavor_resources_mismatch",
                    "flavor {flavor} must list one quota for each of the coveredResources "
                    "({expected}) and for no other resource, got ({given})",
                    {
                        "flavor": repr(flavor.name),
                        "expected": ", ".join(self.covered_resources),
                        "given": ", ".join(names),
                    },
                )
        raise_broken_rules("ResourceGroup", _GROUP_RULES, self)
        return self


_PREFERENCE_RULE: CelRule[FlavorFungibility] = CelRule(
    rule=(
        "!has(self.preference) || "
        "(self.whenCanBorrow == 'TryNextFlavor' && self.whenCanPreempt == 'TryNextFlavor')"
    ),
    message=(
        "preference can only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor"
    ),
    field="preference",
    holds=lambda fungibility: (
        fungibility.preference is None
        or (fungibility.when_can_borrow, fungibility.when_can_preempt)
        == ("TryNextFlavor", "TryNextFlavor")
    ),
    reported_at_field=True,
)


class FlavorFungibility(KubeModel):
    """Whether Kueue borrows or preempts in a flavor before trying the next one.

    ``Borrow`` and ``Preempt`` are Kueue's old names of ``MayStopSearch``; Kueue 0.15 and later
    store the new name. The default stays ``Borrow`` (what Kueue stores is the same)."""

    model_config = ConfigDict(
        json_schema_extra={CEL_VALIDATIONS: [_PREFERENCE_RULE.schema_entry()]}
    )

    when_can_borrow: Literal["MayStopSearch", "TryNextFlavor", "Borrow"] = "Borrow"
    when_can_preempt: Literal["MayStopSearch", "TryNextFlavor", "Preempt"] = "TryNextFlavor"
    preference: Literal["BorrowingOverPreemption", "PreemptionOverBorrowing"] | None = Field(
        default=None,
        description="When every flavor needs borrowing or preemption, which one to prefer.",
    )

    @model_validator(mode="after")
    def _kueues_rules(self) -> Self:
        raise_broken_rules("FlavorFungibility", (_PREFERENCE_RULE,), self)
        return self


class BorrowWithinCohort(KubeModel):
    """Whether a workload may preempt others in the cohort while borrowing."""

    policy: Literal["Never", "LowerPriority"] = "Never"
    max_priority_threshold: int | None = Field(default=None, ge=-_INT32 - 1, le=_INT32)


_RECLAIM_RULE: CelRule[ClusterQueuePreemption] = CelRule(
    rule=(
        "!(self.reclaimWithinCohort == 'Never' && has(self.borrowWithinCohort) && "
        "self.borrowWithinCohort.policy != 'Never')"
    ),
    message=(
        "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never: a queue that may "
        "preempt in its cohort while borrowing must also reclaim"
    ),
    field="borrowWithinCohort.policy",
    holds=lambda preemption: (
        not (
            preemption.reclaim_within_cohort == "Never"
            and preemption.borrow_within_cohort is not None
            and preemption.borrow_within_cohort.policy != "Never"
        )
    ),
    reported_at_field=True,
)


class ClusterQueuePreemption(KubeModel):
    """Which workloads a pending workload may preempt."""

    model_config = ConfigDict(json_schema_extra={CEL_VALIDATIONS: [_RECLAIM_RULE.schema_entry()]})

    reclaim_within_cohort: Literal["Never", "LowerPriority", "Any"] = "Never"
    borrow_within_cohort: BorrowWithinCohort | None = None
    within_cluster_queue: Literal["Never", "LowerPriority", "LowerOrNewerEqualPriority"] = "Never"

    @model_validator(mode="after")
    def _kueues_rules(self) -> Self:
        raise_broken_rules("ClusterQueuePreemption", (_RECLAIM_RULE,), self)
        return self


class AdmissionCheckStrategyRule(KubeModel):
    """An admission check, optionally only for some flavors."""

    name: str = Field(min_length=1)
    on_flavors: list[str] | None = None


class AdmissionChecksStrategy(KubeModel):
    """Admission checks with per-flavor scoping."""

    admission_checks: list[AdmissionCheckStrategyRule]


class AdmissionScope(KubeModel):
    """Whether the queue orders its workloads by their LocalQueue's usage (admission fair
    sharing); Kueue's v1beta2 enum, which it stores."""

    admission_mode: Literal["UsageBasedAdmissionFairSharing", "NoAdmissionFairSharing"]


_SMALLEST_WEIGHT: Final = Decimal("1e-9")


class FairSharing(KubeModel):
    """Fair-sharing weight of the queue within its cohort."""

    weight: Quantity | None = None

    @model_validator(mode="after")
    def _a_weight_kueue_can_tell_from_zero(self) -> Self:
        """Kueue's webhook rule. Not a CEL rule of the CRD: parsing a quantity of unbounded
        length is past the API server's cost budget (the real API server refuses the CRD),
        so the planner tells it (``InvalidSpec``)."""
        if self.weight is not None and 0 < _quantity(self.weight) <= _SMALLEST_WEIGHT:
            raise_violations(
                "FairSharing", [("weight", "When not 0, weight must be > 10e-9", None)]
            )
        return self


def _without_cohort_no(limit: str, attribute: str) -> CelRule[ClusterQueueSpec]:
    """Kueue's rule that a queue without a cohort neither borrows nor lends."""
    return CelRule(
        rule=(
            "!has(self.cohort) && has(self.resourceGroups) ? self.resourceGroups.all(rg, "
            f"rg.flavors.all(f, f.resources.all(r, !has(r.{limit})))) : true"
        ),
        message=f"{limit} must be nil when cohort is empty",
        field="resourceGroups",
        holds=lambda spec: (
            spec.cohort is not None
            or all(
                getattr(quota, attribute) is None
                for group in spec.resource_groups or ()
                for flavor in group.flavors
                for quota in flavor.resources
            )
        ),
        reported_at_field=True,
    )


_SPEC_RULES: tuple[CelRule[ClusterQueueSpec], ...] = (
    _without_cohort_no("borrowingLimit", "borrowing_limit"),  # Kueue's CRD
    _without_cohort_no("lendingLimit", "lending_limit"),  # Kueue's webhook
    CelRule(
        rule=(
            "!has(self.resourceGroups) || "
            f"self.resourceGroups.map(rg, size(rg.flavors)).sum() <= {KUEUE_MAX_FLAVORS}"
        ),
        message=(
            f"total number of flavors across all resourceGroups must be ≤ {KUEUE_MAX_FLAVORS}"
        ),
        field="resourceGroups",
        holds=lambda spec: (
            sum(len(g.flavors) for g in spec.resource_groups or ()) <= KUEUE_MAX_FLAVORS
        ),
        reported_at_field=True,
    ),
    CelRule(
        rule=(
            "!has(self.resourceGroups) || "
            "self.resourceGroups.map(rg, size(rg.coveredResources)).sum() <= "
            f"{KUEUE_MAX_COVERED_RESOURCES}"
        ),
        message=(
            "total number of covered resources across all resourceGroups must be ≤ "
            f"{KUEUE_MAX_COVERED_RESOURCES}"
        ),
        field="resourceGroups",
        holds=lambda spec: (
            sum(len(g.covered_resources) for g in spec.resource_groups or ())
            <= KUEUE_MAX_COVERED_RESOURCES
        ),
        reported_at_field=True,
    ),
)


class ClusterQueueSpec(KubeModel):
    """The Kueue ClusterQueueSpec Kaiwo applies to a managed ClusterQueue."""

    model_config = ConfigDict(
        json_schema_extra={CEL_VALIDATIONS: [rule.schema_entry() for rule in _SPEC_RULES]}
    )

    resource_groups: list[ResourceGroup] | None = Field(default=None, max_length=16)
    cohort: str | None = Field(default=None, max_length=253, pattern=DNS_SUBDOMAIN_PATTERN)
    queueing_strategy: Literal["StrictFIFO", "BestEffortFIFO"] = "BestEffortFIFO"
    namespace_selector: LabelSelector | None = Field(
        default=None, description="Namespaces whose workloads may use the queue; {} = all."
    )
    # Kueue's CRD defaults both to {} so the API server fills in their inner defaults.
    flavor_fungibility: FlavorFungibility = Field(
        default_factory=FlavorFungibility, json_schema_extra={"default": {}}
    )
    preemption: ClusterQueuePreemption = Field(
        default_factory=ClusterQueuePreemption, json_schema_extra={"default": {}}
    )
    admission_checks: list[str] | None = None
    admission_checks_strategy: AdmissionChecksStrategy | None = None
    admission_scope: AdmissionScope | None = None
    stop_policy: Literal["None", "Hold", "HoldAndDrain"] = "None"
    fair_sharing: FairSharing | None = None

    @model_validator(mode="after")
    def _one_way_to_list_admission_checks(self) -> Self:
        if self.admission_checks and self.admission_checks_strategy is not None:
            raise PydanticCustomError(
                "admission_checks_twice",
                "set either admissionChecks or admissionChecksStrategy, not both",
            )
        return self

    @model_validator(mode="after")
    def _each_resource_and_flavor_in_one_group(self) -> Self:
        groups = self.resource_groups or ()
        covered = [name for group in groups for name in group.covered_resources]
        _require_unique(covered, what="resourceGroups[].coveredResources")
        # Kueue's webhook refuses a flavor named in two groups.
        flavors = [flavor.name for group in groups for flavor in group.flavors]
        _require_unique(flavors, what="resourceGroups[].flavors[].name")
        raise_broken_rules("ClusterQueueSpec", _SPEC_RULES, self)
        return self


class ClusterQueue(KubeModel):
    """A Kueue ClusterQueue managed by Kaiwo, and the namespaces that get a LocalQueue for it."""

    name: str = Field(
        min_length=1,
        max_length=253,
        pattern=DNS_SUBDOMAIN_PATTERN,
        description="ClusterQueue name (also the name of its LocalQueues).",
    )
    spec: Annotated[ClusterQueueSpec, NoCrdDefault] = Field(default_factory=ClusterQueueSpec)
    namespaces: list[Annotated[str, Field(max_length=63, pattern=DNS_LABEL_PATTERN)]] | None = (
        Field(
            default=None, description="Namespaces where a LocalQueue of the same name is created."
        )
    )


# ------------------------------------------------------------------ flavors, priorities, topologies


class ResourceFlavorSpec(KubeModel):
    """A Kueue ResourceFlavor managed by Kaiwo: a set of nodes selected by labels."""

    name: str = Field(
        min_length=1,
        max_length=253,
        pattern=DNS_SUBDOMAIN_PATTERN,
        description="ResourceFlavor name.",
    )
    node_labels: dict[str, str] | None = Field(
        default=None, max_length=10, description="Node labels that select the flavor's nodes."
    )
    taints: list[Taint] | None = Field(default=None, max_length=5)
    tolerations: list[Toleration] | None = Field(default=None, max_length=5)
    topology_name: str | None = Field(
        default=None, description="Upstream: the Topology this flavor's nodes belong to."
    )


class WorkloadPriorityClass(KubeModel):
    """A Kueue WorkloadPriorityClass (whole object); workloads refer to it by name."""

    api_version: str | None = None
    kind: Literal["WorkloadPriorityClass"] | None = None
    metadata: ObjectMeta
    # Kueue's field is an int32: a larger value is refused when the class is applied.
    value: int = Field(
        ge=-(2**31),
        le=2**31 - 1,
        description="Priority; higher runs first and may preempt lower.",
    )
    description: str | None = None

    @model_validator(mode="after")
    def _named(self) -> Self:
        if not self.metadata.name:
            raise PydanticCustomError("missing_name", "a WorkloadPriorityClass needs metadata.name")
        _require_object_name(self.metadata.name)
        return self


class TopologyLevel(KubeModel):
    """One level of a topology, identified by a node label."""

    node_label: str = Field(min_length=1, max_length=316)


_HOSTNAME_LABEL = "kubernetes.io/hostname"


class TopologySpec(KubeModel):
    """The levels of a topology, from the widest (block) to the narrowest (host)."""

    levels: list[TopologyLevel] = Field(min_length=1, max_length=8)

    @model_validator(mode="after")
    def _levels_well_formed(self) -> Self:
        labels = [level.node_label for level in self.levels]
        _require_unique(labels, what="levels[].nodeLabel")
        if _HOSTNAME_LABEL in labels[:-1]:
            raise PydanticCustomError(
                "hostname_not_lowest",
                "the kubernetes.io/hostname label can only be used at the lowest level",
            )
        return self


class Topology(KubeModel):
    """Upstream: a Kueue Topology (whole object) for topology-aware scheduling."""

    api_version: str | None = None
    kind: Literal["Topology"] | None = None
    metadata: ObjectMeta
    spec: TopologySpec

    @model_validator(mode="after")
    def _named(self) -> Self:
        if not self.metadata.name:
            raise PydanticCustomError("missing_name", "a Topology needs metadata.name")
        _require_object_name(self.metadata.name)
        return self


_OBJECT_NAME = re.compile(DNS_SUBDOMAIN_PATTERN)


def _require_object_name(name: str) -> None:
    """The whole objects listed here are created under their own name: it must be one the
    API server takes, or every plan of the KaiwoQueueConfig fails to apply."""
    if len(name) > 253 or not _OBJECT_NAME.match(name):
        raise PydanticCustomError(
            "object_name",
            "metadata.name must be a lowercase RFC 1123 name such as team-a, not {name}",
            {"name": repr(name)},
        )


# ------------------------------------------------------------------ the kind


class KaiwoQueueConfigSpec(KubeModel):
    """The Kueue objects Kaiwo manages; everything of these kinds not listed is deleted."""

    cluster_queues: list[ClusterQueue] | None = Field(default=None, max_length=10)
    resource_flavors: list[ResourceFlavorSpec] | None = Field(
        default=None, description="Empty or unset: flavors are discovered from node pools."
    )
    workload_priority_classes: list[WorkloadPriorityClass] | None = Field(
        default=None, max_length=5
    )
    topologies: list[Topology] | None = Field(default=None, max_length=10)

    @model_validator(mode="after")
    def _names_unique(self) -> Self:
        _require_unique((q.name for q in self.cluster_queues or ()), what="clusterQueues[].name")
        _require_unique(
            (f.name for f in self.resource_flavors or ()), what="resourceFlavors[].name"
        )
        _require_unique(
            (str(p.metadata.name) for p in self.workload_priority_classes or ()),
            what="workloadPriorityClasses[].metadata.name",
        )
        _require_unique(
            (str(t.metadata.name) for t in self.topologies or ()),
            what="topologies[].metadata.name",
        )
        return self


class KaiwoQueueConfigStatus(KubeModel):
    """Whether the managed Kueue objects are in sync (READY) or not (FAILED)."""

    conditions: Conditions | None = None
    status: Annotated[WorkloadStatus, NoCrdDefault] = Field(
        default=WorkloadStatus.NEW,
        description="READY once the managed Kueue objects are in sync, FAILED when they cannot be.",
    )


class KaiwoQueueConfig(KaiwoObject):
    """Kaiwo's Kueue configuration; a cluster-scoped singleton named ``kaiwo``."""

    crd: ClassVar[CrdInfo] = CrdInfo(
        group=GROUP,
        version=VERSION,
        kind="KaiwoQueueConfig",
        plural="kaiwoqueueconfigs",
        scope="Cluster",
        short_names=("kqc",),
        categories=CATEGORIES,
        printer_columns=(PrinterColumn("WorkloadStatus", "string", ".status.status"),),
        status_subresource=True,
        description=(
            "KaiwoQueueConfig manages Kueue resources (ClusterQueues, ResourceFlavors, "
            "WorkloadPriorityClasses) for Kaiwo; only the one named 'kaiwo' is acted on."
        ),
    )

    api_version: Literal["kaiwo.silogen.ai/v1alpha1"] = API_VERSION
    kind: Literal["KaiwoQueueConfig"] = "KaiwoQueueConfig"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: KaiwoQueueConfigSpec = Field(default_factory=KaiwoQueueConfigSpec)
    status: KaiwoQueueConfigStatus = Field(default_factory=KaiwoQueueConfigStatus)


class KaiwoQueueConfigList(KaiwoObjectList):
    """A list of KaiwoQueueConfigs."""

    item_kind: ClassVar[str] = "KaiwoQueueConfig"

    api_version: Literal["kaiwo.silogen.ai/v1alpha1"] = API_VERSION
    kind: Literal["KaiwoQueueConfigList"] = "KaiwoQueueConfigList"
    metadata: ListMeta = Field(default_factory=ListMeta)
    items: list[KaiwoQueueConfig] = Field(default_factory=list)


def _require_unique(names: Iterable[str], *, what: str) -> None:
    repeated = sorted(name for name, count in Counter(names).items() if count > 1)
    if repeated:
        raise PydanticCustomError(
            "duplicate_name",
            "{what} must be unique; repeated: {repeated}",
            {"what": what, "repeated": ", ".join(repeated)},
        )
