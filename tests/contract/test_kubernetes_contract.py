"""One behavioural suite for the Kubernetes port, run through the real kubernetes_asyncio adapter.

Each test runs against the fake API server (started in-process) and against the session's real
API server (marker ``k8s``; the ``real_cluster`` fixture: the envtest control plane, or the
cluster of ``KAIWO_TEST_KUBECONFIG``). Every test works in its own namespace and removes what
it created.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kaiwo_kube import (
    AlreadyExists,
    Conflict,
    Invalid,
    KubernetesPort,
    NotFound,
    ResourceExpired,
    ResourceType,
    Retryable,
    WatchEvent,
)
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_kube.plain_client import PlainApiClient
from kaiwo_kube.resources import (
    CONFIG_MAP,
    CUSTOM_RESOURCE_DEFINITION,
    DEPLOYMENT,
    EVENT,
)
from kaiwo_kubefake import FakeKubeServer

from tests.kube_backends import api_server, delete_quietly, scratch_namespace
from tests.sample_crds import OPEN_SCHEMA, STATUS_ONLY, crd_for, gadget_crd
from tests.waiting import eventually


@dataclass
class Backend:
    """The API server under test, the adapter talking to it, and this test's namespace."""

    kube: KubernetesAsyncioAdapter
    namespace: str
    run_id: str
    fake: FakeKubeServer | None
    # Seconds within which a watch with bookmarks must have sent one.
    bookmark_within: int

    def expire_history(self) -> None:
        """Make old resourceVersions unusable (a real cluster compacts etcd on its own)."""
        if self.fake is not None:
            self.fake.store.compact()


@pytest.fixture(
    params=[
        "fake",
        pytest.param("real", marks=pytest.mark.k8s),
        # The commands' transport (plain aiohttp): the same adapter, the same contract (on
        # the real API server the commands' end-to-end tests use it: test_scientist_cli).
        "fake-plain",
    ]
)
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    run_id = uuid.uuid4().hex[:8]
    async with contextlib.AsyncExitStack() as stack:
        server = await api_server(request.param, request, stack, tmp_path, bookmark_interval=0.2)
        # A real server sends a watch's bookmark once a minute, or 2 s before the watch's
        # own timeout when that comes sooner (the watch cache's nextBookmarkTime).
        fake, bookmark_within = server.fake, 5 if server.fake is not None else 10
        if request.param.endswith("plain"):
            kube = await KubernetesAsyncioAdapter.from_kubeconfig_quickly(server.kubeconfig)
            assert isinstance(kube.transport.api_client, PlainApiClient)
        else:
            kube = await KubernetesAsyncioAdapter.from_kubeconfig(server.kubeconfig)
        stack.push_async_callback(kube.close)
        namespace = await scratch_namespace(kube, stack, prefix="kaiwo-contract", run_id=run_id)
        yield Backend(
            kube=kube,
            namespace=namespace,
            run_id=run_id,
            fake=fake,
            bookmark_within=bookmark_within,
        )


def widget_crd(group: str) -> dict[str, Any]:
    """A namespaced kind with an open spec and status, and the status and scale
    subresources."""
    schema = {"type": "object", "properties": {"spec": OPEN_SCHEMA, "status": OPEN_SCHEMA}}
    scale = {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}
    return crd_for(
        group,
        kind="Widget",
        plural="widgets",
        versions={"v1": schema},
        subresources={**STATUS_ONLY, "scale": scale},
    )


@pytest.fixture
async def widgets(backend: Backend) -> AsyncIterator[ResourceType]:
    """A namespaced custom kind with status and scale subresources, served for this test."""
    group = f"w{backend.run_id}.contract.kaiwo.test"
    crd = widget_crd(group)
    await backend.kube.ensure_crds([crd], field_manager="kaiwo-contract")
    try:
        yield ResourceType(
            group=group, version="v1", plural="widgets", kind="Widget", namespaced=True
        )
    finally:
        await delete_quietly(backend.kube, CUSTOM_RESOURCE_DEFINITION, f"widgets.{group}")


def config_map(
    namespace: str, name: str, *, data: dict[str, str] | None = None, **metadata: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, **metadata},
        "data": data or {},
    }


def widget(
    resource: ResourceType, namespace: str, name: str, *, spec: dict[str, Any]
) -> dict[str, Any]:
    return {
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def deployment(namespace: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]},
            },
        },
    }


