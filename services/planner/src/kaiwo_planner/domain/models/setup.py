"""A Model resolved against the system configuration: what its objects are made from.

:func:`model_setup` turns the Model's spec and the configuration into a :class:`ModelSetup`
(resources, image, source, cache), or says why it cannot (:class:`SetupProblem`, the reason
and message of the ``Configured`` condition). Upstream fails each reconcile with the same
messages; here the Model's status says it and nothing of it is changed.

Choices where upstream has a quirk:

* No ``resourceProfile``: no resources and the ``default`` image (upstream fails every
  reconcile).
* Engine and URL that cannot work together are refused up front rather than started as a
  server that can never load its model: ``ollama://`` only for OLlama; OLlama only with
  ``ollama://`` and ``pvc://``, and a ``pvc://`` one only with the model's tag
  (``?model=<tag>``: its startup probe copies that tag to the Model's name, and without one
  it ran ``ollama cp`` with no source and the Pod never turned Ready; decision 0253);
  ``s3://`` without a cache only for VLLM (it streams from S3).
* Quantities are multiplied exactly, keeping their unit (``24Gi`` x 2 = ``48Gi``, ``500m`` x 3 =
  ``1500m``); an integer stays an integer.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Final

from kaiwo_contracts.crds.kubeai_v1.model import Model
from kaiwo_contracts.models_config import (
    DEFAULT_IMAGE_NAME,
    ModelsConfig,
    ResourceProfile,
    SharedFilesystem,
)

from kaiwo_planner.domain.models.sources import ModelSource, parse_model_url
from kaiwo_planner.domain.settings.namespace_config import NamespaceSettings
from kaiwo_planner.domain.state.nodes import parse_quantity

_NUMBER_AND_UNIT: Final = re.compile(r"^([0-9]+(?:\.[0-9]+)?)([a-zA-Z]*)$")

REASON_INVALID_CONFIG: Final = "InvalidSystemConfig"
REASON_PROFILE_NOT_FOUND: Final = "ResourceProfileNotFound"
REASON_CACHE_PROFILE_NOT_FOUND: Final = "CacheProfileNotFound"
REASON_NO_IMAGE: Final = "MissingServerImage"
REASON_UNSUPPORTED_URL: Final = "UnsupportedURL"


@dataclass(frozen=True, slots=True)
class ServerResources:
    """A resource profile times its count: the server container's resources and the Pod's
    scheduling fields."""

    requests: Mapping[str, int | str] = field(default_factory=dict)
    limits: Mapping[str, int | str] = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    affinity: Mapping[str, Any] | None = None
    tolerations: tuple[Mapping[str, Any], ...] = ()
    scheduler_name: str | None = None
    runtime_class_name: str | None = None
    image_name: str = DEFAULT_IMAGE_NAME


@dataclass(frozen=True, slots=True)
class CacheSetup:
    """The cache profile a Model uses."""

    profile: str
    filesystem: SharedFilesystem


@dataclass(frozen=True, slots=True)
class ModelSetup:
    """Everything a Model's objects are made from (the Model itself included)."""

    model: Model
    config: ModelsConfig
    source: ModelSource
    resources: ServerResources
    image: str
    cache: CacheSetup | None
    namespace: NamespaceSettings

    @property
    def name(self) -> str:
        return self.model.metadata.name or ""

    @property
    def namespace_name(self) -> str:
        return self.model.metadata.namespace or ""

    @property
    def uid(self) -> str:
        return self.model.metadata.uid or ""

    @property
    def engine(self) -> str:
        return self.model.spec.engine


@dataclass(frozen=True, slots=True)
class SetupProblem:
    """Why a Model cannot be served with the configuration in force."""

    reason: str
    message: str


