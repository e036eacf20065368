"""The API server's rules for a write, as pure functions: what a new object gets from the
server, which names are valid, preconditions, what an update may not change, finalizers on an
object being deleted, and the status the CRD controllers report."""

from __future__ import annotations

import copy
import re
import secrets
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kaiwo_kubefake import errors
from kaiwo_kubefake.custom_resources import conform
from kaiwo_kubefake.kinds import CRD_KIND, ResourceKind
from kaiwo_kubefake.ownership import canonical
from kaiwo_kubefake.pod_validation import check_container_resources

DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
MODIFIED_MESSAGE = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


@dataclass(frozen=True, slots=True)
class Preconditions:
    uid: str | None = None
    resource_version: str | None = None


NO_PRECONDITIONS = Preconditions()


def meta(obj: dict[str, Any]) -> dict[str, Any]:
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        metadata = {}
        obj["metadata"] = metadata
    return metadata


def without(obj: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in keys}


def content(obj: dict[str, Any]) -> str:
    """The object minus what the server maintains, for no-op detection."""
    metadata = without(obj.get("metadata") or {}, "resourceVersion", "generation")
    if "managedFields" in metadata:
        metadata["managedFields"] = [without(entry, "time") for entry in metadata["managedFields"]]
    return canonical({**obj, "metadata": metadata})


def prepare_new(
    kind: ResourceKind,
    *,
    namespace: str | None,
    body: dict[str, Any],
    now: str,
    check_namespace: Callable[[ResourceKind, str | None], None],
    applied: bool = False,
) -> dict[str, Any]:
    """A new object as the server stores it: kind and namespace checked, name generated
    and validated, server fields set, a custom resource pruned and defaulted."""
    if not isinstance(body, dict):
        raise errors.bad_request("the body must be a JSON object")
    obj = copy.deepcopy(body)
    metadata = meta(obj)
    if obj.get("kind") not in (None, "", kind.kind):
        raise errors.bad_request(
            f"the kind {obj.get('kind')!r} does not match the resource {kind.plural}"
        )
    obj["apiVersion"], obj["kind"] = kind.api_version, kind.kind
    body_namespace = metadata.get("namespace")
    if kind.namespaced:
        if body_namespace and namespace and body_namespace != namespace:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent "
                "on the request"
            )
        namespace = namespace or body_namespace
        check_namespace(kind, namespace)
        metadata["namespace"] = namespace
    else:
        metadata.pop("namespace", None)
    if not metadata.get("name") and metadata.get("generateName"):
        metadata["name"] = metadata["generateName"] + secrets.token_hex(3)[:5]
    validate_name(kind, metadata.get("name"))
    check_container_resources(kind, obj)
    for server_field in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
        metadata.pop(server_field, None)
    metadata["uid"] = str(uuid.uuid4())
    metadata["creationTimestamp"] = now
    if kind.has_generation:
        metadata["generation"] = 1
    else:
        metadata.pop("generation", None)
    if kind.status_subresource:
        obj.pop("status", None)
    default_fields(kind, obj)
    return conform(kind, obj, applied=applied)


def validate_name(kind: ResourceKind, name: Any) -> None:
    if not name:
        raise errors.invalid(
            name="",
            group=kind.group,
            kind=kind.kind,
            causes=[("FieldValueRequired", "metadata.name", "name or generateName is required")],
        )
    if not isinstance(name, str) or len(name) > 253 or not DNS_SUBDOMAIN.match(name):
        raise errors.invalid(
            name=str(name),
            group=kind.group,
            kind=kind.kind,
            causes=[
                (
                    "FieldValueInvalid",
                    "metadata.name",
                    f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist '
                    "of lower case alphanumeric characters, '-' or '.'",
                )
            ],
        )


def default_fields(kind: ResourceKind, obj: dict[str, Any]) -> None:
    """Fields the real server fills in on create for the kinds where tests see them."""
    if kind.key == NAMESPACES.key:
        name = obj["metadata"]["name"]
        obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = name
        obj.setdefault("spec", {"finalizers": ["kubernetes"]})
        obj["status"] = {"phase": "Active"}
    elif kind.key == CRD_KIND.key:
        obj["status"] = crd_status(obj)


