"""What the Kubernetes fake serves over HTTP beyond the port's contract: discovery, scale, raw
error answers, paging, write counters and the separate-process mode."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_kube.resources import CONFIG_MAP, NAMESPACE
from kaiwo_kubefake import FakeKubeServer


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[FakeKubeServer]:
    async with FakeKubeServer(kubeconfig_path=tmp_path / "kubeconfig") as fake:
        yield fake


@pytest.fixture
async def http(server: FakeKubeServer) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(base_url=server.url) as session:
        yield session


async def call(
    http: aiohttp.ClientSession,
    method: str,
    path: str,
    *,
    body: Any = None,
    content_type: str = "application/json",
) -> tuple[int, dict[str, Any]]:
    data = json.dumps(body) if body is not None else None
    async with http.request(
        method, path, data=data, headers={"Content-Type": content_type}
    ) as response:
        return response.status, await response.json(content_type=None)


async def test_core_discovery_lists_resources_and_subresources(
    http: aiohttp.ClientSession,
) -> None:
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
    ]
    _, apps = await call(http, "GET", "/apis/apps/v1")
    scale = next(entry for entry in apps["resources"] if entry["name"] == "deployments/scale")
    assert (scale["group"], scale["version"], scale["kind"]) == ("autoscaling", "v1", "Scale")
    status, _ = await call(http, "GET", "/apis/ray.io/v1")
    assert status == 404


async def test_a_posted_crd_appears_in_discovery_with_its_preferred_version(
    http: aiohttp.ClientSession,
) -> None:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "rayjobs.ray.io"},
        "spec": {
            "group": "ray.io",
            "scope": "Namespaced",
            "names": {"plural": "rayjobs", "kind": "RayJob"},
            "versions": [
                {"name": "v1alpha1", "served": True, "storage": False},
                {"name": "v1", "served": True, "storage": True, "subresources": {"status": {}}},
            ],
        },
    }
    status, created = await call(
        http, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", body=crd
    )
    assert status == 201
    established = {c["type"]: c["status"] for c in created["status"]["conditions"]}
    assert established == {"NamesAccepted": "True", "Established": "True"}
    _, group = await call(http, "GET", "/apis/ray.io")
    assert group["preferredVersion"] == {"groupVersion": "ray.io/v1", "version": "v1"}
    _, resources = await call(http, "GET", "/apis/ray.io/v1")
    assert [entry["name"] for entry in resources["resources"]] == ["rayjobs", "rayjobs/status"]


async def test_scale_subresource_reads_and_writes_replicas(
    server: FakeKubeServer, http: aiohttp.ClientSession
) -> None:
    deployment = {"metadata": {"name": "web"}, "spec": {"replicas": 1}}
    await call(http, "POST", "/apis/apps/v1/namespaces/default/deployments", body=deployment)
    status, scale = await call(
        http, "GET", "/apis/apps/v1/namespaces/default/deployments/web/scale"
    )
    assert status == 200
    assert (scale["kind"], scale["spec"]["replicas"]) == ("Scale", 1)
    status, scaled = await call(
        http,
        "PATCH",
        "/apis/apps/v1/namespaces/default/deployments/web/scale",
        body={"spec": {"replicas": 4}},
        content_type="application/merge-patch+json",
    )
    assert (status, scaled["spec"]["replicas"]) == (200, 4)
    kind = server.store.kinds.lookup(group="apps", version="v1", plural="deployments")
    assert kind is not None
    stored = server.store.get(kind, namespace="default", name="web")
    assert stored["spec"]["replicas"] == 4
    assert stored["metadata"]["generation"] == 2


async def test_errors_answer_with_status_bodies(http: aiohttp.ClientSession) -> None:
    status, body = await call(http, "GET", "/api/v1/namespaces/default/configmaps/nope")
    assert status == 404
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'configmaps "nope" not found',
        "reason": "NotFound",
        "details": {"name": "nope", "group": "", "kind": "configmaps"},
        "code": 404,
    }
    status, body = await call(http, "GET", "/apis/example.com/v1/widgets")
    assert (status, body["reason"]) == (404, "NotFound")
    await call(
        http, "POST", "/api/v1/namespaces/default/configmaps", body={"metadata": {"name": "a"}}
    )
    status, body = await call(
        http,
        "PATCH",
        "/api/v1/namespaces/default/configmaps/a",
        body={},
        content_type="text/plain",
    )
    assert (status, body["reason"]) == (415, "UnsupportedMediaType")


async def test_json_and_strategic_patches_over_http(http: aiohttp.ClientSession) -> None:
    pods = "/api/v1/namespaces/default/pods"
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
    assert patched["spec"]["containers"] == [
        {"name": "main", "image": "a:2"},
        {"name": "side", "image": "s:1"},
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


async def test_the_adapter_reads_every_page(server: FakeKubeServer) -> None:
    kube = await KubernetesAsyncioAdapter.from_kubeconfig(server.kubeconfig_path, page_size=2)
    async with kube:
        for name in ("e", "d", "c", "b", "a"):
            await kube.create(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": name, "namespace": "default"},
                }
            )
        listed = await kube.list(CONFIG_MAP, namespace="default")
    assert [item["metadata"]["name"] for item in listed.items] == ["a", "b", "c", "d", "e"]


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
        assert server.store.open_watches == 1
    for _ in range(100):  # the server notices within about a second
        if not server.store.open_watches:
            break
        await asyncio.sleep(0.1)
    assert server.store.open_watches == 0
