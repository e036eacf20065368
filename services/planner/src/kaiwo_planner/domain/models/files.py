"""``spec.files``: one ConfigMap per Model, each file mounted at its path in the server.

The ConfigMap's keys are the paths with every ``/`` turned into ``_``, as upstream's, when
that is a valid ConfigMap key (letters, digits, ``-``, ``_`` and ``.``, at most 253
characters). Otherwise (the CRD lets a path hold any character but ``:`` and run to 1024
characters: ``/app/chat template.jinja``, ``/etc/tmpl@v2.j2``), every other character turns
into ``_`` too and the key is a bounded prefix of that followed by a hash of the path
(upstream's key is refused by the API server, and the Model never gets Pods; decision 0212).
Two paths that would share a key (``/etc/a_b`` and ``/etc/a/b``) each get their own, the
key and a hash of the path (upstream gives both files one of the two contents; decision
0203). Each file is its own read-only ``subPath`` mount, which the kubelet never refreshes:
a running server keeps the content it started with. So the files' content is part of the Pods' hash
(:mod:`~kaiwo_planner.domain.models.server_pod`) and an edited file rolls the Pods like any
other change (upstream rolls nothing, and its servers keep the old content until something
else replaces them; decision 0127). Without files there is no ConfigMap (upstream creates an
empty one and deletes it again, every other reconcile).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from hashlib import sha256
from typing import Any, Final

from kaiwo_contracts.plans import ObjectRef

from kaiwo_planner.domain.models.names import files_config_map
from kaiwo_planner.domain.models.ownership import model_child_metadata

FILES_VOLUME: Final = "model-files"
KEY_MAX_LENGTH: Final = 253
"""A ConfigMap key's limit (the API server's ``IsConfigMapKey``)."""
SHORT_HASH: Final = 8
FULL_HASH: Final = 64

_KEY: Final = re.compile(r"[-._a-zA-Z0-9]+")
_NOT_KEY: Final = re.compile(r"[^-._a-zA-Z0-9]")


def file_keys(paths: Iterable[str]) -> dict[str, str]:
    """Each path's ConfigMap key (see the module docstring), unique among ``paths``.

    * Upstream's (``/`` turned into ``_``) when it is a valid key that no other path's key
      equals: the keys every Model had before, which its ConfigMap and Pods keep.
    * Else the path with every character a key cannot hold turned into ``_``, cut to leave
      room for ``-`` and the first 8 hex digits of the path's SHA-256, which follow (two
      paths of upstream's key: upstream's followed by the hash, as decision 0203 made them).
    * A key still shared then (two hashes alike) takes the whole SHA-256 instead.

    A path starts with ``/`` (the CRD's rule), so a key starts with ``_``, never ``.``."""
    unique = sorted(set(paths))
    plain = {path: path.replace("/", "_") for path in unique}
    digits = {path: 0 if _is_key(key) else SHORT_HASH for path, key in plain.items()}
    while True:
        keys = {path: _key(key, path, digits[path]) for path, key in plain.items()}
        shared = Counter(keys.values())
        longer = {
            path: SHORT_HASH if digits[path] == 0 else FULL_HASH
            for path, key in keys.items()
            if shared[key] > 1 and digits[path] < FULL_HASH
        }
        if not longer:
            return keys
        digits |= longer


def _is_key(key: str) -> bool:
    return len(key) <= KEY_MAX_LENGTH and _KEY.fullmatch(key) is not None


def _key(plain: str, path: str, digits: int) -> str:
    """``plain`` itself (``digits`` 0), else its valid characters followed by ``-`` and the
    first ``digits`` hex digits of the SHA-256 of ``path``, within a key's length."""
    if digits == 0:
        return plain
    kept = _NOT_KEY.sub("_", plain)[: KEY_MAX_LENGTH - 1 - digits]
    return f"{kept}-{sha256(path.encode()).hexdigest()[:digits]}"


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
