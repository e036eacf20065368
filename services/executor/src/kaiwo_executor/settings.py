"""The executor's settings (``KAIWO_*`` environment variables, on top of the shared ones).

The cluster comes from ``KAIWO_KUBECONFIG`` (shared), else ``$KUBECONFIG`` / ``~/.kube/config``,
else the in-cluster service account.
"""

from __future__ import annotations

from kaiwo_runtime.settings import SingleActiveSettings
from pydantic import Field, model_validator

from kaiwo_executor.api_retries import RetryPolicy
from kaiwo_executor.service import BUCKET


class ExecutorSettings(SingleActiveSettings):
    """``KAIWO_EXECUTOR_BUCKET``, ``KAIWO_API_RETRY_ATTEMPTS``, ..."""

    executor_bucket: str = BUCKET
    """The key-value bucket holding what the executor already applied, per owner."""
    api_retry_attempts: int = Field(default=5, ge=1, le=50)
    """Attempts per API call on 409/429/5xx/no answer before the plan is redelivered."""
    api_retry_initial_seconds: float = Field(default=0.2, ge=0)
    api_retry_max_seconds: float = Field(default=10.0, ge=0)
    startup_timeout_seconds: float = Field(default=10.0, gt=0)
    """How long to wait for NATS and the API server at start before giving up."""

    @model_validator(mode="after")
    def _delays_in_order(self) -> ExecutorSettings:
        if self.api_retry_initial_seconds > self.api_retry_max_seconds:
            raise ValueError("KAIWO_API_RETRY_INITIAL_SECONDS exceeds the maximum delay")
        return self

    @property
    def active_active(self) -> bool:
        """With partitions every replica works, each on the partitions whose leases it
        holds (:mod:`kaiwo_runtime.partition_leases`); without, one replica is active."""
        return self.bus_partitions > 1

    def retry_policy(self) -> RetryPolicy:
        return RetryPolicy(
            attempts=self.api_retry_attempts,
            initial_delay=self.api_retry_initial_seconds,
            max_delay=self.api_retry_max_seconds,
        )
