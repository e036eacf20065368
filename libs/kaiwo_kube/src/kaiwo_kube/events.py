"""Building core/v1 Events about an object (pure: the time is a parameter)."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any


def _timestamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def event_manifest(
    *,
    involved: dict[str, Any],
    event_type: str,
    reason: str,
    message: str,
    component: str,
    now: datetime,
) -> dict[str, Any]:
    """A core/v1 Event about ``involved``, in its namespace ("default" if cluster-scoped).

    The name is ``<object name>.<16 hex digits>`` like kubectl's recorder; the digits hash the
    object's uid, the reason, the message and the time, so two different events never collide.
    """
    metadata = involved.get("metadata") or {}
    namespace = metadata.get("namespace") or "default"
    seed = "|".join([str(metadata.get("uid", "")), reason, message, now.isoformat(), event_type])
    suffix = hashlib.sha256(seed.encode()).hexdigest()[:16]
    reference = {
        "apiVersion": involved.get("apiVersion", ""),
        "kind": involved.get("kind", ""),
        "name": metadata.get("name", ""),
    }
    for key in ("namespace", "uid", "resourceVersion"):
        if metadata.get(key):
            reference[key] = metadata[key]
    stamp = _timestamp(now)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{str(metadata.get('name', 'object'))[:236]}.{suffix}",
            "namespace": namespace,
        },
        "involvedObject": reference,
        "type": event_type,
        "reason": reason,
        "message": message[:1024],
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": component,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }
