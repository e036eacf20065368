"""The fake cluster's write rules, history and watch filtering (in memory, no HTTP)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from kaiwo_kubefake.errors import ApiError
from kaiwo_kubefake.kinds import ResourceKind
from kaiwo_kubefake.selectors import FieldSelector, LabelSelector
from kaiwo_kubefake.storage import ObjectStore, Preconditions

NOON = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)


def make_store(**options: Any) -> ObjectStore:
    return ObjectStore(clock=lambda: NOON, **options)


def kind(store: ObjectStore, group: str, version: str, plural: str) -> ResourceKind:
    found = store.kinds.lookup(group=group, version=version, plural=plural)
    assert found is not None
    return found


def config_maps(store: ObjectStore) -> ResourceKind:
    return kind(store, "", "v1", "configmaps")


def deployments(store: ObjectStore) -> ResourceKind:
    return kind(store, "apps", "v1", "deployments")


def cm(name: str, **metadata: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, **metadata}}


def test_create_fills_server_fields() -> None:
    store = make_store()
    created = store.create(
        deployments(store),
        namespace="default",
        body={
            "metadata": {"name": "web"},
            "spec": {"replicas": 1},
            "status": {"replicas": 9},
        },
    )
    metadata = created["metadata"]
    assert created["apiVersion"] == "apps/v1"
    assert created["kind"] == "Deployment"
    assert metadata["namespace"] == "default"
    assert metadata["creationTimestamp"] == "2025-03-01T12:00:00Z"
    assert metadata["generation"] == 1
    assert int(metadata["resourceVersion"]) == store.resource_version
    assert "status" not in created


def test_resource_versions_come_from_one_counter_across_kinds() -> None:
    store = make_store()
    first = store.create(config_maps(store), namespace="default", body=cm("a"))
    second = store.create(deployments(store), namespace="default", body={"metadata": {"name": "d"}})
    assert (
        int(second["metadata"]["resourceVersion"]) == int(first["metadata"]["resourceVersion"]) + 1
    )


def test_generate_name_appends_five_characters() -> None:
    store = make_store()
    created = store.create(
        config_maps(store), namespace="default", body={"metadata": {"generateName": "run-"}}
    )
    name = created["metadata"]["name"]
    assert name.startswith("run-")
    assert len(name) == len("run-") + 5


def test_namespaced_objects_need_their_namespace() -> None:
    store = make_store()
    with pytest.raises(ApiError) as raised:
        store.create(config_maps(store), namespace="nowhere", body=cm("a"))
    assert raised.value.code == 404
    assert raised.value.message == 'namespaces "nowhere" not found'
    relaxed = make_store(require_namespaces=False)
    assert relaxed.create(config_maps(relaxed), namespace="nowhere", body=cm("a"))


@pytest.mark.parametrize("name", ["Upper", "under_score", "-dash", "a" * 254])
def test_invalid_names_are_rejected(name: str) -> None:
    store = make_store()
    with pytest.raises(ApiError) as raised:
        store.create(config_maps(store), namespace="default", body=cm(name))
    assert raised.value.code == 422
    assert raised.value.details is not None
    assert raised.value.details["causes"][0]["field"] == "metadata.name"


def test_replace_that_changes_nothing_keeps_the_resource_version() -> None:
    store = make_store()
    created = store.create(
        config_maps(store), namespace="default", body={**cm("a"), "data": {"k": "v"}}
    )
    again = store.replace(
        config_maps(store), namespace="default", name="a", body=created, manager="unknown"
    )
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert store.changes[("", "configmaps", "default", "a")] == 1


def test_generation_counts_spec_changes_only() -> None:
    store = make_store()
    store.create(
        deployments(store),
        namespace="default",
        body={
            "metadata": {"name": "web"},
            "spec": {"replicas": 1},
        },
    )
    labelled = store.patch(
        deployments(store),
        namespace="default",
        name="web",
        content_type="application/merge-patch+json",
        body={"metadata": {"labels": {"a": "b"}}},
        manager="test",
    )
    assert labelled["metadata"]["generation"] == 1
    status = store.patch(
        deployments(store),
        namespace="default",
        name="web",
        content_type="application/merge-patch+json",
        body={"status": {"replicas": 1}},
        manager="test",
        subresource="status",
    )
    assert status["metadata"]["generation"] == 1
    assert status["status"] == {"replicas": 1}
    scaled = store.replace(
        deployments(store),
        namespace="default",
        name="web",
        body={
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"replicas": 3},
        },
        manager="test",
    )
    assert scaled["metadata"]["generation"] == 2
    assert scaled["status"] == {"replicas": 1}


def test_config_maps_carry_no_generation() -> None:
    store = make_store()
    created = store.create(config_maps(store), namespace="default", body=cm("a"))
    assert "generation" not in created["metadata"]


def test_jobs_orphan_their_pods_unless_told_otherwise() -> None:
    store = make_store()
    jobs, pods = kind(store, "batch", "v1", "jobs"), kind(store, "", "v1", "pods")
    job = store.create(jobs, namespace="default", body={"metadata": {"name": "j"}})
    reference = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "j",
        "uid": job["metadata"]["uid"],
    }
    store.create(
        pods,
        namespace="default",
        body={
            "metadata": {"name": "p", "ownerReferences": [reference]},
        },
    )
    store.delete(jobs, namespace="default", name="j")
    assert "ownerReferences" not in store.get(pods, namespace="default", name="p")["metadata"]


def test_foreground_delete_removes_dependents_first() -> None:
    store = make_store()
    maps = config_maps(store)
    owner = store.create(maps, namespace="default", body=cm("owner"))
    reference = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "owner",
        "uid": owner["metadata"]["uid"],
    }
    store.create(maps, namespace="default", body=cm("child", ownerReferences=[reference]))
    watcher = store.watch(
        maps,
        namespace="default",
        labels=LabelSelector(),
        fields=FieldSelector(),
        resource_version=str(store.resource_version),
    )
    store.delete(maps, namespace="default", name="owner", propagation="Foreground")
    events = [watcher.queue.get_nowait() for _ in range(watcher.queue.qsize())]
    assert [(e[0], e[1]["metadata"]["name"]) for e in events if e] == [
        ("DELETED", "child"),
        ("DELETED", "owner"),
    ]


def test_deleting_a_namespace_deletes_what_is_in_it() -> None:
    store = make_store()
    namespaces = kind(store, "", "v1", "namespaces")
    store.create(namespaces, namespace=None, body={"metadata": {"name": "team"}})
    store.create(config_maps(store), namespace="team", body=cm("a"))
    store.delete(namespaces, namespace=None, name="team")
    assert store.find(config_maps(store), namespace="team", name="a") is None


def test_uid_precondition_must_match() -> None:
    store = make_store()
    store.create(config_maps(store), namespace="default", body=cm("a"))
    with pytest.raises(ApiError) as raised:
        store.delete(
            config_maps(store),
            namespace="default",
            name="a",
            preconditions=Preconditions(uid="not-the-uid"),
        )
    assert raised.value.code == 409


def test_no_finalizer_can_be_added_while_terminating() -> None:
    store = make_store()
    maps = config_maps(store)
    store.create(maps, namespace="default", body=cm("a", finalizers=["x/y"]))
    store.delete(maps, namespace="default", name="a")
    with pytest.raises(ApiError) as raised:
        store.patch(
            maps,
            namespace="default",
            name="a",
            content_type="application/merge-patch+json",
            body={"metadata": {"finalizers": ["x/y", "x/z"]}},
            manager="t",
        )
    assert raised.value.code == 422


def drain(watcher: Any) -> list[tuple[str, str]]:
    items = [watcher.queue.get_nowait() for _ in range(watcher.queue.qsize())]
    return [(item[0], item[1]["metadata"]["name"]) for item in items if item is not None]


def test_a_selector_watch_sees_objects_enter_and_leave_the_selection() -> None:
    store = make_store()
    maps = config_maps(store)
    watcher = store.watch(
        maps,
        namespace="default",
        labels=LabelSelector.parse("pick=yes"),
        fields=FieldSelector(),
        resource_version=str(store.resource_version),
    )
    store.create(maps, namespace="default", body=cm("a", labels={"pick": "no"}))
    store.patch(
        maps,
        namespace="default",
        name="a",
        content_type="application/merge-patch+json",
        body={"metadata": {"labels": {"pick": "yes"}}},
        manager="t",
    )
    store.patch(
        maps,
        namespace="default",
        name="a",
        content_type="application/merge-patch+json",
        body={"data": {"k": "v"}},
        manager="t",
    )
    store.patch(
        maps,
        namespace="default",
        name="a",
        content_type="application/merge-patch+json",
        body={"metadata": {"labels": {"pick": "no"}}},
        manager="t",
    )
    store.delete(maps, namespace="default", name="a")
    assert drain(watcher) == [("ADDED", "a"), ("MODIFIED", "a"), ("DELETED", "a")]


def test_watch_without_version_starts_with_the_current_objects() -> None:
    store = make_store()
    maps = config_maps(store)
    store.create(maps, namespace="default", body=cm("b"))
    store.create(maps, namespace="default", body=cm("a"))
    watcher = store.watch(
        maps, namespace=None, labels=LabelSelector(), fields=FieldSelector(), resource_version=None
    )
    assert drain(watcher) == [("ADDED", "a"), ("ADDED", "b")]


def test_history_is_bounded_and_older_versions_are_gone() -> None:
    store = make_store(history_limit=3)
    maps = config_maps(store)
    start = store.resource_version
    for name in ("a", "b", "c", "d"):
        store.create(maps, namespace="default", body=cm(name))
    with pytest.raises(ApiError) as raised:
        store.watch(
            maps,
            namespace=None,
            labels=LabelSelector(),
            fields=FieldSelector(),
            resource_version=str(start),
        )
    assert raised.value.code == 410
    watcher = store.watch(
        maps,
        namespace=None,
        labels=LabelSelector(),
        fields=FieldSelector(),
        resource_version=str(start + 1),
    )
    assert drain(watcher) == [("ADDED", "b"), ("ADDED", "c"), ("ADDED", "d")]


def test_compaction_expires_every_earlier_version() -> None:
    store = make_store()
    maps = config_maps(store)
    store.create(maps, namespace="default", body=cm("a"))
    before = store.resource_version - 1
    store.compact()
    with pytest.raises(ApiError):
        store.watch(
            maps,
            namespace=None,
            labels=LabelSelector(),
            fields=FieldSelector(),
            resource_version=str(before),
        )
    current = store.watch(
        maps,
        namespace=None,
        labels=LabelSelector(),
        fields=FieldSelector(),
        resource_version=str(store.resource_version),
    )
    assert drain(current) == []


def test_a_registered_crd_serves_each_served_version() -> None:
    store = make_store()
    store.register_crd(
        {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "models.kubeai.org"},
            "spec": {
                "group": "kubeai.org",
                "scope": "Namespaced",
                "names": {"plural": "models", "kind": "Model"},
                "versions": [
                    {
                        "name": "v1",
                        "served": True,
                        "storage": True,
                        "subresources": {
                            "status": {},
                            "scale": {
                                "specReplicasPath": ".spec.replicas",
                                "statusReplicasPath": ".status.replicas.all",
                            },
                        },
                    },
                    {"name": "v0", "served": False, "storage": False},
                ],
            },
        }
    )
    models = store.kinds.lookup(group="kubeai.org", version="v1", plural="models")
    assert models is not None
    assert models.namespaced
    assert models.status_subresource
    assert models.scale is not None
    assert models.scale.status_replicas_path == ".status.replicas.all"
    assert store.kinds.lookup(group="kubeai.org", version="v0", plural="models") is None


def test_deleting_a_crd_removes_its_objects_and_kind() -> None:
    store = make_store()
    crds = kind(store, "apiextensions.k8s.io", "v1", "customresourcedefinitions")
    store.register_crd(
        {
            "metadata": {"name": "things.example.com"},
            "spec": {
                "group": "example.com",
                "scope": "Cluster",
                "names": {"plural": "things", "kind": "Thing"},
                "versions": [{"name": "v1", "served": True, "storage": True}],
            },
        }
    )
    things = kind(store, "example.com", "v1", "things")
    store.create(things, namespace=None, body={"metadata": {"name": "t"}})
    store.delete(crds, namespace=None, name="things.example.com")
    assert store.kinds.lookup(group="example.com", version="v1", plural="things") is None
    assert store.find(things, namespace=None, name="t") is None


def test_set_status_plays_the_controller() -> None:
    store = make_store()
    jobs = kind(store, "batch", "v1", "jobs")
    created = store.create(jobs, namespace="default", body={"metadata": {"name": "j"}})
    done = store.set_status(jobs, namespace="default", name="j", status={"succeeded": 1})
    assert done["status"] == {"succeeded": 1}
    assert done["metadata"]["uid"] == created["metadata"]["uid"]
    assert done["metadata"]["generation"] == 1
    assert int(done["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
