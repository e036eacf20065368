"""Who may call the gateway, answered by a real API server (decision 0040).

The gateway authenticates as its own ServiceAccount, bound to the role deploy/k8s/base/
rbac.yaml gives it (a TokenRequest token for ``kaiwo-gateway``). Two tenants: ServiceAccount
``alice`` in namespace A, bound to a Role granting ``get`` on ``models.kubeai.org`` there,
and ``bob`` in namespace B with no grant at all. Their tokens come from the TokenRequest
API, as ``kubectl create token`` issues them (one of alice's for the audience
``kaiwo-gateway`` only).

What must hold: the TokenReview names alice with her groups; the SubjectAccessReview lets
her use A and nothing else, and bob nothing; a forged token, a token for another audience,
and a token of a deleted ServiceAccount (once the remembered answer expires) are refused;
the gateway's account may ask those two reviews and do nothing else. And end to end, with
the gateway process on a real nats-server: alice's ``/models`` lists A's Models only, her
request is answered, bob's request for the same Model is a 404 that scales nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import aiohttp
import openai
import pytest
import pytest_asyncio
from kaiwo_contracts.events.permissions import ADMIN, WATCHER, operator_identities
from kaiwo_contracts.events.streams import bus_topology
from kaiwo_gateway.__main__ import serve
from kaiwo_gateway.domain.access import CacheSettings, Caller
from kaiwo_gateway.kubernetes_access import AccessSettings, KubernetesAccess
from kaiwo_gateway.metrics import GatewayMetrics
from kaiwo_gateway.settings import GatewaySettings
from kaiwo_kube import KubeError, NotFound, resources
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_runtime.nats_credentials import write_credentials
from kaiwo_runtime.nats_server import NatsServer, free_port
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config

from tests.integration.gateway.test_gateway import (
    connect,
    observe,
    routed_to,
    standin_pod,
    start_standin,
    until,
)
from tests.integration.rbac.service_accounts import (
    rbac_installed,
    service_kubeconfig,
    service_user,
)
from tests.real_cluster import OPERATOR_NAMESPACE, RealCluster
from tests.unit.gateway.model_objects import model_object

pytestmark = [pytest.mark.k8s, pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(300)]

GATEWAY_AUDIENCE: Final = "kaiwo-gateway"
TOKEN_SECONDS: Final = 3600


@dataclass
class Tenants:
    admin: KubernetesAsyncioAdapter
    gateway: KubernetesAsyncioAdapter
    gateway_kubeconfig: Path
    team_a: str
    team_b: str
    tokens: dict[str, str]

    def user(self, name: str) -> str:
        namespace = self.team_a if name.startswith("alice") else self.team_b
        return f"system:serviceaccount:{namespace}:{name.split('@', maxsplit=1)[0]}"

    def access(self, clock: Any = None, **settings: Any) -> KubernetesAccess:
        extra = {"clock": clock} if clock is not None else {}
        return KubernetesAccess(
            self.gateway,
            AccessSettings(cache=CacheSettings(allowed_seconds=30, denied_seconds=5), **settings),
            metrics=GatewayMetrics(),
            **extra,
        )


async def issue_token(
    kubeconfig: Path, namespace: str, account: str, audiences: list[str] | None = None
) -> str:
    """A token of ``account`` from the TokenRequest API, as ``kubectl create token``."""
    api = await k8s_config.new_client_from_config(config_file=str(kubeconfig), persist_config=False)
    async with api:
        request = k8s_client.AuthenticationV1TokenRequest(
            spec=k8s_client.V1TokenRequestSpec(
                audiences=audiences or [], expiration_seconds=TOKEN_SECONDS
            )
        )
        issued = await k8s_client.CoreV1Api(api).create_namespaced_service_account_token(
            account, namespace, request
        )
    return str(issued.status.token)


async def operator_namespace_ready(admin: KubernetesAsyncioAdapter) -> None:
    """Wait out a ``kaiwo-system`` another test deleted (still terminating)."""
    for _ in range(600):
        try:
            found = await admin.get(resources.NAMESPACE, OPERATOR_NAMESPACE)
        except NotFound:
            return
        if (found.get("status") or {}).get("phase") != "Terminating":
            return
        await asyncio.sleep(0.1)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def tenants(
    real_cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Tenants]:
    directory = tmp_path_factory.mktemp("gateway-access")
    suffix = uuid.uuid4().hex[:6]
    team_a, team_b = f"gw-team-a-{suffix}", f"gw-team-b-{suffix}"
    admin = await KubernetesAsyncioAdapter.from_kubeconfig(real_cluster.kubeconfig)
    async with contextlib.AsyncExitStack() as exits:
        exits.push_async_callback(admin.close)
        await operator_namespace_ready(admin)
        await exits.enter_async_context(rbac_installed(admin))
        for namespace, account in ((team_a, "alice"), (team_b, "bob")):
            await admin.create(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            )
            exits.push_async_callback(_delete_namespace, admin, namespace)
            await admin.create(
                {
                    "apiVersion": "v1",
                    "kind": "ServiceAccount",
                    "metadata": {"name": account, "namespace": namespace},
                }
            )
        await admin.create(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": "model-user", "namespace": team_a},
                "rules": [{"apiGroups": ["kubeai.org"], "resources": ["models"], "verbs": ["get"]}],
            }
        )
        await admin.create(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": "alice-uses-models", "namespace": team_a},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Role",
                    "name": "model-user",
                },
                "subjects": [{"kind": "ServiceAccount", "name": "alice", "namespace": team_a}],
            }
        )
        kubeconfig = await service_kubeconfig(real_cluster.kubeconfig, "gateway", directory)
        gateway = await KubernetesAsyncioAdapter.from_kubeconfig(kubeconfig)
        exits.push_async_callback(gateway.close)
        tokens = {
            "alice": await issue_token(real_cluster.kubeconfig, team_a, "alice"),
            "alice@gateway": await issue_token(
                real_cluster.kubeconfig, team_a, "alice", [GATEWAY_AUDIENCE]
            ),
            "bob": await issue_token(real_cluster.kubeconfig, team_b, "bob"),
        }
        yield Tenants(
            admin=admin,
            gateway=gateway,
            gateway_kubeconfig=kubeconfig,
            team_a=team_a,
            team_b=team_b,
            tokens=tokens,
        )


async def _delete_namespace(admin: KubernetesAsyncioAdapter, namespace: str) -> None:
    with contextlib.suppress(NotFound):
        await admin.delete(resources.NAMESPACE, namespace)


async def test_the_api_server_names_the_caller_and_what_they_may_use(tenants: Tenants) -> None:
    access = tenants.access()

    alice = await access.authenticate(tenants.tokens["alice"])
    bob = await access.authenticate(tenants.tokens["bob"])

    assert alice is not None and bob is not None
    assert alice.name == tenants.user("alice")
    assert {"system:serviceaccounts", f"system:serviceaccounts:{tenants.team_a}"} <= set(
        alice.groups
    )
    assert alice.uid  # the ServiceAccount's uid, which the access review passes on
    assert await access.may_use(alice, tenants.team_a)
    assert not await access.may_use(alice, tenants.team_b)
    assert not await access.may_use(bob, tenants.team_a)
    assert not await access.may_use(bob, tenants.team_b)  # bob has no grant at all
    assert await access.authenticate("eyJhbGciOiJSUzI1NiJ9.forged.token") is None
    # A caller the API server never issued a token for is refused too, even named as alice.
    assert not await access.may_use(Caller(name="alice"), tenants.team_a)


async def test_a_token_for_another_audience_is_refused(tenants: Tenants) -> None:
    for_gateway_only = tenants.access(audiences=(GATEWAY_AUDIENCE,))
    any_default = tenants.access()

    gateway_token = tenants.tokens["alice@gateway"]
    assert await for_gateway_only.authenticate(gateway_token) is not None
    assert await for_gateway_only.authenticate(tenants.tokens["alice"]) is None
    assert await any_default.authenticate(gateway_token) is None


async def test_a_deleted_service_account_s_token_is_refused_once_its_answer_expires(
    tenants: Tenants, real_cluster: RealCluster
) -> None:
    account = f"carol-{uuid.uuid4().hex[:4]}"
    await tenants.admin.create(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": account, "namespace": tenants.team_a},
        }
    )
    token = await issue_token(real_cluster.kubeconfig, tenants.team_a, account)
    now = [0.0]
    access = tenants.access(clock=lambda: now[0])
    assert await access.authenticate(token) is not None

    await tenants.admin.delete(
        resources.ResourceType("", "v1", "serviceaccounts", "ServiceAccount", namespaced=True),
        account,
        namespace=tenants.team_a,
    )

    async def refused_by_the_api_server() -> bool:  # it caches tokens itself for some seconds
        return await tenants.access().authenticate(token) is None

    await until(refused_by_the_api_server, within=120)
    assert await access.authenticate(token) is not None  # the gateway remembers it for 30 s
    now[0] += 30
    assert await access.authenticate(token) is None


async def test_the_gateway_s_account_may_ask_the_two_reviews_and_nothing_else(
    tenants: Tenants,
) -> None:
    gateway = tenants.gateway
    refused: list[int] = []
    for attempt in (
        gateway.list(resources.SECRET, namespace=tenants.team_a),
        gateway.get(resources.KUBEAI_MODEL, "any", namespace=tenants.team_a),
        gateway.list(resources.NAMESPACE),
        gateway.list(resources.POD),
        gateway.create(
            {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "LocalSubjectAccessReview",
                "metadata": {"namespace": tenants.team_a},
                "spec": {
                    "user": "x",
                    "resourceAttributes": {"namespace": tenants.team_a, "verb": "get"},
                },
            }
        ),
    ):
        with pytest.raises(KubeError) as error:
            await attempt
        refused.append(error.value.code)
    assert refused == [403] * 5
    assert service_user("gateway") == f"system:serviceaccount:{OPERATOR_NAMESPACE}:kaiwo-gateway"


@pytest.mark.nats
async def test_end_to_end_a_tenant_lists_and_calls_only_its_own_models(
    tenants: Tenants, tmp_path: Path
) -> None:
    credentials = write_credentials(tmp_path / "credentials", operator_identities(bus_topology()))
    ports = {name: free_port() for name in ("model", "gateway", "health")}
    standin = await start_standin("a1", ports["model"])
    versions: dict[str, int] = {}
    try:
        async with NatsServer(config=credentials.server_config.read_text()) as server:
            admin_bus = await connect(server, credentials, ADMIN)
            await admin_bus.ensure_streams()
            watcher = await connect(server, credentials, WATCHER)
            for obj in (
                model_object("llm", namespace=tenants.team_a, uid="llm-a"),
                standin_pod("p1", namespace=tenants.team_a, model="llm", model_uid="llm-a",
                            port=ports["model"]),
                model_object("sleepy", namespace=tenants.team_a, uid="sleepy-a"),
                model_object("other", namespace=tenants.team_b, uid="other-b"),
            ):  # fmt: skip
                await observe(watcher, versions, obj)
            settings = GatewaySettings(
                nats_url=server.url,
                nats_credentials_file=credentials.seed("gateway"),
                kubeconfig=tenants.gateway_kubeconfig,
                gateway_host="127.0.0.1",
                gateway_port=ports["gateway"],
                health_host="127.0.0.1",
                health_port=ports["health"],
                gateway_endpoint_wait_seconds=1.0,
                autoscaler_enabled=False,
            )
            stop = asyncio.Event()
            gateway = asyncio.create_task(serve(settings, stop))
            base_url = f"http://127.0.0.1:{ports['gateway']}/openai/v1"

            def client(who: str) -> openai.AsyncOpenAI:
                return openai.AsyncOpenAI(
                    base_url=base_url, api_key=tenants.tokens[who], max_retries=0
                )

            async def serving() -> bool:
                try:
                    return len((await client("alice").models.list()).data) == 2
                except openai.APIConnectionError:
                    return False

            try:
                await until(serving, within=30)
                assert [m.id for m in (await client("alice").models.list()).data] == [
                    "llm",
                    "sleepy",
                ]
                assert (await client("bob").models.list()).data == []
                answer = await client("alice").completions.create(model="llm", prompt="x")
                assert answer.choices[0].text == "a1|llm|"
                with pytest.raises(openai.NotFoundError):
                    await client("bob").completions.create(model="sleepy", prompt="x")
                with pytest.raises(openai.AuthenticationError):
                    await openai.AsyncOpenAI(
                        base_url=base_url, api_key="forged", max_retries=0
                    ).models.list()
                # bob's request was never routed: not in flight, never waited for a replica.
                assert routed_to(await _metrics(ports["health"]), "sleepy") == []
            finally:
                stop.set()
                await asyncio.wait_for(gateway, 10)
                await watcher.close()
                await admin_bus.close()
    finally:
        standin.terminate()
        await standin.wait()


async def _metrics(port: int) -> str:
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{port}/metrics") as response,
    ):
        return await response.text()
