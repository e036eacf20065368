"""The system configuration of KubeAI Models: what KubeAI's Helm chart sets for its controller.

A platform team sets it once for the cluster: the model-server images per engine and image
variant, the resource profiles a Model names in ``resourceProfile`` (``cpu``,
``amd-gpu-mi300x``, ...), the cache profiles of ``cacheProfile``, the model-loader image, the
security context of model-server Pods, the Secret names of the default credentials and the
rollout surge. It lives in a ConfigMap (see :data:`CONFIG_MAP_NAME`), as one YAML document
under :data:`CONFIG_MAP_KEY`, with KubeAI's keys (``modelServers.VLLM.images``,
``resourceProfiles.<name>.requests``, ...), so a ``system.yaml`` written for KubeAI can be
pasted in.

What the document leaves out keeps the defaults of upstream's chart (``charts/kubeai``, v0.22):
:func:`models_config` merges it over them as Helm merges values (mappings key by key, other
values replaced; a key set to null removes that default, e.g. a resource profile). Without a
document, the chart's defaults apply.

Beyond upstream: a cache profile's volume size (``sharedFilesystem.size``, upstream a fixed
10Gi), per-engine probes (``modelServers.<engine>.probes``; upstream's are built in) and the
autoscaler's cluster-wide ceiling (``modelAutoscaling.maxReplicas``, default
:data:`DEFAULT_AUTOSCALING_MAX_REPLICAS`; upstream has none, and a Model without
``maxReplicas`` had no bound at all).

Upstream's keys for its own process are accepted and read by nothing, so that its chart's
``system.yaml`` pastes in whole (decision 0199): ``modelAutoscaling.interval``,
``timeWindow`` and ``stateConfigMapName`` (the gateway's ``KAIWO_AUTOSCALER_*`` settings
here, its state in the bus), ``metricsAddr``, ``healthAddress``, ``leaderElection`` and
``allowPodAddressOverride`` (each service's own settings), and ``messaging`` with no
streams. Messaging streams are refused: the messenger here takes its requests from the bus
(decision 0049), and a stream URL it would never read must not look configured.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal, Self

from pydantic import Field, field_validator, model_validator

from kaiwo_contracts.crds.base import KubeModel, OpenObject
from kaiwo_contracts.crds.quantity import Quantity

CONFIG_MAP_NAME: Final = "kaiwo-models"
"""The ConfigMap's conventional name (only the label below is what finds it)."""
CONFIG_MAP_LABEL: Final = "kaiwo.silogen.ai/system-config"
CONFIG_MAP_LABEL_VALUE: Final = "models"
CONFIG_MAP_KEY: Final = "models.yaml"

DEFAULT_IMAGE_NAME: Final = "default"
DEFAULT_AUTOSCALING_MAX_REPLICAS: Final = 8
"""The most replicas the autoscaler gives any Model unless the platform team sets
``modelAutoscaling.maxReplicas`` (decision 0038)."""
DEFAULT_MODEL_LOADER_IMAGE: Final = "ghcr.io/kubeai-project/kubeai-model-loader:v0.14.0"

