"""A fake Kubernetes API server over HTTP, for tests and benchmarks.

``async with FakeKubeServer(kubeconfig_path=tmp / "kubeconfig") as server:`` serves the API on
127.0.0.1 (free port); any Kubernetes client can use the kubeconfig. ``server.store`` holds
the state for direct inspection and changes. ``python -m kaiwo_kubefake`` runs it as a process.
What the fake does and does not do: docs/decisions/0004-kubernetes-fake.md.
"""

from kaiwo_kubefake.errors import ApiError
from kaiwo_kubefake.kinds import BUILTIN_KINDS, ResourceKind, ScalePaths, kinds_from_crd
from kaiwo_kubefake.server import FakeKubeServer
from kaiwo_kubefake.storage import ObjectStore, Preconditions

__all__ = [
    "BUILTIN_KINDS",
    "ApiError",
    "FakeKubeServer",
    "ObjectStore",
    "Preconditions",
    "ResourceKind",
    "ScalePaths",
    "kinds_from_crd",
]
