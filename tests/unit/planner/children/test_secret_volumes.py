"""``secretVolumes``: the pod volumes and mounts, and entries that share a directory."""

from __future__ import annotations

from kaiwo_planner.domain.children.pod_additions import secret_volumes_and_mounts
from kaiwo_planner.domain.settings.workload_inputs import SecretVolumeInput


def test_entries_with_their_own_paths_get_a_volume_and_a_mount_each():
    entries = (
        SecretVolumeInput(
            name="token", secret_name="s3", key="token", sub_path="t.txt", mount_path="/s3"
        ),
        SecretVolumeInput(name="all", secret_name="db", mount_path="/db"),
        SecretVolumeInput(name="one", secret_name="tls", sub_path="tls.crt", mount_path="/c.crt"),
    )

    assert secret_volumes_and_mounts(entries) == (
        [
            {
                "name": "token",
                "secret": {"secretName": "s3", "items": [{"key": "token", "path": "t.txt"}]},
            },
            {"name": "all", "secret": {"secretName": "db"}},
            {"name": "one", "secret": {"secretName": "tls"}},
        ],
        [
            {"name": "token", "mountPath": "/s3"},
            {"name": "all", "mountPath": "/db"},
            {"name": "one", "mountPath": "/c.crt", "subPath": "tls.crt"},
        ],
    )


def test_entries_that_share_a_directory_become_one_projected_volume():
    # Before, a container's mounts are one per path, so only the last entry's file was
    # there: /etc/creds/user went missing without a word.
    entries = (
        SecretVolumeInput(
            name="user",
            secret_name="db-user",
            key="username",
            sub_path="user",
            mount_path="/etc/creds",
        ),
        SecretVolumeInput(name="other", secret_name="s3", key="token", mount_path="/s3"),
        SecretVolumeInput(
            name="password", secret_name="db-pass", key="password", mount_path="/etc/creds"
        ),
        SecretVolumeInput(name="ca", secret_name="ca-bundle", mount_path="/etc/creds"),
    )

    assert secret_volumes_and_mounts(entries) == (
        [
            {
                "name": "user",
                "projected": {
                    "sources": [
                        {
                            "secret": {
                                "name": "db-user",
                                "items": [{"key": "username", "path": "user"}],
                            }
                        },
                        {
                            "secret": {
                                "name": "db-pass",
                                "items": [{"key": "password", "path": "password"}],
                            }
                        },
                        {"secret": {"name": "ca-bundle"}},
                    ]
                },
            },
            {
                "name": "other",
                "secret": {"secretName": "s3", "items": [{"key": "token", "path": "token"}]},
            },
        ],
        [
            {"name": "user", "mountPath": "/etc/creds"},
            {"name": "other", "mountPath": "/s3"},
        ],
    )


def test_single_file_mounts_at_one_path_are_left_as_they_are():
    # Two files mounted at the same file path cannot both be there; nothing is merged.
    entries = (
        SecretVolumeInput(name="a", secret_name="x", sub_path="a", mount_path="/f"),
        SecretVolumeInput(name="b", secret_name="y", key="k", mount_path="/f"),
    )

    volumes, mounts = secret_volumes_and_mounts(entries)

    assert [v["name"] for v in volumes] == ["a", "b"]
    assert mounts == [
        {"name": "a", "mountPath": "/f", "subPath": "a"},
        {"name": "b", "mountPath": "/f"},
    ]
