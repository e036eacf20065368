"""The stack built from tools/k8s: its cache key, where it is looked for, what each program is
told of its version, and that the pins in tools/k8s are what the build expects."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from kaiwo_envtest import AssetsNotFoundError, StackNotBuiltError, built_stack, find_binaries
from kaiwo_envtest.stack import (
    MANIFESTS,
    PROGRAMS,
    StackBuildError,
    build_stack,
    built_before,
    default_cache_root,
    go_too_old,
    module_keys,
    required_go,
    stack_key,
    tools_directory,
    version_flags,
)

REPO_TOOLS = Path(__file__).resolve().parents[3] / "tools" / "k8s"
GO = "go1.26.8 linux amd64"


def tools_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "tools"
    shutil.copytree(REPO_TOOLS, copy)
    return copy


def completed(cache: Path, key: str) -> Path:
    directory = cache / key
    (directory / "bin").mkdir(parents=True)
    (directory / "stack.json").write_text(json.dumps({"versions": {"k8s.io/kubernetes": "v1"}}))
    return directory


def test_the_package_finds_the_checkouts_tools() -> None:
    assert tools_directory({}) == REPO_TOOLS
    assert tools_directory({"KAIWO_K8S_TOOLS": "/t"}) == Path("/t")


def test_the_cache_is_outside_the_checkout_and_configurable() -> None:
    assert default_cache_root({"KAIWO_K8S_CACHE": "/c"}) == Path("/c")
    assert default_cache_root({"XDG_CACHE_HOME": "/x"}) == Path("/x/kaiwo/k8s-stack")
    assert default_cache_root({}) == Path.home() / ".cache" / "kaiwo" / "k8s-stack"


def test_the_key_follows_every_pin_and_the_go_version(tmp_path: Path) -> None:
    tools = tools_copy(tmp_path)
    key = stack_key(tools, GO)
    assert re.fullmatch(r"[0-9a-f]{16}", key)
    assert stack_key(tools, GO) == key
    assert stack_key(tools, "go1.27.0 linux amd64") != key
    go_sum = tools / "kueue" / "go.sum"
    go_sum.write_text(go_sum.read_text() + "example.com/x v1.0.0 h1:abc=\n")
    assert stack_key(tools, GO) != key


def test_the_go_needed_is_the_newest_directive_of_the_modules(tmp_path: Path) -> None:
    for module, directive in (("a", "go 1.26.0"), ("b", "go 1.26.10"), ("c", "go 1.26.9")):
        (tmp_path / module).mkdir()
        (tmp_path / module / "go.mod").write_text(f"module example.com/{module}\n\n{directive}\n")
    assert required_go(tmp_path) == "1.26.10"  # by number, not by text


def test_a_go_older_than_the_modules_need_is_told() -> None:
    assert go_too_old("go1.26.6 linux amd64", "1.26.7")
    assert go_too_old("go1.25.9 linux amd64", "1.26.0")
    assert not go_too_old("go1.26.7 linux amd64", "1.26.7")
    assert not go_too_old("go1.27 linux amd64", "1.26.7")
    assert not go_too_old("devel go1.27-abcdef linux amd64", "1.26.7")


def test_a_build_with_too_old_a_go_stops_before_building(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GOTOOLCHAIN=local refuses only the module that asks for more, many minutes into a build.
    tools = tmp_path / "tools"
    for module, directive in (("kubernetes", "go 1.26.0"), ("prometheus", "go 1.26.7")):
        (tools / module).mkdir(parents=True)
        (tools / module / "go.mod").write_text(f"module example.com/{module}\n\n{directive}\n")
    monkeypatch.setattr("kaiwo_envtest.stack.go_version", lambda: "go1.26.6 linux amd64")
    cache = tmp_path / "cache"

    with pytest.raises(
        StackBuildError,
        match=r"^go1\.26\.6 is older than the stack's modules need: install Go 1\.26\.7 or newer",
    ):
        build_stack(tools=tools, cache_root=cache)
    assert not cache.exists()


def test_a_stack_not_built_names_the_command_that_builds_it(tmp_path: Path) -> None:
    with pytest.raises(StackNotBuiltError, match=r"run `make stack`"):
        built_stack(tools=REPO_TOOLS, cache_root=tmp_path, go=GO)


def test_a_half_built_stack_is_not_used(tmp_path: Path) -> None:
    (tmp_path / stack_key(REPO_TOOLS, GO) / "bin").mkdir(parents=True)
    with pytest.raises(StackNotBuiltError):
        built_stack(tools=REPO_TOOLS, cache_root=tmp_path, go=GO)


def test_a_finished_stack_is_found_by_its_key(tmp_path: Path) -> None:
    directory = completed(tmp_path, stack_key(REPO_TOOLS, GO))
    stack = built_stack(tools=REPO_TOOLS, cache_root=tmp_path, go=GO)
    assert stack.directory == directory
    assert stack.program("etcd") == directory / "bin" / "etcd"
    assert stack.versions() == {"k8s.io/kubernetes": "v1"}


@pytest.mark.skipif(shutil.which("go") is None, reason="the stack is built with Go")
def test_a_second_build_is_a_no_op(tmp_path: Path) -> None:
    from kaiwo_envtest.stack import go_version

    directory = completed(tmp_path, stack_key(REPO_TOOLS, go_version()))
    said: list[str] = []
    stack = build_stack(tools=REPO_TOOLS, cache_root=tmp_path, progress=said.append)
    assert stack.directory == directory
    assert said == [f"the stack is built: {directory}"]
    assert sorted(p.name for p in directory.iterdir()) == ["bin", "stack.json"]


def test_without_the_variable_the_built_stack_is_used_or_its_absence_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KAIWO_K8S_CACHE", str(tmp_path))
    monkeypatch.delenv("KAIWO_ENVTEST_ASSETS", raising=False)
    with pytest.raises(AssetsNotFoundError, match=r"^KAIWO_ENVTEST_ASSETS is not set, and the"):
        find_binaries()


def test_kubernetes_programs_report_their_release() -> None:
    apiserver = next(p for p in PROGRAMS if p.name == "kube-apiserver")
    flags = version_flags(apiserver, {"k8s.io/kubernetes": "v1.36.3"})
    pairs = dict(zip(flags[::2], flags[1::2], strict=True))
    assert set(pairs) == {"-X"}
    assert "k8s.io/component-base/version.gitVersion=v1.36.3" in flags
    assert "k8s.io/component-base/version.gitMajor=1" in flags
    assert "k8s.io/component-base/version.gitMinor=36" in flags
    etcd = next(p for p in PROGRAMS if p.name == "etcd")
    assert version_flags(etcd, {}) == []


def test_every_program_and_manifest_source_is_pinned_in_tools() -> None:
    for program in PROGRAMS:
        go_mod = (REPO_TOOLS / program.module / "go.mod").read_text()
        if program.package != ".":
            assert program.package in go_mod, f"{program.name}: no tool line in {program.module}"
        if program.version_of:
            assert re.search(rf"\n\s*{re.escape(program.version_of)} v", go_mod), program.name
    for manifests in MANIFESTS:
        go_mod = (REPO_TOOLS / manifests.within / "go.mod").read_text()
        assert re.search(rf"\n\s*{re.escape(manifests.module)} v", go_mod), manifests.module


def test_kubernetes_staging_modules_are_pinned_to_the_matching_release() -> None:
    go_mod = (REPO_TOOLS / "kubernetes" / "go.mod").read_text()
    release = re.search(r"k8s\.io/kubernetes v1\.(\d+)\.(\d+)", go_mod)
    assert release is not None
    replaced = re.findall(r"(k8s\.io/[\w-]+) => k8s\.io/[\w-]+ (v\S+)", go_mod)
    assert len(replaced) >= 30
    assert {version for _, version in replaced} == {f"v0.{release[1]}.{release[2]}"}


def test_a_new_pin_rebuilds_only_its_own_module(tmp_path: Path) -> None:
    """An earlier build's program is taken when it recorded the same key for the program's
    module; a module whose files changed (its key with them) is built again."""
    tools = tools_copy(tmp_path)
    cache = tmp_path / "cache"
    earlier = completed(cache, "earlier")
    (earlier / "bin" / "kwok").write_text("kwok built earlier")
    (earlier / "bin" / "kueue").write_text("kueue built earlier")
    keys = module_keys(tools, GO)
    record = {"versions": {}, "modules": keys}
    (earlier / "stack.json").write_text(json.dumps(record))
    kwok = next(p for p in PROGRAMS if p.name == "kwok")
    kueue = next(p for p in PROGRAMS if p.name == "kueue")
    assert built_before(kwok, keys["kwok"], cache) == earlier / "bin" / "kwok"

    go_sum = tools / "kueue" / "go.sum"
    go_sum.write_text(go_sum.read_text() + "example.com/x v1.0.0 h1:abc=\n")
    pinned_anew = module_keys(tools, GO)
    assert pinned_anew["kwok"] == keys["kwok"]
    assert built_before(kueue, pinned_anew["kueue"], cache) is None
    assert module_keys(tools, "go1.27.0 linux amd64")["kwok"] != keys["kwok"]
    # A build without the record (older than it) is never taken.
    (earlier / "stack.json").write_text(json.dumps({"versions": {}}))
    assert built_before(kwok, keys["kwok"], cache) is None
