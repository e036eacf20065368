"""KaiwoConfig (config.kaiwo.silogen.ai/v1alpha1): the operator's run-time settings.

A cluster-scoped singleton named ``kaiwo`` (:data:`KAIWO_CONFIG_NAME`); the operator reads it
on every reconcile so changes apply live. It has no status subresource.

Two renderings of the API reference exist. Where they differ we follow the upstream Go types:

* the storage settings live under ``spec.storage``; the older rendering calls the field
  ``spec.data`` (its name before upstream renamed it). ``data`` is still accepted and kept on
  the wire, and :attr:`KaiwoConfigSpec.effective_storage` merges the two (``storage`` wins).
  The mount paths have no CRD default, so one a user left unset stays unset on the cluster
  and ``data``'s can apply (decision 0112).
* ``spec.defaultTopologyName`` and ``spec.gpuPreemption`` exist upstream but in neither
  rendering; they are modelled too, so configs written for the current operator parse.

Every nested section defaults to ``{}`` (as upstream's CRD does), so reading
``config.spec.ray.default_ray_image`` always gives a value.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Final, Literal

from pydantic import Field

from kaiwo_contracts.crds.base import CrdInfo, KubeModel
from kaiwo_contracts.crds.config_v1alpha1.durations import GoDuration, SimpleDuration
from kaiwo_contracts.crds.config_v1alpha1.type_meta import TypedObject
from kaiwo_contracts.crds.label_syntax import QUALIFIED_NAME_MAX_LENGTH, QUALIFIED_NAME_PATTERN
from kaiwo_contracts.crds.meta import (
    DNS_SUBDOMAIN_PATTERN,
    EMPTY_OR_DNS_SUBDOMAIN_PATTERN,
    ListMeta,
    ObjectMeta,
)
from kaiwo_contracts.crds.quantity import QuantityString
from kaiwo_contracts.crds.structural import NoCrdDefault

GROUP = "config.kaiwo.silogen.ai"
VERSION = "v1alpha1"
API_VERSION: Final = "config.kaiwo.silogen.ai/v1alpha1"

KAIWO_CONFIG_NAME = "kaiwo"
"""The only KaiwoConfig the operator reads."""

_DEFAULT_EMPTY_OBJECT: dict[str, Any] = {"default": {}}


class KaiwoRayConfig(KubeModel):
    """Ray-specific settings."""

    default_ray_image: str = Field(
        default="ghcr.io/silogen/rocm-ray:6.4",
        description="Image used for Ray workloads that provide none.",
    )
    head_pod_memory: QuantityString = Field(
        default="16Gi",
        description="Memory requested (and limited to) for the Ray head pod.",
    )


class KaiwoStorageConfig(KubeModel):
    """Storage settings. Upstream reads none of them (workloads carry their own defaults)."""

    default_storage_class: str | None = Field(
        default=None,
        description="Storage class for workloads that do not name one.",
    )
    # No CRD defaults for the mount paths: the API server would store them in ``storage``
    # (itself defaulted to {}), and ``storage`` would then always win over the deprecated
    # ``data`` (effective_storage). The model's defaults apply to what is still unset there
    # (decision 0112).
    default_data_mount_path: Annotated[str, NoCrdDefault] = Field(
        default="/workload",
        description=(
            "Where data storage and downloads are mounted in workload pods; /workload if unset."
        ),
    )
    default_hf_mount_path: Annotated[str, NoCrdDefault] = Field(
        default="/hf_cache",
        description=(
            "Where the Hugging Face cache is mounted; HF_HOME is set to it; /hf_cache if unset."
        ),
    )


class KaiwoNodeConfig(KubeModel):
    """Node settings."""

    # Both end up in every GPU pod or node the operator writes: outside Kubernetes' grammar
    # each of those writes would be refused (422).
    default_gpu_resource_key: str = Field(
        default="amd.com/gpu",
        pattern=QUALIFIED_NAME_PATTERN,
        max_length=QUALIFIED_NAME_MAX_LENGTH,
        description="Resource key used to reserve GPU capacity for pods.",
    )
    default_gpu_taint_key: str = Field(
        default="kaiwo.silogen.ai/gpu",
        pattern=QUALIFIED_NAME_PATTERN,
        max_length=QUALIFIED_NAME_MAX_LENGTH,
        description="Key of the taint put on GPU nodes.",
    )
    exclude_master_nodes_from_node_pools: bool = Field(
        default=False,
        description="Leave control-plane nodes out of the node pools.",
    )
    add_taints_to_gpu_nodes: bool = Field(
        default=False,
        description="Taint GPU nodes with defaultGpuTaintKey (and tolerate it in GPU pods).",
    )


class KaiwoSchedulingConfig(KubeModel):
    """Workload scheduling settings."""

    # Set as every workload pod's spec.schedulerName, which the API server checks as a DNS
    # subdomain: anything else would make every child's apply fail. Empty means the
    # cluster's default scheduler, as for a pod.
    kube_scheduler_name: str = Field(
        default="kaiwo-scheduler",
        max_length=253,
        pattern=EMPTY_OR_DNS_SUBDOMAIN_PATTERN,
        description="Scheduler name set on workload pods.",
    )
    pending_threshold_for_preemption: GoDuration = Field(
        default="5m",
        description=(
            "How long a GPU workload may stay pending before Kaiwo preempts workloads past "
            "their duration deadline that use GPUs of the same vendor."
        ),
    )


class KaiwoResourceMonitoringConfig(KubeModel):
    """Legacy resource monitoring. Enabling it, the metrics endpoint and the polling interval
    are environment variables of the operator (RESOURCE_MONITORING_*), not settings here.
    """

    low_utilization_threshold: float = Field(
        default=1.0,
        ge=0,
        description="Utilisation (percent of requested capacity) under which a workload is idle.",
    )
    target_namespaces: list[str] | None = Field(
        default=None,
        description="Namespaces to monitor; empty means all but kube-system.",
    )
    profile: Literal["gpu"] = Field(default="gpu", description="The resource to monitor.")
    terminate_underutilized: bool = Field(
        default=False,
        description="Terminate workloads that stay underutilised.",
    )
    terminate_underutilized_after: SimpleDuration = Field(
        default="24h",
        description="How long a workload may stay underutilised before it is terminated.",
    )


class KaiwoGpuPreemptionConfig(KubeModel):
    """Cluster-wide defaults of GPU idle preemption (annotation > KaiwoConfig > env var).

    Every field is optional: unset means "use the operator's environment variable".
    """

    default_threshold: float | None = Field(
        default=None,
        ge=0,
        le=100,
        description="Utilisation percentage under which a workload counts as idle.",
    )
    default_grace_period: GoDuration | None = Field(
        default=None,
        description="How long a workload must stay idle before it may be preempted.",
    )
    default_policy: Literal["OnPressure", "Always"] | None = Field(
        default=None,
        description="Preempt idle workloads only when others wait (OnPressure) or always.",
    )
    default_aggregation: Literal["Min", "Max", "Avg"] | None = Field(
        default=None,
        description="How utilisation of several pods is combined.",
    )
    default_ttl: GoDuration | None = Field(
        default=None,
        alias="defaultTTL",
        description='How long finished GpuWorkloads are kept ("0" keeps them forever).',
    )


class KaiwoConfigSpec(KubeModel):
    """The operator's configuration. Only the object named ``kaiwo`` is read."""

    ray: KaiwoRayConfig = Field(
        default_factory=KaiwoRayConfig, json_schema_extra=_DEFAULT_EMPTY_OBJECT
    )
    storage: KaiwoStorageConfig = Field(
        default_factory=KaiwoStorageConfig, json_schema_extra=_DEFAULT_EMPTY_OBJECT
    )
    data: KaiwoStorageConfig | None = Field(
        default=None,
        description="Deprecated: the former name of storage. storage wins where both are set.",
    )
    nodes: KaiwoNodeConfig = Field(
        default_factory=KaiwoNodeConfig, json_schema_extra=_DEFAULT_EMPTY_OBJECT
    )
    scheduling: KaiwoSchedulingConfig = Field(
        default_factory=KaiwoSchedulingConfig, json_schema_extra=_DEFAULT_EMPTY_OBJECT
    )
    resource_monitoring: KaiwoResourceMonitoringConfig = Field(
        default_factory=KaiwoResourceMonitoringConfig, json_schema_extra=_DEFAULT_EMPTY_OBJECT
    )
    gpu_preemption: KaiwoGpuPreemptionConfig = Field(
        default_factory=KaiwoGpuPreemptionConfig, json_schema_extra=_DEFAULT_EMPTY_OBJECT
    )
    # It names the workloads' LocalQueues and so becomes their children's
    # kueue.x-k8s.io/queue-name label value: at most 63 characters, or every child gets a 422.
    default_cluster_queue_name: str = Field(
        default="kaiwo",
        min_length=1,
        max_length=63,
        pattern=DNS_SUBDOMAIN_PATTERN,
        description="Cluster queue for workloads that name none.",
    )
    default_cluster_queue_cohort_name: str = Field(
        default="kaiwo",
        min_length=1,
        max_length=253,
        pattern=DNS_SUBDOMAIN_PATTERN,
        description="Cohort of the default cluster queue.",
    )
    dynamically_update_default_cluster_queue: bool = Field(
        default=False,
        description="Keep the default cluster queue's quotas equal to the cluster's capacity.",
    )
    default_topology_name: str = Field(
        default="default-topology",
        min_length=1,
        max_length=253,
        pattern=DNS_SUBDOMAIN_PATTERN,
        description="Kueue Topology referenced by generated resource flavors.",
    )

    @property
    def effective_storage(self) -> KaiwoStorageConfig:
        """Storage settings from ``storage`` and the deprecated ``data``, field by field.

        A field set in ``storage`` wins, then one set in ``data``, then the default.
        """
        if self.data is None:
            return self.storage
        merged = self.data.model_dump(exclude_unset=True) | self.storage.model_dump(
            exclude_unset=True
        )
        return KaiwoStorageConfig.model_validate(merged)


