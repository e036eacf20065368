"""The real Kubernetes API server of a test session (a pytest plugin, see ``tests/conftest.py``).

``real_cluster`` is, in this order of choice:

1. the cluster of ``KAIWO_TEST_KUBECONFIG``, when that is set;
2. a throw-away control plane (etcd, kube-apiserver, kube-controller-manager, audit log) from
   the stack ``make stack`` builds (or ``KAIWO_ENVTEST_ASSETS``), started once per session,
   with ``OwnerReferencesPermissionEnforcement`` admission and every request of the operator's
   ServiceAccounts audited.

Either way our CRDs and the third-party ones (Kueue, KubeRay, AppWrapper, Gateway API, from
their pinned Go modules' sources, copied out by the stack's build) are served and Established
before the first test. No Kueue manager runs here, so Kueue's CRDs serve only the version the
operator writes (:func:`kaiwo_envtest.crds.one_version`); ``tests/real_stack.py`` runs the
real Kueue. With neither a kubeconfig nor a built stack the test is skipped with the reason,
unless ``KAIWO_REQUIRE_REAL_APISERVER=1`` (CI), when it fails.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, NoReturn, TypeVar

import pytest
from kaiwo_contracts.crds.registry import SERVED_KINDS
from kaiwo_contracts.crds.schema import custom_resource_definitions
from kaiwo_envtest import (
    AssetsNotFoundError,
    AuditLog,
    ControlPlane,
    ControlPlaneOptions,
    StackNotBuiltError,
    built_stack,
    find_binaries,
)
from kaiwo_envtest.crds import third_party_crds as third_party_crds_of
from kaiwo_kube import NotFound
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_kube.resources import CUSTOM_RESOURCE_DEFINITION, KUEUE_CLUSTER_QUEUE

from tests.required import unavailable as missing

T = TypeVar("T")

REPO_ROOT: Final = Path(__file__).resolve().parent.parent
KUBECONFIG_VARIABLE: Final = "KAIWO_TEST_KUBECONFIG"
FIELD_MANAGER: Final = "kaiwo-tests"
ESTABLISHED_WITHIN: Final = 600.0
"""A bound against a server that never serves them, not a measure: on a busy 2-core machine
compiling the large third-party schemas has taken over a minute."""
OPERATOR_NAMESPACE: Final = "kaiwo-system"
AUDITED_IN_FULL: Final = (f"system:serviceaccounts:{OPERATOR_NAMESPACE}",)
"""The operator's ServiceAccounts (deploy/k8s/base/rbac.yaml): the audit log holds every
request of theirs, reads too, so a test can compare their roles with the calls they make."""
ADMISSION_PLUGINS: Final = ("OwnerReferencesPermissionEnforcement",)
"""Besides the API server's defaults, as OpenShift runs it: a client that sets
``blockOwnerDeletion`` on an owner reference (every child the operator makes) must be allowed
to update the owner's ``finalizers``."""


@dataclass(frozen=True, slots=True)
class RealCluster:
    """A real API server for this session: an administrator's kubeconfig and, when the tests
    started the control plane themselves, its audit log and its own client identities."""

    kubeconfig: Path
    plane: ControlPlane | None

    @property
    def audit_log(self) -> AuditLog | None:
        return self.plane.audit_log if self.plane is not None else None

    def kubeconfig_for(self, user: str) -> Path:
        """A kubeconfig authenticating as ``user`` (an administrator) on our own control
        plane, so the audit log tells its writes apart; on a given cluster, the given one."""
        return self.plane.kubeconfig_for(user) if self.plane is not None else self.kubeconfig


def run_async(work: Callable[[], Awaitable[T]]) -> T:
    """Run ``work`` on an event loop of its own, in a thread: session set-up happens outside
    the tests' loops and must not touch them."""

    async def main() -> T:
        return await work()

    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, main()).result()


def third_party_crds() -> list[dict[str, Any]]:
    """Kueue's, KubeRay's, AppWrapper's and Gateway API's CRDs from the built stack; Kueue's
    serving only the version the operator writes, as no Kueue converts here."""
    try:
        stack = built_stack()
    except StackNotBuiltError as error:
        unavailable(str(error))
        raise
    return third_party_crds_of(stack.crds, kueue_version=KUEUE_CLUSTER_QUEUE.version)


async def install_crds(kubeconfig: Path, *, keep_existing_third_party: bool) -> None:
    """The third-party CRDs and ours (as ``kaiwo up --install-crds`` applies them), each
    Established and served when this returns.

    On a cluster we did not start, a third-party CRD already there is left alone: it may be a
    newer release with its own conversion webhook.
    """
    async with await KubernetesAsyncioAdapter.from_kubeconfig(kubeconfig) as kube:
        crds = third_party_crds()
        if keep_existing_third_party:
            crds = [crd for crd in crds if not await _served(kube, crd["metadata"]["name"])]
        crds += custom_resource_definitions(SERVED_KINDS)
        await kube.ensure_crds(crds, field_manager=FIELD_MANAGER, within=ESTABLISHED_WITHIN)


async def _served(kube: KubernetesAsyncioAdapter, name: str) -> bool:
    try:
        await kube.get(CUSTOM_RESOURCE_DEFINITION, name)
    except NotFound:
        return False
    return True


def unavailable(reason: str) -> NoReturn:
    """Skip with ``reason``; under ``KAIWO_REQUIRE_REAL_APISERVER=1`` fail with it."""
    missing("a real Kubernetes API server", reason)


FIRST_TEST_TIMEOUT: Final = 900.0
"""The first test that asks for a session plane (``real_cluster`` or ``real_stack``) waits for
its start too, which on a busy 2-core machine has taken minutes; pytest-timeout counts
fixtures' set-up in the test's time. Its own bounds (the plane's readiness, the CRDs') still
hold."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Give the first test of each file that asks for a plane the time to start it: with
    ``make test``'s workers (``pytest -n 2 --dist loadfile``) any such file may be the first
    its worker runs, and each worker starts its own planes."""
    seen: set[tuple[str, str]] = set()
    for item in items:
        for plane in ("real_cluster", "real_stack"):
            key = (item.nodeid.partition("::")[0], plane)
            if plane in getattr(item, "fixturenames", ()) and key not in seen:
                seen.add(key)
                item.add_marker(pytest.mark.timeout(FIRST_TEST_TIMEOUT))


@pytest.fixture(scope="session")
def real_cluster() -> Iterator[RealCluster]:
    """The session's real API server with every CRD Established (see the module's doc)."""
    configured = os.environ.get(KUBECONFIG_VARIABLE)
    if configured:
        run_async(lambda: install_crds(Path(configured), keep_existing_third_party=True))
        yield RealCluster(kubeconfig=Path(configured), plane=None)
        return
    try:
        binaries = find_binaries()
    except AssetsNotFoundError as error:
        unavailable(f"{KUBECONFIG_VARIABLE} is not set, and {error}")
        raise  # unavailable() skipped or failed; this line is never reached
    options = ControlPlaneOptions(
        binaries=binaries,
        controller_manager=True,
        audit=True,
        audit_every_request_of=AUDITED_IN_FULL,
        admission_plugins=ADMISSION_PLUGINS,
    )
    started = time.monotonic()
    with ControlPlane(options) as plane:
        run_async(lambda: install_crds(plane.kubeconfig, keep_existing_third_party=False))
        print(f"\nreal API server ready in {time.monotonic() - started:.1f} s: {plane.server}")
        yield RealCluster(kubeconfig=plane.kubeconfig, plane=plane)
