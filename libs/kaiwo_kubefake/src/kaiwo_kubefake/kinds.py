"""The kinds the fake serves: built-in ones and those registered from CRDs or by tests."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from kaiwo_kubefake.errors import bad_request
from kaiwo_kubefake.structural_schema import StructuralSchema, is_open, parse_schema

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True, slots=True)
class ScalePaths:
    """Where the scale subresource reads and writes replicas (dotted JSON paths)."""

    spec_replicas_path: str = ".spec.replicas"
    status_replicas_path: str = ".status.replicas"
    label_selector_path: str | None = None


@dataclass(frozen=True, slots=True)
class ResourceKind:
    """One served resource: group/version/plural plus what the API server knows of it."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    status_subresource: bool = True
    scale: ScalePaths | None = None
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    # Some built-ins carry no metadata.generation (ConfigMap, Secret, Event, Lease, ...).
    has_generation: bool = True
    # batch/v1 Jobs orphan their Pods when a delete names no propagation policy.
    default_propagation: str = "Background"
    verbs: tuple[str, ...] = ALL_VERBS
    singular: str = field(default="")
    # Served from a CRD (strategic merge patch is refused, as the API server does).
    custom: bool = False
    # A CRD version's structural schema: custom resources are pruned and defaulted by it.
    schema: StructuralSchema | None = field(default=None, compare=False, repr=False)
    # Whether objects are kept in this version; if not, the storage version's schema.
    storage_version: bool = True
    storage_schema: StructuralSchema | None = field(default=None, compare=False, repr=False)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_version(self) -> str:
        return self.api_version

    @property
    def key(self) -> tuple[str, str]:
        """Storage key: objects are shared across versions of one group/plural."""
        return (self.group, self.plural)

    @property
    def singular_name(self) -> str:
        return self.singular or self.kind.lower()


def _core(plural: str, kind: str, *, namespaced: bool = True, **options: Any) -> ResourceKind:
    return ResourceKind(
        group="", version="v1", plural=plural, kind=kind, namespaced=namespaced, **options
    )


BUILTIN_KINDS: tuple[ResourceKind, ...] = (
    _core("pods", "Pod", short_names=("po",)),
    _core("nodes", "Node", namespaced=False, short_names=("no",)),
    _core("namespaces", "Namespace", namespaced=False, short_names=("ns",), has_generation=False),
    _core(
        "configmaps",
        "ConfigMap",
        status_subresource=False,
        short_names=("cm",),
        has_generation=False,
    ),
    _core("secrets", "Secret", status_subresource=False, has_generation=False),
    _core("persistentvolumeclaims", "PersistentVolumeClaim", short_names=("pvc",)),
    _core("events", "Event", status_subresource=False, short_names=("ev",), has_generation=False),
    _core("services", "Service", short_names=("svc",)),
    _core("serviceaccounts", "ServiceAccount", status_subresource=False, has_generation=False),
    ResourceKind(
        group="batch",
        version="v1",
        plural="jobs",
        kind="Job",
        namespaced=True,
        default_propagation="Orphan",
    ),
    ResourceKind(
        group="apps",
        version="v1",
        plural="deployments",
        kind="Deployment",
        namespaced=True,
        scale=ScalePaths(),
        short_names=("deploy",),
    ),
    ResourceKind(
        group="rbac.authorization.k8s.io",
        version="v1",
        plural="roles",
        kind="Role",
        namespaced=True,
        status_subresource=False,
        has_generation=False,
    ),
    ResourceKind(
        group="rbac.authorization.k8s.io",
        version="v1",
        plural="rolebindings",
        kind="RoleBinding",
        namespaced=True,
        status_subresource=False,
        has_generation=False,
    ),
    ResourceKind(
        group="coordination.k8s.io",
        version="v1",
        plural="leases",
        kind="Lease",
        namespaced=True,
        status_subresource=False,
        has_generation=False,
    ),
    ResourceKind(
        group="events.k8s.io",
        version="v1",
        plural="events",
        kind="Event",
        namespaced=True,
        status_subresource=False,
        short_names=("ev",),
        has_generation=False,
    ),
    ResourceKind(
        group="scheduling.k8s.io",
        version="v1",
        plural="priorityclasses",
        kind="PriorityClass",
        namespaced=False,
        status_subresource=False,
        short_names=("pc",),
        has_generation=False,
    ),
    ResourceKind(
        group="apiextensions.k8s.io",
        version="v1",
        plural="customresourcedefinitions",
        kind="CustomResourceDefinition",
        namespaced=False,
        short_names=("crd", "crds"),
    ),
)

