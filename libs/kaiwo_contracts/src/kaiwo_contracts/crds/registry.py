"""The kinds the operator serves, and the model for an ``apiVersion``/``kind`` pair.

``SERVED_KINDS`` is the one list every generic part reads: the CRD generator writes one CRD per
entry, the watcher watches them, ``kaiwo validate`` parses manifests with them. A kind's list
type (``KaiwoJobList``) is found through its item type, so ``model_for`` answers for both.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel

from kaiwo_contracts.crds.config_v1alpha1 import (
    AIMNamespaceConfig,
    AIMNamespaceConfigList,
    KaiwoConfig,
    KaiwoConfigList,
)
from kaiwo_contracts.crds.kaiwo_v1alpha1 import (
    GpuWorkload,
    GpuWorkloadList,
    KaiwoJob,
    KaiwoJobList,
    KaiwoQueueConfig,
    KaiwoQueueConfigList,
    KaiwoService,
    KaiwoServiceList,
)
from kaiwo_contracts.crds.kubeai_v1 import Model, ModelList
from kaiwo_contracts.crds.schema import crd_info

SERVED_KINDS: tuple[type[BaseModel], ...] = (
    KaiwoJob,
    KaiwoService,
    KaiwoQueueConfig,
    KaiwoConfig,
    AIMNamespaceConfig,
    Model,
    GpuWorkload,
)
"""Every top-level model with a CRD, in the order people meet them."""

LIST_KINDS: Mapping[type[BaseModel], type[BaseModel]] = {
    KaiwoJob: KaiwoJobList,
    KaiwoService: KaiwoServiceList,
    KaiwoQueueConfig: KaiwoQueueConfigList,
    KaiwoConfig: KaiwoConfigList,
    AIMNamespaceConfig: AIMNamespaceConfigList,
    Model: ModelList,
    GpuWorkload: GpuWorkloadList,
}
"""The ``<Kind>List`` model of each served kind."""


def _index() -> dict[tuple[str, str], type[BaseModel]]:
    index: dict[tuple[str, str], type[BaseModel]] = {}
    for model in SERVED_KINDS:
        info = crd_info(model)
        index[(info.api_version, info.kind)] = model
        index[(info.api_version, f"{info.kind}List")] = LIST_KINDS[model]
    return index


_BY_TYPE = _index()


def model_for(api_version: str, kind: str) -> type[BaseModel] | None:
    """The model of ``kind`` in ``api_version`` (a served kind or its list), or None."""
    return _BY_TYPE.get((api_version, kind))


def served_types() -> tuple[tuple[str, str], ...]:
    """Every ``(apiVersion, kind)`` pair of a served kind (lists excluded), sorted."""
    return tuple(
        sorted((crd_info(model).api_version, crd_info(model).kind) for model in SERVED_KINDS)
    )
