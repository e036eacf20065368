"""A CRD's structural schema: pruning and defaulting of custom resources, on both servers.

Each test runs against the fake API server and against the session's real API server
(``real_cluster``, marker ``k8s``). Each test serves its own CRD, in its
own API group, works in its own namespace, and removes both. Expected objects are written
out by hand: they are what a kube-apiserver v1.36 stored.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kaiwo_contracts.crds.kaiwo_v1alpha1 import KaiwoQueueConfig
from kaiwo_contracts.crds.schema import custom_resource_definitions
from kaiwo_kube import Invalid, ResourceType
from kaiwo_kube.kubernetes_asyncio_adapter import KubernetesAsyncioAdapter
from kaiwo_kube.resources import CUSTOM_RESOURCE_DEFINITION
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config

from tests.kube_backends import api_server, delete_quietly, scratch_namespace
from tests.sample_crds import crd_for

MANAGER = "kaiwo-contract"


@dataclass
class Backend:
    """The API server under test, the adapter talking to it, and this test's namespace."""

    kube: KubernetesAsyncioAdapter
    raw: k8s_client.ApiClient  # for the patch types the port does not offer
    namespace: str
    run_id: str


@pytest.fixture(params=["fake", pytest.param("real", marks=pytest.mark.k8s)])
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    run_id = uuid.uuid4().hex[:8]
    async with contextlib.AsyncExitStack() as stack:
        kubeconfig = (await api_server(request.param, request, stack, tmp_path)).kubeconfig
        kube = await KubernetesAsyncioAdapter.from_kubeconfig(kubeconfig)
        stack.push_async_callback(kube.close)
        raw = await k8s_config.new_client_from_config(
            config_file=str(kubeconfig), persist_config=False
        )
        stack.push_async_callback(raw.close)
        namespace = await scratch_namespace(kube, stack, prefix="kaiwo-schema", run_id=run_id)
        yield Backend(kube=kube, raw=raw, namespace=namespace, run_id=run_id)


async def raw_patch(
    backend: Backend, resource: ResourceType, *, name: str, body: Any, content_type: str
) -> tuple[int, dict[str, Any]]:
    """PATCH with any content type; the HTTP status and the decoded answer."""
    response = await backend.raw.call_api(
        resource.path(namespace=backend.namespace, name=name),
        "PATCH",
        header_params={"Content-Type": content_type, "Accept": "application/json"},
        body=body,
        auth_settings=["BearerToken"],
        _preload_content=False,
    )
    try:
        return response.status, json.loads(await response.read())
    finally:
        response.release()


# ---------------------------------------------------------------------- the sample kind

STRING = {"type": "string"}
INT_OR_STRING = {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, STRING]}

SAMPLE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "apiVersion": STRING,
        "kind": STRING,
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "properties": {
                "image": STRING,
                "replicas": {"type": "integer", "default": 1},
                "nested": {
                    "type": "object",
                    "properties": {
                        "inner": {
                            "type": "object",
                            "properties": {"leaf": {"type": "string", "default": "x"}},
                        }
                    },
                },
                "policy": {
                    "type": "object",
                    "default": {},
                    "properties": {
                        "mode": {"type": "string", "default": "Auto"},
                        "limit": {"type": "integer"},
                    },
                },
                "ports": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "name": STRING,
                            "protocol": {"type": "string", "default": "TCP"},
                        },
                    },
                },
                "tags": {"type": "array", "items": STRING},
                "weights": {
                    "type": "object",
                    "additionalProperties": {
                        "type": "object",
                        "properties": {
                            "value": {"type": "integer"},
                            "unit": {"type": "string", "default": "m"},
                        },
                    },
                },
                "labels": {"type": "object", "additionalProperties": STRING},
                "extensions": {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": True,
                    "properties": {"known": {"type": "object", "properties": {"k": STRING}}},
                },
                "template": {
                    "type": "object",
                    "x-kubernetes-embedded-resource": True,
                    "properties": {
                        "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}
                    },
                },
                "port": INT_OR_STRING,
                "timeout": {**INT_OR_STRING, "default": "30s"},
                "comment": {"type": "string", "nullable": True},
                "owner": STRING,
                "priority": {"type": "string", "default": "normal"},
            },
        },
        "status": {
            "type": "object",
            "properties": {
                "phase": {"type": "string", "default": "Pending"},
                "conditions": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "type": STRING,
                            "status": {"type": "string", "default": "Unknown"},
                        },
                    },
                },
            },
        },
    },
}

