"""Finding the control plane's archives and unpacking them once per archive version."""

from __future__ import annotations

import lzma
import os
from pathlib import Path

import pytest
from kaiwo_envtest import (
    ArchiveStamp,
    Assets,
    AssetsNotFoundError,
    cache_key,
    default_cache_root,
    find_assets,
    unpack,
)


def archives(directory: Path, *names: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        (directory / f"{name}.xz").write_bytes(lzma.compress(f"#!/bin/sh\necho {name}\n".encode()))
    return directory


def test_the_variable_names_the_assets(tmp_path: Path) -> None:
    chosen = archives(tmp_path / "chosen", "etcd", "kube-apiserver")
    fallback = archives(tmp_path / "fallback", "etcd", "kube-apiserver")
    found = find_assets(fallback=fallback, environ={"KAIWO_ENVTEST_ASSETS": str(chosen)})
    assert found == Assets(directory=chosen)


def test_without_the_variable_the_fallback_is_used(tmp_path: Path) -> None:
    fallback = archives(tmp_path / "fallback", "etcd", "kube-apiserver")
    assert find_assets(fallback=fallback, environ={}) == Assets(directory=fallback)


def test_a_variable_pointing_at_nothing_is_reported_not_passed_over(tmp_path: Path) -> None:
    fallback = archives(tmp_path / "fallback", "etcd", "kube-apiserver")
    empty = tmp_path / "empty"
    with pytest.raises(AssetsNotFoundError) as raised:
        find_assets(fallback=fallback, environ={"KAIWO_ENVTEST_ASSETS": str(empty)})
    assert str(raised.value) == (
        f"KAIWO_ENVTEST_ASSETS={empty} holds no etcd.xz or kube-apiserver.xz"
    )


def test_a_fallback_without_the_api_server_is_reported(tmp_path: Path) -> None:
    fallback = archives(tmp_path / "fallback", "etcd")
    with pytest.raises(AssetsNotFoundError) as raised:
        find_assets(fallback=fallback, environ={})
    assert str(raised.value) == (
        f"KAIWO_ENVTEST_ASSETS is not set and {fallback} holds no kube-apiserver.xz"
    )


def test_neither_variable_nor_fallback() -> None:
    with pytest.raises(AssetsNotFoundError, match=r"^KAIWO_ENVTEST_ASSETS is not set$"):
        find_assets(fallback=None, environ={})


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
    assert first.etcd.read_text() == "#!/bin/sh\necho etcd\n"
    assert first.kube_apiserver.read_text() == "#!/bin/sh\necho kube-apiserver\n"
    assert first.kube_controller_manager is None
    assert os.access(first.etcd, os.X_OK)

    first.etcd.write_text("kept")  # a second unpack of the same archives reuses the files
    assert unpack(assets, cache_root=tmp_path / "cache") == first
    assert first.etcd.read_text() == "kept"

    os.utime(assets.archive("etcd"), ns=(1, 1))  # a new archive: a new directory
    renewed = unpack(assets, cache_root=tmp_path / "cache")
    assert renewed.etcd.parent != first.etcd.parent
    assert renewed.etcd.read_text() == "#!/bin/sh\necho etcd\n"
    assert sorted(p.name for p in renewed.etcd.parent.iterdir()) == ["etcd", "kube-apiserver"]


def test_the_controller_manager_is_unpacked_when_present(tmp_path: Path) -> None:
    directory = archives(tmp_path / "assets", "etcd", "kube-apiserver", "kube-controller-manager")
    binaries = unpack(Assets(directory=directory), cache_root=tmp_path / "cache")
    assert binaries.kube_controller_manager is not None
    assert binaries.kube_controller_manager.name == "kube-controller-manager"
    assert binaries.kube_controller_manager.read_text().endswith("echo kube-controller-manager\n")
