"""kubectl against the fake as against a real API server: ``kubectl apply`` with no flags
(the fake serves OpenAPI, so kubectl's validation finds the kinds) and ``kubectl get``
showing the CRD's printer columns (the fake answers Table requests). kubectl is the built
stack's (``tests/stack_programs.py``)."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml
from kaiwo_contracts.crds.registry import SERVED_KINDS
from kaiwo_contracts.crds.schema import custom_resource_definitions

from tests.kube_backends import api_server
from tests.stack_programs import stack_program

JOB = """\
apiVersion: kaiwo.silogen.ai/v1alpha1
kind: KaiwoJob
metadata:
  name: tiny
  namespace: {namespace}
spec:
  user: alice@example.com
  image: busybox
  entrypoint: echo hello
"""


async def kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> tuple[int, str]:
    process = await asyncio.create_subprocess_exec(
        stack_program("kubectl"),
        f"--kubeconfig={kubeconfig}",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await process.communicate(stdin.encode() if stdin is not None else None)
    assert process.returncode is not None
    return process.returncode, output.decode()


@pytest.fixture(params=["fake", pytest.param("real", marks=pytest.mark.k8s)])
async def kubeconfig(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Path]:
    async with contextlib.AsyncExitStack() as stack:
        server = await api_server(request.param, request, stack, tmp_path)
        if server.fake is not None:  # the real server has the CRDs
            crds = yaml.safe_dump_all(list(custom_resource_definitions(SERVED_KINDS)))
            code, output = await kubectl(server.kubeconfig, "apply", "-f", "-", stdin=crds)
            assert code == 0, output
            await asyncio.sleep(0.2)  # discovery of the new kinds
        yield server.kubeconfig


async def test_apply_without_flags_and_get_with_printer_columns(kubeconfig: Path) -> None:
    namespace = f"kaiwo-kubectl-{uuid.uuid4().hex[:6]}"
    namespace_manifest = (
        f"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {namespace}\n"
        "  labels:\n    kaiwo-tests/namespace: 'true'\n"
    )
    code, output = await kubectl(kubeconfig, "apply", "-f", "-", stdin=namespace_manifest)
    assert code == 0, output
    try:
        manifest = JOB.format(namespace=namespace)
        code, output = await kubectl(kubeconfig, "apply", "-f", "-", stdin=manifest)
        assert (code, output.strip()) == (0, "kaiwojob.kaiwo.silogen.ai/tiny created")
        code, output = await kubectl(kubeconfig, "apply", "-f", "-", stdin=manifest)
        assert (code, output.strip()) == (0, "kaiwojob.kaiwo.silogen.ai/tiny unchanged")

        code, output = await kubectl(kubeconfig, "get", "kaiwojobs", "-n", namespace)
        assert code == 0, output
        header, row = output.splitlines()
        assert header.split() == ["NAME", "STATUS", "STARTTIME", "COMPLETIONTIME", "DURATION(S)"]
        assert row.split() == ["tiny"]

        code, output = await kubectl(kubeconfig, "get", "kaiwojobs", "-A")
        lines = [line.split() for line in output.splitlines()]
        assert lines[0][:2] == ["NAMESPACE", "NAME"]
        assert [namespace, "tiny"] in lines
    finally:
        await kubectl(kubeconfig, "delete", "namespace", namespace, "--wait=false")
