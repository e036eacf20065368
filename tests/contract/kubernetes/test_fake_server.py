"""What the Kubernetes fake serves over HTTP beyond the port's contract: discovery, scale, raw
error answers, paging, write counters and the separate-process mode.

The tests that describe Kubernetes itself run against the session's real API server too
(``api`` fixture, marker ``k8s``), each in a namespace of its own; those about the fake's own
tools (write counters, compaction, its process mode, its group list) run on the fake only.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_kube.resources import CONFIG_MAP, NAMESPACE
from kaiwo_kubefake import FakeKubeServer
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config

from tests.real_cluster import RealCluster
from tests.sample_crds import gadget_crd
from tests.waiting import Pending, eventually


@dataclass
class Api:
    """Raw HTTP to one API server (the fake or the real one) and this test's namespace."""

    http: aiohttp.ClientSession
    namespace: str
    kubeconfig: Path
    real: bool


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[FakeKubeServer]:
    async with FakeKubeServer(kubeconfig_path=tmp_path / "kubeconfig") as fake:
        yield fake


@pytest.fixture
async def http(server: FakeKubeServer) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(base_url=server.url) as session:
        yield session


async def real_session(kubeconfig: Path) -> aiohttp.ClientSession:
    """A session authenticated as the kubeconfig says (certificates or a bearer token)."""
    configuration = k8s_client.Configuration()
    await k8s_config.load_kube_config(
        config_file=str(kubeconfig), client_configuration=configuration
    )
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, configuration.key_file)
    token = configuration.api_key.get("authorization") or configuration.api_key.get("BearerToken")
    headers = {"Authorization": token} if token else {}
    return aiohttp.ClientSession(
        base_url=configuration.host,
        headers=headers,
        connector=aiohttp.TCPConnector(ssl=context),
    )


@pytest.fixture(params=["fake", pytest.param("real", marks=pytest.mark.k8s)])
async def api(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Api]:
    if request.param == "fake":
        async with (
            FakeKubeServer(kubeconfig_path=tmp_path / "kubeconfig") as fake,
            aiohttp.ClientSession(base_url=fake.url) as session,
        ):
            yield Api(
                http=session, namespace="default", kubeconfig=fake.kubeconfig_path, real=False
            )
        return
    real: RealCluster = request.getfixturevalue("real_cluster")
    namespace = f"kaiwo-http-{uuid.uuid4().hex[:8]}"
    async with await real_session(real.kubeconfig) as session:
        status, _ = await call(
            session, "POST", "/api/v1/namespaces", body={"metadata": {"name": namespace}}
        )
        assert status == 201
        try:
            yield Api(http=session, namespace=namespace, kubeconfig=real.kubeconfig, real=True)
        finally:
            await call(session, "DELETE", f"/api/v1/namespaces/{namespace}")


async def call(
    http: aiohttp.ClientSession,
    method: str,
    path: str,
    *,
    body: Any = None,
    content_type: str = "application/json",
) -> tuple[int, Any]:
    """The status and the JSON body (or the text, when the server answered plain text)."""
    data = json.dumps(body) if body is not None else None
    async with http.request(
        method, path, data=data, headers={"Content-Type": content_type}
    ) as response:
        if response.content_type == "text/plain":
            return response.status, await response.text()
        return response.status, await response.json(content_type=None)


async def test_core_discovery_lists_resources_and_subresources(api: Api) -> None:
    http = api.http
    status, versions = await call(http, "GET", "/api")
    assert status == 200
    assert versions["versions"] == ["v1"]
    _, core = await call(http, "GET", "/api/v1")
    by_name = {entry["name"]: entry for entry in core["resources"]}
    assert by_name["pods"]["namespaced"] is True
    assert by_name["pods"]["kind"] == "Pod"
    assert "watch" in by_name["pods"]["verbs"]
    assert by_name["pods/status"]["verbs"] == ["get", "patch", "update"]
    assert by_name["nodes"]["namespaced"] is False
    assert by_name["namespaces"]["namespaced"] is False
    assert "configmaps/status" not in by_name


async def test_group_discovery(http: aiohttp.ClientSession) -> None:
    _, groups = await call(http, "GET", "/apis")
    names = [group["name"] for group in groups["groups"]]
    assert names == [
        "apiextensions.k8s.io",
        "apps",
        "batch",
        "coordination.k8s.io",
        "events.k8s.io",
        "rbac.authorization.k8s.io",
        "scheduling.k8s.io",
    ]
    _, apps = await call(http, "GET", "/apis/apps/v1")
    scale = next(entry for entry in apps["resources"] if entry["name"] == "deployments/scale")
    assert (scale["group"], scale["version"], scale["kind"]) == ("autoscaling", "v1", "Scale")
    status, _ = await call(http, "GET", "/apis/ray.io/v1")
    assert status == 404


