"""``kaiwo logs -c NAME`` naming a container the workload's pods do not have says so, and
which they have, rather than that the workload "has no pods yet"; exit 1 (bad input)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

import pytest
from kaiwo_cli.workload_logs import print_logs
from kaiwo_kube import NotFound, ObjectList
from kaiwo_kube.resources import ResourceType

TRAIN = {
    "kind": "KaiwoJob",
    "metadata": {"name": "train", "namespace": "ml-team", "uid": "uid-train"},
    "status": {"status": "COMPLETE"},
}
POD = {
    "metadata": {"name": "train-x7k2p", "namespace": "ml-team"},
    "spec": {"containers": [{"name": "workload"}, {"name": "sidecar"}]},
    "status": {
        "phase": "Succeeded",
        "containerStatuses": [
            {"name": "workload", "state": {"terminated": {"exitCode": 0}}},
            {"name": "sidecar", "state": {"terminated": {"exitCode": 0}}},
        ],
    },
}


class OnePodCluster:
    """A finished KaiwoJob with one pod of two containers."""

    async def get(self, resource: ResourceType, name: str, *, namespace: str | None = None) -> Any:
        if resource.kind == "KaiwoJob" and (namespace, name) == ("ml-team", "train"):
            return TRAIN
        raise NotFound(f"{resource.kind} {name} not found", code=404)

    async def list(self, resource: ResourceType, **_: Any) -> ObjectList:
        return ObjectList(items=[POD] if resource.kind == "Pod" else [], resource_version="1")

    async def pod_log_lines(self, name: str, **_: Any) -> AsyncGenerator[str, None]:
        raise AssertionError(f"no log should be read, not {name}'s")
        yield ""


def test_a_container_the_pods_do_not_have_is_named_with_those_they_have(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = asyncio.run(
        print_logs(OnePodCluster(), "ml-team", "train", container="trainer", tail=None)
    )

    assert code == 1
    assert capsys.readouterr().err == (
        "kaiwo logs: no container trainer in the pods of KaiwoJob ml-team/train "
        "(they have: sidecar, workload)\n"
    )