async def collect(
    events: AsyncGenerator[WatchEvent, None],
    *,
    until: Callable[[list[WatchEvent]], bool],
    within: float,
) -> list[WatchEvent]:
    """Watch events until ``until(seen)`` holds; fail if it does not within ``within`` seconds."""
    seen: list[WatchEvent] = []

    async def read() -> None:
        async with contextlib.aclosing(events) as stream:
            async for event in stream:
                seen.append(event)
                if until(seen):
                    return

    await asyncio.wait_for(read(), timeout=within)
    return seen


async def is_gone(kube: KubernetesPort, resource: ResourceType, name: str, namespace: str) -> bool:
    try:
        await kube.get(resource, name, namespace=namespace)
    except NotFound:
        return True
    return False


def not_bookmark(events: list[WatchEvent]) -> list[tuple[str, str]]:
    return [(e.type, e.object["metadata"]["name"]) for e in events if e.type != "BOOKMARK"]


# ---------------------------------------------------------------------- CRUD


async def test_create_get_replace_and_resource_versions(backend: Backend) -> None:
    kube, ns = backend.kube, backend.namespace
    created = await kube.create(config_map(ns, "settings", data={"mode": "fast"}))
    metadata = created["metadata"]
    assert metadata["namespace"] == ns
    assert metadata["uid"]
    assert metadata["creationTimestamp"].endswith("Z")
    assert metadata["resourceVersion"]

    fetched = await kube.get(CONFIG_MAP, "settings", namespace=ns)
    assert fetched["data"] == {"mode": "fast"}
    assert fetched["metadata"]["resourceVersion"] == metadata["resourceVersion"]

    fetched["data"] = {"mode": "slow"}
    replaced = await kube.replace(fetched)
    assert replaced["data"] == {"mode": "slow"}
    assert replaced["metadata"]["uid"] == metadata["uid"]
    assert replaced["metadata"]["resourceVersion"] != metadata["resourceVersion"]


async def test_generation_follows_spec_changes_only(backend: Backend) -> None:
    kube, ns = backend.kube, backend.namespace
    created = await kube.create(deployment(ns, "web"))
    assert created["metadata"]["generation"] == 1

    labelled = await kube.merge_patch(
        DEPLOYMENT, "web", {"metadata": {"labels": {"tier": "front"}}}, namespace=ns
    )
    assert labelled["metadata"]["generation"] == 1
    assert labelled["metadata"]["resourceVersion"] != created["metadata"]["resourceVersion"]

    changed = await kube.merge_patch(
        DEPLOYMENT, "web", {"spec": {"minReadySeconds": 5}}, namespace=ns
    )
    assert changed["metadata"]["generation"] == 2


async def test_missing_object_is_not_found(backend: Backend) -> None:
    with pytest.raises(NotFound) as raised:
        await backend.kube.get(CONFIG_MAP, "absent", namespace=backend.namespace)
    assert raised.value.code == 404
    assert raised.value.reason == "NotFound"
    assert raised.value.status["details"]["name"] == "absent"
    assert raised.value.status["details"]["kind"] == "configmaps"
    with pytest.raises(NotFound):
        await backend.kube.delete(CONFIG_MAP, "absent", namespace=backend.namespace)


async def test_second_create_already_exists(backend: Backend) -> None:
    await backend.kube.create(config_map(backend.namespace, "once"))
    with pytest.raises(AlreadyExists) as raised:
        await backend.kube.create(config_map(backend.namespace, "once"))
    assert raised.value.code == 409
    assert raised.value.reason == "AlreadyExists"


async def test_replace_with_stale_resource_version_conflicts(backend: Backend) -> None:
    kube, ns = backend.kube, backend.namespace
    original = await kube.create(config_map(ns, "contended", data={"n": "1"}))
    await kube.replace({**original, "data": {"n": "2"}})
    with pytest.raises(Conflict) as raised:
        await kube.replace({**original, "data": {"n": "3"}})
    assert raised.value.code == 409
    assert raised.value.reason == "Conflict"
    assert (await kube.get(CONFIG_MAP, "contended", namespace=ns))["data"] == {"n": "2"}


async def test_object_without_name_is_invalid(backend: Backend) -> None:
    nameless = config_map(backend.namespace, "x")
    del nameless["metadata"]["name"]
    with pytest.raises(Invalid) as raised:
        await backend.kube.create(nameless)
    assert raised.value.code == 422
    assert [cause["field"] for cause in raised.value.causes] == ["metadata.name"]


