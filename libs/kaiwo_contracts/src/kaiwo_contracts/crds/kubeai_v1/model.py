"""KubeAI's Model (kubeai.org/v1): an ML model served behind an OpenAI-compatible API.

Field for field the KubeAI API, with its CEL rules twice: as ``x-kubernetes-validations`` in the
schema (what the API server enforces) and as pydantic checks (so ``kaiwo validate`` catches the
same mistakes offline, each error located at the field it is about). Rules comparing an update
with the previous object (``oldSelf``) cannot be checked on one object; call
:meth:`Model.update_violations`.

Where the API reference (the seed) and upstream's Go code differ, the reference wins:

* ``features`` accepts ``TextGeneration``, ``TextEmbedding`` and ``SpeechToText`` (upstream
  later added ``Reranking``);
* ``loadBalancing.prefixHash.replication`` defaults to 20 (upstream now 256);
* ``features`` is optional (upstream's CRD requires the key, the reference does not).

Beyond the reference, ``replication`` lies in [1, :data:`MAX_RING_REPLICATION`]: the gateway
builds a ring of replication x endpoints points, and one Model with a huge value would take the
memory of the gateway every Model shares (decision 0032).

Upstream fields the reference predates are modelled too: ``envFrom``, ``files`` and
``priorityClassName``. Beyond upstream, ``resourceProfile`` is checked to have the
``<profile>:<count>`` form the controller otherwise rejects at reconcile time, and the CRD gets
printer columns and a short name. The scale subresource has no label selector path, as upstream.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Final, Generic, Literal, Self, TypeVar

from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from kaiwo_contracts.crds.base import CrdInfo, KubeModel, PrinterColumn, ScaleSubresource
from kaiwo_contracts.crds.core_v1 import EnvFromSource
from kaiwo_contracts.crds.kaiwo_v1alpha1.common import Conditions
from kaiwo_contracts.crds.meta import ListMeta, ObjectMeta
from kaiwo_contracts.crds.schema import NoCrdDefault

GROUP: Final = "kubeai.org"
VERSION: Final = "v1"
API_VERSION: Final = "kubeai.org/v1"
MAX_RING_REPLICATION: Final = 1000

CEL_VALIDATIONS = "x-kubernetes-validations"

Engine = Literal["OLlama", "VLLM", "FasterWhisper", "Infinity"]
ModelFeature = Literal["TextGeneration", "TextEmbedding", "SpeechToText"]
LoadBalancingStrategy = Literal["LeastLoad", "PrefixHash"]

MODEL_URL_SCHEMES: Final = ("hf://", "pvc://", "ollama://", "s3://", "gs://", "oss://")
ADAPTER_URL_SCHEMES: Final = ("hf://", "s3://", "gs://", "oss://")
CACHEABLE_URL_SCHEMES: Final = ADAPTER_URL_SCHEMES
MAX_MODEL_NAME_LENGTH: Final = 40

RESOURCE_PROFILE_PATTERN: Final = r"^[^:]+:[0-9]+$"

T = TypeVar("T")


# ------------------------------------------------------------------ CEL rules, checked twice


@dataclass(frozen=True, slots=True)
class RuleViolation:
    """A broken validation rule: the field it is about (wire path) and the API's message."""

    field: str
    message: str


@dataclass(frozen=True)
class CelRule(Generic[T]):
    """A CEL rule the API server evaluates, with the Python predicate that mirrors it."""

    rule: str
    message: str
    field: str
    """Wire path, relative to the object the rule sits on, of the field an error names."""
    holds: Callable[[T], bool]

    def schema_entry(self) -> dict[str, Any]:
        return {"rule": self.rule, "message": self.message}


@dataclass(frozen=True)
class TransitionRule(Generic[T]):
    """A CEL rule comparing an update (``self``) with the stored object (``oldSelf``)."""

    rule: str
    message: str
    field: str
    holds: Callable[[T, T], bool]

    def schema_entry(self) -> dict[str, Any]:
        return {"rule": self.rule, "message": self.message}


def _starts_with_any(value: str, prefixes: tuple[str, ...]) -> bool:
    return value.startswith(prefixes)


