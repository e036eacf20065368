"""What a plan was computed from, and whether the live objects still say so (decision 0038).

A plan names its sources (:class:`~kaiwo_contracts.plans.PlanSource`): its owner and the
configuration objects whose values shaped it. Each carries a *digest* of what people write in
the object, so the executor, which reads the owner anyway, can tell a plan made from the
object as the user wrote it from one made from a forged observation:

* :func:`source_digest` is the same function on both sides: the planner hashes the object it
  observed, the executor the object the API server returns.
* What counts is what people write: every top-level field but ``apiVersion``, ``kind``,
  ``metadata`` and ``status`` (a custom resource's ``spec``, a ConfigMap's ``data``), the
  labels but those the operator itself sets on owners of that kind (a Model's
  ``features.kubeai.org/…``), the annotations, and whether the object is being deleted.
  Status, finalizers, managed fields and the resourceVersion are left out: they move with
  the operator's own writes (and a settled system makes none).
* :func:`source_verdict` compares one source with the live object: ``match``; ``stale``
  when the live object is a newer version (the owner changed after the plan was made: the
  planner plans the newer version too, so the plan is dropped quietly); ``differs`` when the
  planner held something the API server never had at that version (a forged observation, or
  the planner's copy is wrong): the plan is refused and the object observed again.

Pure: no I/O.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, Final, Literal

from kaiwo_contracts.confinement import CONFINEMENTS
from kaiwo_contracts.plans import ObjectRef, PlanSource, canonical_json_bytes

SourceVerdict = Literal["match", "stale", "differs"]

_NOT_WRITTEN: Final = frozenset({"apiVersion", "kind", "metadata", "status"})


def source_digest(obj: Mapping[str, Any]) -> str:
    """SHA-256 of what people write in ``obj`` (module docstring), as 64 hex digits."""
    metadata = obj.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    confinement = CONFINEMENTS.get((str(obj.get("apiVersion", "")), str(obj.get("kind", ""))))
    labels = metadata.get("labels")
    labels = labels if isinstance(labels, Mapping) else {}
    written = {
        "content": {key: value for key, value in obj.items() if key not in _NOT_WRITTEN},
        "labels": {
            key: value
            for key, value in labels.items()
            if confinement is None or not confinement.owns_label(key)
        },
        "annotations": metadata.get("annotations") or {},
        "deleting": bool(metadata.get("deletionTimestamp")),
    }
    return hashlib.sha256(canonical_json_bytes(written)).hexdigest()


def source_of(
    obj: Mapping[str, Any], *, digest: str | None = None, whole: bool = True
) -> PlanSource:
    """The source a plan made from ``obj`` names. ``digest``: its digest when already known;
    ``whole=False`` for an object the planner holds only in part (no digest)."""
    metadata = obj.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    generation = metadata.get("generation")
    version = metadata.get("resourceVersion")
    return PlanSource(
        ref=ObjectRef(
            api_version=str(obj.get("apiVersion", "")),
            kind=str(obj.get("kind", "")),
            name=str(metadata.get("name") or ""),
            namespace=metadata.get("namespace") or None,
            uid=metadata.get("uid") or None,
        ),
        generation=generation if isinstance(generation, int) else None,
        resource_version=version if isinstance(version, str) else None,
        digest=(digest or source_digest(obj)) if whole else None,
    )


def source_verdict(
    source: PlanSource, live: Mapping[str, Any] | None, *, live_digest: str | None = None
) -> SourceVerdict:
    """``source`` against the object as the API server holds it now (None: absent).
    ``live_digest``: :func:`source_digest` of ``live`` when the caller keeps it."""
    if live is None:
        return "differs"
    metadata = live.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    if source.ref.uid is None or metadata.get("uid") != source.ref.uid:
        return "differs"
    if source.digest is None or source.digest == (live_digest or source_digest(live)):
        return "match"
    live_version = metadata.get("resourceVersion")
    return "stale" if _older(source.resource_version, live_version) else "differs"


def _older(planned: str | None, live: object) -> bool:
    """The planned resourceVersion is older than the live one. Versions are compared as
    integers (they are on every real API server); anything else cannot be ordered and is
    not older: a plan that cannot be shown to be stale is refused."""
    if planned is None or not isinstance(live, str):
        return False
    if not planned.isdigit() or not live.isdigit():
        return False
    return int(planned) < int(live)
