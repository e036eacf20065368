"""The operator's RBAC on a real API server: deploy/k8s/base/rbac.yaml installed as kustomize
installs it (namespaced objects in ``kaiwo-system``) with the executor's admission policies
(deploy/k8s/base/admission-policy.yaml), a token per ServiceAccount (TokenRequest,
``create serviceaccounts/token``), a kubeconfig per service that authenticates with it, and
what the audit log says each service did with its grants."""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, Final

import yaml
from kaiwo_envtest import AuditEvent
from kaiwo_kube import AlreadyExists, KubeError, NotFound, resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config

from tests.integration.pipeline.harness import Pending, eventually
from tests.real_cluster import OPERATOR_NAMESPACE, REPO_ROOT

RBAC_MANIFEST: Final = REPO_ROOT / "deploy" / "k8s" / "base" / "rbac.yaml"
ADMISSION_MANIFEST: Final = REPO_ROOT / "deploy" / "k8s" / "base" / "admission-policy.yaml"
FIELD_MANAGER: Final = "kaiwo-tests"
NAMESPACED_KINDS: Final = ("ServiceAccount", "Role", "RoleBinding")
REFUSED: Final = (401, 403)
TOKEN_SECONDS: Final = 3600
TERMINATING_SECONDS: Final = 60.0

Grant = tuple[str, str, str]
"""(apiGroup, resource or ``resource/subresource``, verb), as a role rule names them."""


def service_account(service: str) -> str:
    return f"kaiwo-{service}"


def service_user(service: str) -> str:
    """The user a ServiceAccount's token authenticates as."""
    return f"system:serviceaccount:{OPERATOR_NAMESPACE}:{service_account(service)}"


def rbac_objects() -> list[dict[str, Any]]:
    """The manifest's objects, the namespaced ones in ``kaiwo-system`` (as kustomize sets it)."""
    objects = [o for o in yaml.safe_load_all(RBAC_MANIFEST.read_text()) if o]
    for obj in objects:
        if obj["kind"] in NAMESPACED_KINDS:
            obj["metadata"]["namespace"] = OPERATOR_NAMESPACE
    return objects


def admission_objects() -> list[dict[str, Any]]:
    """The executor's ValidatingAdmissionPolicies and their bindings (cluster-scoped)."""
    return [o for o in yaml.safe_load_all(ADMISSION_MANIFEST.read_text()) if o]


def granted(service: str) -> set[Grant]:
    """Everything the roles bound to ``service``'s ServiceAccount grant."""
    objects = rbac_objects()
    roles = {(o["kind"], o["metadata"]["name"]): o for o in objects if "rules" in o}
    found: set[Grant] = set()
    for binding in (o for o in objects if "roleRef" in o):
        if all(s["name"] != service_account(service) for s in binding["subjects"]):
            continue
        role = roles[(binding["roleRef"]["kind"], binding["roleRef"]["name"])]
        for rule in role["rules"]:
            found |= {
                (group, resource, verb)
                for group in rule["apiGroups"]
                for resource in rule["resources"]
                for verb in rule["verbs"]
            }
    return found


def grant_of(request: AuditEvent) -> Grant:
    resource = request.resource
    if request.subresource:
        resource = f"{resource}/{request.subresource}"
    return (request.api_group, resource, request.verb)


def used(requests: Iterable[AuditEvent]) -> set[Grant]:
    """The grants the authorized requests used. A server-side apply that created its object
    (201) needed ``create`` as well as ``patch``."""
    found: set[Grant] = set()
    for request in requests:
        if request.code in REFUSED or not request.resource:
            continue
        grant = grant_of(request)
        found.add(grant)
        if request.verb == "patch" and request.code == 201:
            found.add((grant[0], grant[1], "create"))
    return found


def usage_table(requests: Iterable[AuditEvent]) -> dict[str, set[str]]:
    """``group/resource`` -> the verbs used, for the report."""
    table: dict[str, set[str]] = defaultdict(set)
    for group, resource, verb in used(requests):
        table[f"{group or 'core'}/{resource}"].add(verb)
    return dict(table)


@contextlib.asynccontextmanager
async def rbac_installed(kube: KubernetesAsyncioAdapter) -> AsyncIterator[None]:
    """The operator's RBAC and admission policies while the block runs, removed after it.

    They are cluster-wide, so one left behind would meet every later test of the session's
    API server (a test's dry run conflicted with a policy an earlier test kept): installing
    them and removing them are one step."""
    await _install_rbac(kube)
    try:
        yield
    finally:
        await _uninstall_rbac(kube)


