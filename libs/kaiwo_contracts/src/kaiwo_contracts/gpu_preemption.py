"""GPU idle preemption settings of one workload: annotations over KaiwoConfig over defaults.

A workload takes part when its own annotations or its namespace's carry any key with the
prefix ``kaiwo.silogen.ai/gpu-preemption.`` (upstream §11.1); ``enabled: "false"`` on the
workload (or, without a workload value, on the namespace) opts out again. Each setting is
looked up in this order, the first valid value winning:

1. the workload's annotation, 2. the namespace's annotation,
3. ``KaiwoConfig.spec.gpuPreemption.default*``, 4. upstream's built-in default
   (threshold 5 %, grace period 10m, policy OnPressure, aggregation Max, and for the
   GpuWorkload of a workload no Kaiwo kind owns a TTL of 24h).

Invalid annotation values are ignored, as upstream does. Upstream's environment variables
(``GPU_PREEMPTION_DEFAULT_*``) have no counterpart: the KaiwoConfig is the one place for
cluster-wide settings. The monitor reads threshold and aggregation (to judge idleness); the
planner resolves all of them itself, from the objects it observes, and takes only readings
from the monitor's findings (decision 0038); both call this one function.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal, InvalidOperation
from typing import Final, Literal, TypeVar, cast

from kaiwo_contracts.crds.config_v1alpha1.kaiwoconfig import KaiwoGpuPreemptionConfig
from kaiwo_contracts.utilization_threshold import capped_threshold_ratio

ANNOTATION_PREFIX: Final = "kaiwo.silogen.ai/gpu-preemption."
ENABLED: Final = f"{ANNOTATION_PREFIX}enabled"
THRESHOLD: Final = f"{ANNOTATION_PREFIX}threshold"
GRACE_PERIOD: Final = f"{ANNOTATION_PREFIX}grace-period"
POLICY: Final = f"{ANNOTATION_PREFIX}policy"
AGGREGATION: Final = f"{ANNOTATION_PREFIX}aggregation"
TTL: Final = f"{ANNOTATION_PREFIX}ttl"

Policy = Literal["OnPressure", "Always"]
Aggregation = Literal["Min", "Max", "Avg"]
POLICIES: Final = ("OnPressure", "Always")
AGGREGATIONS: Final = ("Min", "Max", "Avg")

DEFAULT_THRESHOLD_PERCENT: Final = 5.0
DEFAULT_GRACE_PERIOD: Final = timedelta(minutes=10)
DEFAULT_POLICY: Final[Policy] = "OnPressure"
DEFAULT_AGGREGATION: Final[Aggregation] = "Max"
DEFAULT_TTL: Final = timedelta(hours=24)
"""How long a GpuWorkload is kept once its workload is gone (upstream's default)."""

_UNIT_SECONDS = {
    "ns": Decimal("1e-9"),
    "us": Decimal("1e-6"),
    "µs": Decimal("1e-6"),
    "μs": Decimal("1e-6"),
    "ms": Decimal("1e-3"),
    "s": Decimal(1),
    "m": Decimal(60),
    "h": Decimal(3600),
}
_T = TypeVar("_T")
_TERM = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|h|m|s)")


@dataclass(frozen=True, slots=True)
class GpuPreemptionSettings:
    """How one opted-in workload is judged idle and when it may be preempted."""

    threshold_percent: float = DEFAULT_THRESHOLD_PERCENT
    grace_period: timedelta = DEFAULT_GRACE_PERIOD
    policy: Policy = DEFAULT_POLICY
    aggregation: Aggregation = DEFAULT_AGGREGATION
    ttl: timedelta = DEFAULT_TTL
    """How long the GpuWorkload of a workload no Kaiwo kind owns is kept once that workload
    is gone (``0``: forever)."""

    @property
    def threshold_ratio(self) -> float:
        return capped_threshold_ratio(self.threshold_percent)


def gpu_preemption_settings(
    *,
    workload_annotations: Mapping[str, str],
    namespace_annotations: Mapping[str, str],
    config: KaiwoGpuPreemptionConfig,
) -> GpuPreemptionSettings | None:
    """The workload's settings, or None when it has not opted in (module docstring)."""
    if not opted_in(
        workload_annotations=workload_annotations, namespace_annotations=namespace_annotations
    ):
        return None
    own = _prefixed(workload_annotations)
    inherited = _prefixed(namespace_annotations)
    return GpuPreemptionSettings(
        threshold_percent=_first(
            _percent(own.get(THRESHOLD)),
            _percent(inherited.get(THRESHOLD)),
            config.default_threshold,
            DEFAULT_THRESHOLD_PERCENT,
        ),
        grace_period=_first(
            _duration(own.get(GRACE_PERIOD)),
            _duration(inherited.get(GRACE_PERIOD)),
            _duration(config.default_grace_period),
            DEFAULT_GRACE_PERIOD,
        ),
        policy=cast(
            "Policy",
            _first(
                _choice(own.get(POLICY), POLICIES),
                _choice(inherited.get(POLICY), POLICIES),
                config.default_policy,
                DEFAULT_POLICY,
            ),
        ),
        aggregation=cast(
            "Aggregation",
            _first(
                _choice(own.get(AGGREGATION), AGGREGATIONS),
                _choice(inherited.get(AGGREGATION), AGGREGATIONS),
                config.default_aggregation,
                DEFAULT_AGGREGATION,
            ),
        ),
        ttl=_first(
            _duration(own.get(TTL)),
            _duration(inherited.get(TTL)),
            _duration(config.default_ttl),
            DEFAULT_TTL,
        ),
    )


def opted_in(
    *, workload_annotations: Mapping[str, str], namespace_annotations: Mapping[str, str]
) -> bool:
    """Whether the workload takes part in GPU idle preemption (module docstring): the one
    question the executor asks before it preempts a workload no Kaiwo kind owns."""
    own = _prefixed(workload_annotations)
    inherited = _prefixed(namespace_annotations)
    if not own and not inherited:
        return False
    return own.get(ENABLED, inherited.get(ENABLED, "true")).strip().lower() != "false"


def parse_go_duration(text: str) -> timedelta:
    """A Go duration (``10m``, ``1h30m``, ``1.5h``, ``0``); ValueError for anything else."""
    value = text.strip().removeprefix("+")
    if value == "0":
        return timedelta(0)
    total, position = Decimal(0), 0
    while position < len(value):
        term = _TERM.match(value, position)
        if term is None:
            break
        total += Decimal(term.group(1)) * _UNIT_SECONDS[term.group(2)]
        position = term.end()
    if not value or position != len(value):
        raise ValueError(f"{text!r} is not a duration such as 30s, 5m or 1h30m")
    return timedelta(microseconds=int(total * 1_000_000))


def _prefixed(annotations: Mapping[str, str]) -> dict[str, str]:
    return {
        key: str(value) for key, value in annotations.items() if key.startswith(ANNOTATION_PREFIX)
    }


def _first(*values: _T | None) -> _T:
    found = next((value for value in values if value is not None), None)
    assert found is not None  # the last value is always a default
    return found


def _percent(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        value = float(Decimal(text.strip()))
    except (InvalidOperation, ValueError):
        return None
    return value if math.isfinite(value) and 0 <= value <= 100 else None


def _duration(text: str | None) -> timedelta | None:
    if text is None:
        return None
    try:
        return parse_go_duration(text)
    except ValueError:
        return None


def _choice(text: str | None, allowed: tuple[str, ...]) -> str | None:
    return text.strip() if text is not None and text.strip() in allowed else None
