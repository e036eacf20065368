"""Which kubeconfigs the commands' plain aiohttp transport serves, and what it reads."""

from __future__ import annotations

import base64
from pathlib import Path

from kaiwo_kube.plain_client import PlainCredentials, read_plain_credentials


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


def test_a_token_file_is_read(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("abc\n")
    path = kubeconfig(tmp_path, "    tokenFile: token\n")

    assert read_plain_credentials(path) == PlainCredentials(
        server="https://10.0.0.1:6443", token="abc"
    )


def test_anything_more_is_left_to_the_client_library(tmp_path: Path) -> None:
    exec_plugin = kubeconfig(tmp_path, "    exec: {command: aws, apiVersion: v1}\n")
    assert read_plain_credentials(exec_plugin) is None
    proxied = kubeconfig(
        tmp_path, "    token: t\n", cluster="server: https://x\n    proxy-url: http://proxy:3128"
    )
    assert read_plain_credentials(proxied) is None
    assert read_plain_credentials(proxied, context="other") is None  # user nobody: unknown
    assert read_plain_credentials(tmp_path / "absent") is None