# What every stored sample's spec holds when the request named none of these fields.
SPEC_DEFAULTS = {"replicas": 1, "policy": {"mode": "Auto"}, "timeout": "30s", "priority": "normal"}


@contextlib.asynccontextmanager
async def served(backend: Backend, crd: dict[str, Any]) -> AsyncIterator[None]:
    await backend.kube.ensure_crds([crd], field_manager=MANAGER)
    try:
        yield
    finally:
        await delete_quietly(backend.kube, CUSTOM_RESOURCE_DEFINITION, crd["metadata"]["name"])


@pytest.fixture
async def samples(backend: Backend, request: pytest.FixtureRequest) -> AsyncIterator[ResourceType]:
    """The Sample kind (SAMPLE_SCHEMA, status subresource) in an API group of this test's own."""
    group = f"s{backend.run_id}.schema.kaiwo.test"
    crd = crd_for(group, kind="Sample", plural="samples", versions={"v1": SAMPLE_SCHEMA})
    async with served(backend, crd):
        yield ResourceType(
            group=group, version="v1", plural="samples", kind="Sample", namespaced=True
        )


def sample(
    resource: ResourceType, backend: Backend, *, name: str, spec: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    return {
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "metadata": {"name": name, "namespace": backend.namespace},
        "spec": spec,
        **extra,
    }


def version_of(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["resourceVersion"])


# ---------------------------------------------------------------------- pruning


async def test_create_prunes_the_fields_the_schema_does_not_declare(
    backend: Backend, samples: ResourceType
) -> None:
    body = sample(
        samples,
        backend,
        name="pruned",
        spec={
            "image": "busybox",
            "unknown": "dropped",
            "nested": {"inner": {"leaf": "y", "extra": 1}, "other": True},
            "ports": [{"name": "http", "protocol": "UDP", "number": 80}],
            "weights": {"gpu": {"value": 2, "unit": "g", "scale": 3}},
            "labels": {"team": "ml"},
        },
        unknownTopLevel={"a": 1},
    )
    body["metadata"]["unknownMeta"] = "dropped"
    body["metadata"]["labels"] = {"app": "sample"}

    created = await backend.kube.create(body)

    assert created["spec"] == {
        "image": "busybox",
        "nested": {"inner": {"leaf": "y"}},
        "ports": [{"name": "http", "protocol": "UDP"}],
        "weights": {"gpu": {"value": 2, "unit": "g"}},
        "labels": {"team": "ml"},
        **SPEC_DEFAULTS,
    }
    assert "unknownTopLevel" not in created
    assert "unknownMeta" not in created["metadata"]
    assert created["metadata"]["labels"] == {"app": "sample"}
    stored = await backend.kube.get(samples, "pruned", namespace=backend.namespace)
    assert stored["spec"] == created["spec"]


async def test_empty_metadata_fields_are_omitted(backend: Backend, samples: ResourceType) -> None:
    body = sample(samples, backend, name="bare", spec={})
    body["metadata"].update(labels={}, annotations={}, finalizers=[])
    created = await backend.kube.create(body)
    for omitted in ("labels", "annotations", "finalizers"):
        assert omitted not in created["metadata"]


async def test_preserve_unknown_fields_keeps_unknown_fields_and_prunes_declared_ones(
    backend: Backend, samples: ResourceType
) -> None:
    created = await backend.kube.create(
        sample(
            samples,
            backend,
            name="open",
            spec={
                "extensions": {"anything": {"deep": [1, {"x": None}]}, "known": {"k": "v", "j": 1}}
            },
        )
    )
    assert created["spec"]["extensions"] == {
        "anything": {"deep": [1, {"x": None}]},
        "known": {"k": "v"},
    }


async def test_an_embedded_resource_keeps_its_type_and_object_meta(
    backend: Backend, samples: ResourceType
) -> None:
    template = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "inside",
            "labels": {},
            "annotations": {"a": "b"},
            "unknownMeta": 1,
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u1", "unknown": 1}
            ],
        },
        "spec": {"size": 3, "unknown": 1},
        "unknown": 1,
    }
    created = await backend.kube.create(
        sample(samples, backend, name="embeds", spec={"template": template})
    )
    assert created["spec"]["template"] == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "inside",
            "annotations": {"a": "b"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u1"}],
        },
        "spec": {"size": 3},
    }

    with pytest.raises(Invalid) as raised:
        await backend.kube.create(
            sample(
                samples, backend, name="kindless", spec={"template": {"metadata": {"name": "x"}}}
            )
        )
    assert [(c["reason"], c["field"]) for c in raised.value.causes] == [
        ("FieldValueRequired", "spec.template.apiVersion"),
        ("FieldValueRequired", "spec.template.kind"),
    ]


