"""Finding the stack's executables: a directory the user names (plain, or archives unpacked
once per archive version), else the built stack."""

from __future__ import annotations

import lzma
import os
from pathlib import Path

import pytest
from kaiwo_envtest import (
    ArchiveStamp,
    Assets,
    AssetsNotFoundError,
    Binaries,
    cache_key,
    default_cache_root,
    find_binaries,
    unpack,
)


def archives(directory: Path, *names: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        (directory / f"{name}.xz").write_bytes(lzma.compress(f"#!/bin/sh\necho {name}\n".encode()))
    return directory


def executables(directory: Path, *names: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        (directory / name).write_text(f"#!/bin/sh\necho {name}\n")
        (directory / name).chmod(0o755)
    return directory


def test_the_variable_names_a_directory_of_executables(tmp_path: Path) -> None:
    chosen = executables(tmp_path / "chosen", "etcd", "kube-apiserver")
    found = find_binaries({"KAIWO_ENVTEST_ASSETS": str(chosen)})
    assert found == Binaries(directory=chosen, origin=f"KAIWO_ENVTEST_ASSETS={chosen}")
    assert found.path("etcd") == chosen / "etcd"


def test_a_directory_of_archives_is_unpacked_into_the_cache(tmp_path: Path) -> None:
    chosen = archives(tmp_path / "chosen", "etcd", "kube-apiserver")
    environ = {"KAIWO_ENVTEST_ASSETS": str(chosen), "KAIWO_ENVTEST_CACHE": str(tmp_path / "c")}
    found = find_binaries(environ)
    assert found.directory.parent == tmp_path / "c"
    assert found.path("kube-apiserver").read_text() == "#!/bin/sh\necho kube-apiserver\n"


def test_a_variable_pointing_at_nothing_is_reported_not_passed_over(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    with pytest.raises(AssetsNotFoundError) as raised:
        find_binaries({"KAIWO_ENVTEST_ASSETS": str(empty)})
    assert str(raised.value) == (
        f"KAIWO_ENVTEST_ASSETS={empty} holds no etcd (or etcd.xz) "
        "or kube-apiserver (or kube-apiserver.xz)"
    )


def test_a_missing_program_is_named_with_where_it_was_looked_for(tmp_path: Path) -> None:
    chosen = executables(tmp_path / "chosen", "etcd", "kube-apiserver")
    found = find_binaries({"KAIWO_ENVTEST_ASSETS": str(chosen)})
    with pytest.raises(AssetsNotFoundError) as raised:
        found.path("kwok")
    assert str(raised.value) == f"KAIWO_ENVTEST_ASSETS={chosen} holds no kwok"


def test_the_cache_key_follows_size_and_modification_time() -> None:
    stamps = [
        ArchiveStamp(name="kube-apiserver.xz", size=30, mtime_ns=40),
        ArchiveStamp(name="etcd.xz", size=10, mtime_ns=20),
    ]
    # sha256 of "etcd.xz:10:20\nkube-apiserver.xz:30:40", first 16 hex digits.
    assert cache_key(stamps) == "00a88f6f914fb802"
    assert cache_key(reversed(stamps)) == "00a88f6f914fb802"
    touched = [stamps[0], ArchiveStamp(name="etcd.xz", size=10, mtime_ns=21)]
    assert cache_key(touched) == "df3573f5bac4d642"
    grown = [stamps[0], ArchiveStamp(name="etcd.xz", size=11, mtime_ns=20)]
    assert cache_key(grown) == "c6ff4299c54e3e00"


def test_the_cache_root_is_configurable() -> None:
    assert default_cache_root({"KAIWO_ENVTEST_CACHE": "/c"}) == Path("/c")
    assert default_cache_root({"XDG_CACHE_HOME": "/x"}) == Path("/x/kaiwo-envtest")
    assert default_cache_root({}) == Path.home() / ".cache" / "kaiwo-envtest"


def test_archives_are_unpacked_once_per_version(tmp_path: Path) -> None:
    assets = Assets(directory=archives(tmp_path / "assets", "etcd", "kube-apiserver"))
    first = unpack(assets, cache_root=tmp_path / "cache")
    assert (first / "etcd").read_text() == "#!/bin/sh\necho etcd\n"
    assert (first / "kube-apiserver").read_text() == "#!/bin/sh\necho kube-apiserver\n"
    assert os.access(first / "etcd", os.X_OK)

    (first / "etcd").write_text("kept")  # a second unpack of the same archives reuses the files
    assert unpack(assets, cache_root=tmp_path / "cache") == first
    assert (first / "etcd").read_text() == "kept"

    os.utime(assets.archive("etcd"), ns=(1, 1))  # a new archive: a new directory
    renewed = unpack(assets, cache_root=tmp_path / "cache")
    assert renewed != first
    assert (renewed / "etcd").read_text() == "#!/bin/sh\necho etcd\n"
    assert sorted(p.name for p in renewed.iterdir()) == ["etcd", "kube-apiserver"]


def test_every_archive_present_is_unpacked(tmp_path: Path) -> None:
    directory = archives(tmp_path / "assets", "etcd", "kube-apiserver", "kube-controller-manager")
    unpacked = unpack(Assets(directory=directory), cache_root=tmp_path / "cache")
    assert (
        (unpacked / "kube-controller-manager")
        .read_text()
        .endswith("echo kube-controller-manager\n")
    )
