"""Storage: claims, how pods mount them, and the gating of the workload on the download job."""

from __future__ import annotations

from typing import Any

import pytest
from kaiwo_planner.domain.children.workload_children import (
    ChildCondition,
    DownloadState,
    plan_children,
)
from kaiwo_planner.domain.scheduling.gpu_allocation import GpuAllocation
from kaiwo_planner.domain.settings.workload_inputs import child_defaults, workload_inputs
from kaiwo_planner.domain.workload_plan import downloads_configured
from pydantic import ValidationError

NO_GPUS = GpuAllocation(gpus=0, gpus_per_replica=0, replicas=1, vendor="amd")

STORAGE: dict[str, Any] = {
    "storageEnabled": True,
    "accessMode": "ReadWriteOnce",
    "data": {
        "storageSize": "10Gi",
        "download": {
            "s3": [
                {
                    "endpointUrl": "https://s3.example.com",
                    "buckets": [
                        {"name": "bucket", "folders": [{"path": "weights", "targetPath": "models"}]}
                    ],
                }
            ],
            "git": [
                {
                    "repository": "https://github.com/o/r.git",
                    "branch": "main",
                    "token": {"secretName": "git-creds", "secretKey": "token"},
                    "targetPath": "code",
                }
            ],
        },
    },
    "huggingFace": {
        "storageSize": "20Gi",
        "mountPath": "/hf",
        "preCacheRepos": [{"repoId": "org/model", "files": ["config.json"]}],
    },
}
NAMESPACE_CREDENTIALS = {
    "credentials": {
        "huggingFaceToken": {"secretName": "hf-creds", "secretKey": "token"},
        "s3": [
            {
                "endpointUrl": "https://s3.example.com/",
                "accessKeyId": {"secretName": "s3-creds", "secretKey": "id"},
                "secretAccessKey": {"secretName": "s3-creds", "secretKey": "secret"},
            }
        ],
    }
}


@pytest.fixture
def plan(make_job, make_config, make_namespace_config):
    """The children in download ``state``; a finished download's Job is observed as the one
    the pending download made (a finished Job that is gone is not made again)."""

    def run(state: DownloadState):
        def children(state: DownloadState, observed: dict[str, Any] | None = None):
            return plan_children(
                workload=make_job({"storage": STORAGE, "env": [{"name": "FOO", "value": "bar"}]}),
                allocation=NO_GPUS,
                config=make_config({"storage": {"defaultStorageClass": "rwx-nfs"}}),
                namespace_config=make_namespace_config(NAMESPACE_CREDENTIALS),
                download_state=state,
                observed_download_job=observed,
            )

        pending = children(DownloadState.PENDING)
        if state is DownloadState.PENDING:
            return pending
        return children(state, _download_job_of(pending))

    return run


def test_until_downloads_succeed_only_storage_children_exist(plan, expected, assert_manifests):
    decision = plan(DownloadState.PENDING)

    assert_manifests(list(decision.desired), expected("storage_with_downloads"))
    assert decision.main_child is None
    assert decision.waiting_for_downloads is True
    assert decision.failed is False
    assert decision.conditions == (
        ChildCondition(
            "DownloadJobSucceeded",
            "False",
            "JobInProgress",
            "Waiting for download job train-download; the workload starts once it succeeds",
        ),
    )


def test_a_failed_download_keeps_the_workload_from_starting_and_says_why(plan, expected):
    decision = plan(DownloadState.FAILED)

    assert list(decision.desired) == expected("storage_with_downloads")
    assert decision.failed is True
    assert decision.main_child is None
    assert decision.conditions == (
        ChildCondition(
            "DownloadJobSucceeded",
            "False",
            "JobFailed",
            "Download job train-download failed, so the workload will not start; "
            "see the logs of job train-download for the cause",
        ),
    )


