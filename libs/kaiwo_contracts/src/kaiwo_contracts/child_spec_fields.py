"""The spec fields a running child created suspended may have taken away (decision 0133).

A child that Kueue admits is created under ``kaiwo-create`` and updated under ``kaiwo``
(see :data:`kaiwo_contracts.plans.CREATE_SUSPENDED_FIELD_MANAGER`). A spec field the owner no
longer sets stays on the child while ``kaiwo-create`` holds it, so the executor gives such a
field up, but only the fields named here: the API server lets them change on a running child
(a Job's ``activeDeadlineSeconds``; never its template, selector or completions), Kueue does
not count them in its admission (its pod sets), and the child's controller reads them as they
are (the Job controller, KubeRay). Any other held field stays as it is, as before: an
immutable one taken away would be refused by the API server on every update. The planner lets
the same fields change on a running child, so what one edit changes another can remove.

Shared by the planner (what an update of an existing child may change) and the executor (what
it gives up), so the two cannot disagree.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

JOB_REMOVABLE_SPEC_FIELDS = frozenset(
    {"activeDeadlineSeconds", "ttlSecondsAfterFinished", "backoffLimit"}
)
RAY_JOB_LIVE_SPEC_FIELDS = frozenset({"activeDeadlineSeconds", "ttlSecondsAfterFinished"})
"""The RayJob fields KubeRay reads on each reconcile (the deadline from the job's start, the
time to keep a finished job's cluster) and that are no part of Kueue's pod sets: a running
RayJob takes a change or removal of them without being stopped or started over."""

_REMOVABLE_SPEC_FIELDS: Mapping[tuple[str, str], frozenset[str]] = MappingProxyType(
    {
        ("batch/v1", "Job"): JOB_REMOVABLE_SPEC_FIELDS,
        ("ray.io/v1", "RayJob"): RAY_JOB_LIVE_SPEC_FIELDS,
    }
)


def removable_spec_fields(api_version: object, kind: object) -> frozenset[str]:
    """The top-level spec fields of an existing child of ``api_version``/``kind`` that may be
    taken away once its owner no longer sets them (none for any other kind: an AppWrapper's
    components cannot change)."""
    return _REMOVABLE_SPEC_FIELDS.get((str(api_version), str(kind)), frozenset())
