"""Which Models an observed change concerns beyond their own objects.

A Model's Pods, Jobs, ConfigMaps and Role name it as their controller, so the general
fan-out (:mod:`kaiwo_planner.domain.fanout`) follows them to it. Here the rest:

* the system configuration's ConfigMap (label ``kaiwo.silogen.ai/system-config=models``,
  in either the old or the new version): every Model (images, profiles, surge);
* an AIMNamespaceConfig: the Models of its namespace (credentials, pull secrets);
* a cache profile's shared volume (label ``kaiwo.silogen.ai/cache-profile``), which has no
  owner: the Models of its namespace (a deleted volume is created again; a deleting Model
  waits for it).

Nodes are not read by Model plans, so they re-plan none.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from kaiwo_contracts.models_config import CONFIG_MAP_LABEL, CONFIG_MAP_LABEL_VALUE
from kaiwo_contracts.plans import ObjectRef

from kaiwo_planner.domain.models.names import LABEL_CACHE_PROFILE
from kaiwo_planner.domain.state.observed_objects import Change
from kaiwo_planner.domain.state.projection import Projection

MODEL: Final = ("kubeai.org", "Model")
AIM_NAMESPACE_CONFIG: Final = ("config.kaiwo.silogen.ai", "AIMNamespaceConfig")
CONFIG_MAP: Final = ("", "ConfigMap")
PERSISTENT_VOLUME_CLAIM: Final = ("", "PersistentVolumeClaim")


def models_concerned(change: Change, projection: Projection) -> list[ObjectRef]:
    """The Models ``change`` concerns other than by ownership (see the module docstring)."""
    kind = (change.group, change.kind)
    versions = [v for v in (change.previous, change.object) if v is not None]
    if kind == AIM_NAMESPACE_CONFIG:
        return all_models(projection, namespace=change.ref.namespace)
    if kind == CONFIG_MAP and any(_is_system_config(v) for v in versions):
        return all_models(projection)
    if kind == PERSISTENT_VOLUME_CLAIM and any(LABEL_CACHE_PROFILE in _labels(v) for v in versions):
        return all_models(projection, namespace=change.ref.namespace)
    return []


def all_models(projection: Projection, *, namespace: str | None = None) -> list[ObjectRef]:
    """Every Model the projection holds (in one namespace, if given)."""
    group, kind = MODEL
    return [
        ObjectRef.of(found)
        for found in projection.objects_of_kind(group=group, kind=kind, namespace=namespace)
    ]


def _is_system_config(config_map: Mapping[str, Any]) -> bool:
    return _labels(config_map).get(CONFIG_MAP_LABEL) == CONFIG_MAP_LABEL_VALUE


def _labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    labels = (obj.get("metadata") or {}).get("labels")
    return labels if isinstance(labels, Mapping) else {}
