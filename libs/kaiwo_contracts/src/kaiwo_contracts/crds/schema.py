"""CustomResourceDefinitions (apiextensions.k8s.io/v1) generated from the API models: the
root schema, names, subresources and printer columns of each top-level kind around the
structural schema of its model (:mod:`kaiwo_contracts.crds.structural`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel

from kaiwo_contracts.crds.base import CrdInfo
from kaiwo_contracts.crds.structural import (
    MAP_TYPE,
    OMIT_CRD_DEFAULT,
    VALIDATIONS,
    NoCrdDefault,
    SchemaGenerationError,
    structural_schema,
)

__all__ = [
    "CRD_API_VERSION",
    "CRD_KIND",
    "MAP_TYPE",
    "OMIT_CRD_DEFAULT",
    "VALIDATIONS",
    "NoCrdDefault",
    "SchemaGenerationError",
    "crd_info",
    "custom_resource_definition",
    "custom_resource_definitions",
    "structural_schema",
]


CRD_API_VERSION = "apiextensions.k8s.io/v1"
CRD_KIND = "CustomResourceDefinition"

_TOP_LEVEL_FIELDS = ("apiVersion", "kind", "metadata")
_API_VERSION_DOC = (
    "APIVersion defines the versioned schema of this representation of an object. "
    "Servers should convert recognized schemas to the latest internal value, and may reject "
    "unrecognized values."
)
_KIND_DOC = (
    "Kind is a string value representing the REST resource this object represents. "
    "Servers may infer this from the endpoint the client submits requests to. "
    "In CamelCase."
)


def crd_info(model: type[BaseModel]) -> CrdInfo:
    """The :class:`CrdInfo` a top-level model carries as ``crd``."""
    info = getattr(model, "crd", None)
    if not isinstance(info, CrdInfo):
        raise SchemaGenerationError(model.__name__, "has no `crd: ClassVar[CrdInfo]`")
    return info


def custom_resource_definition(model: type[BaseModel]) -> dict[str, Any]:
    """The CustomResourceDefinition of a top-level model, as the API server takes it."""
    info = crd_info(model)
    version: dict[str, Any] = {
        "name": info.version,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": _root_schema(model, info)},
    }
    subresources = _subresources(info)
    if subresources:
        version["subresources"] = subresources
    if info.printer_columns:
        version["additionalPrinterColumns"] = [
            _printer_column(column) for column in info.printer_columns
        ]
    return {
        "apiVersion": CRD_API_VERSION,
        "kind": CRD_KIND,
        "metadata": {"name": info.crd_name},
        "spec": {
            "group": info.group,
            "names": _names(info),
            "scope": info.scope,
            "versions": [version],
        },
    }


def custom_resource_definitions(models: Iterable[type[BaseModel]]) -> list[dict[str, Any]]:
    """One CRD per model, sorted by CRD name; two models for one CRD name are an error."""
    by_name: dict[str, dict[str, Any]] = {}
    for model in models:
        crd = custom_resource_definition(model)
        name = crd["metadata"]["name"]
        if name in by_name:
            raise SchemaGenerationError(model.__name__, f"a second model for CRD {name}")
        by_name[name] = crd
    return [by_name[name] for name in sorted(by_name)]


def _root_schema(model: type[BaseModel], info: CrdInfo) -> dict[str, Any]:
    schema = structural_schema(model)
    properties = schema.get("properties", {})
    for name in ("spec", *(("status",) if info.status_subresource else ())):
        if name not in properties:
            raise SchemaGenerationError(model.__name__, f"a top-level model needs `{name}`")
    root: dict[str, Any] = {
        "description": info.description or schema.get("description", ""),
        "type": "object",
        "properties": {
            "apiVersion": {"description": _API_VERSION_DOC, "type": "string"},
            "kind": {"description": _KIND_DOC, "type": "string"},
            "metadata": {"type": "object"},
            **{
                name: _without_default(node)
                for name, node in properties.items()
                if name not in _TOP_LEVEL_FIELDS
            },
        },
    }
    required = [name for name in schema.get("required", []) if name not in _TOP_LEVEL_FIELDS]
    if required:
        root["required"] = required
    if VALIDATIONS in schema:
        root[VALIDATIONS] = schema[VALIDATIONS]
    if not root["description"]:
        del root["description"]
    return root


def _without_default(node: Mapping[str, Any]) -> dict[str, Any]:
    # A defaulted spec or status would only fill every stored object with empty sections.
    return {k: v for k, v in node.items() if k != "default"}


def _names(info: CrdInfo) -> dict[str, Any]:
    names: dict[str, Any] = {
        "kind": info.kind,
        "listKind": f"{info.kind}List",
        "plural": info.plural,
        "singular": info.singular_name,
    }
    if info.short_names:
        names["shortNames"] = list(info.short_names)
    if info.categories:
        names["categories"] = list(info.categories)
    return names


def _subresources(info: CrdInfo) -> dict[str, Any]:
    subresources: dict[str, Any] = {}
    if info.status_subresource:
        subresources["status"] = {}
    if info.scale is not None:
        scale = {
            "specReplicasPath": info.scale.spec_replicas_path,
            "statusReplicasPath": info.scale.status_replicas_path,
        }
        if info.scale.label_selector_path is not None:
            scale["labelSelectorPath"] = info.scale.label_selector_path
        subresources["scale"] = scale
    return subresources


def _printer_column(column: Any) -> dict[str, Any]:
    rendered: dict[str, Any] = {
        "name": column.name,
        "type": column.type,
        "jsonPath": column.json_path,
    }
    if column.description:
        rendered["description"] = column.description
    if column.priority:
        rendered["priority"] = column.priority
    return rendered
