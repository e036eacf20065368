"""The kube-scheduler of a control plane, run with a given KubeSchedulerConfiguration (the
project's kaiwo-scheduler profile, ``deploy/k8s/scheduler/scheduler.yaml``) adapted for a
local process: the kubeconfig is this plane's, and there is no leader election (one process,
nothing to elect).

A cluster also has its default scheduler, which every pod that names no scheduler waits for
(the Kubernetes Job controller's, KubeRay's and Kueue's own pods do not pass through Kaiwo's
templates). One process plays both: :func:`local_configuration` adds a ``default-scheduler``
profile with the stock plugins when the configuration has none.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Final

DEFAULT_SCHEDULER: Final = "default-scheduler"


def local_configuration(
    configuration: dict[str, Any], *, kubeconfig: Path, default_profile: bool = True
) -> dict[str, Any]:
    """``configuration`` (a KubeSchedulerConfiguration) talking to the plane through
    ``kubeconfig``, without leader election, with a ``default-scheduler`` profile too when
    ``default_profile``."""
    if configuration.get("kind") != "KubeSchedulerConfiguration":
        raise ValueError("the scheduler configuration is not a KubeSchedulerConfiguration")
    local = copy.deepcopy(configuration)
    local["clientConnection"] = {
        **(local.get("clientConnection") or {}),
        "kubeconfig": str(kubeconfig),
    }
    local["leaderElection"] = {"leaderElect": False}
    profiles = list(local.get("profiles") or [])
    names = {profile.get("schedulerName", DEFAULT_SCHEDULER) for profile in profiles}
    if default_profile and DEFAULT_SCHEDULER not in names:
        profiles.append({"schedulerName": DEFAULT_SCHEDULER})
    local["profiles"] = profiles
    return local


def scheduler_flags(
    *, configuration: Path, kubeconfig: Path, port: int, cert_dir: Path
) -> list[str]:
    """The command-line flags besides the executable: serving on loopback only, its own
    identity for delegated authentication and authorization."""
    return [
        f"--config={configuration}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={cert_dir}",
    ]
