"""Which Models are served, their endpoints, and which Model a request goes to."""

from __future__ import annotations

from kaiwo_gateway.domain.autoscaling import ScalingSpec
from kaiwo_gateway.domain.catalog import Catalog, Endpoint
from kaiwo_gateway.domain.routing import (
    Ambiguous,
    Route,
    Unknown,
    balancing_prefix,
    find_route,
    prompt_prefix,
)
from kaiwo_gateway.domain.selectors import LabelSelector, parse_selectors

from tests.unit.gateway.model_objects import model_object, pod_object

EVERYTHING = LabelSelector()


def catalog_with(*objects: dict, namespaces: tuple[str, ...] = ()) -> Catalog:
    catalog = Catalog(namespaces=namespaces)
    for obj in objects:
        catalog.apply(kind=obj["kind"], event="ADDED", obj=obj)
    return catalog


def test_ready_pods_of_the_model_are_its_endpoints_with_port_and_adapters() -> None:
    catalog = catalog_with(
        model_object("llama", uid="m1", adapters=["sql"]),
        pod_object("p1", model="llama", model_uid="m1", ip="10.0.0.1", adapters=("sql",)),
        pod_object("p2", model="llama", model_uid="m1", ip="10.0.0.2", port="9000"),
        pod_object("p3", model="llama", model_uid="m1", ip="10.0.0.3", ready=False),
        pod_object("p4", model="llama", model_uid="m1", ip="10.0.0.4", port="none"),
        pod_object("stranger", model="llama", model_uid="other", ip="10.0.0.5"),
    )
    [llama] = catalog.models()

    assert catalog.endpoints(llama) == (
        Endpoint(key="team-a/p1", address="10.0.0.1:8000", adapters=frozenset({"sql"})),
        Endpoint(key="team-a/p2", address="10.0.0.2:9000"),
    )


def test_a_pod_in_another_namespace_is_no_endpoint_even_with_the_model_s_uid() -> None:
    catalog = catalog_with(
        model_object("llama", uid="m1"),
        pod_object("p1", model="llama", model_uid="m1", namespace="intruder"),
    )
    [llama] = catalog.models()

    assert catalog.endpoints(llama) == ()


def test_older_versions_and_late_events_after_a_deletion_change_nothing() -> None:
    catalog = catalog_with(model_object("llama", uid="m1", version="5"))
    pod = pod_object("p1", model="llama", model_uid="m1", version="7")
    assert catalog.apply(kind="Pod", event="ADDED", obj=pod)
    assert catalog.apply(
        kind="Pod",
        event="DELETED",
        obj=pod_object("p1", model="llama", model_uid="m1", version="8"),
    )
    assert not catalog.apply(kind="Pod", event="MODIFIED", obj=pod)
    assert not catalog.apply(
        kind="Model",
        event="MODIFIED",
        obj=model_object("llama", uid="m1", version="4", features=["TextEmbedding"]),
    )

    [llama] = catalog.models()
    assert catalog.endpoints(llama) == ()
    assert llama.features == ("TextGeneration",)


def test_pods_that_come_and_go_leave_the_last_deletions_remembered_and_no_more() -> None:
    catalog = Catalog(tombstones_kept=2)
    catalog.apply(kind="Model", event="ADDED", obj=model_object("llama", uid="m1"))
    pods = [pod_object(f"p{i}", model="llama", model_uid="m1", version="7") for i in range(3)]
    for pod in pods:
        catalog.apply(kind="Pod", event="ADDED", obj=pod)
        gone = pod_object(pod["metadata"]["name"], model="llama", model_uid="m1", version="8")
        catalog.apply(kind="Pod", event="DELETED", obj=gone)

    # Memory follows what is live: the Model, and the two deletions kept (decision 0246).
    assert sorted(catalog._versions) == ["m1", "pod-uid-p1", "pod-uid-p2"]
    assert catalog._endpoints == {}
    # A late event of a deletion remembered changes nothing; the oldest is forgotten.
    assert not catalog.apply(kind="Pod", event="MODIFIED", obj=pods[2])
    assert catalog.apply(kind="Pod", event="MODIFIED", obj=pods[0])


def test_a_pod_that_stops_being_ready_leaves_and_an_invalid_model_is_not_served() -> None:
    catalog = catalog_with(
        model_object("llama", uid="m1"),
        pod_object("p1", model="llama", model_uid="m1", version="1"),
    )
    catalog.apply(
        kind="Pod",
        event="MODIFIED",
        obj=pod_object("p1", model="llama", model_uid="m1", version="2", ready=False),
    )
    [llama] = catalog.models()
    assert catalog.endpoints(llama) == ()

    broken = model_object("llama", uid="m1", version="2")
    broken["spec"]["engine"] = "Unknown"
    catalog.apply(kind="Model", event="MODIFIED", obj=broken)
    assert catalog.models() == ()


def test_models_outside_the_served_namespaces_are_left_out() -> None:
    catalog = catalog_with(
        model_object("a", namespace="team-a"),
        model_object("b", namespace="team-b"),
        namespaces=("team-b",),
    )

    assert [m.name for m in catalog.models()] == ["b"]


def test_model_and_adapter_names_route_and_unknown_ones_do_not() -> None:
    catalog = catalog_with(model_object("llama", uid="m1", adapters=["sql"]))

    route = find_route(catalog, "llama_sql", EVERYTHING)
    assert isinstance(route, Route)
    assert (route.model.name, route.adapter, route.backend_model) == ("llama", "sql", "sql")
    assert find_route(catalog, "llama_chat", EVERYTHING) == Unknown("llama_chat")
    assert find_route(catalog, "mistral", EVERYTHING) == Unknown("mistral")
    assert Unknown("mistral").message == 'model not found: "mistral"'


