"""The CloudEvents ``type``, ``source`` and ``subject`` of an event, and its ``id``: random for
most events, derived from the fact where a second publication of the same fact must
collapse into one message (:func:`observed_event_id`, :func:`plan_event_id`,
:func:`derived_event_id`).
"""

from __future__ import annotations

import uuid

from kaiwo_contracts.plans import Plan

TYPE_PREFIX = "ai.silogen.kaiwo"
SOURCE_PREFIX = "/kaiwo/"

EVENT_ID_NAMESPACE = uuid.UUID("6b1f3f2e-6c2d-5b7e-9a51-0c4b8e7d2a11")
"""UUIDv5 namespace of every derived event id (fixed forever: changing it changes ids)."""


def event_type(family: str, event: str, version: int = 1) -> str:
    """``ai.silogen.kaiwo.<family>.<event>.v<version>``, the CloudEvents ``type``."""
    return f"{TYPE_PREFIX}.{family}.{event}.v{version}"


def service_source(service: str) -> str:
    """``/kaiwo/<service>``, the CloudEvents ``source`` of everything a service publishes."""
    return f"{SOURCE_PREFIX}{service}"


def object_subject(*, namespace: str | None, name: str) -> str:
    """The CloudEvents ``subject``: ``<namespace>/<name>``, or ``<name>`` when cluster-scoped."""
    return f"{namespace}/{name}" if namespace else name


def derived_event_id(*parts: str) -> str:
    """A UUID (v5) determined by ``parts``: the same parts always give the same id."""
    return str(uuid.uuid5(EVENT_ID_NAMESPACE, "\x1f".join(parts)))


def observed_event_id(*, uid: str, resource_version: str) -> str:
    """``<uid>:<resourceVersion>``: one observation of one object version is one event.

    Two watcher replicas (or a relist) observing the same version publish the same id, so
    JetStream keeps one copy and the event store one row.
    """
    return f"{uid}:{resource_version}"


def plan_event_id(*, plan: Plan, causation_id: str, fingerprint: str | None = None) -> str:
    """The id of a plan decision: owner uid + plan fingerprint + the event that caused it.

    A planner that re-processes the same cause (redelivery after a crash, a second replica)
    republishes an identical plan under the same id, which JetStream drops. The cause is part
    of the id on purpose: a plan that goes A -> B -> A within the duplicate window is a new
    decision and must not be dropped as a copy of the first A. ``fingerprint``, when given,
    must be ``plan.fingerprint()`` (saves hashing the plan again).
    """
    owner = plan.owner.uid or plan.owner.display()
    return derived_event_id("plan", owner, fingerprint or plan.fingerprint(), causation_id)
