"""The watcher's settings (``KAIWO_*`` environment variables, on top of the shared ones).

The cluster comes from ``KAIWO_KUBECONFIG`` (shared), else ``$KUBECONFIG`` / ``~/.kube/config``,
else the in-cluster service account.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from kaiwo_runtime.settings import ServiceSettings
from pydantic import Field, field_validator
from pydantic_settings import NoDecode

from kaiwo_watcher.progress import WatcherTuning
from kaiwo_watcher.watch_list import DEFAULT_OPERATOR_NAMESPACE
from kaiwo_watcher.watch_state import BUCKET

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def own_namespace(path: Path = SERVICE_ACCOUNT_NAMESPACE) -> str:
    """The namespace the watcher runs in (its service account's), else the default."""
    try:
        found = path.read_text().strip()
    except OSError:
        return DEFAULT_OPERATOR_NAMESPACE
    return found or DEFAULT_OPERATOR_NAMESPACE


class WatcherSettings(ServiceSettings):
    """``KAIWO_WATCH_NAMESPACES``, ``KAIWO_RELIST_INTERVAL_SECONDS``, ..."""

    watch_namespaces: Annotated[tuple[str, ...], NoDecode] = ()
    """Comma-separated namespaces to watch namespaced kinds in; empty: all namespaces.
    Cluster-scoped kinds (nodes, KaiwoQueueConfig, ...) are always watched."""
    relist_interval_seconds: float = Field(default=0.0, ge=0)
    """Relist every kind this often, re-publishing every object as SYNC; 0: only after a
    410 Gone (watches with bookmarks do not miss events, so a periodic relist only costs)."""
    watch_timeout_seconds: int = Field(default=300, ge=1)
    """How long the API server keeps one watch open before the watcher opens the next."""
    missing_kind_retry_seconds: float = Field(default=60.0, gt=0)
    """How often to look again for a kind whose API is not installed (Kueue, KubeRay...)."""
    checkpoint_every_seconds: float = Field(default=1.0, ge=0)
    """Write each stream's resourceVersion checkpoint at most this often (0: every event).
    A crash resumes up to this much earlier; JetStream drops the re-published duplicates."""
    watch_stuck_seconds: float = Field(default=60.0, gt=0)
    """A stream whose publish has kept failing this long makes ``/readyz`` fail."""
    operator_namespace: str = Field(default_factory=own_namespace)
    """The operator's namespace: the only one the system configuration of Models is read
    from (``KAIWO_OPERATOR_NAMESPACE``; in a cluster, the service account's namespace)."""
    watcher_bucket: str = BUCKET
    """The key-value bucket holding checkpoints and known objects."""
    startup_timeout_seconds: float = Field(default=10.0, gt=0)
    """How long to wait for NATS and the API server at start before giving up."""

    @field_validator("watch_namespaces", mode="before")
    @classmethod
    def _split(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    def tuning(self) -> WatcherTuning:
        return WatcherTuning(
            watch_timeout=self.watch_timeout_seconds,
            relist_interval=self.relist_interval_seconds,
            missing_kind_retry=self.missing_kind_retry_seconds,
            checkpoint_every=self.checkpoint_every_seconds,
            stuck_after=self.watch_stuck_seconds,
        )