def model_setup(
    model: Model, *, config: ModelsConfig, namespace: NamespaceSettings
) -> ModelSetup | SetupProblem:
    """``model`` resolved against ``config`` (see the module docstring)."""
    spec = model.spec
    try:
        source = parse_model_url(spec.url)
    except ValueError as error:
        return SetupProblem(REASON_UNSUPPORTED_URL, str(error))
    unsupported = _unsupported(spec.engine, source, cached=spec.cache_profile is not None)
    if unsupported:
        return SetupProblem(REASON_UNSUPPORTED_URL, unsupported)
    resources = server_resources(spec.resource_profile, config)
    if isinstance(resources, SetupProblem):
        return resources
    cache = None
    if spec.cache_profile is not None:
        found = config.cache_profiles.get(spec.cache_profile)
        if found is None:
            return SetupProblem(
                REASON_CACHE_PROFILE_NOT_FOUND, f'cache profile not found: "{spec.cache_profile}"'
            )
        cache = CacheSetup(profile=spec.cache_profile, filesystem=found.shared_filesystem)
    image = spec.image or _server_image(spec.engine, resources.image_name, config)
    if not image:
        return SetupProblem(
            REASON_NO_IMAGE,
            f"missing default server image: modelServers.{spec.engine}.images has neither "
            f'"{resources.image_name}" nor "{DEFAULT_IMAGE_NAME}"',
        )
    return ModelSetup(
        model=model,
        config=config,
        source=source,
        resources=resources,
        image=image,
        cache=cache,
        namespace=namespace,
    )


def server_resources(profile: str | None, config: ModelsConfig) -> ServerResources | SetupProblem:
    """The resources of ``<profile>:<count>`` (none without a profile)."""
    if not profile:
        return ServerResources()
    name, _, count_text = profile.partition(":")
    if not count_text.isdigit():
        return SetupProblem(
            REASON_PROFILE_NOT_FOUND,
            f'invalid resource profile: "{profile}", should match <name>:<multiple>, '
            "example: nvidia-gpu-l4:2",
        )
    found = config.resource_profiles.get(name)
    if found is None:
        return SetupProblem(REASON_PROFILE_NOT_FOUND, f'resource profile not found: "{name}"')
    return _times(found, int(count_text))


def _times(profile: ResourceProfile, count: int) -> ServerResources:
    return ServerResources(
        requests={key: multiplied(value, count) for key, value in profile.requests.items()},
        limits={key: multiplied(value, count) for key, value in profile.limits.items()},
        node_selector=dict(profile.node_selector),
        affinity=profile.affinity,
        tolerations=tuple(profile.tolerations),
        scheduler_name=profile.scheduler_name,
        runtime_class_name=profile.runtime_class_name,
        image_name=profile.image_name or DEFAULT_IMAGE_NAME,
    )


def multiplied(quantity: int | str, count: int) -> int | str:
    """``quantity`` x ``count``, in the quantity's own unit (see the module docstring)."""
    if isinstance(quantity, int):
        return quantity * count
    found = _NUMBER_AND_UNIT.match(quantity.strip())
    if found is not None:
        return _plain(Decimal(found.group(1)) * count) + found.group(2)
    return _plain(parse_quantity(quantity) * count)


def _plain(number: Decimal) -> str:
    if number == number.to_integral_value():
        return str(int(number))
    return format(number.normalize(), "f")


def _server_image(engine: str, image_name: str, config: ModelsConfig) -> str:
    images = config.model_servers.for_engine(engine).images
    return images.get(image_name) or images.get(DEFAULT_IMAGE_NAME) or ""


def _unsupported(engine: str, source: ModelSource, *, cached: bool) -> str:
    scheme = source.scheme
    if scheme == "ollama" and engine != "OLlama":
        return f"ollama:// URLs are served by the OLlama engine only, not {engine}"
    if engine == "OLlama" and scheme not in {"ollama", "pvc"}:
        return f"the OLlama engine serves ollama:// and pvc:// URLs, not {scheme}://"
    if engine == "OLlama" and scheme == "pvc" and not source.model_param:
        return (
            "a pvc:// URL for the OLlama engine names the model stored in the claim: "
            f"pvc://<claim>[/<path>]?model=<tag>, not {source.original}"
        )
    if scheme == "s3" and not cached and engine != "VLLM":
        return (
            f"s3:// URLs without a cacheProfile are streamed by VLLM only; {engine} needs a "
            "cacheProfile to load them"
        )
    if scheme not in {"hf", "pvc", "ollama", "s3", "gs", "oss"}:
        return f"unknown URL scheme {scheme}://"
    return ""