async def _install_rbac(kube: KubernetesAsyncioAdapter) -> None:
    await _namespace_not_terminating(kube)
    with contextlib.suppress(AlreadyExists):
        await kube.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": OPERATOR_NAMESPACE}}
        )
    for obj in rbac_objects():
        await kube.apply(obj, field_manager=FIELD_MANAGER, force=True)
    for obj in admission_objects():
        await kube.apply(obj, field_manager=FIELD_MANAGER, force=True)


async def _namespace_not_terminating(kube: KubernetesAsyncioAdapter) -> None:
    """An earlier test's uninstall deletes the namespace without waiting: nothing can be
    created in it until the namespace controller has emptied and removed it."""
    deadline = asyncio.get_running_loop().time() + TERMINATING_SECONDS
    while True:
        try:
            found = await kube.get(resources.NAMESPACE, OPERATOR_NAMESPACE)
        except NotFound:
            return
        if not found["metadata"].get("deletionTimestamp"):
            return
        assert asyncio.get_running_loop().time() < deadline, f"{OPERATOR_NAMESPACE} still going"
        await asyncio.sleep(0.5)


async def _uninstall_rbac(kube: KubernetesAsyncioAdapter) -> None:
    """The cluster-wide roles, bindings and admission policies, and the namespace with
    everything else (not waited for: nothing else uses it)."""
    for obj in admission_objects():
        resource = await kube.resolve(obj["apiVersion"], obj["kind"])
        with contextlib.suppress(NotFound):
            await kube.delete(resource, obj["metadata"]["name"])
    for obj in rbac_objects():
        if obj["kind"] in ("ClusterRole", "ClusterRoleBinding"):
            resource = await kube.resolve(obj["apiVersion"], obj["kind"])
            with contextlib.suppress(NotFound):
                await kube.delete(resource, obj["metadata"]["name"])
    with contextlib.suppress(NotFound):
        await kube.delete(resources.NAMESPACE, OPERATOR_NAMESPACE)


async def service_kubeconfig(admin_kubeconfig: Path, service: str, directory: Path) -> Path:
    """A kubeconfig for the API server of ``admin_kubeconfig`` that authenticates as
    ``service``'s ServiceAccount, with a token the TokenRequest API issues for it."""
    api = await k8s_config.new_client_from_config(
        config_file=str(admin_kubeconfig), persist_config=False
    )
    async with api:
        request = k8s_client.AuthenticationV1TokenRequest(
            spec=k8s_client.V1TokenRequestSpec(audiences=[], expiration_seconds=TOKEN_SECONDS)
        )
        issued = await k8s_client.CoreV1Api(api).create_namespaced_service_account_token(
            service_account(service), OPERATOR_NAMESPACE, request
        )
    admin = yaml.safe_load(await asyncio.to_thread(admin_kubeconfig.read_text))
    [context] = [c for c in admin["contexts"] if c["name"] == admin["current-context"]]
    [cluster] = [c for c in admin["clusters"] if c["name"] == context["context"]["cluster"]]
    user = service_account(service)
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": user, "user": {"token": issued.status.token}}],
        "contexts": [{"name": user, "context": {"cluster": cluster["name"], "user": user}}],
        "current-context": user,
    }
    path = directory / f"{user}.kubeconfig"
    await asyncio.to_thread(_write_private, path, yaml.safe_dump(document, sort_keys=False))
    return path


def _write_private(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o600)


async def refusal_in_force(
    attempt: Callable[[], Awaitable[object]],
    undo: Callable[[], Awaitable[object]],
    *,
    refused_by: str,
    what: str,
) -> None:
    """Until the API server refuses ``attempt`` (a 403 whose message holds ``refused_by``,
    e.g. a policy's name): it enforces each admission policy a moment after its binding is
    made, each on its own. Each attempt it allows is undone."""

    async def refused() -> bool | Pending:
        try:
            await attempt()
        except KubeError as error:
            if error.code == 403 and refused_by in error.message:
                return True
            return Pending(error.message)
        await undo()
        return Pending("allowed: not in force yet")

    await eventually(refused, what=what, interval=0.5)