async def test_a_container_requesting_more_than_its_limit_is_invalid(backend: Backend) -> None:
    kube, ns = backend.kube, backend.namespace
    body = deployment(ns, "greedy")
    container = body["spec"]["template"]["spec"]["containers"][0]
    container["resources"] = {"requests": {"cpu": "8"}, "limits": {"cpu": "2"}}
    with pytest.raises(Invalid) as raised:
        await kube.apply(body, field_manager="kaiwo-contract")
    assert raised.value.code == 422
    assert [cause["field"] for cause in raised.value.causes] == [
        "spec.template.spec.containers[0].resources.requests"
    ]
    assert "must be less than or equal to cpu limit of 2" in str(raised.value)

    container["resources"] = {"requests": {"cpu": "1500m"}, "limits": {"cpu": "2"}}
    await kube.apply(body, field_manager="kaiwo-contract")  # 1.5 <= 2: accepted
    container["resources"] = {"requests": {"cpu": "3"}, "limits": {"cpu": "2"}}
    with pytest.raises(Invalid):  # and checked on an update too
        await kube.apply(body, field_manager="kaiwo-contract")


async def test_delete_with_wrong_uid_precondition_conflicts(backend: Backend) -> None:
    kube, ns = backend.kube, backend.namespace
    created = await kube.create(config_map(ns, "guarded"))
    with pytest.raises(Conflict):
        await kube.delete(CONFIG_MAP, "guarded", namespace=ns, uid=str(uuid.uuid4()))
    await kube.delete(CONFIG_MAP, "guarded", namespace=ns, uid=created["metadata"]["uid"])
    assert await is_gone(kube, CONFIG_MAP, "guarded", ns)


# ---------------------------------------------------------------------- list and watch


async def test_list_filters_by_label_and_field_selectors(backend: Backend) -> None:
    kube, ns = backend.kube, backend.namespace
    await kube.create(config_map(ns, "a", labels={"team": "ml", "tier": "gpu"}))
    await kube.create(config_map(ns, "b", labels={"team": "web"}))
    await kube.create(config_map(ns, "c", labels={"team": "ops", "tier": "cpu"}))

    async def names(**selectors: str) -> list[str]:
        listed = await kube.list(CONFIG_MAP, namespace=ns, **selectors)
        assert listed.resource_version
        found = [item["metadata"]["name"] for item in listed.items]
        # The namespace's own kube-root-ca.crt ConfigMap on a real cluster carries no labels.
        return sorted(name for name in found if name != "kube-root-ca.crt")

    assert await names(label_selector="team=ml") == ["a"]
    assert await names(label_selector="team!=ml,team") == ["b", "c"]
    assert await names(label_selector="team in (ml, ops)") == ["a", "c"]
    assert await names(label_selector="team notin (ml),team") == ["b", "c"]
    assert await names(label_selector="tier") == ["a", "c"]
    assert await names(label_selector="!tier,team") == ["b"]
    assert await names(label_selector="team=ml,tier=cpu") == []
    assert await names(field_selector="metadata.name=b") == ["b"]
    assert await names(field_selector=f"metadata.namespace={ns},metadata.name!=b") == ["a", "c"]


async def test_watch_resumes_from_a_resource_version(backend: Backend) -> None:
    kube, ns = backend.kube, backend.namespace
    listed = await kube.list(CONFIG_MAP, namespace=ns, label_selector="watched=yes")
    await kube.create(config_map(ns, "w1", labels={"watched": "yes"}))
    await kube.create(config_map(ns, "ignored", labels={"watched": "no"}))
    modified = await kube.merge_patch(CONFIG_MAP, "w1", {"data": {"k": "v"}}, namespace=ns)
    await kube.delete(CONFIG_MAP, "w1", namespace=ns)

    def complete(seen: list[WatchEvent]) -> bool:
        return any(e.type == "DELETED" for e in seen)

    everything = await collect(
        kube.watch(
            CONFIG_MAP,
            namespace=ns,
            resource_version=listed.resource_version,
            label_selector="watched=yes",
        ),
        until=complete,
        within=30,
    )
    assert not_bookmark(everything) == [("ADDED", "w1"), ("MODIFIED", "w1"), ("DELETED", "w1")]

    resumed = await collect(
        kube.watch(
            CONFIG_MAP,
            namespace=ns,
            resource_version=modified["metadata"]["resourceVersion"],
            label_selector="watched=yes",
        ),
        until=complete,
        within=30,
    )
    assert not_bookmark(resumed) == [("DELETED", "w1")]