def _cel_starts_with_any(subject: str, prefixes: tuple[str, ...]) -> str:
    return " || ".join(f'{subject}.startsWith("{prefix}")' for prefix in prefixes)


def _quoted_list(prefixes: tuple[str, ...]) -> str:
    quoted = [f'"{prefix}"' for prefix in prefixes]
    return ", ".join(quoted[:-1]) + f", or {quoted[-1]}"


def _raise_violations(title: str, violations: list[tuple[str, str, Any]]) -> None:
    """Raise one pydantic error per violation, each located at its own field."""
    if not violations:
        return
    raise ValidationError.from_exception_data(
        title,
        [
            InitErrorDetails(
                type=PydanticCustomError("cel_rule", message),
                loc=tuple(field.split(".")),
                input=value,
            )
            for field, message, value in violations
        ],
    )


# Field-level rules: one predicate on a string field.
_URL_MESSAGE = f"url must start with {_quoted_list(MODEL_URL_SCHEMES)} and not be empty."
_URL_RULE = CelRule[str](
    rule=_cel_starts_with_any("self", MODEL_URL_SCHEMES),
    message=_URL_MESSAGE,
    field="url",
    holds=lambda url: _starts_with_any(url, MODEL_URL_SCHEMES),
)
_ADAPTER_URL_RULE = CelRule[str](
    rule=_cel_starts_with_any("self", ADAPTER_URL_SCHEMES),
    message=f"adapter url must start with {_quoted_list(ADAPTER_URL_SCHEMES)}.",
    field="url",
    holds=lambda url: _starts_with_any(url, ADAPTER_URL_SCHEMES),
)
_FILE_PATH_RULE = CelRule[str](
    rule="self.startsWith('/') && !self.contains(':')",
    message=(
        "Path must be an absolute path, starting with /, and must not contain a ':' character."
    ),
    field="path",
    holds=lambda path: path.startswith("/") and ":" not in path,
)
# Field-level ``self == oldSelf`` rules: Kubernetes only evaluates them when the field exists in
# both the stored object and the update.
_CACHE_PROFILE_IMMUTABLE = TransitionRule["ModelSpec"](
    rule="self == oldSelf",
    message="cacheProfile is immutable.",
    field="cacheProfile",
    holds=lambda new, old: (
        new.cache_profile is None
        or old.cache_profile is None
        or new.cache_profile == old.cache_profile
    ),
)
_REPLICATION_IMMUTABLE = TransitionRule["ModelSpec"](
    rule="self == oldSelf",
    message="replication is immutable.",
    field="loadBalancing.prefixHash.replication",
    holds=lambda new, old: (
        new.load_balancing.prefix_hash.replication == old.load_balancing.prefix_hash.replication
    ),
)


def _checked(rule: CelRule[str], value: str) -> str:
    if not rule.holds(value):
        raise PydanticCustomError("cel_rule", rule.message)
    return value


# ------------------------------------------------------------------ nested types


class Adapter(KubeModel):
    """A LoRA adapter loaded into the model's vLLM servers."""

    name: str = Field(
        max_length=63,
        pattern=r"^[a-z0-9-]+$",
        description="Lowercase letters, digits and dashes; requests address <model>_<name>.",
    )
    url: str = Field(json_schema_extra={CEL_VALIDATIONS: [_ADAPTER_URL_RULE.schema_entry()]})

    @field_validator("url")
    @classmethod
    def _url_has_known_scheme(cls, value: str) -> str:
        return _checked(_ADAPTER_URL_RULE, value)


class PrefixHash(KubeModel):
    """Consistent hashing with bounded loads: requests with the same prefix go to one server."""

    mean_load_factor: int = Field(
        default=125,
        ge=100,
        description="Load (percent of the mean) no endpoint may exceed.",
    )
    replication: int = Field(
        default=20,
        ge=1,
        le=MAX_RING_REPLICATION,
        description="Replicas of each endpoint on the hash ring. Immutable.",
        json_schema_extra={CEL_VALIDATIONS: [_REPLICATION_IMMUTABLE.schema_entry()]},
    )
    prefix_char_length: int = Field(
        default=100,
        description="Characters of the prompt that make the prefix to hash.",
    )


