"""The names the bus's permissions are written with: each identity's, the services', the
key-value buckets and leases they keep, and the event streams.
"""

from __future__ import annotations

from kaiwo_contracts.events.messenger import TENANT_PREFIX
from kaiwo_contracts.events.permission_blocks import EVERYTHING
from kaiwo_contracts.events.streams import (
    DEAD_LETTER_STREAM,
    GATEWAY_STREAM,
    MONITOR_STREAM,
    OBSERVED_STREAM,
    PLAN_STREAM,
    RESULT_STREAM,
)
from kaiwo_contracts.events.subjects import Family

ADMIN = "admin"
WATCHER = "watcher"
PLANNER = "planner"
EXECUTOR = "executor"
MONITOR = "monitor"
RECORDER = "recorder"
CLI = "cli"
GATEWAY = "gateway"
CONSOLE = "console"
SUBSCRIBER = "subscriber"
SERVICES: tuple[str, ...] = (WATCHER, PLANNER, EXECUTOR, MONITOR, RECORDER)
"""The operator's services, each with an identity of its own."""
GATEWAY_OBSERVED_KINDS: tuple[str, ...] = ("model", "pod")
"""The observations the gateway reads (kind tokens)."""

SERVICE_BUCKETS: dict[str, str] = {
    WATCHER: "kaiwo-watcher",
    PLANNER: "kaiwo-planner",
    EXECUTOR: "kaiwo-executor",
    MONITOR: "kaiwo-monitor",
}
"""The key-value bucket each service keeps its state in (the services' defaults)."""
LEASE_BUCKET = "kaiwo-leases"
"""The bucket of the planner's, the executor's, the monitor's and the autoscaler's leases
(``KAIWO_LEASE_BUCKET``)."""
AUTOSCALER_BUCKET = "kaiwo-autoscaler"
"""The autoscaler's moving averages, kept by whichever gateway replica leads it."""
AUTOSCALER_LEASE = "autoscaler"
STATE_BUCKETS: tuple[str, ...] = (*SERVICE_BUCKETS.values(), AUTOSCALER_BUCKET)
"""Every bucket of one value per key the operator keeps state in (not the leases): the
administrator declares them all, those of services that are off too (decision 0222)."""
"""The lease of the gateway replica that runs the autoscaler."""

EVENT_STREAMS: tuple[str, ...] = (
    OBSERVED_STREAM,
    PLAN_STREAM,
    RESULT_STREAM,
    MONITOR_STREAM,
    GATEWAY_STREAM,
    DEAD_LETTER_STREAM,
)
OPERATOR_CONSUMER_PREFIXES: tuple[str, ...] = (
    *(f"{name}-" for name in (*SERVICES, GATEWAY)),
    "bus-",
    TENANT_PREFIX,
    f"{SUBSCRIBER}-",
)
REFUSALS = f"kaiwo.{Family.RESULT.value}.refused.{EVERYTHING}"
"""The executor's refusals (``PlanRefusedV1``): the watcher observes their sources again."""