async def test_int_or_string_keeps_numbers_and_strings(
    backend: Backend, samples: ResourceType
) -> None:
    numeric = await backend.kube.create(
        sample(samples, backend, name="numeric", spec={"port": 8080, "timeout": 5})
    )
    named = await backend.kube.create(sample(samples, backend, name="named", spec={"port": "http"}))
    assert (numeric["spec"]["port"], numeric["spec"]["timeout"]) == (8080, 5)
    assert (named["spec"]["port"], named["spec"]["timeout"]) == ("http", "30s")


# ---------------------------------------------------------------------- defaulting


async def test_defaults_fill_only_objects_that_exist(
    backend: Backend, samples: ResourceType
) -> None:
    without = await backend.kube.create(
        sample(samples, backend, name="without", spec={"image": "a"})
    )
    # No nested, so no nested.inner.leaf; policy's own default {} brings policy.mode.
    assert without["spec"] == {"image": "a", **SPEC_DEFAULTS}

    empty_parent = await backend.kube.create(
        sample(samples, backend, name="parent", spec={"nested": {}, "policy": {"limit": 4}})
    )
    assert empty_parent["spec"]["nested"] == {}
    assert empty_parent["spec"]["policy"] == {"limit": 4, "mode": "Auto"}

    with_inner = await backend.kube.create(
        sample(samples, backend, name="inner", spec={"nested": {"inner": {}}})
    )
    assert with_inner["spec"]["nested"] == {"inner": {"leaf": "x"}}


async def test_defaults_fill_list_items_and_map_values(
    backend: Backend, samples: ResourceType
) -> None:
    created = await backend.kube.create(
        sample(
            samples,
            backend,
            name="items",
            spec={
                "ports": [{"name": "a"}, {"name": "b", "protocol": "UDP"}, {}],
                "weights": {"cpu": {"value": 1}, "gpu": {}},
            },
        )
    )
    assert created["spec"]["ports"] == [
        {"name": "a", "protocol": "TCP"},
        {"name": "b", "protocol": "UDP"},
        {"protocol": "TCP"},
    ]
    assert created["spec"]["weights"] == {"cpu": {"value": 1, "unit": "m"}, "gpu": {"unit": "m"}}


async def test_nulls_are_kept_dropped_or_defaulted_as_the_schema_says(
    backend: Backend, samples: ResourceType
) -> None:
    created = await backend.kube.create(
        sample(
            samples,
            backend,
            name="nulls",
            spec={
                "comment": None,  # nullable: kept
                "owner": None,  # neither nullable nor defaulted: dropped
                "priority": None,  # defaulted
                "policy": None,  # defaulted, and the default itself defaulted
                "labels": {"kept": "yes", "gone": None},
                "port": None,
            },
        )
    )
    assert created["spec"] == {
        "comment": None,
        "priority": "normal",
        "policy": {"mode": "Auto"},
        "labels": {"kept": "yes"},
        "replicas": 1,
        "timeout": "30s",
    }

    with pytest.raises(Invalid) as raised:
        await backend.kube.create(sample(samples, backend, name="bad", spec={"tags": ["a", None]}))
    assert [(c["reason"], c["field"]) for c in raised.value.causes] == [
        ("FieldValueTypeInvalid", "spec.tags[1]")
    ]
    assert 'spec.tags[1] in body must be of type string: "null"' in raised.value.message


