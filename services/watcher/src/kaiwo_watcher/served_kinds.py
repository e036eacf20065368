"""Waiting for a kind the API server does not serve yet (404): look again after a delay, or
as soon as its CustomResourceDefinition becomes Established, so a kind installed after the
watcher started is followed within moments."""

from __future__ import annotations

import asyncio
import contextlib
import math

import structlog
from kaiwo_kube import KubeError, ObjectReader, resources
from kaiwo_kube.resources import ResourceType
from kaiwo_kube.responses import crd_established

log = structlog.get_logger("kaiwo.watcher")

MISSING_KIND_FIRST_RETRY = 0.5
"""Seconds before the first look again at a kind that is not served."""
BUILT_IN_GROUPS = frozenset(
    {
        "",
        "apps",
        "batch",
        "coordination.k8s.io",
        "apiextensions.k8s.io",
        "rbac.authorization.k8s.io",
        "scheduling.k8s.io",
    }
)
"""API groups the API server serves itself: no CRD to wait for."""


async def until_served(kube: ObjectReader, resource: ResourceType, *, delay: float) -> None:
    """Wait ``delay`` seconds, or less when the kind's CRD becomes Established meanwhile."""
    if resource.group in BUILT_IN_GROUPS:
        await asyncio.sleep(delay)
        return
    name = f"{resource.plural}.{resource.group}"
    try:
        await asyncio.wait_for(_crd_established(kube, name, delay=delay), timeout=delay)
    except TimeoutError:
        return
    except (KubeError, OSError) as error:  # e.g. no right to watch CRDs: just wait
        log.debug("cannot watch the CRD; waiting", crd=name, error=str(error))
        await asyncio.sleep(delay)


async def _crd_established(kube: ObjectReader, name: str, *, delay: float) -> None:
    """Return once CRD ``name`` turns Established (after ``delay`` if it is already)."""
    selector = f"metadata.name={name}"
    listed = await kube.list(resources.CUSTOM_RESOURCE_DEFINITION, field_selector=selector)
    if any(crd_established(crd) for crd in listed.items):
        # Established, yet its kind was not served a moment ago: give the server a moment.
        await asyncio.sleep(delay)
        return
    events = kube.watch(
        resources.CUSTOM_RESOURCE_DEFINITION,
        resource_version=listed.resource_version,
        field_selector=selector,
        timeout_seconds=max(1, math.ceil(delay)),
        bookmarks=False,
    )
    async with contextlib.aclosing(events):
        async for event in events:
            if event.type in ("ADDED", "MODIFIED") and crd_established(event.object):
                return
    await asyncio.sleep(delay)  # the watch ended early: the outer timeout ends the wait
