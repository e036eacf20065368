"""The planner's settings, from ``KAIWO_*`` environment variables."""

from __future__ import annotations

from kaiwo_runtime.settings import SingleActiveSettings
from pydantic import AliasChoices, Field
from pydantic_settings import SettingsConfigDict


class PlannerSettings(SingleActiveSettings):
    """``KAIWO_SNAPSHOT_BUCKET``, ``KAIWO_SNAPSHOT_EVERY_EVENTS``, ... on top of the shared ones."""

    # A field with the API reference's name as an alias is still set by name in code.
    model_config = SettingsConfigDict(**SingleActiveSettings.model_config, populate_by_name=True)

    default_cluster_queue_name: str = Field(
        default="",
        max_length=63,
        pattern=r"^$|^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
        validation_alias=AliasChoices(
            "KAIWO_DEFAULT_CLUSTER_QUEUE_NAME", "DEFAULT_CLUSTER_QUEUE_NAME"
        ),
    )
    """``DEFAULT_CLUSTER_QUEUE_NAME`` (the API reference's installation setting; the project's
    ``KAIWO_DEFAULT_CLUSTER_QUEUE_NAME`` wins where both are set): the default queue written
    into the KaiwoConfig the operator creates when there is none. The KaiwoConfig in the
    cluster decides from then on (decision 0046). "": the CRD's default, ``kaiwo``."""

    snapshot_bucket: str = Field(default="kaiwo-planner", pattern=r"^[A-Za-z0-9_-]+$")
    """JetStream key-value bucket holding the projection snapshot."""
    snapshot_every_events: int = Field(default=1000, ge=1)
    """Write a snapshot after this many observations, or as many as the projection holds
    objects if that is more (a snapshot costs in proportion to them) ..."""
    snapshot_every_seconds: float = Field(default=60.0, gt=0)
    """... or after this long with at least one new observation, whichever comes first."""
    resync_on_start: bool = True
    """Re-plan every owner once the projection is restored (publishes only what differs)."""
    resync_every_seconds: float = Field(default=600.0, ge=0)
    """Re-plan every owner this often, re-applying what is absent or drifted (10 minutes by
    default, as a controller's resync); 0 turns periodic resync off."""
    poll_seconds: float = Field(default=1.0, gt=0)
    """Longest wait for new observations before timers and snapshots are looked at."""
    tombstone_retention: int = Field(default=100_000, ge=1)
    """Observations after which a deleted object's last resource version is forgotten."""
    connect_timeout_seconds: float = Field(default=10.0, gt=0)