# ---------------------------------------------------------------------- every write path


async def test_replace_without_the_defaults_changes_nothing(
    backend: Backend, samples: ResourceType
) -> None:
    # What an operator does: send its desired object, which does not spell out defaults.
    desired = sample(samples, backend, name="steady", spec={"image": "a", "ports": [{"name": "p"}]})
    created = await backend.kube.create(desired)

    again = copy.deepcopy(desired)
    again["metadata"]["resourceVersion"] = version_of(created)
    again["spec"]["unknown"] = "pruned, so still no change"
    replaced = await backend.kube.replace(again)

    assert version_of(replaced) == version_of(created)
    assert replaced["metadata"]["generation"] == 1
    assert replaced["spec"] == {
        "image": "a",
        "ports": [{"name": "p", "protocol": "TCP"}],
        **SPEC_DEFAULTS,
    }


async def test_merge_patch_is_pruned_and_defaulted(backend: Backend, samples: ResourceType) -> None:
    kube, ns = backend.kube, backend.namespace
    created = await kube.create(
        sample(samples, backend, name="merged", spec={"image": "a", "replicas": 3})
    )

    only_unknown = await kube.merge_patch(samples, "merged", {"spec": {"x": 1}}, namespace=ns)
    assert version_of(only_unknown) == version_of(created)

    patched = await kube.merge_patch(
        samples,
        "merged",
        {"spec": {"replicas": None, "nested": {"inner": {"other": 1}}, "policy": None}},
        namespace=ns,
    )
    # Removing a defaulted field brings its default back.
    assert patched["spec"] == {"image": "a", "nested": {"inner": {"leaf": "x"}}, **SPEC_DEFAULTS}
    assert patched["metadata"]["generation"] == 2


async def test_json_patch_is_pruned_and_defaulted(backend: Backend, samples: ResourceType) -> None:
    await backend.kube.create(sample(samples, backend, name="jsonpatched", spec={"ports": []}))
    status, patched = await raw_patch(
        backend,
        samples,
        name="jsonpatched",
        body=[
            {"op": "add", "path": "/spec/ports/-", "value": {"name": "a", "junk": 1}},
            {"op": "add", "path": "/spec/owner", "value": None},
        ],
        content_type="application/json-patch+json",
    )
    assert status == 200
    assert patched["spec"] == {"ports": [{"name": "a", "protocol": "TCP"}], **SPEC_DEFAULTS}


async def test_strategic_merge_patch_is_refused_for_custom_resources(
    backend: Backend, samples: ResourceType
) -> None:
    await backend.kube.create(sample(samples, backend, name="strategic", spec={}))
    status, answer = await raw_patch(
        backend,
        samples,
        name="strategic",
        body={"spec": {"replicas": 2}},
        content_type="application/strategic-merge-patch+json",
    )
    assert (status, answer["reason"]) == (415, "UnsupportedMediaType")


async def test_apply_is_defaulted_and_a_repeat_changes_nothing(
    backend: Backend, samples: ResourceType
) -> None:
    config = sample(
        samples, backend, name="applied", spec={"image": "a", "weights": {"gpu": {"value": 1}}}
    )
    first = await backend.kube.apply(config, field_manager=MANAGER)
    assert first["spec"] == {
        "image": "a",
        "weights": {"gpu": {"value": 1, "unit": "m"}},
        **SPEC_DEFAULTS,
    }

    second = await backend.kube.apply(config, field_manager=MANAGER)
    assert version_of(second) == version_of(first)

    config["spec"]["image"] = "b"
    changed = await backend.kube.apply(config, field_manager=MANAGER)
    assert changed["spec"] == {**first["spec"], "image": "b"}
    assert changed["metadata"]["generation"] == 2


