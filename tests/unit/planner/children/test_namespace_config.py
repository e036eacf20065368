"""What an AIMNamespaceConfig changes for workloads in its namespace."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kaiwo_contracts.validation import Problem
from kaiwo_planner.domain.children.workload_children import plan_children
from kaiwo_planner.domain.scheduling.gpu_allocation import GpuAllocation
from kaiwo_planner.domain.settings.namespace_config import (
    NamespaceSettings,
    S3Credential,
    SecretKeyRef,
    names_aws_default_endpoint,
    namespace_settings,
    unused_credential_entries,
    with_default_credentials,
)
from kaiwo_planner.domain.settings.namespace_config_names import namespace_config_name_problems
from kaiwo_planner.domain.status.config_events import plan_namespace_config

NO_GPUS = GpuAllocation(gpus=0, gpus_per_replica=0, replicas=1, vendor="amd")
ID = SecretKeyRef("s3", "id")
KEY = SecretKeyRef("s3", "key")
OTHER_ID = SecretKeyRef("other", "id")


def test_settings_come_only_from_the_workloads_own_namespace(make_namespace_config):
    config = make_namespace_config(
        {
            "gateway": {"name": "gw"},
            "images": {"imagePullSecrets": ["reg"]},
            "credentials": {
                "huggingFaceToken": {"secretName": "hf", "secretKey": "t"},
                "gcs": [{"applicationCredentials": {"secretName": "g", "secretKey": "k"}}],
                "azureBlob": [{"connectionString": {"secretName": "a"}}],
            },
        },
        namespace="team-a",
    )

    assert namespace_settings(config, "team-b") == NamespaceSettings()
    settings = namespace_settings(config, "team-a")
    assert settings.image_pull_secrets == ("reg",)
    assert settings.hugging_face_token == SecretKeyRef("hf", "t")
    assert settings.gcs == (SecretKeyRef("g", "k"),)
    # A reference without a key names no usable value.
    assert settings.azure_blob == ()
    assert settings.gateway is not None
    assert (settings.gateway.name, settings.gateway.namespace) == ("gw", "team-a")


def test_a_pull_secret_named_twice_is_given_once(make_namespace_config):
    # Decision 0205: a Model's Pods and the cache and download Jobs listed it twice, which
    # server-side apply refuses.
    config = make_namespace_config(
        {"images": {"imagePullSecrets": ["reg", "other", "reg"]}}, namespace="team-a"
    )

    assert namespace_settings(config, "team-a").image_pull_secrets == ("reg", "other")


SECRET_NAME = (
    "must be a Secret's name: a lowercase RFC 1123 subdomain of at most 253 characters, "
    "such as hf-creds"
)
SECRET_KEY = (
    "must be a Secret's key: at most 253 letters, digits, '-', '_' or '.', "
    "not '.' or '..' and not starting with '..', such as token"
)
NAMESPACE = (
    "must be a namespace's name: a lowercase RFC 1123 label of at most 63 characters, "
    "such as gateway-system"
)
GATEWAY = (
    "must be a Gateway's name: a lowercase RFC 1123 subdomain of at most 253 characters, "
    "such as kgw-default"
)


def test_names_the_children_can_use_are_no_problem(make_namespace_config):
    # At the limits the API server sets (decision 0206): 253 characters for an object's
    # name and a key, 63 for a namespace; a key may start with one dot and hold capitals.
    config = make_namespace_config(
        {
            "gateway": {"name": "g" * 253, "namespace": "n" * 63},
            "images": {"imagePullSecrets": ["a.b-c", "r" * 253]},
            "credentials": {
                "huggingFaceToken": {"secretName": "hf.creds", "secretKey": ".Token_1-x"},
                "s3": [{"accessKeyId": {"secretName": "s3", "secretKey": "k" * 253}}],
            },
        }
    )

    assert namespace_config_name_problems(config) == ()


def test_each_name_the_children_cannot_use_is_named_by_its_own_field(make_namespace_config):
    config = make_namespace_config(
        {
            "gateway": {"name": "g" * 254, "namespace": "gateway.system"},
            "images": {"imagePullSecrets": ["ok", "", "Reg"]},
            "credentials": {
                "huggingFaceToken": {"secretName": "hf", "secretKey": ".."},
                "s3": [
                    {
                        "accessKeyId": {"secretName": "s3_creds", "secretKey": "id"},
                        "secretAccessKey": {"secretName": "s3", "secretKey": "..key"},
                    }
                ],
                "gcs": [{"applicationCredentials": {"secretName": "gcs", "secretKey": "a/b"}}],
                "azureBlob": [{"connectionString": {"secretName": "Azure", "secretKey": "."}}],
            },
        }
    )

    assert namespace_config_name_problems(config) == (
        Problem("spec.gateway.namespace", f'"gateway.system" {NAMESPACE}'),
        Problem("spec.gateway.name", f'"{"g" * 77}..." {GATEWAY}'),
        Problem("spec.credentials.huggingFaceToken.secretKey", f'".." {SECRET_KEY}'),
        Problem("spec.credentials.s3[0].accessKeyId.secretName", f'"s3_creds" {SECRET_NAME}'),
        Problem("spec.credentials.s3[0].secretAccessKey.secretKey", f'"..key" {SECRET_KEY}'),
        Problem("spec.credentials.gcs[0].applicationCredentials.secretKey", f'"a/b" {SECRET_KEY}'),
        Problem(
            "spec.credentials.azureBlob[0].connectionString.secretName", f'"Azure" {SECRET_NAME}'
        ),
        Problem("spec.credentials.azureBlob[0].connectionString.secretKey", f'"." {SECRET_KEY}'),
        Problem("spec.images.imagePullSecrets[1]", f'"" {SECRET_NAME}'),
        Problem("spec.images.imagePullSecrets[2]", f'"Reg" {SECRET_NAME}'),
    )


def test_a_half_reference_or_an_empty_gateway_field_is_no_name_to_check(make_namespace_config):
    # The planner ignores a reference given by halves (decision 0121) and a gateway without
    # a name: nothing of them reaches a child.
    config = make_namespace_config(
        {
            "gateway": {"name": "", "namespace": ""},
            "credentials": {"huggingFaceToken": {"secretName": "Bad_Name"}},
        }
    )

    assert namespace_config_name_problems(config) == ()


def test_s3_items_without_credentials_take_the_matching_endpoints_credentials():
    settings = NamespaceSettings(
        s3=(
            S3Credential("https://other.example.com", OTHER_ID, None),
            S3Credential("https://s3.example.com/", ID, KEY),
            S3Credential("", OTHER_ID, OTHER_ID),
        )
    )
    downloads = {
        "s3": [
            {"endpointUrl": "https://s3.example.com", "buckets": []},
            {"endpointUrl": "https://unknown.example.com", "buckets": []},
            {
                "endpointUrl": "https://s3.example.com",
                "accessKeyId": {"secretName": "mine", "secretKey": "id"},
                "buckets": [],
            },
        ]
    }

    assert with_default_credentials(downloads, settings) == {
        "s3": [
            {
                "endpointUrl": "https://s3.example.com",
                "buckets": [],
                "accessKeyId": {"secretName": "s3", "secretKey": "id"},
                "secretKey": {"secretName": "s3", "secretKey": "key"},
            },
            {
                "endpointUrl": "https://unknown.example.com",
                "buckets": [],
                "accessKeyId": {"secretName": "other", "secretKey": "id"},
                "secretKey": {"secretName": "other", "secretKey": "id"},
            },
            {
                "endpointUrl": "https://s3.example.com",
                "accessKeyId": {"secretName": "mine", "secretKey": "id"},
                "buckets": [],
            },
        ]
    }


def test_gcs_and_azure_items_without_a_secret_take_the_first_namespace_credential():
    settings = NamespaceSettings(
        gcs=(SecretKeyRef("g", "k"),), azure_blob=(SecretKeyRef("a", "c"),)
    )
    downloads = {
        "gcs": [{"applicationCredentials": {}, "buckets": []}],
        "azureBlob": [
            {"connectionString": {"secretName": "own", "secretKey": "c"}, "containers": []}
        ],
    }

    assert with_default_credentials(downloads, settings) == {
        "gcs": [{"applicationCredentials": {"secretName": "g", "secretKey": "k"}, "buckets": []}],
        "azureBlob": [
            {"connectionString": {"secretName": "own", "secretKey": "c"}, "containers": []}
        ],
    }


def test_a_workloads_own_hf_token_wins_over_the_namespaces(make_job, make_namespace_config):
    own_token = {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "mine", "key": "t"}}}
    config = make_namespace_config(
        {"credentials": {"huggingFaceToken": {"secretName": "hf", "secretKey": "t"}}}
    )

    (job,) = plan_children(
        workload=make_job({"env": [own_token]}),
        allocation=NO_GPUS,
        config=None,
        namespace_config=config,
    ).desired

    env = job["spec"]["template"]["spec"]["containers"][0]["env"]
    assert [variable for variable in env if variable["name"] == "HF_TOKEN"] == [own_token]


def test_a_containers_own_hf_token_wins_over_the_namespaces(make_job, make_namespace_config):
    # Decision 0201: the namespace's token replaced a token a container of spec.job named.
    own_token = {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "mine", "key": "t"}}}
    namespace_token = {
        "name": "HF_TOKEN",
        "valueFrom": {"secretKeyRef": {"name": "hf", "key": "t"}},
    }
    config = make_namespace_config(
        {"credentials": {"huggingFaceToken": {"secretName": "hf", "secretKey": "t"}}}
    )
    containers = [
        {"name": "main", "image": "busybox:1.36", "env": [own_token]},
        {"name": "sidecar", "image": "busybox:1.36"},
    ]
    job_spec = {"template": {"spec": {"containers": containers}}}

    (job,) = plan_children(
        workload=make_job({"job": {"spec": job_spec}}),
        allocation=NO_GPUS,
        config=None,
        namespace_config=config,
    ).desired

    tokens = [
        [variable for variable in container["env"] if variable["name"] == "HF_TOKEN"]
        for container in job["spec"]["template"]["spec"]["containers"]
    ]
    assert tokens == [[own_token], [namespace_token]]


def test_kaiwo_jobs_get_no_route_but_do_get_the_pull_secrets(make_job, make_namespace_config):
    config = make_namespace_config(
        {"gateway": {"name": "gw"}, "images": {"imagePullSecrets": ["r"]}}
    )

    desired = plan_children(
        workload=make_job(), allocation=NO_GPUS, config=None, namespace_config=config
    ).desired

    assert [obj["kind"] for obj in desired] == ["Job"]
    assert desired[0]["spec"]["template"]["spec"]["imagePullSecrets"] == [{"name": "r"}]


# The API reference's own S3 example entry (decision 0233).
AWS_ENTRY = S3Credential("https://s3.us-east-1.amazonaws.com", ID, KEY)
S3_ITEM_WITH_NAMESPACE_KEYS = {
    "buckets": [],
    "accessKeyId": {"secretName": "s3", "secretKey": "id"},
    "secretKey": {"secretName": "s3", "secretKey": "key"},
}


def test_an_s3_item_without_an_endpoint_takes_the_entry_of_awss_own_endpoint():
    settings = NamespaceSettings(
        s3=(S3Credential("https://minio.local", OTHER_ID, None), AWS_ENTRY)
    )

    assert with_default_credentials({"s3": [{"buckets": []}]}, settings) == {
        "s3": [S3_ITEM_WITH_NAMESPACE_KEYS]
    }


def test_an_entry_without_endpoint_still_comes_before_the_aws_one_for_an_item_without():
    settings = NamespaceSettings(s3=(AWS_ENTRY, S3Credential("", OTHER_ID, None)))

    assert with_default_credentials({"s3": [{"buckets": []}]}, settings) == {
        "s3": [{"buckets": [], "accessKeyId": {"secretName": "other", "secretKey": "id"}}]
    }


@pytest.mark.parametrize(
    ("endpoint_url", "is_aws_default"),
    [
        ("https://s3.amazonaws.com", True),
        ("https://s3.us-east-1.amazonaws.com/", True),
        ("https://S3.EU-WEST-1.amazonaws.com", True),
        ("http://s3-ap-southeast-2.amazonaws.com", True),
        # Other partitions take other keys; other hosts and ports are someone else's.
        ("https://s3.us-gov-west-1.amazonaws.com", False),
        ("https://s3.cn-north-1.amazonaws.com.cn", False),
        ("https://s3.amazonaws.com.example.com", False),
        ("https://bucket.s3.amazonaws.com", False),
        ("https://s3.amazonaws.com:9000", False),
        ("https://s3.amazonaws.com/bucket", False),
        ("s3.amazonaws.com", False),
        ("https://minio.local", False),
        ("", False),
    ],
)
def test_awss_own_endpoint_is_told_by_its_host(endpoint_url, is_aws_default):
    assert names_aws_default_endpoint(endpoint_url) is is_aws_default


def test_an_s3_entry_naming_no_secret_is_passed_over():
    # Its endpoint matches, but it would give the item nothing and hide the entry after it.
    settings = NamespaceSettings(
        s3=(
            S3Credential("https://minio.local", None, None),
            S3Credential("", None, None),
            S3Credential("", ID, KEY),
        )
    )
    downloads = {"s3": [{"endpointUrl": "https://minio.local", "buckets": []}, {"buckets": []}]}

    assert with_default_credentials(downloads, settings) == {
        "s3": [
            {"endpointUrl": "https://minio.local", **S3_ITEM_WITH_NAMESPACE_KEYS},
            S3_ITEM_WITH_NAMESPACE_KEYS,
        ]
    }


def test_each_credential_entry_that_can_never_be_used_is_named(make_namespace_config):
    config = make_namespace_config(
        {
            "credentials": {
                "s3": [
                    {"endpointUrl": "https://minio.local"},
                    {
                        "endpointUrl": "https://minio.local/",
                        "accessKeyId": {"secretName": "m", "secretKey": "id"},
                    },
                    {
                        "endpointUrl": "https://minio.local",
                        "secretAccessKey": {"secretName": "m2", "secretKey": "key"},
                    },
                    {"accessKeyId": {"secretName": "d", "secretKey": "id"}},
                ],
                "gcs": [
                    {"applicationCredentials": {}},
                    {"applicationCredentials": {"secretName": "g1", "secretKey": "k"}},
                    {"applicationCredentials": {"secretName": "g2", "secretKey": "k"}},
                ],
                "azureBlob": [
                    {"connectionString": {"secretName": "a1", "secretKey": "c"}},
                    {"connectionString": {"secretName": "a2", "secretKey": "c"}},
                ],
            }
        }
    )

    assert unused_credential_entries(config) == (
        Problem(
            "spec.credentials.s3[0]",
            "names neither an accessKeyId nor a secretAccessKey Secret, so it has no effect",
        ),
        Problem(
            "spec.credentials.s3[2]",
            "has the endpointUrl of spec.credentials.s3[1], which is always chosen first, "
            "so it has no effect",
        ),
        Problem(
            "spec.credentials.gcs[0]", "names no applicationCredentials Secret, so it has no effect"
        ),
        Problem(
            "spec.credentials.gcs[2]",
            "is never used: an item without applicationCredentials takes the first entry that "
            "names a Secret, spec.credentials.gcs[1] (entries have no selector)",
        ),
        Problem(
            "spec.credentials.azureBlob[1]",
            "is never used: an item without connectionString takes the first entry that "
            "names a Secret, spec.credentials.azureBlob[0] (entries have no selector)",
        ),
    )


def test_one_entry_of_each_kind_is_no_problem(make_namespace_config):
    config = make_namespace_config(
        {
            "credentials": {
                "s3": [
                    {
                        "endpointUrl": "https://s3.us-east-1.amazonaws.com",
                        "accessKeyId": {"secretName": "s3-creds", "secretKey": "accessKeyId"},
                    },
                    {"accessKeyId": {"secretName": "d", "secretKey": "id"}},
                ],
                "gcs": [{"applicationCredentials": {"secretName": "g", "secretKey": "k"}}],
                "azureBlob": [{"connectionString": {"secretName": "a", "secretKey": "c"}}],
            }
        }
    )

    assert unused_credential_entries(config) == ()


def namespace_config_wire(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "config.kaiwo.silogen.ai/v1alpha1",
        "kind": "AIMNamespaceConfig",
        "metadata": {
            "name": "aim",
            "namespace": "team-a",
            "uid": "aim-uid",
            "generation": 3,
            "resourceVersion": "42",
        },
        "spec": spec,
    }


GCS_TWICE = {
    "gcs": [
        {"applicationCredentials": {"secretName": "g1", "secretKey": "k"}},
        {"applicationCredentials": {"secretName": "g2", "secretKey": "k"}},
    ]
}


def test_an_unused_entry_is_told_once_per_version_by_the_configs_event():
    config = namespace_config_wire({"credentials": GCS_TWICE})

    first = plan_namespace_config(config, in_force=config)
    again = plan_namespace_config(copy.deepcopy(config), in_force=config)

    assert first.plan is not None
    assert [(e.type, e.reason, e.message) for e in first.plan.events] == [
        (
            "Warning",
            "InvalidConfig",
            "The AIMNamespaceConfig has credential entries no download item or Model of "
            "namespace 'team-a' can get; remove them, or put the one to use first: "
            "spec.credentials.gcs[1]: is never used: an item without applicationCredentials "
            "takes the first entry that names a Secret, spec.credentials.gcs[0] (entries "
            "have no selector)",
        )
    ]
    assert (first.plan.status, first.plan.desired) == (None, ())
    # The same version plans the same (published once); one entry plans nothing.
    assert again == first
    single = namespace_config_wire({"credentials": {"gcs": GCS_TWICE["gcs"][:1]}})
    assert plan_namespace_config(single, in_force=single).plan is None


def test_bad_names_and_unused_entries_share_the_configs_one_event():
    config = namespace_config_wire(
        {"images": {"imagePullSecrets": ["Bad_Name"]}, "credentials": GCS_TWICE}
    )

    plan = plan_namespace_config(config, in_force=None).plan

    assert plan is not None
    [event] = plan.events
    assert event.message == (
        "The AIMNamespaceConfig gives names the children of the workloads and Models of "
        "namespace 'team-a' cannot use (the API server refuses such a child, or no Secret or "
        "Gateway can be so named); they are passed on as written until fixed: "
        'spec.images.imagePullSecrets[0]: "Bad_Name" must be a Secret\'s name: a lowercase '
        "RFC 1123 subdomain of at most 253 characters, such as hf-creds. "
        "The AIMNamespaceConfig has credential entries no download item or Model of "
        "namespace 'team-a' can get; remove them, or put the one to use first: "
        "spec.credentials.gcs[1]: is never used: an item without applicationCredentials "
        "takes the first entry that names a Secret, spec.credentials.gcs[0] (entries "
        "have no selector)"
    )