async def test_a_lagging_fake_serves_a_new_kind_at_once_and_lists_it_after_the_lag(
    tmp_path: Path,
) -> None:
    crd = gadget_crd("lag.kaiwo.test")
    crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    async with (
        FakeKubeServer(kubeconfig_path=tmp_path / "kubeconfig", discovery_lag=0.5) as fake,
        aiohttp.ClientSession(base_url=fake.url) as http,
    ):
        status, created = await call(http, "POST", crds, body=crd)
        assert status == 201
        assert {c["type"]: c["status"] for c in created["status"]["conditions"]} == {
            "NamesAccepted": "True",
            "Established": "True",
        }
        assert (await call(http, "GET", "/apis/lag.kaiwo.test/v1alpha1/gadgets"))[0] == 200
        assert (await call(http, "GET", "/apis/lag.kaiwo.test/v1alpha1"))[0] == 404
        assert (await call(http, "GET", "/apis/lag.kaiwo.test"))[0] == 404

        await asyncio.sleep(0.6)
        _, listed = await call(http, "GET", "/apis/lag.kaiwo.test/v1alpha1")
        assert [entry["name"] for entry in listed["resources"]] == ["gadgets"]
        # Applying the CRD again (a new schema, say) does not take it out of discovery.
        crd["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"]
        status, _ = await call(http, "PUT", f"{crds}/gadgets.lag.kaiwo.test", body=crd)
        assert status == 200
        assert (await call(http, "GET", "/apis/lag.kaiwo.test/v1alpha1"))[0] == 200


async def test_a_posted_crd_appears_in_discovery_with_its_preferred_version(api: Api) -> None:
    http, group = api.http, f"d{uuid.uuid4().hex[:8]}.contract.kaiwo.test"
    schema = {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"rayjobs.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "rayjobs", "kind": "RayJob"},
            "versions": [
                {"name": "v1alpha1", "served": True, "storage": False, "schema": schema},
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": schema,
                    "subresources": {"status": {}},
                },
            ],
        },
    }
    crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    status, _ = await call(http, "POST", crds, body=crd)
    assert status == 201
    try:

        async def established() -> bool:
            _, found = await call(http, "GET", f"{crds}/rayjobs.{group}")
            # A real server may answer ``conditions: null`` before its controllers looked.
            listed = (found.get("status") or {}).get("conditions") or []
            conditions = {c["type"]: c["status"] for c in listed}
            return conditions == {"NamesAccepted": "True", "Established": "True"}

        async def discovered() -> bool:
            status, _ = await call(http, "GET", f"/apis/{group}/v1")
            return status == 200

        async def preferred() -> dict[str, str] | Pending:
            _, served = await call(http, "GET", f"/apis/{group}")
            found = served.get("preferredVersion") or {}
            # A real server adds a CRD's versions to the group's discovery one by one: on a
            # loaded machine the group was seen with v1alpha1 alone, then both.
            return found if len(served.get("versions") or ()) == 2 else Pending(str(served))

        await eventually(established)
        await eventually(discovered)
        assert await eventually(preferred) == {"groupVersion": f"{group}/v1", "version": "v1"}
        _, resources = await call(http, "GET", f"/apis/{group}/v1")
        assert [entry["name"] for entry in resources["resources"]] == [
            "rayjobs",
            "rayjobs/status",
        ]
    finally:
        await call(http, "DELETE", f"{crds}/rayjobs.{group}")


async def test_scale_subresource_reads_and_writes_replicas(api: Api) -> None:
    http, deployments = api.http, f"/apis/apps/v1/namespaces/{api.namespace}/deployments"
    labels = {"app": "web"}
    deployment = {
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]},
            },
        },
    }
    status, _ = await call(http, "POST", deployments, body=deployment)
    assert status == 201
    status, scale = await call(http, "GET", f"{deployments}/web/scale")
    assert status == 200
    assert (scale["kind"], scale["spec"]["replicas"]) == ("Scale", 1)
    status, scaled = await call(
        http,
        "PATCH",
        f"{deployments}/web/scale",
        body={"spec": {"replicas": 4}},
        content_type="application/merge-patch+json",
    )
    assert (status, scaled["spec"]["replicas"]) == (200, 4)
    _, stored = await call(http, "GET", f"{deployments}/web")
    assert stored["spec"]["replicas"] == 4
    assert stored["metadata"]["generation"] == 2


async def test_errors_answer_with_status_bodies(api: Api) -> None:
    http, configmaps = api.http, f"/api/v1/namespaces/{api.namespace}/configmaps"
    status, body = await call(http, "GET", f"{configmaps}/nope")
    assert status == 404
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'configmaps "nope" not found',
        "reason": "NotFound",
        "details": {"name": "nope", "kind": "configmaps"},
        "code": 404,
    }
    # A group nothing serves: the server's mux answers, in plain text.
    assert await call(http, "GET", "/apis/example.com/v1/widgets") == (
        404,
        "404 page not found\n",
    )
    # A served group version without such a resource: a Status.
    status, body = await call(http, "GET", f"/api/v1/namespaces/{api.namespace}/gadgets")
    assert (status, body["reason"], body["message"]) == (
        404,
        "NotFound",
        "the server could not find the requested resource",
    )
    await call(http, "POST", configmaps, body={"metadata": {"name": "a"}})
    status, body = await call(http, "PATCH", f"{configmaps}/a", body={}, content_type="text/plain")
    assert (status, body["reason"]) == (415, "UnsupportedMediaType")


