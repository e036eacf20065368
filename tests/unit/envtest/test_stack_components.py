"""The configuration the control plane gives the kube-scheduler, kwok and Kueue, decided with
no process started (what they then do is ``tests/integration/test_real_stack*.py``'s)."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path
from typing import Any

import pytest
from kaiwo_envtest import appwrapper, kueue
from kaiwo_envtest.kueue import (
    KueueOptions,
    converted_crds,
    kueue_configuration,
    webhook_certificates,
    webhook_configurations,
)
from kaiwo_envtest.kwok import KwokOptions, run_time_expression, stages
from kaiwo_envtest.pki import certificate_authority, serving_credentials
from kaiwo_envtest.rest import object_path
from kaiwo_envtest.scheduler import local_configuration

KAIWO_PROFILE: dict[str, Any] = {
    "schedulerName": "kaiwo-scheduler",
    "pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "X"}}}],
}


def test_the_scheduler_runs_the_given_profile_locally_beside_a_default_one() -> None:
    given = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {
            "leaderElect": True,
            "resourceNamespace": "kaiwo-system",
            "resourceName": "kaiwo-scheduler",
        },
        "profiles": [KAIWO_PROFILE],
    }
    local = local_configuration(given, kubeconfig=Path("/plane/scheduler.kubeconfig"))
    assert local == {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "profiles": [KAIWO_PROFILE, {"schedulerName": "default-scheduler"}],
        "clientConnection": {"kubeconfig": "/plane/scheduler.kubeconfig"},
    }
    assert given["leaderElection"]["leaderElect"] is True  # the input is left alone


def test_a_configuration_with_a_default_profile_keeps_its_own() -> None:
    given = {
        "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "default-scheduler", "plugins": {}}],
    }
    local = local_configuration(given, kubeconfig=Path("/k"))
    assert local["profiles"] == [{"schedulerName": "default-scheduler", "plugins": {}}]
    alone = local_configuration(
        {"kind": "KubeSchedulerConfiguration", "profiles": [KAIWO_PROFILE]},
        kubeconfig=Path("/k"),
        default_profile=False,
    )
    assert alone["profiles"] == [KAIWO_PROFILE]


def test_only_a_scheduler_configuration_is_taken() -> None:
    with pytest.raises(ValueError, match="not a KubeSchedulerConfiguration"):
        local_configuration({"kind": "ConfigMap"}, kubeconfig=Path("/k"))


def test_kwoks_stages_and_their_delays() -> None:
    options = KwokOptions(start_seconds=2, run_seconds=20, download_seconds=3, time_scale=0.5)
    by_name = {stage["metadata"]["name"]: stage["spec"] for stage in stages(options)}
    assert list(by_name) == [
        "node-initialize",
        "node-heartbeat",
        "pod-start",
        "pod-succeed",
        "pod-fail",
        "pod-stop",
        "pod-delete",
    ]
    assert by_name["pod-start"]["delay"] == {"durationMilliseconds": 1000}
    run = {
        "durationMilliseconds": 10000,
        "durationFrom": {"expressionFrom": run_time_expression(options)},
    }
    assert by_name["pod-succeed"]["delay"] == by_name["pod-fail"]["delay"] == run
    assert by_name["node-heartbeat"]["delay"] == {"durationMilliseconds": 300000}
    assert by_name["pod-delete"]["next"] == {"delete": True}
    fail = '.metadata.annotations["sandbox.kaiwo.silogen.ai/fail"]'
    assert {"key": fail, "operator": "Exists"} in by_name["pod-fail"]["selector"][
        "matchExpressions"
    ]
    assert {"key": fail, "operator": "DoesNotExist"} in by_name["pod-succeed"]["selector"][
        "matchExpressions"
    ]
    for name in ("pod-succeed", "pod-fail"):
        assert {
            "key": ".metadata.ownerReferences.[].kind",
            "operator": "In",
            "values": ["Job"],
        } in by_name[name]["selector"]["matchExpressions"]


def test_a_pods_run_time_comes_from_its_annotation_scaled_else_the_download_time() -> None:
    expression = run_time_expression(KwokOptions(download_seconds=3, time_scale=0.5))
    assert expression == (
        '(.metadata.annotations["sandbox.kaiwo.silogen.ai/run-seconds"] | tonumber? | . * 0.5 '
        '| tostring + "s"), (if .metadata.labels["kaiwo.silogen.ai/type"] == "downloader" '
        'then "1.5s" else empty end)'
    )


def test_kueue_is_configured_as_upstream_kaiwo_configures_it_for_a_local_process() -> None:
    configuration = kueue_configuration(
        KueueOptions(), webhook_port=9443, health_port=8081, cert_dir=Path("/plane/certs")
    )
    assert configuration == {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": "kueue-system",
        "health": {"healthProbeBindAddress": "127.0.0.1:8081"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"host": "127.0.0.1", "port": 9443, "certDir": "/plane/certs"},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {
            "enable": True,
            "webhookServiceName": "kueue-webhook-service",
            "webhookSecretName": "kueue-webhook-server-cert",
        },
        "manageJobsWithoutQueueName": False,
        "managedJobsNamespaceSelector": {"matchLabels": {"kueue-managed": "true"}},
        "integrations": {
            "frameworks": [
                "batch/job",
                "ray.io/rayjob",
                "ray.io/raycluster",
                "workload.codeflare.dev/appwrapper",
                "pod",
                "deployment",
                "statefulset",
            ]
        },
        "featureGates": {
            "ManagedJobsNamespaceSelectorAlwaysRespected": False,
            "VisibilityOnDemand": False,
        },
    }


def webhook(name: str, path: str) -> dict[str, Any]:
    return {
        "name": name,
        "clientConfig": {
            "service": {"name": "webhook-service", "namespace": "system", "path": path}
        },
        "rules": [],
    }


def test_kueues_webhooks_are_reached_on_loopback_with_the_ca() -> None:
    manifests = [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "mutating-webhook-configuration"},
            "webhooks": [
                webhook("mpod.kb.io", "/mutate--v1-pod"),
                webhook("mjob.kb.io", "/mutate-batch-v1-job"),
            ],
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "validating-webhook-configuration"},
            "webhooks": [webhook("vjob.kb.io", "/validate-batch-v1-job")],
        },
    ]
    ca = base64.b64encode(b"CA PEM").decode()
    mutating, validating = webhook_configurations(
        manifests, base_url="https://127.0.0.1:9443", ca=b"CA PEM"
    )
    assert mutating["metadata"] == {"name": "kueue-mutating-webhook-configuration"}
    assert validating["metadata"] == {"name": "kueue-validating-webhook-configuration"}
    pod, job = mutating["webhooks"]
    assert pod == {
        "name": "mpod.kb.io",
        "clientConfig": {"url": "https://127.0.0.1:9443/mutate--v1-pod", "caBundle": ca},
        "rules": [],
        "namespaceSelector": {
            "matchExpressions": [
                {
                    "key": "kubernetes.io/metadata.name",
                    "operator": "NotIn",
                    "values": ["kube-system", "kueue-system"],
                }
            ]
        },
    }
    assert job == {
        "name": "mjob.kb.io",
        "clientConfig": {"url": "https://127.0.0.1:9443/mutate-batch-v1-job", "caBundle": ca},
        "rules": [],
    }
    assert manifests[0]["webhooks"][0]["clientConfig"]["service"]["path"] == "/mutate--v1-pod"
    with pytest.raises(ValueError, match="lack a mutating or validating"):
        webhook_configurations(manifests[:1], base_url="https://x", ca=b"")


def crd(group: str, plural: str) -> dict[str, Any]:
    return {"spec": {"group": group, "names": {"plural": plural}, "versions": []}}


def test_only_kueues_converted_kinds_convert_through_its_webhook() -> None:
    given = [
        crd("kueue.x-k8s.io", "workloads"),
        crd("kueue.x-k8s.io", "clusterqueues"),
        crd("kueue.x-k8s.io", "resourceflavors"),
        crd("ray.io", "rayjobs"),
    ]
    converted = converted_crds(given, url="https://127.0.0.1:9443/convert", ca=b"CA")
    strategies = [c["spec"].get("conversion", {}).get("strategy") for c in converted]
    assert strategies == ["Webhook", "Webhook", None, None]
    assert converted[0]["spec"]["conversion"]["webhook"]["clientConfig"] == {
        "url": "https://127.0.0.1:9443/convert",
        "caBundle": base64.b64encode(b"CA").decode(),
    }


def certificate_text(path: Path) -> str:
    return subprocess.run(
        ["openssl", "x509", "-in", str(path), "-noout", "-text"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def test_kueues_certificates_satisfy_its_rotator_and_the_api_server(tmp_path: Path) -> None:
    """The rotator verifies its CA for the name ``kueue-ca`` and reads its key as PKCS#1 RSA;
    the API server reaches the webhooks at 127.0.0.1; both look 90 days ahead."""
    made = webhook_certificates(tmp_path)
    assert made.ca.key.read_text().startswith("-----BEGIN RSA PRIVATE KEY-----")
    ca = certificate_text(made.ca.certificate)
    assert "DNS:kueue-ca" in ca
    assert "CA:TRUE" in ca
    serving = certificate_text(made.serving.certificate)
    assert "DNS:kueue-webhook-service.kueue-system.svc, IP Address:127.0.0.1" in serving
    assert "TLS Web Server Authentication" in serving
    check = subprocess.run(
        [
            "openssl", "verify", "-CAfile", str(made.ca.certificate),
            "-attime", "1893456000",  # 2030: well past the rotator's 90 days
            str(made.serving.certificate),
        ],
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    assert check.returncode == 0, check.stderr
    secret = made.secret(kueue.WEBHOOKS)
    assert sorted(secret["data"]) == ["ca.crt", "ca.key", "tls.crt", "tls.key"]
    assert secret["metadata"] == {"name": "kueue-webhook-server-cert", "namespace": "kueue-system"}


def test_a_serving_certificate_names_its_addresses(tmp_path: Path) -> None:
    ca = certificate_authority(tmp_path, "ca", common_name="test-ca")
    made = serving_credentials(tmp_path, ca, name="server", dns_names=("a.example",))
    assert "DNS:a.example, IP Address:127.0.0.1" in certificate_text(made.certificate)


def test_object_paths_of_the_kinds_set_up() -> None:
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s", "namespace": "kueue-system"},
    }
    assert object_path(secret) == "/api/v1/namespaces/kueue-system/secrets/s"
    crd_object = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "workloads.kueue.x-k8s.io"},
    }
    assert object_path(crd_object) == (
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/workloads.kueue.x-k8s.io"
    )
    with pytest.raises(ValueError, match="no path known for apps/v1 Deployment"):
        object_path({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}})


def test_the_appwrapper_webhooks_are_named_as_its_rotator_expects_and_reached_on_loopback() -> None:
    manifests = [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "mutating-webhook-configuration"},
            "webhooks": [webhook("mappwrapper.kb.io", "/mutate-appwrapper")],
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "validating-webhook-configuration"},
            "webhooks": [webhook("vappwrapper.kb.io", "/validate-appwrapper")],
        },
    ]
    mutating, validating = appwrapper.webhook_configurations(
        manifests, base_url="https://127.0.0.1:7443", ca=b"CA PEM"
    )
    assert mutating["metadata"] == {"name": "appwrapper-mutating-webhook-configuration"}
    assert validating["webhooks"] == [
        {
            "name": "vappwrapper.kb.io",
            "clientConfig": {
                "url": "https://127.0.0.1:7443/validate-appwrapper",
                "caBundle": base64.b64encode(b"CA PEM").decode(),
            },
            "rules": [],
        }
    ]
    assert appwrapper.WEBHOOKS.dns_name == "appwrapper-webhook-service.appwrapper-system.svc"
    with pytest.raises(ValueError, match="appwrapper webhook manifests lack"):
        appwrapper.webhook_configurations(manifests[1:], base_url="https://x", ca=b"")