async def test_watch_sees_changes_made_while_it_runs(backend: Backend) -> None:
    kube, ns = backend.kube, backend.namespace
    listed = await kube.list(CONFIG_MAP, namespace=ns)
    watching = asyncio.create_task(
        collect(
            kube.watch(
                CONFIG_MAP,
                namespace=ns,
                resource_version=listed.resource_version,
                field_selector="metadata.name=live",
            ),
            until=lambda seen: len(not_bookmark(seen)) == 2,
            within=30,
        )
    )
    await asyncio.sleep(0.3)
    await kube.create(config_map(ns, "live"))
    await kube.create(config_map(ns, "other"))
    await kube.merge_patch(CONFIG_MAP, "live", {"data": {"x": "1"}}, namespace=ns)
    seen = await watching
    assert not_bookmark(seen) == [("ADDED", "live"), ("MODIFIED", "live")]
    assert seen[-1].object["data"] == {"x": "1"}


async def test_watch_surfaces_bookmarks(backend: Backend) -> None:
    kube, ns = backend.kube, backend.namespace
    await kube.create(config_map(ns, "marker"))
    listed = await kube.list(CONFIG_MAP, namespace=ns)
    seen = await collect(
        kube.watch(
            CONFIG_MAP,
            namespace=ns,
            resource_version=listed.resource_version,
            timeout_seconds=backend.bookmark_within,
            bookmarks=True,
        ),
        until=lambda seen: any(e.type == "BOOKMARK" for e in seen),
        within=backend.bookmark_within + 10,
    )
    bookmark = next(e for e in seen if e.type == "BOOKMARK")
    assert int(bookmark.resource_version) >= int(listed.resource_version)
    assert bookmark.object["kind"] == "ConfigMap"


async def test_too_old_version_raises_resource_expired_and_relist_recovers(
    backend: Backend, widgets: ResourceType
) -> None:
    # A kind served only since this test began: on a real API server its watch cache starts
    # at today's resourceVersion, so "1" is too old at once (a ConfigMap's cache can still
    # hold "1" on a young cluster, until it wraps around).
    kube, ns = backend.kube, backend.namespace
    await kube.create(widget(widgets, ns, "before", spec={}))
    backend.expire_history()
    with pytest.raises(ResourceExpired) as raised:
        await collect(
            kube.watch(widgets, namespace=ns, resource_version="1"),
            until=lambda seen: False,
            within=30,
        )
    assert raised.value.code == 410

    relisted = await kube.list(widgets, namespace=ns)
    assert "before" in [item["metadata"]["name"] for item in relisted.items]
    watching = asyncio.create_task(
        collect(
            kube.watch(widgets, namespace=ns, resource_version=relisted.resource_version),
            until=lambda seen: ("ADDED", "after") in not_bookmark(seen),
            within=30,
        )
    )
    await asyncio.sleep(0.3)
    await kube.create(widget(widgets, ns, "after", spec={}))
    assert not_bookmark(await watching) == [("ADDED", "after")]


# ---------------------------------------------------------------------- status subresource


async def test_status_subresource_is_isolated_from_the_main_resource(
    backend: Backend, widgets: ResourceType
) -> None:
    kube, ns = backend.kube, backend.namespace
    body = widget(widgets, ns, "w", spec={"size": 1})
    created = await kube.create({**body, "status": {"phase": "Invented"}})
    assert "status" not in created
    assert created["metadata"]["generation"] == 1

    with_status = await kube.patch_status(
        widgets,
        "w",
        {"phase": "Running", "replicas": 1},
        namespace=ns,
        field_manager="kaiwo-status",
    )
    assert with_status["status"] == {"phase": "Running", "replicas": 1}
    assert with_status["spec"] == {"size": 1}
    assert with_status["metadata"]["generation"] == 1

    main_write = await kube.replace(
        {**with_status, "spec": {"size": 2}, "status": {"phase": "Overwritten"}}
    )
    assert main_write["spec"] == {"size": 2}
    assert main_write["status"] == {"phase": "Running", "replicas": 1}
    assert main_write["metadata"]["generation"] == 2

    merged = await kube.patch_status(
        widgets,
        "w",
        {"phase": "Done"},
        namespace=ns,
        field_manager="kaiwo-status",
        method="merge",
    )
    assert merged["status"] == {"phase": "Done", "replicas": 1}
    assert merged["spec"] == {"size": 2}
    assert merged["metadata"]["generation"] == 2


