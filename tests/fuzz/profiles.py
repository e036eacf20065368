"""The hypothesis settings every fuzz target runs under.

``HYPOTHESIS_PROFILE=fuzz`` (``make fuzz``) runs 100,000 cases per target, new ones on every
run; anything else (CI, a plain ``pytest``) the same 300 every time (``derandomize``): a
CI run must not turn red on a case no commit brought in. What ``make fuzz`` finds becomes a
regression test, and the CI cases change when the strategies do. ``KAIWO_FUZZ_CASES=N``
sets the number of the ``fuzz`` profile (a run that must fit in a given time). No example
database, so CI runs stay independent of what ran before on the machine; no deadline, since
a case that builds a whole cluster is slow only on a busy machine.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

CI_CASES = 300
"""Enough to catch a strategy or contract that broke; finding new cases is ``make fuzz``'s job
(at 1,000 the fuzz targets took a quarter of CI's time)."""
FUZZ_CASES = int(os.environ.get("KAIWO_FUZZ_CASES", "100000"))

for _profile, _examples in (("ci", CI_CASES), ("fuzz", FUZZ_CASES)):
    settings.register_profile(
        f"kaiwo-fuzz-{_profile}",
        max_examples=_examples,
        derandomize=_profile == "ci",
        deadline=None,
        database=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.filter_too_much,
        ],
    )

PROFILE = settings.get_profile(
    "kaiwo-fuzz-fuzz" if os.environ.get("HYPOTHESIS_PROFILE") == "fuzz" else "kaiwo-fuzz-ci"
)
"""The settings of a fuzz target: ``@PROFILE`` above ``@given``."""