_NVIDIA_TOLERATIONS = [
    {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
]
_AMD_TOLERATIONS = [
    {"key": "amd.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
]
_ONE_NVIDIA_GPU = {"nvidia.com/gpu": "1"}

# Upstream's chart (charts/kubeai/values.yaml), as the reference describes it. One departure:
# upstream's AMD vLLM image "rocm/vllm/rocm6.4.1_vllm_0.10.1_20250909" names a repository
# without a tag, which no registry serves; the image is that tag of "rocm/vllm".
CHART_DEFAULTS: Final[Mapping[str, Any]] = {
    "secretNames": {
        "huggingface": "kubeai-huggingface",
        "aws": "kubeai-aws",
        "gcp": "kubeai-gcp",
        "alibaba": "kubeai-alibaba",
    },
    "modelServers": {
        "VLLM": {
            "images": {
                "default": "vllm/vllm-openai:v0.10.2",
                "nvidia-gpu": "vllm/vllm-openai:v0.10.2",
                "cpu": "public.ecr.aws/q9t5s3a7/vllm-cpu-release-repo:v0.10.2",
                "google-tpu": "vllm/vllm-tpu:23194d83e8f2a6783b0d8c275f5f8a22faab9aec",
                "gh200": "vllm/vllm-openai:v0.10.2",
                "amd-gpu": "rocm/vllm:rocm6.4.1_vllm_0.10.1_20250909",
            }
        },
        "OLlama": {
            "images": {
                "default": "ollama/ollama:0.11.11",
                "nvidia-gpu": "ollama/ollama:0.11.11",
                "amd-gpu": "ollama/ollama:0.11.11-rocm",
            }
        },
        "FasterWhisper": {
            "images": {
                "default": "fedirz/faster-whisper-server:latest-cpu",
                "nvidia-gpu": "fedirz/faster-whisper-server:latest-cuda",
            }
        },
        "Infinity": {
            "images": {
                "default": "michaelf34/infinity:0.0.77",
                "nvidia-gpu": "michaelf34/infinity:0.0.77",
                "cpu": "michaelf34/infinity:0.0.77-cpu",
                "amd-gpu": "michaelf34/infinity:0.0.77-rocm",
            }
        },
    },
    "modelLoading": {"image": DEFAULT_MODEL_LOADER_IMAGE},
    "resourceProfiles": {
        "cpu": {"imageName": "cpu", "requests": {"cpu": 1, "memory": "2Gi"}},
        "nvidia-gpu-t4": {
            "imageName": "nvidia-gpu",
            "requests": _ONE_NVIDIA_GPU,
            "limits": _ONE_NVIDIA_GPU,
        },
        "nvidia-gpu-l4": {
            "imageName": "nvidia-gpu",
            "requests": {**_ONE_NVIDIA_GPU, "cpu": "6", "memory": "24Gi"},
            "limits": _ONE_NVIDIA_GPU,
            "tolerations": _NVIDIA_TOLERATIONS,
        },
        "nvidia-gpu-l40s": {
            "imageName": "nvidia-gpu",
            "requests": {**_ONE_NVIDIA_GPU, "cpu": "6", "memory": "24Gi"},
            "limits": _ONE_NVIDIA_GPU,
            "tolerations": _NVIDIA_TOLERATIONS,
        },
        "nvidia-gpu-h100": {
            "imageName": "nvidia-gpu",
            "limits": _ONE_NVIDIA_GPU,
            "tolerations": _NVIDIA_TOLERATIONS,
        },
        "nvidia-gpu-gh200": {
            "imageName": "gh200",
            "requests": _ONE_NVIDIA_GPU,
            "limits": _ONE_NVIDIA_GPU,
            "tolerations": _NVIDIA_TOLERATIONS,
        },
        "nvidia-gpu-a100-80gb": {
            "imageName": "nvidia-gpu",
            "limits": _ONE_NVIDIA_GPU,
            "tolerations": _NVIDIA_TOLERATIONS,
        },
        "nvidia-gpu-a100-40gb": {
            "imageName": "nvidia-gpu",
            "limits": _ONE_NVIDIA_GPU,
            "tolerations": _NVIDIA_TOLERATIONS,
        },
        "nvidia-gpu-a16": {
            "imageName": "nvidia-gpu",
            "limits": _ONE_NVIDIA_GPU,
            "tolerations": _NVIDIA_TOLERATIONS,
        },
        "nvidia-gpu-rtx4070-8gb": {
            "imageName": "nvidia-gpu",
            "limits": _ONE_NVIDIA_GPU,
            "tolerations": _NVIDIA_TOLERATIONS,
        },
        "amd-gpu-mi300x": {
            "imageName": "amd-gpu",
            "limits": {"amd.com/gpu": "1"},
            "tolerations": _AMD_TOLERATIONS,
        },
    },
    "cacheProfiles": {},
    "modelServerPods": {
        "securityContext": {
            "readOnlyRootFilesystem": False,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
        },
    },
    "modelRollouts": {"surge": 1},
}


class SecretNames(KubeModel):
    """The Secrets (in each Model's namespace) that credentials are read from, by reference.

    Keys: ``token`` (Hugging Face); ``accessKeyID``/``secretAccessKey`` (AWS);
    ``jsonKeyfile`` (GCP); ``accessKeyID``/``accessKeySecret`` (Alibaba). Every reference is
    optional, so a Secret that does not exist does not stop a Pod. An AIMNamespaceConfig's
    credentials take precedence in its namespace."""

    huggingface: str = ""
    aws: str = ""
    gcp: str = ""
    alibaba: str = ""


class ServerProbes(KubeModel):
    """Probes that replace an engine's built-in ones (each a core/v1 Probe)."""

    startup: OpenObject | None = None
    readiness: OpenObject | None = None
    liveness: OpenObject | None = None


class ModelServer(KubeModel):
    """One engine's images by image name (a resource profile's ``imageName``, else
    ``default``), and probes replacing the built-in ones."""

    images: dict[str, str] = Field(default_factory=dict)
    probes: ServerProbes | None = None


class ModelServers(KubeModel):
    """The four engines, under their KubeAI names."""

    vllm: ModelServer = Field(default_factory=ModelServer, alias="VLLM")
    ollama: ModelServer = Field(default_factory=ModelServer, alias="OLlama")
    faster_whisper: ModelServer = Field(default_factory=ModelServer, alias="FasterWhisper")
    infinity: ModelServer = Field(default_factory=ModelServer, alias="Infinity")

    def for_engine(self, engine: str) -> ModelServer:
        """The engine's entry (VLLM's for any other name, as upstream looks it up)."""
        return {
            "OLlama": self.ollama,
            "FasterWhisper": self.faster_whisper,
            "Infinity": self.infinity,
        }.get(engine, self.vllm)


class ModelLoading(KubeModel):
    """The image of the jobs that fill a cache and of the adapter-loader sidecar."""

    image: str = Field(default=DEFAULT_MODEL_LOADER_IMAGE, min_length=1)


class ResourceProfile(KubeModel):
    """Resources and scheduling of one replica; ``resourceProfile: <name>:<count>`` multiplies
    ``requests`` and ``limits`` by the count and copies the rest."""

    image_name: str | None = None
    requests: dict[str, Quantity] = Field(default_factory=dict)
    limits: dict[str, Quantity] = Field(default_factory=dict)
    node_selector: dict[str, str] = Field(default_factory=dict)
    affinity: OpenObject | None = None
    tolerations: list[OpenObject] = Field(default_factory=list)
    scheduler_name: str | None = None
    runtime_class_name: str | None = None


class SharedFilesystem(KubeModel):
    """A ReadWriteMany volume shared by every Model of the profile in a namespace."""

    storage_class_name: str | None = None
    persistent_volume_name: str | None = None
    size: Quantity = Field(default="10Gi", description="Requested size (Kaiwo; upstream 10Gi).")

    @model_validator(mode="after")
    def _names_a_volume(self) -> Self:
        if not self.storage_class_name and not self.persistent_volume_name:
            raise ValueError("set storageClassName or persistentVolumeName (or both)")
        return self


class CacheProfile(KubeModel):
    """Where model files are cached: only a shared filesystem exists (as upstream)."""

    shared_filesystem: SharedFilesystem


class ImagePullSecret(KubeModel):
    name: str = Field(min_length=1)


class JsonPatchOperation(KubeModel):
    """One RFC 6902 operation on every model-server Pod (``/spec/...``,
    ``/metadata/labels/...``, ``/metadata/annotations/...``)."""

    op: Literal["add", "remove", "replace", "move", "copy", "test"]
    path: str
    value: Any = None
    from_: str | None = Field(default=None, alias="from")


class ModelServerPods(KubeModel):
    """What every model-server Pod gets: service account, security contexts, pull secrets,
    and JSON patches applied last (before the Pod's spec is hashed)."""

    service_account_name: str | None = None
    pod_security_context: OpenObject | None = None
    security_context: OpenObject | None = None
    image_pull_secrets: list[ImagePullSecret] = Field(default_factory=list)
    json_patches: list[JsonPatchOperation] = Field(default_factory=list)


class ModelRollouts(KubeModel):
    """Extra Pods while a changed Model replaces its Pods."""

    surge: int = Field(default=1, ge=0)


class ModelAutoscaling(KubeModel):
    """Bounds on what the autoscaler's decisions may do (the gateway decides, the planner
    bounds: a decision is a claim of whoever holds the gateway's key)."""

    max_replicas: int = Field(
        default=DEFAULT_AUTOSCALING_MAX_REPLICAS,
        ge=1,
        le=400,
        description="The most replicas the autoscaler sets on any Model; a Model's own "
        "maxReplicas may only lower it (400: the Pods a Model runs at most).",
    )
    interval: str | int | None = Field(
        default=None, description="Upstream's; read by nothing (KAIWO_AUTOSCALER_INTERVAL_SECONDS)."
    )
    time_window: str | int | None = Field(
        default=None, description="Upstream's; read by nothing (KAIWO_AUTOSCALER_WINDOW_SECONDS)."
    )
    state_config_map_name: str | None = Field(
        default=None, description="Upstream's; read by nothing (the state is kept in the bus)."
    )


class Messaging(KubeModel):
    """Upstream's messenger streams (cloud pub/sub URLs): none may be given, the messenger
    here reads the bus (decision 0049); the chart's empty list pastes in."""

    error_max_backoff: str | int | None = None
    streams: list[OpenObject] = Field(default_factory=list)

    @field_validator("streams")
    @classmethod
    def _no_streams(cls, value: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if value:
            raise ValueError(
                "the messenger takes its requests from the operator's bus, not from "
                "pub/sub URLs (docs/models.md, decision 0049): leave streams empty"
            )
        return value


class ModelsConfig(KubeModel):
    """The whole system configuration of Models (see the module docstring)."""

    secret_names: SecretNames = Field(default_factory=SecretNames)
    model_servers: ModelServers = Field(default_factory=ModelServers)
    model_loading: ModelLoading = Field(default_factory=ModelLoading)
    resource_profiles: dict[str, ResourceProfile] = Field(default_factory=dict)
    cache_profiles: dict[str, CacheProfile] = Field(default_factory=dict)
    model_server_pods: ModelServerPods = Field(default_factory=ModelServerPods)
    model_rollouts: ModelRollouts = Field(default_factory=ModelRollouts)
    model_autoscaling: ModelAutoscaling = Field(default_factory=ModelAutoscaling)
    # Upstream's settings of its own process (module docstring): accepted, read by nothing.
    messaging: Messaging = Field(default_factory=Messaging)
    metrics_addr: str | None = None
    health_address: str | None = None
    leader_election: OpenObject | None = None
    allow_pod_address_override: bool | None = None
    fixed_self_metric_addrs: list[str] | None = None

    @field_validator("resource_profiles", "cache_profiles")
    @classmethod
    def _names_have_no_colon(cls, value: dict[str, Any]) -> dict[str, Any]:
        # "<profile>:<count>" is split at the colon.
        bad = sorted(name for name in value if ":" in name or not name)
        if bad:
            raise ValueError(f"profile names must be non-empty and without ':': {bad}")
        return value

    @classmethod
    def default(cls) -> ModelsConfig:
        """The chart's defaults (what applies without a configuration document)."""
        return _DEFAULT

    @classmethod
    def from_document(cls, document: Mapping[str, Any] | None) -> ModelsConfig:
        """The configuration a document (parsed YAML) sets, merged over the chart's defaults.

        Raises ``pydantic.ValidationError`` (or ValueError when it is not a mapping)."""
        if document is None:
            return _DEFAULT
        if not isinstance(document, Mapping):
            raise ValueError("the models configuration must be a mapping of settings")
        return cls.model_validate(merged_over(CHART_DEFAULTS, document))


def merged_over(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``override`` merged into ``base`` as Helm merges values: mappings key by key, any other
    value replaced, a null removing the key."""
    merged = dict(base)
    for key, value in override.items():
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = merged_over(merged[key], value)
        else:
            merged[key] = value
    return merged


_DEFAULT: Final = ModelsConfig.model_validate(CHART_DEFAULTS)