class KaiwoConfig(TypedObject):
    """The Kaiwo operator's configuration, changeable at run time (singleton ``kaiwo``)."""

    crd: ClassVar[CrdInfo] = CrdInfo(
        group=GROUP,
        version=VERSION,
        kind="KaiwoConfig",
        plural="kaiwoconfigs",
        scope="Cluster",
        status_subresource=False,
        description=(
            "KaiwoConfig manages the Kaiwo operator's configuration which can be modified "
            "during runtime."
        ),
    )

    api_version: Literal["config.kaiwo.silogen.ai/v1alpha1"] = API_VERSION
    kind: Literal["KaiwoConfig"] = "KaiwoConfig"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: KaiwoConfigSpec = Field(default_factory=KaiwoConfigSpec)

    @classmethod
    def default(cls) -> KaiwoConfig:
        """The configuration the operator creates at start-up when none exists."""
        return cls(metadata=ObjectMeta(name=KAIWO_CONFIG_NAME))


class KaiwoConfigList(TypedObject):
    """A list of KaiwoConfig objects, as the API server returns it."""

    api_version: Literal["config.kaiwo.silogen.ai/v1alpha1"] = API_VERSION
    kind: Literal["KaiwoConfigList"] = "KaiwoConfigList"
    metadata: ListMeta = Field(default_factory=ListMeta)
    items: list[KaiwoConfig]
