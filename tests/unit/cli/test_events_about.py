"""Which of a namespace's Events ``kaiwo status`` shows for a workload: those about it, its
children and its pods, and not those of an earlier workload of the same name (decision 0165)."""

from __future__ import annotations

import asyncio
from typing import Any

from kaiwo_cli.cluster_access import events_about
from kaiwo_kube import ObjectList
from kaiwo_kube.resources import ResourceType

NEW_RUN = {"kind": "KaiwoJob", "metadata": {"name": "train", "namespace": "ml", "uid": "u-new"}}
NEW_JOB = {"kind": "Job", "metadata": {"name": "train", "namespace": "ml", "uid": "j-new"}}


def event(name: str, kind: str, about: str, uid: str | None) -> dict[str, Any]:
    involved = {"kind": kind, "name": about, "namespace": "ml"}
    if uid is not None:
        involved["uid"] = uid
    return {
        "kind": "Event",
        "metadata": {"name": name, "namespace": "ml"},
        "involvedObject": involved,
    }


class Namespace:
    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events = events

    async def get(self, resource: ResourceType, name: str, *, namespace: str | None = None) -> Any:
        raise AssertionError("no get expected")

    async def list(
        self,
        resource: ResourceType,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> ObjectList:
        assert (resource.kind, namespace) == ("Event", "ml")
        return ObjectList(items=self.events, resource_version="1")


def test_the_events_of_an_earlier_workload_of_the_same_name_are_not_this_ones() -> None:
    events = [
        event("old-run", "KaiwoJob", "train", "u-old"),
        event("old-job", "Job", "train", "j-old"),
        event("new-run", "KaiwoJob", "train", "u-new"),
        event("new-job", "Job", "train", "j-new"),
        event("no-uid", "Job", "train", None),
        event("other", "KaiwoJob", "serve", "u-serve"),
        event("other-no-uid", "Job", "serve", None),
    ]

    shown = asyncio.run(events_about(Namespace(events), "ml", [NEW_RUN, NEW_JOB]))

    assert [e["metadata"]["name"] for e in shown] == ["new-run", "new-job", "no-uid"]
