"""What the simulated controllers ask of the API server, declared here where it is used: they
get and list, create, apply, merge-patch and write status. Nothing here deletes, scales,
records Events or installs CRDs. The kubernetes_asyncio adapter, the fake API server and
:class:`~kaiwo_sandbox.scope.NamespaceScope` satisfy it by their shape."""

from __future__ import annotations

from typing import Protocol

from kaiwo_kube import (
    MergePatcher,
    ObjectApplier,
    ObjectCreator,
    ObjectGetter,
    ObjectLister,
    StatusWriter,
)


class SandboxCluster(
    ObjectGetter, ObjectLister, ObjectCreator, ObjectApplier, MergePatcher, StatusWriter, Protocol
):
    """Every call the sandbox's controllers make (the kubelets' log endpoint only gets)."""