class LoadBalancing(KubeModel):
    """How requests are spread over the model's servers."""

    strategy: LoadBalancingStrategy = "LeastLoad"
    prefix_hash: PrefixHash = Field(default_factory=PrefixHash, json_schema_extra={"default": {}})


class File(KubeModel):
    """A file mounted into the model's pods (through a ConfigMap)."""

    path: str = Field(
        max_length=1024,
        description="Absolute path of the file in the pod.",
        json_schema_extra={CEL_VALIDATIONS: [_FILE_PATH_RULE.schema_entry()]},
    )
    content: str = Field(max_length=100000, description="Content of the file.")

    @field_validator("path")
    @classmethod
    def _path_is_absolute(cls, value: str) -> str:
        return _checked(_FILE_PATH_RULE, value)


# ------------------------------------------------------------------ spec


_SPEC_RULES: tuple[CelRule[ModelSpec], ...] = (
    CelRule(
        rule="!has(self.cacheProfile) || "
        + _cel_starts_with_any("self.url", CACHEABLE_URL_SCHEMES),
        message=(
            "cacheProfile is only supported with urls of format "
            '"hf://...", "s3://...", "gs://...", or "oss://..." at the moment.'
        ),
        field="cacheProfile",
        holds=lambda spec: (
            spec.cache_profile is None or _starts_with_any(spec.url, CACHEABLE_URL_SCHEMES)
        ),
    ),
    CelRule(
        rule='!self.url.startsWith("gs://") || has(self.cacheProfile)',
        message='urls of format "gs://..." only supported when using a cacheProfile',
        field="url",
        holds=lambda spec: not spec.url.startswith("gs://") or spec.cache_profile is not None,
    ),
    CelRule(
        rule='!self.url.startsWith("oss://") || has(self.cacheProfile)',
        message='urls of format "oss://..." only supported when using a cacheProfile',
        field="url",
        holds=lambda spec: not spec.url.startswith("oss://") or spec.cache_profile is not None,
    ),
    CelRule(
        rule="!has(self.maxReplicas) || self.minReplicas <= self.maxReplicas",
        message="minReplicas should be less than or equal to maxReplicas.",
        field="minReplicas",
        holds=lambda spec: spec.max_replicas is None or spec.min_replicas <= spec.max_replicas,
    ),
    CelRule(
        rule='!has(self.adapters) || self.engine == "VLLM"',
        message="adapters only supported with VLLM engine.",
        field="adapters",
        holds=lambda spec: spec.adapters is None or spec.engine == "VLLM",
    ),
    CelRule(
        rule=(
            "!has(self.files) || self.files.size() <= 1 || "
            "!self.files.exists(f, self.files.filter(other, other.path == f.path).size() > 1)"
        ),
        message="All file paths must be unique.",
        field="files",
        holds=lambda spec: (
            spec.files is None or len({file.path for file in spec.files}) == len(spec.files)
        ),
    ),
)

_SPEC_TRANSITION_RULES: tuple[TransitionRule[ModelSpec], ...] = (
    TransitionRule(
        rule="!has(oldSelf.cacheProfile) || self.url == oldSelf.url",
        message="url is immutable when using cacheProfile.",
        field="url",
        holds=lambda new, old: old.cache_profile is None or new.url == old.url,
    ),
    _CACHE_PROFILE_IMMUTABLE,
    _REPLICATION_IMMUTABLE,
)

# The order of upstream's CRD: the transition rule on url sits before the files rule.
_SPEC_SCHEMA_RULES: list[Any] = [rule.schema_entry() for rule in _SPEC_RULES[:5]] + [
    _SPEC_TRANSITION_RULES[0].schema_entry(),
    _SPEC_RULES[5].schema_entry(),
]


