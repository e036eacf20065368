"""``spec.files``: one ConfigMap per Model, each file mounted at its path in the server.

The ConfigMap's keys are the paths with every ``/`` turned into ``_``, as upstream's; two
paths that would share a key (``/etc/a_b`` and ``/etc/a/b``) each get their own, the key
and a hash of the path (upstream gives both files one of the two contents; decision 0203).
Each file is its own
read-only ``subPath`` mount, which the kubelet never refreshes: a running server keeps the
content it started with. So the files' content is part of the Pods' hash
(:mod:`~kaiwo_planner.domain.models.server_pod`) and an edited file rolls the Pods like any
other change (upstream rolls nothing, and its servers keep the old content until something
else replaces them; decision 0127). Without files there is no ConfigMap (upstream creates an
empty one and deletes it again, every other reconcile).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from hashlib import sha256
from typing import Any, Final

from kaiwo_contracts.plans import ObjectRef

from kaiwo_planner.domain.models.names import files_config_map
from kaiwo_planner.domain.models.ownership import model_child_metadata

FILES_VOLUME: Final = "model-files"


def file_keys(paths: Iterable[str]) -> dict[str, str]:
    """Each path's ConfigMap key: upstream's (``/`` turned into ``_``) unless another path
    turns into the same, then that followed by the first 8 hex digits of the path's SHA-256
    (a key stays within a ConfigMap key's characters: letters, digits, ``-``, ``_``, ``.``)."""
    unique = sorted(set(paths))
    plain = {path: path.replace("/", "_") for path in unique}
    shared = Counter(plain.values())
    return {
        path: key if shared[key] == 1 else f"{key}-{sha256(path.encode()).hexdigest()[:8]}"
        for path, key in plain.items()
    }


def files_config_map_manifest(
    identity: ObjectRef, files: Mapping[str, str]
) -> dict[str, Any] | None:
    """The ConfigMap of ``files`` (path -> content), or None without files."""
    if not files:
        return None
    keys = file_keys(files)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": model_child_metadata(identity, name=files_config_map(identity.name)),
        "data": {keys[path]: content for path, content in sorted(files.items())},
    }


def files_volume(identity: ObjectRef, files: Mapping[str, str]) -> tuple[dict[str, Any], ...]:
    if not files:
        return ()
    return ({"name": FILES_VOLUME, "configMap": {"name": files_config_map(identity.name)}},)


def files_mounts(files: Mapping[str, str]) -> tuple[dict[str, Any], ...]:
    keys = file_keys(files)
    return tuple(
        {"name": FILES_VOLUME, "mountPath": path, "subPath": keys[path], "readOnly": True}
        for path in sorted(files)
    )