async def test_json_and_strategic_patches_over_http(api: Api) -> None:
    http, pods = api.http, f"/api/v1/namespaces/{api.namespace}/pods"
    pod = {
        "metadata": {"name": "p", "labels": {"a": "1"}},
        "spec": {
            "containers": [{"name": "main", "image": "a:1"}, {"name": "side", "image": "s:1"}]
        },
    }
    await call(http, "POST", pods, body=pod)
    _, patched = await call(
        http,
        "PATCH",
        f"{pods}/p",
        body={"spec": {"containers": [{"name": "main", "image": "a:2"}]}},
        content_type="application/strategic-merge-patch+json",
    )
    # Merged by name (a real server also fills in container defaults, hence the two fields).
    assert [(c["name"], c["image"]) for c in patched["spec"]["containers"]] == [
        ("main", "a:2"),
        ("side", "s:1"),
    ]
    _, patched = await call(
        http,
        "PATCH",
        f"{pods}/p",
        body=[{"op": "replace", "path": "/metadata/labels/a", "value": "2"}],
        content_type="application/json-patch+json",
    )
    assert patched["metadata"]["labels"] == {"a": "2"}


async def test_too_old_versions_answer_410_in_lists_and_watch_streams(
    server: FakeKubeServer, http: aiohttp.ClientSession
) -> None:
    await call(
        http, "POST", "/api/v1/namespaces/default/configmaps", body={"metadata": {"name": "a"}}
    )
    old = server.store.resource_version - 1
    server.store.compact()
    status, body = await call(
        http,
        "GET",
        f"/api/v1/namespaces/default/configmaps?resourceVersion={old}&resourceVersionMatch=Exact",
    )
    assert (status, body["code"], body["reason"]) == (410, 410, "Expired")
    async with http.get(
        f"/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={old}"
    ) as response:
        assert response.status == 200
        lines = [json.loads(line) async for line in response.content if line.strip()]
    assert [event["type"] for event in lines] == ["ERROR"]
    assert lines[0]["object"]["code"] == 410


async def test_write_counters_see_requests_that_change_nothing(server: FakeKubeServer) -> None:
    async with await KubernetesAsyncioAdapter.from_kubeconfig(server.kubeconfig_path) as kube:
        desired = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cfg", "namespace": "default"},
            "data": {"a": "1"},
        }
        await kube.apply(desired, field_manager="kaiwo")
        await kube.apply(desired, field_manager="kaiwo")
    assert server.store.write_requests[("", "configmaps", "default", "cfg")] == 2
    assert server.store.changes[("", "configmaps", "default", "cfg")] == 1


async def test_the_adapter_reads_every_page(api: Api) -> None:
    kube = await KubernetesAsyncioAdapter.from_kubeconfig(api.kubeconfig, page_size=2)
    async with kube:
        for name in ("e", "d", "c", "b", "a"):
            await kube.create(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": name, "namespace": api.namespace},
                }
            )
        listed = await kube.list(CONFIG_MAP, namespace=api.namespace)
    names = [item["metadata"]["name"] for item in listed.items]
    # A real namespace also holds the kube-root-ca.crt ConfigMap its controller puts there.
    assert [name for name in names if name != "kube-root-ca.crt"] == ["a", "b", "c", "d", "e"]


async def test_runs_as_a_separate_process(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "out" / "kubeconfig"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "kaiwo_kubefake",
        "--port",
        "0",
        "--kubeconfig",
        str(kubeconfig),
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), timeout=30)).decode()
        assert line.startswith("listening on http://127.0.0.1:")
        async with await KubernetesAsyncioAdapter.from_kubeconfig(kubeconfig) as kube:
            listed = await kube.list(NAMESPACE)
        assert [item["metadata"]["name"] for item in listed.items] == [
            "default",
            "kube-node-lease",
            "kube-public",
            "kube-system",
        ]
    finally:
        process.terminate()
        assert await asyncio.wait_for(process.wait(), timeout=30) == 0


async def test_a_watch_whose_client_left_is_dropped(
    server: FakeKubeServer, http: aiohttp.ClientSession
) -> None:
    async with http.get("/api/v1/namespaces/default/configmaps?watch=true") as response:
        assert response.status == 200
        assert server.store.feed.open_watches == 1
    for _ in range(100):  # the server notices within about a second
        if not server.store.feed.open_watches:
            break
        await asyncio.sleep(0.1)
    assert server.store.feed.open_watches == 0