async def test_scale_subresource_sets_replicas_only_while_they_are_the_expected_ones(
    backend: Backend, widgets: ResourceType
) -> None:
    kube, ns = backend.kube, backend.namespace
    await kube.create(widget(widgets, ns, "w", spec={"size": 1}))

    # Without spec.replicas there is no Scale to read, nor replicas to test; an update sets
    # the field all the same.
    with pytest.raises(Retryable) as unreadable:
        await kube.get_scale(widgets, "w", namespace=ns)
    assert unreadable.value.code == 500
    assert '".spec.replicas" does not exist' in unreadable.value.message
    with pytest.raises(Invalid):
        await kube.patch_scale(
            widgets, "w", replicas=3, expected_replicas=0, namespace=ns, field_manager="kaiwo"
        )
    scaled = await kube.patch_scale(widgets, "w", replicas=1, namespace=ns, field_manager="kaiwo")
    assert scaled["spec"]["replicas"] == 1
    found = await kube.get(widgets, "w", namespace=ns)
    assert found["spec"] == {"size": 1, "replicas": 1}
    assert found["metadata"]["generation"] == 2

    assert (await kube.get_scale(widgets, "w", namespace=ns))["spec"]["replicas"] == 1
    tested = await kube.patch_scale(
        widgets, "w", replicas=2, expected_replicas=1, namespace=ns, field_manager="kaiwo"
    )
    assert tested["spec"]["replicas"] == 2
    # Someone scaled it meanwhile: a patch made from the old replicas changes nothing.
    with pytest.raises(Invalid):
        await kube.patch_scale(
            widgets, "w", replicas=3, expected_replicas=1, namespace=ns, field_manager="kaiwo"
        )
    assert (await kube.get_scale(widgets, "w", namespace=ns))["spec"]["replicas"] == 2


async def test_scale_subresource_scales_from_zero_replicas_only_while_they_are_zero(
    backend: Backend, widgets: ResourceType
) -> None:
    """A Scale at 0 replicas has no ``spec.replicas`` (autoscaling/v1 omits a zero), so a
    test of the value 0 cannot hold: it must still be scaled up from 0, and only from 0."""
    kube, ns = backend.kube, backend.namespace
    await kube.create(widget(widgets, ns, "w", spec={"size": 1, "replicas": 0}))
    assert (await kube.get_scale(widgets, "w", namespace=ns))["spec"] == {}

    scaled = await kube.patch_scale(
        widgets, "w", replicas=1, expected_replicas=0, namespace=ns, field_manager="kaiwo"
    )
    assert scaled["spec"]["replicas"] == 1
    assert (await kube.get(widgets, "w", namespace=ns))["spec"] == {"size": 1, "replicas": 1}
    # No longer at 0: a patch made from 0 replicas changes nothing.
    with pytest.raises(Invalid):
        await kube.patch_scale(
            widgets, "w", replicas=3, expected_replicas=0, namespace=ns, field_manager="kaiwo"
        )
    down = await kube.patch_scale(
        widgets, "w", replicas=0, expected_replicas=1, namespace=ns, field_manager="kaiwo"
    )
    assert down["spec"] == {}
    assert (await kube.get(widgets, "w", namespace=ns))["spec"] == {"size": 1, "replicas": 0}
    again = await kube.patch_scale(
        widgets, "w", replicas=2, expected_replicas=0, namespace=ns, field_manager="kaiwo"
    )
    assert again["spec"]["replicas"] == 2