def test_after_downloads_succeed_the_workload_mounts_both_volumes(plan, expected):
    decision = plan(DownloadState.SUCCEEDED)

    storage_children = expected("storage_with_downloads")
    assert [obj for obj in decision.desired if obj["metadata"]["name"] != "train"] == (
        storage_children
    )
    assert decision.main_child is not None
    assert decision.main_child.display() == "Job/team-a/train"
    assert decision.conditions == (
        ChildCondition("DownloadJobSucceeded", "True", "JobCompleted", "Download job succeeded"),
        ChildCondition(
            "ChildSpecApplied", "True", "Applied", "The Job matches the workload's spec"
        ),
    )
    (job,) = [obj for obj in decision.desired if obj["metadata"]["name"] == "train"]
    pod = job["spec"]["template"]["spec"]
    assert pod["volumes"] == [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "train-data"}},
        {"name": "hf", "persistentVolumeClaim": {"claimName": "train-hf"}},
    ]
    container = pod["containers"][0]
    assert container["volumeMounts"] == [
        {"name": "dshm", "mountPath": "/dev/shm"},
        {"name": "data", "mountPath": "/workload"},
        {"name": "hf", "mountPath": "/hf"},
    ]
    assert container["env"] == [
        {"name": "FOO", "value": "bar"},
        {"name": "HF_HOME", "value": "/hf"},
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-creds", "key": "token"}}},
        {"name": "NUM_GPUS", "value": "0"},
        {"name": "NUM_REPLICAS", "value": "1"},
        {"name": "NUM_GPUS_PER_REPLICA", "value": "0"},
    ]


