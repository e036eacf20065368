"""The objects a Model's spec is made of: LoRA adapters, load balancing and mounted files,
with the URL schemes a model and an adapter may come from.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Literal

from pydantic import Field, field_validator

from kaiwo_contracts.crds.base import KubeModel
from kaiwo_contracts.crds.cel_rules import (
    CEL_VALIDATIONS,
    CelRule,
    TransitionRule,
    cel_starts_with_any,
    checked,
    quoted_list,
    starts_with_any,
)

if TYPE_CHECKING:
    # The immutable-replication rule compares two whole specs; ruff does not see the name in
    # the rule's subscript, mypy does.
    from kaiwo_contracts.crds.kubeai_v1.model_spec import ModelSpec  # noqa: F401

MAX_RING_REPLICATION: Final = 1000

LoadBalancingStrategy = Literal["LeastLoad", "PrefixHash"]

MODEL_URL_SCHEMES: Final = ("hf://", "pvc://", "ollama://", "s3://", "gs://", "oss://")
ADAPTER_URL_SCHEMES: Final = ("hf://", "s3://", "gs://", "oss://")
CACHEABLE_URL_SCHEMES: Final = ADAPTER_URL_SCHEMES
_ADAPTER_URL_RULE = CelRule[str](
    rule=cel_starts_with_any("self", ADAPTER_URL_SCHEMES),
    message=f"adapter url must start with {quoted_list(ADAPTER_URL_SCHEMES)}.",
    field="url",
    holds=lambda url: starts_with_any(url, ADAPTER_URL_SCHEMES),
)
_FILE_PATH_RULE = CelRule[str](
    rule="self.startsWith('/') && !self.contains(':')",
    message=(
        "Path must be an absolute path, starting with /, and must not contain a ':' character."
    ),
    field="path",
    holds=lambda path: path.startswith("/") and ":" not in path,
)
REPLICATION_IMMUTABLE = TransitionRule["ModelSpec"](
    rule="self == oldSelf",
    message="replication is immutable.",
    field="loadBalancing.prefixHash.replication",
    holds=lambda new, old: (
        new.load_balancing.prefix_hash.replication == old.load_balancing.prefix_hash.replication
    ),
)

if TYPE_CHECKING:  # the spec's immutable replication rule compares two specs
    pass


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
        return checked(_ADAPTER_URL_RULE, value)


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
        json_schema_extra={CEL_VALIDATIONS: [REPLICATION_IMMUTABLE.schema_entry()]},
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
        return checked(_FILE_PATH_RULE, value)