async def test_scale_subresource_sets_replicas_only_while_the_object_is_the_version_read(
    backend: Backend, widgets: ResourceType
) -> None:
    """The Scale carries the object's resourceVersion: a patch testing it holds only while
    nothing was written to the object since it was read (the executor scales a Model only
    while it is the Model the autoscaler decided on: a user's ``autoscalingDisabled``, set
    in between with the replicas unchanged, refuses the patch)."""
    kube, ns = backend.kube, backend.namespace
    created = await kube.create(widget(widgets, ns, "w", spec={"size": 1, "replicas": 2}))
    read_at = created["metadata"]["resourceVersion"]

    # Someone changes another field of the spec after the read: the replicas are still 2.
    await kube.merge_patch(widgets, "w", {"spec": {"autoscalingDisabled": True}}, namespace=ns)
    with pytest.raises(Invalid):
        await kube.patch_scale(
            widgets,
            "w",
            replicas=4,
            expected_replicas=2,
            read_at=read_at,
            namespace=ns,
            field_manager="kaiwo",
        )
    found = await kube.get(widgets, "w", namespace=ns)
    assert found["spec"] == {"size": 1, "replicas": 2, "autoscalingDisabled": True}

    # Read again: the patch holds, from 0 too.
    scaled = await kube.patch_scale(
        widgets,
        "w",
        replicas=0,
        expected_replicas=2,
        read_at=found["metadata"]["resourceVersion"],
        namespace=ns,
        field_manager="kaiwo",
    )
    assert scaled["spec"] == {}
    up = await kube.patch_scale(
        widgets,
        "w",
        replicas=1,
        expected_replicas=0,
        read_at=scaled["metadata"]["resourceVersion"],
        namespace=ns,
        field_manager="kaiwo",
    )
    assert up["spec"] == {"replicas": 1}
    assert (await kube.get(widgets, "w", namespace=ns))["spec"]["replicas"] == 1


# ---------------------------------------------------------------------- server-side apply


async def test_apply_creates_updates_and_a_repeat_changes_nothing(backend: Backend) -> None:
    kube, ns = backend.kube, backend.namespace
    desired = config_map(ns, "applied", data={"a": "1"}, labels={"app": "x"})
    created = await kube.apply(desired, field_manager="kaiwo")
    assert created["data"] == {"a": "1"}
    assert [entry["manager"] for entry in created["metadata"]["managedFields"]] == ["kaiwo"]
    assert created["metadata"]["managedFields"][0]["operation"] == "Apply"

    again = await kube.apply(desired, field_manager="kaiwo")
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]

    changed = await kube.apply(
        config_map(ns, "applied", data={"a": "2"}, labels={"app": "x"}), field_manager="kaiwo"
    )
    assert changed["data"] == {"a": "2"}
    assert changed["metadata"]["resourceVersion"] != created["metadata"]["resourceVersion"]


async def test_an_apply_if_absent_creates_and_never_touches_an_existing_object(
    backend: Backend,
) -> None:
    kube, ns = backend.kube, backend.namespace
    created = await kube.apply(
        config_map(ns, "first-come", data={"a": "1"}), field_manager="kaiwo", if_absent=True
    )
    assert created["data"] == {"a": "1"}
    assert [(e["manager"], e["operation"]) for e in created["metadata"]["managedFields"]] == [
        ("kaiwo", "Apply")
    ]
    # Someone else's object of that name: refused, forced or not, and left exactly as it is.
    theirs = await kube.create(config_map(ns, "taken", data={"theirs": "1"}))
    for force in (True, False):
        with pytest.raises(Conflict):
            await kube.apply(
                config_map(ns, "taken", data={"mine": "1"}),
                field_manager="kaiwo",
                force=force,
                if_absent=True,
            )
    after = await kube.get(CONFIG_MAP, "taken", namespace=ns)
    assert after["data"] == {"theirs": "1"}
    assert after["metadata"]["resourceVersion"] == theirs["metadata"]["resourceVersion"]


async def test_apply_removes_fields_the_manager_stops_sending(backend: Backend) -> None:
    kube, ns = backend.kube, backend.namespace
    await kube.apply(
        config_map(ns, "pruned", data={"keep": "1", "drop": "2"}, labels={"a": "1", "b": "2"}),
        field_manager="kaiwo",
    )
    after = await kube.apply(
        config_map(ns, "pruned", data={"keep": "1"}, labels={"a": "1"}), field_manager="kaiwo"
    )
    assert after["data"] == {"keep": "1"}
    assert after["metadata"]["labels"] == {"a": "1"}


async def test_apply_keeps_a_field_another_manager_also_owns(backend: Backend) -> None:
    kube, ns = backend.kube, backend.namespace
    await kube.apply(
        config_map(ns, "shared", data={"mine": "1", "both": "x"}), field_manager="first"
    )
    await kube.apply(config_map(ns, "shared", data={"both": "x"}), field_manager="second")
    after = await kube.apply(config_map(ns, "shared", data={"mine": "1"}), field_manager="first")
    assert after["data"] == {"mine": "1", "both": "x"}