def test_label_selectors_narrow_models_and_a_name_in_two_namespaces_is_ambiguous() -> None:
    catalog = catalog_with(
        model_object("llama", namespace="team-a", labels={"tenant": "a"}),
        model_object("llama", namespace="team-b", labels={"tenant": "b", "tier": "gold"}),
    )

    assert find_route(catalog, "llama", EVERYTHING) == Ambiguous("llama", ("team-a", "team-b"))
    only_b = find_route(catalog, "llama", parse_selectors(["tenant=b"]))
    assert isinstance(only_b, Route)
    assert only_b.model.namespace == "team-b"
    anded = find_route(catalog, "llama", parse_selectors(["tenant in (a,b)", "tier"]))
    assert isinstance(anded, Route)
    assert anded.model.namespace == "team-b"
    assert find_route(catalog, "llama", parse_selectors(["tenant!=a,tier=silver"])) == Unknown(
        "llama"
    )


def test_the_prefix_is_the_prompt_or_the_last_user_message_cut_to_length() -> None:
    chat = {
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "first question"},
            {"role": "assistant", "content": "answer"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "second "},
                    {"type": "text", "text": "question"},
                ],
            },
        ]
    }

    assert prompt_prefix("/v1/chat/completions", chat, 10) == "second que"
    assert prompt_prefix("/v1/completions", {"prompt": "Once upon a time"}, 4) == "Once"
    assert prompt_prefix("/v1/completions", {"prompt": ["abc", "def"]}, 10) == "abc"
    assert prompt_prefix("/v1/embeddings", {"input": "abc"}, 10) == ""


def test_only_a_prefix_hash_model_is_balanced_on_a_prefix_of_its_own_length() -> None:
    prefix_hash = {"strategy": "PrefixHash", "prefixHash": {"prefixCharLength": 3}}
    catalog = catalog_with(
        model_object("hashed", uid="m1", loadBalancing=prefix_hash),
        model_object("least", uid="m2", loadBalancing={"strategy": "LeastLoad"}),
    )
    served = {model.name: model for model in catalog.models()}
    prompt = {"prompt": "Once upon a time"}

    assert balancing_prefix(served["hashed"], "/v1/completions", prompt) == "Onc"
    assert balancing_prefix(served["least"], "/v1/completions", prompt) == ""


def test_a_model_carries_its_generation_and_the_fields_the_autoscaler_reads() -> None:
    catalog = Catalog()
    catalog.apply(
        kind="Model",
        event="ADDED",
        obj=model_object(
            "llm",
            generation=3,
            replicas=2,
            minReplicas=1,
            maxReplicas=4,
            targetRequests=8,
            scaleDownDelaySeconds=-5,
        ),
    )
    [served] = catalog.models()
    assert served.generation == 3
    # A negative delay (the API allows it) is no delay.
    assert served.scaling == ScalingSpec(
        replicas=2,
        min_replicas=1,
        max_replicas=4,
        autoscaling_disabled=False,
        target_requests=8,
        scale_down_delay_seconds=0,
    )

    # A change of the replicas alone is news: requests waiting for endpoints look again.
    changed = catalog.apply(
        kind="Model",
        event="MODIFIED",
        obj=model_object("llm", version="2", generation=4, replicas=3),
    )
    assert changed is True
    assert catalog.models()[0].scaling.replicas == 3


def _configured(status: str, generation: int, message: str = "") -> dict[str, object]:
    return {
        "type": "Configured",
        "status": status,
        "reason": "ResourceProfileNotFound" if status == "False" else "Configured",
        "message": message,
        "observedGeneration": generation,
    }


def test_a_model_the_operator_cannot_configure_for_its_spec_says_why() -> None:
    catalog = Catalog()
    broken = model_object("broken", generation=2)
    broken["status"] = {
        "conditions": [
            {"type": "Ready", "status": "False", "reason": "NotConfigured", "message": "x"},
            _configured("False", 2, 'resource profile not found: "nope"'),
        ]
    }
    stale = model_object("fixed", generation=3)
    stale["status"] = {"conditions": [_configured("False", 2, "an earlier spec's problem")]}
    fine = model_object("fine", generation=1)
    fine["status"] = {"conditions": [_configured("True", 1, "Served by vllm with cpu:1")]}
    fresh = model_object("fresh", generation=1)
    for obj in (broken, stale, fine, fresh):
        catalog.apply(kind="Model", event="ADDED", obj=obj)

    found = {m.name: m.not_configured for m in catalog.models()}

    assert found == {
        "broken": 'resource profile not found: "nope"',
        "fixed": None,  # the user edited the spec since: its own plan has not said yet
        "fine": None,
        "fresh": None,  # no status yet
    }


def test_a_model_configured_again_is_served_again() -> None:
    catalog = Catalog()
    broken = model_object("llm", generation=1, version="1")
    broken["status"] = {
        "conditions": [_configured("False", 1, "the system configuration is invalid")]
    }
    catalog.apply(kind="Model", event="ADDED", obj=broken)
    fixed = model_object("llm", generation=1, version="2")
    fixed["status"] = {"conditions": [_configured("True", 1, "Served by vllm")]}

    assert catalog.apply(kind="Model", event="MODIFIED", obj=fixed)  # waiters are woken
    [served] = catalog.models()
    assert served.not_configured is None
