"""The system configuration of Models in force, from the cluster state.

It is the ConfigMap labelled ``kaiwo.silogen.ai/system-config=models`` (key ``models.yaml``,
one YAML document; see :mod:`kaiwo_contracts.models_config`). The watcher lists such
ConfigMaps only in the operator's own namespace; ConfigMaps of other namespaces reach the
planner only when they carry ``app.kubernetes.io/managed-by=kaiwo`` (the label of the
operator's own children), so a ConfigMap with that label is never taken for the
configuration: a tenant cannot configure the images and profiles of everyone's Models.
Several candidates: the first by namespace and name.

No ConfigMap: the chart's defaults. A ConfigMap whose document is not valid YAML or not a
valid configuration: no configuration at all (:attr:`ConfigLookup.problem`), and Models are
planned to change nothing but their status until it is fixed. Falling back to the defaults
instead would roll every Model onto other images and profiles because of a typo.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import yaml
from kaiwo_contracts.models_config import (
    CONFIG_MAP_KEY,
    CONFIG_MAP_LABEL,
    CONFIG_MAP_LABEL_VALUE,
    ModelsConfig,
)
from pydantic import ValidationError

from kaiwo_planner.domain.children.labels import LABEL_MANAGED_BY, MANAGED_BY_KAIWO
from kaiwo_planner.domain.state.cluster import ClusterState
from kaiwo_planner.domain.state.first_few import first_few
from kaiwo_planner.domain.state.planning_context import PlanningContext

CONFIG_MAP_KIND: Final = ("", "ConfigMap")
MAX_PROBLEMS: Final = 5


@dataclass(frozen=True, slots=True)
class ConfigLookup:
    """The configuration in force (None when the ConfigMap is invalid: ``problem`` says why)
    and the ConfigMap it came from (``namespace/name``, "" for the defaults)."""

    config: ModelsConfig | None
    source: str = ""
    problem: str = ""


def models_config(context: PlanningContext) -> ConfigLookup:
    """The configuration in force (see the module docstring)."""
    cluster = context.cluster
    return context.derived(
        ("models-config",),
        reads=(CONFIG_MAP_KIND,),
        inputs=lambda: (config_map_of(cluster),),
        compute=lambda: parse_config_map(config_map_of(cluster)),
    )


def ceiling_origin(config: ModelsConfig, source: str) -> str:
    """Where the autoscaler's cluster-wide ceiling (``modelAutoscaling.maxReplicas``) of a
    valid ``config`` comes from, for messages that must tell people whom to ask: the
    ConfigMap ``source`` that sets it, or the default and why it applies."""
    if (
        "model_autoscaling" in config.model_fields_set
        and "max_replicas" in config.model_autoscaling.model_fields_set
    ):
        return f"modelAutoscaling.maxReplicas in ConfigMap {source}"
    if not source:
        return (
            "the default of modelAutoscaling.maxReplicas (no ConfigMap labelled "
            f"{CONFIG_MAP_LABEL}={CONFIG_MAP_LABEL_VALUE} sets it)"
        )
    return f"the default of modelAutoscaling.maxReplicas, which ConfigMap {source} does not set"


def config_map_of(cluster: ClusterState) -> Mapping[str, Any] | None:
    """The ConfigMap holding the configuration, or None."""
    candidates = [
        found
        for found in cluster.objects_labelled(
            CONFIG_MAP_LABEL, CONFIG_MAP_LABEL_VALUE, kind="ConfigMap"
        )
        if _labels(found).get(LABEL_MANAGED_BY) != MANAGED_BY_KAIWO
    ]
    return candidates[0] if candidates else None


def parse_config_map(found: Mapping[str, Any] | None) -> ConfigLookup:
    """The configuration a ConfigMap (wire form) holds; None: the defaults."""
    if found is None:
        return ConfigLookup(config=ModelsConfig.default())
    meta = found.get("metadata") or {}
    source = f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"
    text = (found.get("data") or {}).get(CONFIG_MAP_KEY)
    if text is None:
        return ConfigLookup(config=ModelsConfig.default(), source=source)
    try:
        document = yaml.safe_load(str(text))
    except yaml.YAMLError as error:
        return ConfigLookup(None, source, f"{CONFIG_MAP_KEY} is not YAML: {_one_line(error)}")
    try:
        return ConfigLookup(ModelsConfig.from_document(document), source)
    except ValidationError as error:
        return ConfigLookup(None, source, _validation_problem(error))
    except (TypeError, ValueError) as error:
        return ConfigLookup(None, source, f"{CONFIG_MAP_KEY}: {_one_line(error)}")


def _validation_problem(error: ValidationError) -> str:
    problems = [
        f"{'.'.join(str(step) for step in detail['loc'])}: {detail['msg']}"
        for detail in error.errors()
    ]
    shown = first_few(problems, shown=MAX_PROBLEMS, separator="; ", and_more="; and ")
    return f"{CONFIG_MAP_KEY}: {shown}"


def _one_line(error: Exception) -> str:
    return " ".join(str(error).split())


def _labels(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    labels = (obj.get("metadata") or {}).get("labels")
    return labels if isinstance(labels, Mapping) else {}
