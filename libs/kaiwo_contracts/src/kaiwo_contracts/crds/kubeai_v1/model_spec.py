"""A Model's spec: its fields, and the CEL rules across them (including the ``oldSelf`` rules an
update must keep, :meth:`ModelSpec.update_violations`).
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal, Self

from pydantic import ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from kaiwo_contracts.crds.base import KubeModel
from kaiwo_contracts.crds.cel_rules import (
    CEL_VALIDATIONS,
    CelRule,
    RuleViolation,
    TransitionRule,
    cel_starts_with_any,
    checked,
    quoted_list,
    raise_violations,
    starts_with_any,
)
from kaiwo_contracts.crds.core_v1 import EnvFromSource
from kaiwo_contracts.crds.kubeai_v1.spec_parts import (
    CACHEABLE_URL_SCHEMES,
    MODEL_URL_SCHEMES,
    REPLICATION_IMMUTABLE,
    Adapter,
    File,
    LoadBalancing,
)
from kaiwo_contracts.crds.structural import NoCrdDefault

Engine = Literal["OLlama", "VLLM", "FasterWhisper", "Infinity"]
ModelFeature = Literal["TextGeneration", "TextEmbedding", "SpeechToText"]
RESOURCE_PROFILE_PATTERN: Final = r"^[^:]+:[0-9]+$"

# Field-level rules: one predicate on a string field.
_URL_MESSAGE = f"url must start with {quoted_list(MODEL_URL_SCHEMES)} and not be empty."
_URL_RULE = CelRule[str](
    rule=cel_starts_with_any("self", MODEL_URL_SCHEMES),
    message=_URL_MESSAGE,
    field="url",
    holds=lambda url: starts_with_any(url, MODEL_URL_SCHEMES),
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
# Kaiwo's (decision 0124): the field-level rule above lets a profile be removed, and the
# Model's files would then stay on the shared volume for good (its finalizer goes with the
# profile, and nothing knows the directory any more). Deleting the Model evicts them.
_CACHE_PROFILE_KEPT = TransitionRule["ModelSpec"](
    rule="!has(oldSelf.cacheProfile) || has(self.cacheProfile)",
    message=(
        "cacheProfile cannot be removed: delete the Model (its files are then evicted from "
        "the cache) and create it again without one."
    ),
    field="cacheProfile",
    holds=lambda new, old: old.cache_profile is None or new.cache_profile is not None,
)
_SPEC_RULES: tuple[CelRule[ModelSpec], ...] = (
    CelRule(
        rule="!has(self.cacheProfile) || " + cel_starts_with_any("self.url", CACHEABLE_URL_SCHEMES),
        message=(
            "cacheProfile is only supported with urls of format "
            '"hf://...", "s3://...", "gs://...", or "oss://..." at the moment.'
        ),
        field="cacheProfile",
        holds=lambda spec: (
            spec.cache_profile is None or starts_with_any(spec.url, CACHEABLE_URL_SCHEMES)
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
    # Upstream's rule reads self.minReplicas, which Go clients always send (no omitempty). The
    # CRD has no default for it (the reference lists none), so a manifest with only maxReplicas
    # would fail with "no such key"; unset counts as 0, as the model and the controller read it.
    CelRule(
        rule=(
            "!has(self.maxReplicas) || "
            "(has(self.minReplicas) ? self.minReplicas : 0) <= self.maxReplicas"
        ),
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
    _CACHE_PROFILE_KEPT,
    REPLICATION_IMMUTABLE,
)

# The order of upstream's CRD: the transition rule on url sits before the files rule.
_SPEC_SCHEMA_RULES: list[Any] = [rule.schema_entry() for rule in _SPEC_RULES[:5]] + [
    _SPEC_TRANSITION_RULES[0].schema_entry(),
    _SPEC_RULES[5].schema_entry(),
    _CACHE_PROFILE_KEPT.schema_entry(),
]


MOST_PROFILE_DIGITS: Final = 9
"""Digits of a ``resourceProfile`` count (leading zeros aside): up to 999,999,999."""


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
        description=(
            "Cache profile (from the system configuration) for the model's files. It cannot "
            "change, nor be removed, once set."
        ),
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
        return checked(_URL_RULE, value)

    @field_validator("resource_profile")
    @classmethod
    def _resource_profile_has_count(cls, value: str | None) -> str | None:
        if value is not None and (value.count(":") != 1 or not value.split(":")[1].isdigit()):
            raise PydanticCustomError(
                "resource_profile",
                'must look like "<resource-profile>:<count>", for example "amd-gpu-mi300x:1"',
            )
        if value is not None and len(value.split(":")[1].lstrip("0")) > MOST_PROFILE_DIGITS:
            # The CRD's pattern takes any number of digits; Python's int() refuses more than
            # 4,300 (planning the Model raised, and nothing was told), and a count of ten
            # digits multiplies a profile past any node.
            raise PydanticCustomError(
                "resource_profile",
                "the count must be at most {most}",
                {"most": 10**MOST_PROFILE_DIGITS - 1},
            )
        return value

    @model_validator(mode="after")
    def _cel_rules_hold(self) -> Self:
        raise_violations(
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
