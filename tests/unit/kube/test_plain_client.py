"""Which kubeconfigs the commands' plain aiohttp transport serves, and what it reads."""

from __future__ import annotations

import base64
from pathlib import Path

from aiohttp import web
from aiohttp.test_utils import TestServer
from kaiwo_kube.plain_client import (
    PlainApiClient,
    PlainCredentials,
    in_cluster_credentials,
    read_plain_credentials,
)


def kubeconfig(tmp_path: Path, user: str, cluster: str = "server: https://10.0.0.1:6443") -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: main\n"
        f"clusters:\n- name: c\n  cluster:\n    {cluster}\n"
        f"users:\n- name: u\n  user:\n{user}\n"
        "contexts:\n- name: main\n  context: {cluster: c, user: u}\n"
        "- name: other\n  context: {cluster: c, user: nobody}\n"
    )
    return path


def test_certificates_in_files_relative_to_the_kubeconfig_and_inline_data(tmp_path: Path) -> None:
    (tmp_path / "client.crt").write_bytes(b"CERT")
    ca = base64.b64encode(b"CA").decode()
    path = kubeconfig(
        tmp_path,
        "    client-certificate: client.crt\n"
        f"    client-key-data: {base64.b64encode(b'KEY').decode()}\n",
        cluster=f"server: https://10.0.0.1:6443/\n    certificate-authority-data: {ca}",
    )

    assert read_plain_credentials(path) == PlainCredentials(
        server="https://10.0.0.1:6443", ca_data=b"CA", certificate=b"CERT", key=b"KEY"
    )


def test_a_token_file_is_named_to_be_read_by_the_client(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("abc\n")
    path = kubeconfig(tmp_path, "    tokenFile: token\n")

    assert read_plain_credentials(path) == PlainCredentials(
        server="https://10.0.0.1:6443", token_file=tmp_path / "token"
    )
    assert read_plain_credentials(kubeconfig(tmp_path, "    tokenFile: absent\n")) is None


def test_anything_more_is_left_to_the_client_library(tmp_path: Path) -> None:
    exec_plugin = kubeconfig(tmp_path, "    exec: {command: aws, apiVersion: v1}\n")
    assert read_plain_credentials(exec_plugin) is None
    proxied = kubeconfig(
        tmp_path, "    token: t\n", cluster="server: https://x\n    proxy-url: http://proxy:3128"
    )
    assert read_plain_credentials(proxied) is None
    assert read_plain_credentials(proxied, context="other") is None  # user nobody: unknown
    assert read_plain_credentials(tmp_path / "absent") is None


def test_a_pods_service_account_is_read_from_where_the_kubelet_mounts_it(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("t1")
    environ = {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}

    assert in_cluster_credentials(environ, account=tmp_path) == PlainCredentials(
        server="https://[fd00::1]:443", ca_file=tmp_path / "ca.crt", token_file=tmp_path / "token"
    )
    assert in_cluster_credentials({}, account=tmp_path) is None
    assert in_cluster_credentials(environ, account=tmp_path / "elsewhere") is None


async def test_a_token_file_is_read_again_after_the_kubelet_rotates_it(tmp_path: Path) -> None:
    seen: list[str] = []

    async def record(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization", ""))
        return web.json_response({})

    app = web.Application()
    app.router.add_get("/version", record)
    token = tmp_path / "token"
    token.write_text("first\n")
    now = [0.0]
    async with TestServer(app) as server:
        client = PlainApiClient(
            PlainCredentials(server=str(server.make_url("")).rstrip("/"), token_file=token),
            monotonic=lambda: now[0],
        )
        for at, written in ((0.0, None), (30.0, "second"), (61.0, None)):
            now[0] = at
            if written:
                token.write_text(written)
            response = await client.call_api(
                "/version",
                "GET",
                query_params=[],
                header_params={},
                body=None,
                auth_settings=[],
                _preload_content=True,
                _request_timeout=5.0,
            )
            response.release()
        await client.close()

    # Read at once, kept for a minute though the file changed, then read again.
    assert seen == ["Bearer first", "Bearer first", "Bearer second"]