def check_preconditions(
    kind: ResourceKind, live: dict[str, Any], preconditions: Preconditions
) -> None:
    metadata = live["metadata"]
    name = metadata["name"]
    if preconditions.uid and preconditions.uid != metadata.get("uid"):
        raise errors.conflict(
            name=name,
            group=kind.group,
            plural=kind.plural,
            why=f"Precondition failed: UID in precondition: {preconditions.uid}, "
            f"UID in object meta: {metadata.get('uid')}",
        )
    wanted = preconditions.resource_version
    if wanted and wanted != metadata.get("resourceVersion"):
        raise errors.conflict(name=name, group=kind.group, plural=kind.plural, why=MODIFIED_MESSAGE)


def main_resource_update(
    kind: ResourceKind, *, live: dict[str, Any], candidate: dict[str, Any]
) -> dict[str, Any]:
    """The candidate with identity, deletion marks and (if a subresource) status kept."""
    new = copy.deepcopy(candidate)
    new["apiVersion"], new["kind"] = live["apiVersion"], live["kind"]
    metadata = meta(new)
    for fixed in (
        "name",
        "namespace",
        "uid",
        "creationTimestamp",
        "generation",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
    ):
        if fixed in live["metadata"]:
            metadata[fixed] = live["metadata"][fixed]
        else:
            metadata.pop(fixed, None)
    if kind.status_subresource:
        if "status" in live:
            new["status"] = copy.deepcopy(live["status"])
        else:
            new.pop("status", None)
    if kind.key == CRD_KIND.key:
        new["status"] = crd_status(new)
    check_finalizers(kind, live=live, new=new)
    check_container_resources(kind, new)
    return new


def check_finalizers(kind: ResourceKind, *, live: dict[str, Any], new: dict[str, Any]) -> None:
    if "deletionTimestamp" not in live["metadata"]:
        return
    before = set(live["metadata"].get("finalizers") or [])
    added = set(new["metadata"].get("finalizers") or []) - before
    if added:
        raise errors.invalid(
            name=live["metadata"]["name"],
            group=kind.group,
            kind=kind.kind,
            causes=[
                (
                    "FieldValueForbidden",
                    "metadata.finalizers",
                    "Forbidden: no new finalizers can be added if the object is being deleted",
                )
            ],
        )


NAMESPACES = ResourceKind(
    group="", version="v1", plural="namespaces", kind="Namespace", namespaced=False
)


def storage_only(group: str, plural: str, *, namespaced: bool) -> ResourceKind:
    return ResourceKind(group=group, version="", plural=plural, kind="", namespaced=namespaced)


def parse_resource_version(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise errors.bad_request(f"invalid resource version: {text!r}") from None
    if value < 0:
        raise errors.bad_request(f"invalid resource version: {text!r}")
    return value


def spec_changed(kind: ResourceKind, old: dict[str, Any], new: dict[str, Any]) -> bool:
    ignored = {"metadata", "apiVersion", "kind"}
    if kind.status_subresource:
        ignored.add("status")
    return canonical(without(old, *ignored)) != canonical(without(new, *ignored))


def crd_status(crd: dict[str, Any]) -> dict[str, Any]:
    """What the API server's CRD controllers report once the names are accepted."""
    spec = crd.get("spec") or {}
    names = dict(spec.get("names") or {})
    names.setdefault("singular", str(names.get("kind", "")).lower())
    names.setdefault("listKind", f"{names.get('kind', '')}List")
    condition_time = (crd.get("metadata") or {}).get("creationTimestamp", "")
    return {
        "acceptedNames": names,
        "storedVersions": [
            version["name"] for version in spec.get("versions") or [] if version.get("storage")
        ],
        "conditions": [
            {
                "type": "NamesAccepted",
                "status": "True",
                "reason": "NoConflicts",
                "message": "no conflicts found",
                "lastTransitionTime": condition_time,
            },
            {
                "type": "Established",
                "status": "True",
                "reason": "InitialNamesAccepted",
                "message": "the initial names have been accepted",
                "lastTransitionTime": condition_time,
            },
        ],
    }