async def test_apply_refuses_fields_the_schema_does_not_declare(
    backend: Backend, samples: ResourceType
) -> None:
    kube = backend.kube
    created = await kube.apply(
        sample(samples, backend, name="strict", spec={"image": "a"}), field_manager=MANAGER
    )

    # Server-side apply types the configuration first: an undeclared field is an error there
    # (a 500 with no reason), not pruned as in the other writes. No retry can help it: the
    # port reports it as Invalid.
    with pytest.raises(Invalid) as raised:
        await kube.apply(
            sample(
                samples,
                backend,
                name="strict",
                spec={"image": "b", "ports": [{"name": "p", "no": 1}]},
            ),
            field_manager=MANAGER,
        )
    assert raised.value.code == 500
    assert ".spec.ports[0].no: field not declared in schema" in raised.value.message
    unchanged = await kube.get(samples, "strict", namespace=backend.namespace)
    assert version_of(unchanged) == version_of(created)

    # Under x-kubernetes-preserve-unknown-fields any field is declared; the nested field a
    # declared property lacks is then pruned.
    open_fields = await kube.apply(
        sample(samples, backend, name="strict", spec={"extensions": {"a": 1, "known": {"z": 1}}}),
        field_manager=MANAGER,
    )
    assert open_fields["spec"]["extensions"] == {"a": 1, "known": {}}


async def test_apply_keeps_typed_nulls_and_rejects_them(
    backend: Backend, samples: ResourceType
) -> None:
    kube = backend.kube
    applied = await kube.apply(
        sample(samples, backend, name="applied-nulls", spec={"comment": None, "priority": None}),
        field_manager=MANAGER,
    )
    assert applied["spec"] == {"comment": None, **SPEC_DEFAULTS}

    with pytest.raises(Invalid) as raised:
        await kube.apply(
            sample(
                samples, backend, name="applied-nulls", spec={"owner": None, "labels": {"a": None}}
            ),
            field_manager=MANAGER,
        )
    assert sorted(c["field"] for c in raised.value.causes) == ["spec.labels.a", "spec.owner"]


