"""The port through which the gateway learns who calls and what they may use (decision 0040);
shared with the console in :mod:`kaiwo_runtime.kubernetes_access` (decision 0051).

:class:`~kaiwo_runtime.kubernetes_access.KubernetesAccess` answers with the API server's
TokenReview and SubjectAccessReview; tests may answer from a table.
"""

from __future__ import annotations

from kaiwo_runtime.kubernetes_access import (
    LOOPBACK_ONLY,
    Access,
    AccessBusyError,
    AccessUnavailableError,
)

__all__ = ["LOOPBACK_ONLY", "Access", "AccessBusyError", "AccessUnavailableError"]