CRD_KIND = BUILTIN_KINDS[-1]


def kinds_from_crd(crd: dict[str, Any]) -> list[ResourceKind]:
    """The served versions a CustomResourceDefinition declares, one kind per version."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    group, plural, kind = spec.get("group"), names.get("plural"), names.get("kind")
    if not (group and plural and kind):
        raise bad_request("a CustomResourceDefinition needs spec.group, names.plural and kind")
    namespaced = spec.get("scope", "Namespaced") == "Namespaced"
    versions = spec.get("versions") or []
    stored = next((version for version in versions if version.get("storage")), None)
    kinds = []
    for version in versions:
        if not version.get("served", True):
            continue
        subresources = version.get("subresources") or {}
        scale = subresources.get("scale")
        kinds.append(
            ResourceKind(
                group=group,
                version=version["name"],
                plural=plural,
                kind=kind,
                namespaced=namespaced,
                status_subresource="status" in subresources,
                scale=ScalePaths(
                    spec_replicas_path=scale["specReplicasPath"],
                    status_replicas_path=scale["statusReplicasPath"],
                    label_selector_path=scale.get("labelSelectorPath"),
                )
                if scale
                else None,
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                singular=names.get("singular", ""),
                custom=True,
                schema=_structural_schema(version),
                storage_version=stored is None or stored["name"] == version["name"],
                storage_schema=_structural_schema(stored) if stored is not None else None,
            )
        )
    return kinds


def _structural_schema(version: dict[str, Any]) -> StructuralSchema | None:
    """The version's schema; none for an open one (nothing to prune or default there), so
    the open stand-ins of third-party kinds behave as before."""
    raw = (version.get("schema") or {}).get("openAPIV3Schema")
    if not isinstance(raw, dict):
        return None
    schema = parse_schema(raw)
    return None if is_open(schema) else schema


class KindRegistry:
    """Served kinds by (group, version, plural) and by (apiVersion, kind)."""

    def __init__(self, kinds: tuple[ResourceKind, ...] = BUILTIN_KINDS) -> None:
        self._by_path: dict[tuple[str, str, str], ResourceKind] = {}
        self._registered_at: dict[tuple[str, str, str], float] = {}
        for kind in kinds:
            self.register(kind)

    def register(self, kind: ResourceKind) -> None:
        path_key = (kind.group, kind.version, kind.plural)
        if path_key not in self._by_path:
            self._registered_at[path_key] = time.monotonic()
        self._by_path[path_key] = kind

    def unregister(self, *, group: str, plural: str) -> None:
        self.replace(group=group, plural=plural, kinds=[])

    def replace(self, *, group: str, plural: str, kinds: list[ResourceKind]) -> None:
        """Serve exactly ``kinds`` for the group's plural (a CRD applied); versions served
        before stay listed in discovery."""
        versions = {kind.version for kind in kinds}
        for path_key in [k for k in self._by_path if (k[0], k[2]) == (group, plural)]:
            if path_key[1] not in versions:
                del self._by_path[path_key]
                del self._registered_at[path_key]
        for kind in kinds:
            self.register(kind)

    def lookup(self, *, group: str, version: str, plural: str) -> ResourceKind | None:
        return self._by_path.get((group, version, plural))

    def by_kind(self, *, api_version: str, kind: str) -> ResourceKind | None:
        for served in self._by_path.values():
            if served.api_version == api_version and served.kind == kind:
                return served
        return None

    def __iter__(self) -> Iterator[ResourceKind]:
        return iter(sorted(self._by_path.values(), key=lambda k: (k.group, k.version, k.plural)))

    def discoverable(self, *, lag: float) -> list[ResourceKind]:
        """The kinds served at least ``lag`` seconds: a real API server serves a new CRD's
        resources at once but lists them in discovery a moment after Established."""
        settled = time.monotonic() - lag
        return [
            kind
            for kind in self
            if self._registered_at[(kind.group, kind.version, kind.plural)] <= settled
        ]