def test_storage_without_downloads_creates_claims_with_the_workload(make_job):
    storage = {
        "storageEnabled": True,
        "storageClassName": "fast",
        "data": {"storageSize": "1Gi", "mountPath": "/data"},
        "huggingFace": {"storageSize": "2Gi"},
    }

    decision = plan_children(
        workload=make_job({"storage": storage}), allocation=NO_GPUS, config=None
    )

    assert [(o["kind"], o["metadata"]["name"]) for o in decision.desired] == [
        ("Job", "train"),
        ("PersistentVolumeClaim", "train-data"),
        ("PersistentVolumeClaim", "train-hf"),
    ]
    data_claim = decision.desired[1]
    assert data_claim["spec"] == {
        "accessModes": ["ReadWriteMany"],
        "storageClassName": "fast",
        "resources": {"requests": {"storage": "1Gi"}},
    }
    container = decision.desired[0]["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "HF_HOME", "value": "/hf_cache"} in container["env"]
    assert container["volumeMounts"][1:] == [
        {"name": "data", "mountPath": "/data"},
        {"name": "hf", "mountPath": "/hf_cache"},
    ]
    assert decision.conditions == (
        ChildCondition(
            "ChildSpecApplied", "True", "Applied", "The Job matches the workload's spec"
        ),
    )


def test_disabled_storage_creates_nothing(make_job):
    storage = {"storageEnabled": False, "data": {"storageSize": "1Gi"}}

    decision = plan_children(
        workload=make_job({"storage": storage}), allocation=NO_GPUS, config=None
    )

    assert [o["kind"] for o in decision.desired] == ["Job"]


def test_without_any_storage_class_the_claim_leaves_the_class_to_the_cluster(make_job):
    storage = {"storageEnabled": True, "data": {"storageSize": "1Gi"}}

    decision = plan_children(
        workload=make_job({"storage": storage}), allocation=NO_GPUS, config=None
    )

    claim = decision.desired[1]
    assert "storageClassName" not in claim["spec"]


GIT = {"git": [{"repository": "https://github.com/o/r.git", "targetPath": "code"}]}
HF_REPOS = [{"repoId": "org/model"}]


@pytest.mark.parametrize(
    "storage",
    [
        {"data": {"storageSize": "1Gi", "download": GIT}},
        {"data": {"download": GIT}},
        {"data": {"storageSize": "1Gi", "download": {}}},
        {"huggingFace": {"storageSize": "1Gi", "preCacheRepos": HF_REPOS}},
        {"huggingFace": {"preCacheRepos": HF_REPOS}},
        {"huggingFace": {"storageSize": "1Gi"}},
    ],
)
def test_the_contract_and_the_planner_agree_on_the_download_job(make_job, storage):
    # Decision 0111: one rule for whether a download Job runs. A spec the models accept is
    # read alike by the contract and by the children planner's inputs; one they refuse (a
    # download without its volume's size) never reaches the planner's children.
    try:
        workload = make_job({"storage": {"storageEnabled": True, **storage}})
    except ValidationError as refused:
        assert [error["loc"][-1] for error in refused.errors()] == ["storageSize"]
        return
    contract = workload.spec.storage
    inputs = workload_inputs(workload, child_defaults(None)).storage

    assert inputs is not None and contract is not None
    assert (inputs.has_object_downloads, inputs.has_hf_downloads, inputs.has_downloads) == (
        contract.has_object_storage_downloads,
        contract.has_hf_downloads,
        contract.has_downloads,
    )
    assert downloads_configured(workload.spec) is contract.has_downloads


def _pod_security_contexts(decision) -> dict[str, object]:
    """Each desired Job's name and its pod template's securityContext (None: left out)."""
    return {
        obj["metadata"]["name"]: obj["spec"]["template"]["spec"].get("securityContext")
        for obj in decision.desired
        if obj["kind"] == "Job"
    }


@pytest.mark.parametrize(
    ("dangerous", "expected_context"),
    [
        (False, {"runAsUser": 1000, "runAsGroup": 1000, "fsGroup": 1000}),
        (True, None),
    ],
)
def test_dangerous_leaves_out_the_default_security_context_of_the_download_pod_too(
    make_job, dangerous, expected_context
):
    # The reference: with `dangerous`, Kaiwo adds no default PodSecurityContext "to the
    # generated pods"; the download Job's pod is one of them (upstream kept it: decision 0117).
    workload = make_job({"storage": STORAGE, "dangerous": dangerous})

    downloading = plan_children(
        workload=workload, allocation=NO_GPUS, config=None, download_state=DownloadState.PENDING
    )
    running = plan_children(
        workload=workload,
        allocation=NO_GPUS,
        config=None,
        download_state=DownloadState.SUCCEEDED,
        observed_download_job=_download_job_of(downloading),
    )

    assert _pod_security_contexts(downloading) == {"train-download": expected_context}
    assert _pod_security_contexts(running) == {
        "train-download": expected_context,
        "train": expected_context,
    }


def _download_job_of(decision) -> dict[str, Any]:
    [job] = [
        o
        for o in decision.desired
        if o["kind"] == "Job" and o["metadata"]["name"] == "train-download"
    ]
    return job


def test_an_existing_download_job_keeps_the_template_it_runs_with(make_job):
    # A Job's template cannot change. The download Job carries the workload's env, so an
    # edit of spec.env once it exists must not reach it: the API server would refuse it on
    # every plan (decision 0117). The edit still reaches the workload's own Job.
    before = plan_children(
        workload=make_job({"storage": STORAGE}),
        allocation=NO_GPUS,
        config=None,
        download_state=DownloadState.PENDING,
    )
    running = _download_job_of(before)
    observed = {
        **running,
        "metadata": {**running["metadata"], "uid": "download-uid", "generation": 1},
    }
    edited = make_job({"storage": STORAGE, "env": [{"name": "LEARNING_RATE", "value": "0.1"}]})

    after = plan_children(
        workload=edited,
        allocation=NO_GPUS,
        config=None,
        download_state=DownloadState.SUCCEEDED,
        observed_download_job=observed,
    )
    unobserved = plan_children(
        workload=edited,
        allocation=NO_GPUS,
        config=None,
        download_state=DownloadState.PENDING,
    )

    assert _download_job_of(after)["spec"]["template"] == running["spec"]["template"]
    [main] = [o for o in after.desired if o["kind"] == "Job" and o["metadata"]["name"] == "train"]
    [container] = main["spec"]["template"]["spec"]["containers"]
    assert {"name": "LEARNING_RATE", "value": "0.1"} in container["env"]
    [new_container] = _download_job_of(unobserved)["spec"]["template"]["spec"]["containers"]
    assert new_container["env"] == [
        {"name": "HF_HOME", "value": "/hf"},
        {"name": "LEARNING_RATE", "value": "0.1"},
    ]


def test_an_edit_the_running_download_job_cannot_take_is_told_with_how_to_take_it(make_job):
    # A pod that cannot mount its Secret never fails: the download waits for good, and the
    # fixed name in the spec does not reach its Job (decision 0218). Once the download has
    # finished, an edit matters to it no more, and nothing is said.
    before = plan_children(
        workload=make_job({"storage": STORAGE}),
        allocation=NO_GPUS,
        config=None,
        download_state=DownloadState.PENDING,
    )
    running = _download_job_of(before)
    observed = {
        **running,
        "metadata": {**running["metadata"], "uid": "download-uid", "generation": 1},
    }
    edited = make_job({"storage": STORAGE, "env": [{"name": "LEARNING_RATE", "value": "0.1"}]})

    def planned(state: DownloadState):
        return plan_children(
            workload=edited,
            allocation=NO_GPUS,
            config=None,
            download_state=state,
            observed_download_job=observed,
        )

    still_running = planned(DownloadState.PENDING)
    assert _download_job_of(still_running)["spec"]["template"] == running["spec"]["template"]
    assert still_running.notes == (
        "Not applied to the running download Job train-download, because a Job's pod template "
        "cannot change after it is created: spec.template.spec.containers[0].env. The download "
        "goes on as it was created; delete the Job (kubectl delete job -n team-a "
        "train-download) and the next one is made from the edited spec",
    )
    assert planned(DownloadState.SUCCEEDED).notes == ()
    assert planned(DownloadState.FAILED).notes == ()


def test_an_edit_of_what_a_finished_download_fetched_is_told_not_dropped(make_job):
    # The ConfigMap follows the spec, the download ran once: a repository added to
    # preCacheRepos afterwards was downloaded by nothing, and nothing said so (decision 0248).
    first = plan_children(
        workload=make_job({"storage": STORAGE}),
        allocation=NO_GPUS,
        config=None,
        download_state=DownloadState.PENDING,
    )
    ran = _download_job_of(first)
    observed = {**ran, "metadata": {**ran["metadata"], "uid": "download-uid", "generation": 1}}
    edited_storage = {
        **STORAGE,
        "huggingFace": {
            **STORAGE["huggingFace"],
            "preCacheRepos": [{"repoId": "org/model"}, {"repoId": "org/other-model"}],
        },
    }

    def planned(storage: dict[str, Any], job: dict[str, Any], state: DownloadState):
        return plan_children(
            workload=make_job({"storage": storage}),
            allocation=NO_GPUS,
            config=None,
            download_state=state,
            observed_download_job=job,
        )

    after = planned(edited_storage, observed, DownloadState.SUCCEEDED)
    running = planned(edited_storage, observed, DownloadState.PENDING)
    unedited = planned(STORAGE, observed, DownloadState.SUCCEEDED)
    made_before = {
        **observed,
        "metadata": {k: v for k, v in observed["metadata"].items() if k != "annotations"},
    }
    older_job = planned(edited_storage, made_before, DownloadState.SUCCEEDED)

    assert after.notes == (
        "The download configuration was edited (storage.data.download, "
        "storage.huggingFace.preCacheRepos or their mount paths) after download Job "
        "train-download finished: nothing more is downloaded, and the workload runs on what "
        "that download fetched. A download runs once; delete and re-create the workload to "
        "download what the spec says now",
    )
    assert running.notes == (
        "The download configuration was edited (storage.data.download, "
        "storage.huggingFace.preCacheRepos or their mount paths) while download Job "
        "train-download runs: it reads its configuration once, when its pod starts, and may "
        "go on with the earlier one; delete the Job (kubectl delete job -n team-a "
        "train-download) and the next one is made from the edited spec",
    )
    # The Job keeps naming the configuration it ran with, so the edit is told at every
    # generation of the spec, not only the first.
    assert _download_job_of(after)["metadata"]["annotations"] == ran["metadata"]["annotations"]
    assert unedited.notes == ()
    # A Job made before the annotation existed says nothing of what it ran with: trusted.
    assert older_job.notes == ()
    assert "annotations" not in _download_job_of(older_job)["metadata"]
