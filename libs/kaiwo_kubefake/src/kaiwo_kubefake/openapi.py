"""OpenAPI documents, enough for kubectl: ``/openapi/v3`` lists one document per served
group-version; each names the kinds' paths with a PATCH that accepts ``fieldValidation``
(so ``kubectl apply`` validates on the server instead of refusing without a schema) and, for
custom resources, the CRD version's schema under ``components.schemas`` tagged with
``x-kubernetes-group-version-kind`` (what ``kubectl explain`` reads). ``/openapi/v2`` carries
the same schemas as Swagger 2.0 definitions.

The fake accepts ``fieldValidation`` and validates as it always does (pruning unknown fields of
custom resources, see :mod:`kaiwo_kubefake.custom_resources`); it does not reject them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

from kaiwo_kubefake.kinds import ResourceKind

_FIELD_VALIDATION: Final = {
    "name": "fieldValidation",
    "in": "query",
    "description": "How the server treats unknown or duplicate fields (Ignore, Warn, Strict).",
    "schema": {"type": "string", "uniqueItems": True},
}


def _path_key(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _definition_name(group: str, version: str, kind: str) -> str:
    reversed_group = ".".join(reversed(group.split("."))) if group else "io.k8s.api.core"
    return f"{reversed_group}.{version}.{kind}"


def _custom_schemas(crds: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    """Each custom kind's schema by (group/version, definition name)."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for crd in crds:
        spec = crd.get("spec") or {}
        group, kind = spec.get("group", ""), (spec.get("names") or {}).get("kind", "")
        for version in spec.get("versions") or ():
            if not version.get("served", True):
                continue
            schema = dict((version.get("schema") or {}).get("openAPIV3Schema") or {})
            schema.setdefault("type", "object")
            schema["x-kubernetes-group-version-kind"] = [
                {"group": group, "version": version["name"], "kind": kind}
            ]
            key = (
                _path_key(group, version["name"]),
                _definition_name(group, version["name"], kind),
            )
            found[key] = schema
    return found


def openapi_v2(crds: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    definitions = {name: schema for (_, name), schema in _custom_schemas(crds).items()}
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes (kaiwo fake)", "version": "v1.33.0"},
        "paths": {},
        "definitions": definitions,
    }


def openapi_v3_index(
    crds: Iterable[Mapping[str, Any]], kinds: Iterable[ResourceKind]
) -> dict[str, Any]:
    crd_list = list(crds)
    paths = {}
    for key in sorted({_path_key(k.group, k.version) for k in kinds}):
        document = openapi_v3_group_version(crd_list, key, kinds=kinds)
        digest = hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()
        paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={digest[:32].upper()}"}
    return {"paths": paths}


def openapi_v3_group_version(
    crds: Iterable[Mapping[str, Any]],
    path: str,
    *,
    kinds: Iterable[ResourceKind] | None = None,
) -> dict[str, Any] | None:
    """The document of one group-version (``apis/<group>/<version>`` or ``api/v1``); None
    when nothing is served there. ``kinds`` defaults to the kinds the CRDs declare."""
    crd_list = list(crds)
    served = [k for k in (kinds or []) if _path_key(k.group, k.version) == path]
    schemas = {name: s for (key, name), s in _custom_schemas(crd_list).items() if key == path}
    gvks = [(k.group, k.version, k.kind, k.plural, k.namespaced) for k in served] or _crd_kinds(
        crd_list, path
    )
    if not gvks:
        return None
    paths: dict[str, Any] = {}
    for group, version, kind, plural, namespaced in gvks:
        scope = "namespaces/{namespace}/" if namespaced else ""
        gvk = {"group": group, "version": version, "kind": kind}
        name = _definition_name(group, version, kind)
        operation = {
            "operationId": f"patch{kind}",
            "parameters": [_FIELD_VALIDATION],
            "x-kubernetes-action": "patch",
            "x-kubernetes-group-version-kind": gvk,
        }
        paths[f"/{path}/{scope}{plural}/{{name}}"] = {"patch": operation}
        if name not in schemas:
            schemas[name] = {
                "type": "object",
                "x-kubernetes-group-version-kind": [gvk],
                "x-kubernetes-preserve-unknown-fields": True,
            }
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (kaiwo fake)", "version": "v1.33.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }


def _crd_kinds(
    crds: Iterable[Mapping[str, Any]], path: str
) -> list[tuple[str, str, str, str, bool]]:
    return [
        (
            spec.get("group", ""),
            version["name"],
            (spec.get("names") or {}).get("kind", ""),
            (spec.get("names") or {}).get("plural", ""),
            spec.get("scope", "Namespaced") == "Namespaced",
        )
        for spec in ((crd.get("spec") or {}) for crd in crds)
        for version in spec.get("versions") or ()
        if _path_key(spec.get("group", ""), version.get("name", "")) == path
    ]
