"""Who a bearer token belongs to and what they may use, asked of the API server: the
gateway's names for :mod:`kaiwo_runtime.kubernetes_access`, which the console shares
(decisions 0040 and 0051). The gateway asks ``get`` on ``models.kubeai.org`` (the settings'
default resource).
"""

from __future__ import annotations

from kaiwo_runtime.kubernetes_access import AccessSettings, KubernetesAccess, ReviewApi

__all__ = ["AccessSettings", "KubernetesAccess", "ReviewApi"]
