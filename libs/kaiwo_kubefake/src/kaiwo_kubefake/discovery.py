"""Discovery documents (``/api``, ``/apis``, ``/apis/<group>/<version>``) from the served kinds."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from kaiwo_kubefake.kinds import ResourceKind

SUBRESOURCE_VERBS = ["get", "patch", "update"]
_VERSION = re.compile(r"^v(\d+)(?:(alpha|beta)(\d+))?$")


def version_priority(version: str) -> tuple[int, int, int, str]:
    """Kubernetes version order: GA before beta before alpha, higher numbers first."""
    match = _VERSION.match(version)
    if not match:
        return (3, 0, 0, version)
    major, stage, minor = match.groups()
    stage_rank = {None: 0, "beta": 1, "alpha": 2}[stage]
    return (stage_rank, -int(major), -int(minor or 0), version)


def resource_list(*, group_version: str, kinds: Iterable[ResourceKind]) -> dict[str, Any]:
    resources: list[dict[str, Any]] = []
    for kind in sorted(kinds, key=lambda k: k.plural):
        entry: dict[str, Any] = {
            "name": kind.plural,
            "singularName": kind.singular_name,
            "namespaced": kind.namespaced,
            "kind": kind.kind,
            "verbs": list(kind.verbs),
        }
        if kind.short_names:
            entry["shortNames"] = list(kind.short_names)
        if kind.categories:
            entry["categories"] = list(kind.categories)
        resources.append(entry)
        if kind.status_subresource:
            resources.append(
                {
                    "name": f"{kind.plural}/status",
                    "singularName": "",
                    "namespaced": kind.namespaced,
                    "kind": kind.kind,
                    "verbs": SUBRESOURCE_VERBS,
                }
            )
        if kind.scale is not None:
            resources.append(
                {
                    "name": f"{kind.plural}/scale",
                    "singularName": "",
                    "namespaced": kind.namespaced,
                    "group": "autoscaling",
                    "version": "v1",
                    "kind": "Scale",
                    "verbs": SUBRESOURCE_VERBS,
                }
            )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }


def core_versions(*, server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def _group_entry(name: str, versions: list[str]) -> dict[str, Any]:
    ordered = sorted(versions, key=version_priority)
    entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in ordered]
    return {"name": name, "versions": entries, "preferredVersion": entries[0]}


def _versions_by_group(kinds: Iterable[ResourceKind]) -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for kind in kinds:
        if not kind.group:
            continue
        versions = groups.setdefault(kind.group, [])
        if kind.version not in versions:
            versions.append(kind.version)
    return groups


def group_list(kinds: Iterable[ResourceKind]) -> dict[str, Any]:
    groups = _versions_by_group(kinds)
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_group_entry(name, versions) for name, versions in sorted(groups.items())],
    }


def group(name: str, kinds: Iterable[ResourceKind]) -> dict[str, Any] | None:
    versions = _versions_by_group(kinds).get(name)
    if not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_entry(name, versions)}


def server_version() -> dict[str, str]:
    return {
        "major": "1",
        "minor": "31",
        "gitVersion": "v1.31.0+kaiwo-kubefake",
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "2024-08-13T00:00:00Z",
        "goVersion": "go1.22",
        "compiler": "gc",
        "platform": "linux/amd64",
    }