async def test_status_writes_are_pruned_and_defaulted(
    backend: Backend, samples: ResourceType
) -> None:
    kube, ns = backend.kube, backend.namespace
    created = await kube.create(
        sample(samples, backend, name="reported", spec={"image": "a"}, status={"phase": "Invented"})
    )
    assert "status" not in created

    merged = await kube.patch_status(
        samples,
        "reported",
        {"conditions": [{"type": "Ready", "reason": "pruned"}], "unknown": 1},
        namespace=ns,
        field_manager="kaiwo-status",
        method="merge",
    )
    assert merged["status"] == {
        "phase": "Pending",
        "conditions": [{"type": "Ready", "status": "Unknown"}],
    }
    assert merged["spec"] == {"image": "a", **SPEC_DEFAULTS}

    applied = await kube.patch_status(
        samples,
        "reported",
        {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
        namespace=ns,
        field_manager="kaiwo-status",
    )
    assert applied["status"] == {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True"}],
    }

    with pytest.raises(Invalid) as raised:
        await kube.patch_status(
            samples, "reported", {"junk": 1}, namespace=ns, field_manager="kaiwo-status"
        )
    assert ".status.junk: field not declared in schema" in raised.value.message


# ---------------------------------------------------------------------- versions


def spec_schema(**spec: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {"spec": {"type": "object", "properties": spec}}}


async def test_each_version_prunes_and_defaults_by_its_own_schema(backend: Backend) -> None:
    group = f"v{backend.run_id}.schema.kaiwo.test"
    crd = crd_for(
        group,
        kind="Thing",
        plural="things",
        versions={
            "v1": spec_schema(mode={"type": "string", "default": "one"}, old=STRING),
            "v2": spec_schema(mode={"type": "string", "default": "two"}, both=STRING, old=STRING),
        },
    )
    async with served(backend, crd):
        v1 = ResourceType(group=group, version="v1", plural="things", kind="Thing", namespaced=True)
        v2 = ResourceType(group=group, version="v2", plural="things", kind="Thing", namespaced=True)
        through_v2 = await backend.kube.create(
            {
                "apiVersion": v2.api_version,
                "kind": "Thing",
                "metadata": {"name": "t", "namespace": backend.namespace},
                "spec": {"old": "kept", "both": "v2 only"},
            }
        )
        assert through_v2["spec"] == {"mode": "two", "old": "kept"}
        through_v1 = await backend.kube.get(v1, "t", namespace=backend.namespace)
        assert through_v1["spec"] == {"mode": "two", "old": "kept"}


async def test_a_changed_schema_shows_on_read_without_a_new_version(backend: Backend) -> None:
    # The API server prunes and defaults as it reads from storage: a CRD update that drops
    # a field and adds a default shows in every object at once, though none was written.
    group = f"c{backend.run_id}.schema.kaiwo.test"
    mode = {"type": "string", "default": "one"}
    before = crd_for(
        group, kind="Gauge", plural="gauges", versions={"v1": spec_schema(mode=mode, old=STRING)}
    )
    after = crd_for(
        group,
        kind="Gauge",
        plural="gauges",
        versions={"v1": spec_schema(mode=mode, added={"type": "string", "default": "new"})},
    )
    gauges = ResourceType(group=group, version="v1", plural="gauges", kind="Gauge", namespaced=True)
    async with served(backend, before):
        created = await backend.kube.create(
            {
                "apiVersion": gauges.api_version,
                "kind": "Gauge",
                "metadata": {"name": "g", "namespace": backend.namespace},
                "spec": {"old": "kept for now"},
            }
        )
        assert created["spec"] == {"mode": "one", "old": "kept for now"}
        await backend.kube.ensure_crds([after], field_manager=MANAGER)

        async def read() -> dict[str, Any]:
            return await backend.kube.get(gauges, "g", namespace=backend.namespace)

        # A real server takes a moment to serve the updated schema.
        deadline = time.monotonic() + 30
        while (current := await read())["spec"] != {"mode": "one", "added": "new"}:
            assert time.monotonic() < deadline, f"still {current['spec']}"
            await asyncio.sleep(0.2)
        assert version_of(current) == version_of(created)


# ---------------------------------------------------------------------- Kueue's defaults

# A fragment of Kueue's v1beta1 ClusterQueue schema, with the defaults the API server fills in
# (the operator's endless write loop came from not expecting them).
CLUSTER_QUEUE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "cohort": STRING,
                "namespaceSelector": {
                    "type": "object",
                    "properties": {
                        "matchLabels": {"type": "object", "additionalProperties": STRING}
                    },
                    "x-kubernetes-map-type": "atomic",
                },
                "queueingStrategy": {"type": "string", "default": "BestEffortFIFO"},
                "stopPolicy": {"type": "string", "default": "None"},
                "flavorFungibility": {
                    "type": "object",
                    "default": {},
                    "properties": {
                        "whenCanBorrow": {"type": "string", "default": "Borrow"},
                        "whenCanPreempt": {"type": "string", "default": "TryNextFlavor"},
                    },
                },
                "preemption": {
                    "type": "object",
                    "default": {},
                    "properties": {
                        "borrowWithinCohort": {
                            "type": "object",
                            "default": {},
                            "properties": {
                                "policy": {"type": "string", "default": "Never"},
                                "maxPriorityThreshold": {"type": "integer", "format": "int32"},
                            },
                        },
                        "reclaimWithinCohort": {"type": "string", "default": "Never"},
                        "withinClusterQueue": {"type": "string", "default": "Never"},
                    },
                },
                "resourceGroups": {
                    "type": "array",
                    "x-kubernetes-list-type": "atomic",
                    "items": {
                        "type": "object",
                        "properties": {
                            "coveredResources": {"type": "array", "items": STRING},
                            "flavors": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "properties": {
                                        "name": STRING,
                                        "resources": {
                                            "type": "array",
                                            "items": {
                                                "type": "object",
                                                "properties": {
                                                    "name": STRING,
                                                    "nominalQuota": INT_OR_STRING,
                                                },
                                            },
                                        },
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
        "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    },
}


async def test_a_cluster_queue_gets_kueues_defaults(backend: Backend) -> None:
    group = f"q{backend.run_id}.schema.kaiwo.test"
    crd = crd_for(
        group,
        kind="ClusterQueue",
        plural="clusterqueues",
        versions={"v1beta1": CLUSTER_QUEUE_SCHEMA},
        scope="Cluster",
    )
    queues = ResourceType(
        group=group,
        version="v1beta1",
        plural="clusterqueues",
        kind="ClusterQueue",
        namespaced=False,
    )
    desired_spec = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": ["cpu", "amd.com/gpu"],
                "flavors": [
                    {
                        "name": "mi300x",
                        "resources": [
                            {"name": "cpu", "nominalQuota": 64},
                            {"name": "amd.com/gpu", "nominalQuota": "8"},
                        ],
                    }
                ],
            }
        ],
    }
    desired = {
        "apiVersion": queues.api_version,
        "kind": "ClusterQueue",
        "metadata": {"name": f"queue-{backend.run_id}"},
        "spec": desired_spec,
    }
    async with served(backend, crd):
        try:
            first = await backend.kube.apply(desired, field_manager=MANAGER)
            assert first["spec"] == {
                **desired_spec,
                "flavorFungibility": {"whenCanBorrow": "Borrow", "whenCanPreempt": "TryNextFlavor"},
                "preemption": {
                    "borrowWithinCohort": {"policy": "Never"},
                    "reclaimWithinCohort": "Never",
                    "withinClusterQueue": "Never",
                },
                "queueingStrategy": "BestEffortFIFO",
                "stopPolicy": "None",
            }
            # Applying the same desired spec, without the defaults, is no change at all.
            again = await backend.kube.apply(desired, field_manager=MANAGER)
            assert version_of(again) == version_of(first)
        finally:
            await delete_quietly(backend.kube, queues, desired["metadata"]["name"])


async def test_the_generated_kaiwo_queue_config_crd_fills_its_defaults(backend: Backend) -> None:
    # The project's own CRD, moved to a group of this test's own: the real cluster may have
    # the original installed, which is not ours to change.
    (crd,) = custom_resource_definitions([KaiwoQueueConfig])
    group = f"k{backend.run_id}.schema.kaiwo.test"
    plural = crd["spec"]["names"]["plural"]
    crd["spec"]["group"] = group
    crd["metadata"]["name"] = f"{plural}.{group}"
    version = crd["spec"]["versions"][0]["name"]
    configs = ResourceType(
        group=group, version=version, plural=plural, kind="KaiwoQueueConfig", namespaced=False
    )
    name = f"kaiwo-{backend.run_id}"
    queue = {
        "name": "gpu-queue",
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["amd.com/gpu"],
                    "flavors": [
                        {
                            "name": "mi300x",
                            "resources": [{"name": "amd.com/gpu", "nominalQuota": 8}],
                        }
                    ],
                }
            ]
        },
    }
    async with served(backend, crd):
        try:
            created = await backend.kube.create(
                {
                    "apiVersion": configs.api_version,
                    "kind": "KaiwoQueueConfig",
                    "metadata": {"name": name},
                    "spec": {"clusterQueues": [queue]},
                }
            )
            assert created["spec"]["clusterQueues"] == [
                {
                    "name": "gpu-queue",
                    "spec": {
                        **queue["spec"],
                        "flavorFungibility": {
                            "whenCanBorrow": "Borrow",
                            "whenCanPreempt": "TryNextFlavor",
                        },
                        "preemption": {
                            "reclaimWithinCohort": "Never",
                            "withinClusterQueue": "Never",
                        },
                        "queueingStrategy": "BestEffortFIFO",
                        "stopPolicy": "None",
                    },
                }
            ]
        finally:
            await delete_quietly(backend.kube, configs, name)