class ModelSpec(KubeModel):
    """Desired state of a Model."""

    model_config = ConfigDict(json_schema_extra={CEL_VALIDATIONS: _SPEC_SCHEMA_RULES})

    url: str = Field(
        description=(
            'Where the model comes from: "hf://<repo>/<model>", "pvc://<pvc>[/<path>]", '
            '"s3://<bucket>/<path>", "gs://<bucket>/<path>" or "oss://<bucket>/<path>" (the '
            "last two only with a cacheProfile) for VLLM, FasterWhisper and Infinity; "
            '"ollama://<model>" for OLlama.'
        ),
        json_schema_extra={CEL_VALIDATIONS: [_URL_RULE.schema_entry()]},
    )
    adapters: list[Adapter] | None = Field(default=None, description="LoRA adapters (VLLM only).")
    features: list[ModelFeature] | None = Field(
        default=None,
        description="What the model supports; decides which APIs list it.",
    )
    engine: Engine = Field(description="The server that runs the model.")
    resource_profile: (
        Annotated[str, Field(json_schema_extra={"pattern": RESOURCE_PROFILE_PATTERN})] | None
    ) = Field(
        default=None,
        description=(
            'Resources per replica as "<resource-profile>:<count>", e.g. "amd-gpu-mi300x:1"; '
            "the profile must exist in the system configuration."
        ),
    )
    cache_profile: str | None = Field(
        default=None,
        description="Cache profile (from the system configuration) for the model's files.",
        json_schema_extra={CEL_VALIDATIONS: [_CACHE_PROFILE_IMMUTABLE.schema_entry()]},
    )
    image: str | None = Field(
        default=None,
        description="Server image; chosen from resourceProfile and engine when empty.",
    )
    args: list[str] | None = Field(default=None, description="Extra server arguments.")
    env: dict[str, str] | None = Field(default=None, description="Extra environment variables.")
    env_from: list[EnvFromSource] | None = Field(
        default=None, description="Environment variables from Secrets or ConfigMaps."
    )
    replicas: int | None = Field(
        default=None,
        description="Pods that should serve the model; managed by the autoscaler unless disabled.",
    )
    min_replicas: Annotated[int, NoCrdDefault] = Field(
        default=0, ge=0, description="Fewest replicas the model scales down to (0 is valid)."
    )
    max_replicas: int | None = Field(
        default=None, ge=1, description="Most replicas the model scales up to; empty: no limit."
    )
    autoscaling_disabled: Annotated[bool, NoCrdDefault] = Field(
        default=False, description="Stop managing replicas (and collecting server metrics)."
    )
    target_requests: int = Field(
        default=100, ge=1, description="Active requests per replica the autoscaler aims for."
    )
    scale_down_delay_seconds: int = Field(
        default=30, description="Minimum wait before scaling down once a scale-down is decided."
    )
    owner: Annotated[str, NoCrdDefault] = Field(
        default="", description="Deprecated: shown as owned_by in /v1/models, nothing else."
    )
    load_balancing: LoadBalancing = Field(
        default_factory=LoadBalancing, json_schema_extra={"default": {}}
    )
    files: list[File] | None = Field(
        default=None, max_length=10, description="Files mounted into the model's pods."
    )
    priority_class_name: str | None = Field(
        default=None, description="PriorityClass of the model's pods."
    )

    @field_validator("url")
    @classmethod
    def _url_has_known_scheme(cls, value: str) -> str:
        return _checked(_URL_RULE, value)

    @field_validator("resource_profile")
    @classmethod
    def _resource_profile_has_count(cls, value: str | None) -> str | None:
        if value is not None and (value.count(":") != 1 or not value.split(":")[1].isdigit()):
            raise PydanticCustomError(
                "resource_profile",
                'must look like "<resource-profile>:<count>", for example "amd-gpu-mi300x:1"',
            )
        return value

    @model_validator(mode="after")
    def _cel_rules_hold(self) -> Self:
        _raise_violations(
            "ModelSpec",
            [
                (
                    rule.field,
                    rule.message,
                    self.model_dump(mode="json", by_alias=True).get(rule.field),
                )
                for rule in _SPEC_RULES
                if not rule.holds(self)
            ],
        )
        return self

    def update_violations(self, *, previous: ModelSpec) -> list[RuleViolation]:
        """The rules an update from ``previous`` to this spec breaks (``oldSelf`` rules)."""
        return [
            RuleViolation(field=rule.field, message=rule.message)
            for rule in _SPEC_TRANSITION_RULES
            if not rule.holds(self, previous)
        ]


# ------------------------------------------------------------------ status


