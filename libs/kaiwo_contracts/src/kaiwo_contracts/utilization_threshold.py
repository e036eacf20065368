"""A utilization threshold given in percent, as the ratio readings are compared with.

The monitor judges a reading and the planner judges the ratio the monitor published against
the same capped threshold (decision 0228): the underutilization threshold
(``lowUtilizationThreshold``) and the GPU idle threshold alike. One function for both
services, so that the two cannot come to read the boundary differently (decision 0242).
"""

from __future__ import annotations

from typing import Final

FULL_PERCENT: Final = 100.0


def capped_threshold_ratio(threshold_percent: float) -> float:
    """``threshold_percent`` as a fraction, at most 1: a threshold over 100 % flags every
    reading below full use, and a 100 % reading never."""
    return min(threshold_percent / FULL_PERCENT, 1.0)
