"""Who owns a field of an object, from its ``managedFields`` (server-side apply's record)."""

from __future__ import annotations

from typing import Any


def field_managers_of(obj: dict[str, Any], *path: str) -> set[str]:
    """The field managers owning the field at ``path`` (e.g. ``"spec", "suspend"``)."""
    owners = set()
    for entry in obj["metadata"].get("managedFields") or []:
        fields = entry.get("fieldsV1") or {}
        for key in path:
            fields = fields.get(f"f:{key}")
            if fields is None:
                break
        else:
            owners.add(entry["manager"])
    return owners
