"""Whether the API server answers: for start-up checks and readiness probes."""

from __future__ import annotations

from kaiwo_kube import resources
from kaiwo_kube.errors import KubeError, Retryable
from kaiwo_kube.port import ObjectReader


async def api_server_reachable(kube: ObjectReader) -> bool:
    """Any answer but 429/5xx/no connection means the API server is reachable (a 403 or 404
    still proves it answers)."""
    try:
        await kube.get(resources.NAMESPACE, "default")
    except Retryable:
        return False
    except KubeError:
        return True
    return True