async def test_apply_conflicts_on_another_managers_field_unless_forced(backend: Backend) -> None:
    kube, ns = backend.kube, backend.namespace
    await kube.apply(config_map(ns, "owned", data={"size": "small"}), field_manager="first")
    with pytest.raises(Conflict) as raised:
        await kube.apply(
            config_map(ns, "owned", data={"size": "large"}), field_manager="second", force=False
        )
    assert raised.value.code == 409
    assert "first" in raised.value.message
    assert (await kube.get(CONFIG_MAP, "owned", namespace=ns))["data"] == {"size": "small"}

    forced = await kube.apply(
        config_map(ns, "owned", data={"size": "large"}), field_manager="second", force=True
    )
    assert forced["data"] == {"size": "large"}
    managers = {entry["manager"] for entry in forced["metadata"]["managedFields"]}
    assert managers == {"second"}


async def test_apply_conflicts_on_a_field_another_manager_patched_unless_forced(
    backend: Backend,
) -> None:
    # Kueue unsuspends a Job with a patch of its own; the executor's creation-time apply of
    # ``suspend: true``, carried out again, must meet a conflict rather than undo it.
    kube, ns = backend.kube, backend.namespace
    await kube.apply(config_map(ns, "gate", data={"open": "no"}), field_manager="creator")
    await kube.merge_patch(
        CONFIG_MAP, "gate", {"data": {"open": "yes"}}, namespace=ns, field_manager="admitter"
    )
    with pytest.raises(Conflict) as raised:
        await kube.apply(
            config_map(ns, "gate", data={"open": "no"}), field_manager="creator", force=False
        )
    assert raised.value.code == 409
    assert "admitter" in raised.value.message
    assert (await kube.get(CONFIG_MAP, "gate", namespace=ns))["data"] == {"open": "yes"}


async def test_an_empty_map_created_by_one_manager_takes_another_managers_apply_inside(
    backend: Backend, widgets: ResourceType
) -> None:
    # The operator creates the default KaiwoQueueConfig with an empty spec; the user's apply
    # of their own spec must not conflict with it.
    kube, ns = backend.kube, backend.namespace
    await kube.create(widget(widgets, ns, "default", spec={}), field_manager="kaiwo")
    applied = await kube.apply(
        widget(widgets, ns, "default", spec={"queues": ["team-a"]}),
        field_manager="cluster-admin",
        force=False,
    )
    assert applied["spec"] == {"queues": ["team-a"]}


async def test_apply_of_an_unchanged_custom_object_keeps_its_resource_version(
    backend: Backend, widgets: ResourceType
) -> None:
    kube, ns = backend.kube, backend.namespace
    desired = widget(widgets, ns, "steady", spec={"replicas": 2, "image": "a:1"})
    first = await kube.apply(desired, field_manager="kaiwo")
    second = await kube.apply(desired, field_manager="kaiwo")
    assert second["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert second["metadata"]["generation"] == 1


# ---------------------------------------------------------------------- merge patch


async def test_merge_patch_merges_maps_and_null_removes(backend: Backend) -> None:
    kube, ns = backend.kube, backend.namespace
    await kube.create(config_map(ns, "patched", data={"a": "1", "b": "2"}, labels={"x": "1"}))
    patched = await kube.merge_patch(
        CONFIG_MAP,
        "patched",
        {"data": {"b": None, "c": "3"}, "metadata": {"labels": {"y": "2"}}},
        namespace=ns,
    )
    assert patched["data"] == {"a": "1", "c": "3"}
    assert patched["metadata"]["labels"] == {"x": "1", "y": "2"}


# ---------------------------------------------------------------------- deletion


def owned_by(owner: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": owner["apiVersion"],
            "kind": owner["kind"],
            "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"],
        }
    ]


async def test_background_delete_removes_dependents(backend: Backend) -> None:
    kube, ns = backend.kube, backend.namespace
    owner = await kube.create(config_map(ns, "owner"))
    child = await kube.create(config_map(ns, "child", ownerReferences=owned_by(owner)))
    await kube.create(config_map(ns, "grandchild", ownerReferences=owned_by(child)))
    await kube.delete(CONFIG_MAP, "owner", namespace=ns, propagation="Background")

    async def all_gone() -> bool:
        return all(
            [await is_gone(kube, CONFIG_MAP, name, ns) for name in ("owner", "child", "grandchild")]
        )

    await eventually(all_gone)