class ModelStatusReplicas(KubeModel):
    """Pods of the model: all of them (terminating included) and the ready ones."""

    all: Annotated[int, NoCrdDefault] = 0
    ready: Annotated[int, NoCrdDefault] = 0


class ModelStatusCache(KubeModel):
    """Whether the model's files are in its cache (only with a cacheProfile)."""

    loaded: Annotated[bool, NoCrdDefault] = False


class ModelStatus(KubeModel):
    """Observed state of a Model.

    ``conditions`` and ``observedGeneration`` are Kaiwo's (upstream's status has neither):
    whether the system configuration serves the Model, its cache, its rollout and adapters.
    """

    replicas: Annotated[ModelStatusReplicas, NoCrdDefault] = Field(
        default_factory=ModelStatusReplicas
    )
    cache: ModelStatusCache | None = None
    observed_generation: int | None = Field(
        default=None, description="The generation the status describes (Kaiwo)."
    )
    conditions: Conditions | None = Field(
        default=None,
        description="Configured, CacheLoaded, Ready, AdaptersLoaded, Valid (Kaiwo).",
    )


# ------------------------------------------------------------------ the kind


_NAME_RULE = CelRule[ObjectMeta](
    rule=f"size(self.metadata.name) <= {MAX_MODEL_NAME_LENGTH}",
    message=f"name must not exceed {MAX_MODEL_NAME_LENGTH} characters.",
    field="metadata.name",
    holds=lambda meta: meta.name is None or len(meta.name) <= MAX_MODEL_NAME_LENGTH,
)


class Model(KubeModel):
    """A model KubeAI serves (kubeai.org/v1 Model)."""

    model_config = ConfigDict(json_schema_extra={CEL_VALIDATIONS: [_NAME_RULE.schema_entry()]})

    crd: ClassVar[CrdInfo] = CrdInfo(
        group=GROUP,
        version=VERSION,
        kind="Model",
        plural="models",
        scope="Namespaced",
        short_names=("mdl",),
        categories=("kubeai",),
        printer_columns=(
            PrinterColumn(name="Engine", type="string", json_path=".spec.engine"),
            PrinterColumn(name="Features", type="string", json_path=".spec.features"),
            PrinterColumn(
                name="Replicas",
                type="integer",
                json_path=".status.replicas.all",
                description="Pods of the model, terminating ones included.",
            ),
            PrinterColumn(name="Ready", type="integer", json_path=".status.replicas.ready"),
            PrinterColumn(name="URL", type="string", json_path=".spec.url", priority=1),
            PrinterColumn(
                name="Profile", type="string", json_path=".spec.resourceProfile", priority=1
            ),
            PrinterColumn(name="Age", type="date", json_path=".metadata.creationTimestamp"),
        ),
        status_subresource=True,
        scale=ScaleSubresource(
            spec_replicas_path=".spec.replicas",
            status_replicas_path=".status.replicas.all",
        ),
        description="Model resources define the ML models that will be served by KubeAI.",
    )

    api_version: Literal["kubeai.org/v1"] = API_VERSION
    kind: Literal["Model"] = "Model"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: ModelSpec
    status: ModelStatus | None = None

    @model_validator(mode="after")
    def _name_fits(self) -> Self:
        self.__pydantic_fields_set__.update({"api_version", "kind"})
        if not _NAME_RULE.holds(self.metadata):
            _raise_violations("Model", [(_NAME_RULE.field, _NAME_RULE.message, self.metadata.name)])
        return self

    def update_violations(self, *, previous: Model) -> list[RuleViolation]:
        """The ``oldSelf`` rules an update from ``previous`` to this object breaks."""
        return [
            RuleViolation(field=f"spec.{violation.field}", message=violation.message)
            for violation in self.spec.update_violations(previous=previous.spec)
        ]


class ModelList(KubeModel):
    """A list of Models, as the API server returns it."""

    api_version: Literal["kubeai.org/v1"] = API_VERSION
    kind: Literal["ModelList"] = "ModelList"
    metadata: ListMeta = Field(default_factory=ListMeta)
    items: list[Model]

    @model_validator(mode="after")
    def _always_send_type_meta(self) -> Self:
        self.__pydantic_fields_set__.update({"api_version", "kind"})
        return self
