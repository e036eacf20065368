"""How the fake answers ``pods/log`` before asking a kubelet: which container, which kubelet,
and its words for refusals (those of kube-apiserver 1.36, written down from its answers)."""

from __future__ import annotations

from typing import Any

import pytest
from kaiwo_kubefake.errors import ApiError
from kaiwo_kubefake.pod_logs import (
    check_numbers,
    chosen_container,
    kubelet_location,
    kubelet_refusal,
    kubelet_url,
)


def pod(*containers: str, init: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "metadata": {"name": "p1"},
        "spec": {
            "containers": [{"name": c} for c in containers],
            "initContainers": [{"name": c} for c in init],
        },
    }


def test_the_only_container_is_meant_when_none_is_named() -> None:
    assert chosen_container(pod("a"), None) == "a"
    assert chosen_container(pod("a", "b"), "b") == "b"
    assert chosen_container(pod("a", init=("setup",)), "setup") == "setup"


def test_several_containers_and_none_named_or_an_unknown_one_are_refused() -> None:
    with pytest.raises(ApiError) as refused:
        chosen_container(pod("a", "b"), None)
    assert (refused.value.code, refused.value.message) == (
        400,
        "a container name must be specified for pod p1, choose one of: [a b]",
    )
    with pytest.raises(ApiError) as refused:
        chosen_container(pod("a", "b", init=("setup",)), "")
    assert refused.value.message == (
        "a container name must be specified for pod p1, choose one of: [a b] "
        "or one of the init containers: [setup]"
    )
    with pytest.raises(ApiError) as refused:
        chosen_container(pod("a"), "zz")
    assert refused.value.message == "container zz is not valid for pod p1"


def test_numbers_must_be_whole() -> None:
    check_numbers({"tailLines": "10", "sinceSeconds": "5", "follow": "true"})
    with pytest.raises(ApiError) as refused:
        check_numbers({"tailLines": "x"})
    assert (refused.value.code, refused.value.message) == (
        400,
        'strconv.ParseInt: parsing "x": invalid syntax',
    )


def test_the_kubelet_is_found_by_the_preferred_address_and_the_daemon_port() -> None:
    node = {
        "status": {
            "addresses": [
                {"type": "ExternalIP", "address": "203.0.113.7"},
                {"type": "InternalIP", "address": "10.0.0.7"},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 31250}},
        }
    }
    assert kubelet_location(node) == ("10.0.0.7", 31250)
    with_hostname = {
        "status": {
            "addresses": [
                {"type": "InternalIP", "address": "10.0.0.7"},
                {"type": "Hostname", "address": "gpu-1"},
            ]
        }
    }
    assert kubelet_location(with_hostname) == ("gpu-1", 10250)


def test_a_node_without_addresses_is_the_api_servers_500() -> None:
    with pytest.raises(ApiError) as refused:
        kubelet_location({"status": {}})
    assert (refused.value.code, refused.value.message) == (
        500,
        "no preferred addresses found; known addresses: []",
    )


def test_the_kubelet_url_passes_the_log_options_on() -> None:
    url = kubelet_url(
        "127.0.0.1",
        4443,
        namespace="ml-team",
        pod="p1",
        container="a",
        query={"container": "a", "follow": "true", "tailLines": "5", "pretty": "1"},
    )
    assert url == "https://127.0.0.1:4443/containerLogs/ml-team/p1/a?follow=true&tailLines=5"


def test_kubelet_refusals_become_the_api_servers() -> None:
    waiting = kubelet_refusal(400, 'container "a" in pod "p1" is waiting to start', pod="p1")
    assert (waiting.code, waiting.reason, waiting.message) == (
        400,
        "BadRequest",
        'container "a" in pod "p1" is waiting to start',
    )
    missing = kubelet_refusal(404, "whatever the kubelet said", pod="p1")
    assert missing.status() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "the server could not find the requested resource ( pods/log p1)",
        "reason": "NotFound",
        "details": {"name": "p1", "kind": "pods/log"},
        "code": 404,
    }
    broken = kubelet_refusal(500, "some kubelet text", pod="p1")
    assert (broken.reason, broken.message) == (
        "InternalError",
        "Internal error occurred: some kubelet text",
    )