async def test_orphan_delete_keeps_dependents_without_the_reference(backend: Backend) -> None:
    kube, ns = backend.kube, backend.namespace
    owner = await kube.create(config_map(ns, "parent"))
    await kube.create(config_map(ns, "kept", ownerReferences=owned_by(owner)))
    await kube.delete(CONFIG_MAP, "parent", namespace=ns, propagation="Orphan")

    async def orphaned() -> bool:
        if not await is_gone(kube, CONFIG_MAP, "parent", ns):
            return False
        kept = await kube.get(CONFIG_MAP, "kept", namespace=ns)
        return not kept["metadata"].get("ownerReferences")

    await eventually(orphaned)


async def test_finalizers_hold_deletion_until_removed(backend: Backend) -> None:
    kube, ns = backend.kube, backend.namespace
    await kube.create(config_map(ns, "held", finalizers=["kaiwo.test/hold"]))
    await kube.delete(CONFIG_MAP, "held", namespace=ns)
    terminating = await kube.get(CONFIG_MAP, "held", namespace=ns)
    assert terminating["metadata"]["deletionTimestamp"]

    await kube.merge_patch(CONFIG_MAP, "held", {"metadata": {"finalizers": None}}, namespace=ns)
    await eventually(lambda: is_gone(kube, CONFIG_MAP, "held", ns))


# ---------------------------------------------------------------------- CRDs and events


async def test_registering_a_crd_serves_its_kind(backend: Backend) -> None:
    kube = backend.kube
    group = f"g{backend.run_id}.contract.kaiwo.test"
    crd = gadget_crd(group)
    await kube.ensure_crds([crd], field_manager="kaiwo-contract")
    try:
        gadgets = await kube.resolve(f"{group}/v1alpha1", "Gadget")
        assert gadgets == ResourceType(
            group=group, version="v1alpha1", plural="gadgets", kind="Gadget", namespaced=False
        )
        created = await kube.apply(
            {
                "apiVersion": f"{group}/v1alpha1",
                "kind": "Gadget",
                "metadata": {"name": "one"},
                "spec": {"colour": "blue"},
            },
            field_manager="kaiwo-contract",
        )
        assert "namespace" not in created["metadata"]
        assert (await kube.get(gadgets, "one"))["spec"] == {"colour": "blue"}
        listed = await kube.list(gadgets)
        assert [item["metadata"]["name"] for item in listed.items] == ["one"]
    finally:
        await delete_quietly(kube, CUSTOM_RESOURCE_DEFINITION, f"gadgets.{group}")


async def test_a_crd_is_usable_by_kind_once_ensured_though_discovery_lags(
    tmp_path: Path,
) -> None:
    """A real API server lists a new CRD in discovery a moment after Established (a CI run
    failed on it); the fake, told to lag, makes that moment long enough to be sure of."""
    async with (
        FakeKubeServer(kubeconfig_path=tmp_path / "kubeconfig", discovery_lag=1.0) as fake,
        await KubernetesAsyncioAdapter.from_kubeconfig(fake.kubeconfig_path) as kube,
    ):
        await kube.ensure_crds([gadget_crd("lagging.contract.kaiwo.test")], field_manager="t")
        created = await kube.create(
            {
                "apiVersion": "lagging.contract.kaiwo.test/v1alpha1",
                "kind": "Gadget",
                "metadata": {"name": "first"},
            }
        )
        assert created["metadata"]["name"] == "first"


async def test_events_are_recorded_on_the_involved_object(backend: Backend) -> None:
    kube, ns = backend.kube, backend.namespace
    involved = await kube.create(config_map(ns, "noted"))
    await kube.create_event(
        involved=involved,
        type="Warning",
        reason="SomethingOdd",
        message="look here",
        component="kaiwo-contract",
    )
    listed = await kube.list(
        EVENT, namespace=ns, field_selector=f"involvedObject.uid={involved['metadata']['uid']}"
    )
    assert [(e["type"], e["reason"], e["message"]) for e in listed.items] == [
        ("Warning", "SomethingOdd", "look here")
    ]
    reference = listed.items[0]["involvedObject"]
    assert (reference["kind"], reference["name"], reference["namespace"]) == (
        "ConfigMap",
        "noted",
        ns,
    )
