"""The adapter reads the proxy variables once, at construction, instead of on every request."""

from __future__ import annotations

import pytest
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kubernetes_asyncio import client as k8s_client


def adapter_for(host: str, *, proxy: str | None = None) -> KubernetesAsyncioAdapter:
    configuration = k8s_client.Configuration(host=host)
    configuration.proxy = proxy
    return KubernetesAsyncioAdapter(k8s_client.ApiClient(configuration=configuration))


@pytest.fixture(autouse=True)
def no_proxy_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "ALL_PROXY",
        "all_proxy",
        "NO_PROXY",
        "no_proxy",
    ):
        monkeypatch.delenv(name, raising=False)


async def test_the_https_proxy_variable_is_used_for_the_api_server(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.corp:3128")
    adapter = adapter_for("https://api.cluster.example:6443")
    try:
        rest = adapter.transport.api_client.rest_client
        assert rest.proxy == "http://proxy.corp:3128"
        assert rest.pool_manager.trust_env is False
    finally:
        await adapter.close()


async def test_no_proxy_naming_the_api_server_keeps_it_direct(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.corp:3128")
    monkeypatch.setenv("NO_PROXY", "localhost,.cluster.example")
    adapter = adapter_for("https://api.cluster.example:6443")
    try:
        assert not adapter.transport.api_client.rest_client.proxy
    finally:
        await adapter.close()


async def test_a_proxy_from_the_kubeconfig_wins_over_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.corp:3128")
    adapter = adapter_for("https://api.cluster.example:6443", proxy="http://kube-proxy:8080")
    try:
        assert adapter.transport.api_client.rest_client.proxy == "http://kube-proxy:8080"
    finally:
        await adapter.close()


async def test_without_proxy_variables_there_is_no_proxy() -> None:
    adapter = adapter_for("https://127.0.0.1:6443")
    try:
        assert not adapter.transport.api_client.rest_client.proxy
        assert adapter.transport.api_client.rest_client.pool_manager.trust_env is False
    finally:
        await adapter.close()
