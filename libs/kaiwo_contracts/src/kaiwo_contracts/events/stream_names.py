"""The names of the JetStream streams, and the subject of the server's max-deliveries advisory."""

from __future__ import annotations

OBSERVED_STREAM = "KAIWO_OBS"
PLAN_STREAM = "KAIWO_PLAN"
RESULT_STREAM = "KAIWO_RES"
MONITOR_STREAM = "KAIWO_MON"
GATEWAY_STREAM = "KAIWO_GATEWAY"
DEAD_LETTER_STREAM = "KAIWO_DLQ"
PUBLIC_STREAM = "KAIWO_PUBLIC"

MAX_DELIVERIES_ADVISORY = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES"
"""Prefix of the advisory the server publishes when a message runs out of deliveries;
the full subject is ``<prefix>.<stream>.<consumer>``."""
