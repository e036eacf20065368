"""The real Kubernetes stack of the tests, built by the project from pinned Go modules.

``tools/k8s/`` holds one small Go module per upstream project (Kubernetes, etcd, Kueue,
KubeRay, the AppWrapper controller, kwok, Prometheus, and the NATS command line ``nats`` that
docs/events.md shows subscribers): each pins its project and builds its programs at exactly
the dependency versions that project is released with, which one shared module could not.
:func:`build_stack` compiles every program with the machine's Go, from the Go module proxy
only, into ``<cache>/<key>/bin`` and copies the third-party CRDs and Kueue's webhook
configuration out of the same module sources into ``<cache>/<key>/manifests``. The key is a
hash of every file in ``tools/k8s`` and the Go version, so a second build is a no-op, a new pin
is a new directory, and every clone on the machine shares one build. Each build records a key
per module directory (:func:`module_keys`), and a new build copies the programs of modules an
earlier one built from the same files (:func:`built_before`): a new pin rebuilds its own
module's programs only.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

TOOLS_VARIABLE: Final = "KAIWO_K8S_TOOLS"
CACHE_VARIABLE: Final = "KAIWO_K8S_CACHE"
RECIPE: Final = "3"
"""Bumped when the way programs are built changes (flags, layout): another key."""
COMPLETE: Final = "stack.json"


class StackNotBuiltError(FileNotFoundError):
    """The stack for these pins has not been built; the message says how to build it."""


class StackBuildError(RuntimeError):
    """A program did not build; the message carries the end of the Go output."""


@dataclass(frozen=True, slots=True)
class Program:
    """One executable: its Go package in one of ``tools/k8s``'s modules."""

    name: str
    module: str
    """The directory under ``tools/k8s`` whose ``go.mod`` pins it."""
    package: str
    version_of: str = ""
    """The module whose pinned version the binary reports (``-X`` flags below)."""
    version_flags: tuple[str, ...] = ()
    """``-X`` assignments, with ``{version}``, ``{major}`` and ``{minor}`` filled in."""
    tags: tuple[str, ...] = ()


_KUBE_VERSION = (
    "k8s.io/component-base/version.gitVersion={version}",
    "k8s.io/component-base/version.gitMajor={major}",
    "k8s.io/component-base/version.gitMinor={minor}",
    "k8s.io/component-base/version.gitTreeState=clean",
    "k8s.io/client-go/pkg/version.gitVersion={version}",
    "k8s.io/client-go/pkg/version.gitMajor={major}",
    "k8s.io/client-go/pkg/version.gitMinor={minor}",
)


def _kubernetes(name: str) -> Program:
    return Program(
        name=name,
        module="kubernetes",
        package=f"k8s.io/kubernetes/cmd/{name}",
        version_of="k8s.io/kubernetes",
        version_flags=_KUBE_VERSION,
    )


PROGRAMS: Final = (
    _kubernetes("kube-apiserver"),
    _kubernetes("kube-controller-manager"),
    _kubernetes("kube-scheduler"),
    _kubernetes("kubectl"),
    Program(name="etcd", module="etcd", package="."),
    Program(
        name="kueue",
        module="kueue",
        package="sigs.k8s.io/kueue/cmd/kueue",
        version_of="sigs.k8s.io/kueue",
        version_flags=("sigs.k8s.io/kueue/pkg/version.GitVersion={version}",),
    ),
    Program(
        name="kuberay", module="kuberay", package="github.com/ray-project/kuberay/ray-operator"
    ),
    Program(name="kwok", module="kwok", package="sigs.k8s.io/kwok/cmd/kwok"),
    # The module's own command (main.go) around upstream's controller packages.
    Program(name="appwrapper", module="appwrapper", package="."),
    Program(
        name="prometheus",
        module="prometheus",
        package="github.com/prometheus/prometheus/cmd/prometheus",
        # Only static and file service discovery: the tests scrape loopback targets, and the
        # cloud providers' SDKs would double the build.
        tags=("remove_all_sd",),
    ),
    Program(name="nats", module="natscli", package="github.com/nats-io/natscli/nats"),
)


@dataclass(frozen=True, slots=True)
class Manifests:
    """Files copied out of one pinned module's source, by glob under its root."""

    module: str
    """The Go module, as its ``go.mod`` names it."""
    within: str
    """The directory under ``tools/k8s`` whose ``go.mod`` pins its version."""
    patterns: tuple[str, ...]
    into: str
    """The subdirectory of ``manifests/`` they go to."""


MANIFESTS: Final = (
    Manifests("sigs.k8s.io/kueue", "kueue", ("config/components/crd/bases/*.yaml",), "crds"),
    Manifests(
        "github.com/ray-project/kuberay/ray-operator",
        "kuberay",
        ("config/crd/bases/*.yaml",),
        "crds",
    ),
    Manifests(
        "github.com/project-codeflare/appwrapper",
        "appwrapper",
        ("config/crd/bases/*.yaml",),
        "crds",
    ),
    Manifests(
        "github.com/project-codeflare/appwrapper",
        "appwrapper",
        ("config/webhook/manifests.yaml",),
        "appwrapper",
    ),
    Manifests(
        "sigs.k8s.io/gateway-api",
        "kueue",
        ("config/crd/standard/gateway.networking.k8s.io_*.yaml",),
        "crds",
    ),
    Manifests(
        "sigs.k8s.io/kueue",
        "kueue",
        ("config/components/webhook/manifests.yaml", "config/components/rbac/role.yaml"),
        "kueue",
    ),
)
NOT_CRDS: Final = re.compile(r"_vap_")
"""Gateway API's standard channel ships a ValidatingAdmissionPolicy beside its CRDs."""


@dataclass(frozen=True, slots=True)
class BuiltStack:
    """A finished build: the executables and the manifests from the modules' sources."""

    directory: Path

    @property
    def bin(self) -> Path:
        return self.directory / "bin"

    @property
    def manifests(self) -> Path:
        return self.directory / "manifests"

    @property
    def crds(self) -> Path:
        return self.manifests / "crds"

    def program(self, name: str) -> Path:
        return self.bin / name

    def versions(self) -> dict[str, str]:
        """The pinned module versions the stack was built from."""
        recorded = json.loads((self.directory / COMPLETE).read_text())
        versions: dict[str, str] = recorded["versions"]
        return versions


def tools_directory(environ: Mapping[str, str] | None = None) -> Path:
    """``KAIWO_K8S_TOOLS``, else ``tools/k8s`` of the checkout this package is installed from
    (the workspace installs it editable)."""
    environ = os.environ if environ is None else environ
    if environ.get(TOOLS_VARIABLE):
        return Path(environ[TOOLS_VARIABLE])
    return Path(__file__).resolve().parents[4] / "tools" / "k8s"


def default_cache_root(environ: Mapping[str, str] | None = None) -> Path:
    """``KAIWO_K8S_CACHE``, else ``$XDG_CACHE_HOME/kaiwo/k8s-stack``, else
    ``~/.cache/kaiwo/k8s-stack``: outside the checkout, shared by its clones."""
    environ = os.environ if environ is None else environ
    if environ.get(CACHE_VARIABLE):
        return Path(environ[CACHE_VARIABLE])
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kaiwo" / "k8s-stack"


def go_version() -> str:
    """``go env GOVERSION GOOS GOARCH`` on one line; a missing Go is said plainly."""
    go = shutil.which("go")
    if go is None:
        raise StackBuildError(
            f"go is not on PATH: the stack is built with Go {required_go(tools_directory())} "
            "or newer"
        )
    answer = subprocess.run(  # noqa: S603 - the machine's go, fixed arguments
        [go, "env", "GOVERSION", "GOOS", "GOARCH"], capture_output=True, text=True, check=True
    )
    return " ".join(answer.stdout.split())


_GO_DIRECTIVE: Final = re.compile(r"^go (\d+(?:\.\d+)*)\s*$", re.MULTILINE)
_GO_RELEASE: Final = re.compile(r"^go(\d+(?:\.\d+)*)")


def required_go(tools: Path) -> str:
    """The newest ``go`` directive of the modules under ``tools``: the oldest Go that builds
    every one of them (the stack builds with ``GOTOOLCHAIN=local``, so no newer toolchain is
    fetched for a module that asks for one)."""
    found = (_GO_DIRECTIVE.search(module.read_text()) for module in sorted(tools.glob("*/go.mod")))
    versions = [match.group(1) for match in found if match is not None]
    return max(versions, key=_release, default="1.26")


def go_too_old(go: str, required: str) -> bool:
    """Whether the Go of ``go`` (:func:`go_version`'s line) is older than ``required``; a
    version that names no release (a development build) is let through."""
    release = _GO_RELEASE.match(go)
    return release is not None and _release(release.group(1)) < _release(required)


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def stack_key(tools: Path, go: str) -> str:
    """16 hex digits naming the build of ``tools`` with Go ``go``: any file under ``tools``
    (a pin, a ``go.sum`` line, the etcd main) or the Go version changes it."""
    return _digest(tools, go)


def module_keys(tools: Path, go: str) -> dict[str, str]:
    """Per module directory of ``tools``, what its programs are built from (its files and Go):
    a program whose module's key an earlier build recorded is that build's program."""
    return {d.name: _digest(d, go) for d in sorted(tools.iterdir()) if (d / "go.mod").is_file()}


def _digest(files: Path, go: str) -> str:
    digest = hashlib.sha256(f"recipe {RECIPE}\n{go}\n".encode())
    for path in sorted(p for p in files.rglob("*") if p.is_file()):
        digest.update(f"{path.relative_to(files)}\n".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def built_before(program: Program, module_key: str, cache_root: Path) -> Path | None:
    """``program`` as an earlier finished build in ``cache_root`` made it from the same module
    key, if one did: a new pin elsewhere in ``tools`` then rebuilds only its own module."""
    for record in sorted(cache_root.glob(f"*/{COMPLETE}")):
        try:
            modules = json.loads(record.read_text()).get("modules") or {}
        except (OSError, ValueError):
            continue
        found = record.parent / "bin" / program.name
        if modules.get(program.module) == module_key and found.is_file():
            return found
    return None


def built_stack(
    *, tools: Path | None = None, cache_root: Path | None = None, go: str | None = None
) -> BuiltStack:
    """The finished build for the current pins, without building; else
    :class:`StackNotBuiltError` naming the command that builds it."""
    tools = tools or tools_directory()
    if not (tools / "kubernetes" / "go.mod").is_file():
        raise StackNotBuiltError(f"{tools} holds no Go modules of the stack")
    directory = (cache_root or default_cache_root()) / stack_key(tools, go or go_version())
    if not (directory / COMPLETE).is_file():
        raise StackNotBuiltError(
            f"the Kubernetes stack for {tools} is not built ({directory} is missing): "
            "run `make stack` (about 25 minutes the first time on 2 cores)"
        )
    return BuiltStack(directory)


Progress = Callable[[str], None]


def build_stack(
    *,
    tools: Path | None = None,
    cache_root: Path | None = None,
    progress: Progress = lambda _: None,
) -> BuiltStack:
    """Build every program and copy every manifest unless the cache already has them.

    Concurrent builds of the same key wait for each other (a lock file); each program is
    written beside its final path and renamed, so nothing half-built is ever run.
    """
    tools = tools or tools_directory()
    go = go_version()
    root = cache_root or default_cache_root()
    directory = root / stack_key(tools, go)
    stack = BuiltStack(directory)
    if (directory / COMPLETE).is_file():
        progress(f"the stack is built: {directory}")
        return stack
    required = required_go(tools)
    if go_too_old(go, required):
        # Said before the build: GOTOOLCHAIN=local would refuse the module asking for it
        # only when its turn comes, many minutes in.
        raise StackBuildError(
            f"{go.split()[0]} is older than the stack's modules need: install Go {required} "
            "or newer and run `make stack` again"
        )
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root / f"{directory.name}.lock"):
        if (directory / COMPLETE).is_file():
            return stack
        started = time.monotonic()
        versions = {module: _pinned_version(tools / within, module) for module, within in _pins()}
        modules = module_keys(tools, go)
        for program in PROGRAMS:
            earlier = built_before(program, modules[program.module], root)
            if earlier is not None:
                _copy_program(earlier, stack.program(program.name), progress)
            else:
                _build(program, tools, stack, versions, progress)
        for manifests in MANIFESTS:
            _copy_manifests(manifests, tools, stack)
        record = {
            "go": go,
            "versions": versions,
            "modules": modules,
            "seconds": round(time.monotonic() - started, 1),
            "bytes": {p.name: stack.program(p.name).stat().st_size for p in PROGRAMS},
        }
        (directory / COMPLETE).write_text(json.dumps(record, indent=2) + "\n")
    progress(f"built in {record['seconds']:.0f} s: {directory}")
    return stack


def _pins() -> list[tuple[str, str]]:
    pins = {(p.version_of, p.module) for p in PROGRAMS if p.version_of}
    pins |= {(m.module, m.within) for m in MANIFESTS}
    return sorted(pins)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _go_environment() -> dict[str, str]:
    # Modules come from the proxy and are checked against go.sum; nothing in go.mod may change.
    return {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly", "GOTOOLCHAIN": "local"}


def _pinned_version(module_dir: Path, module: str) -> str:
    answer = _go(["list", "-m", "-f", "{{.Version}}", module], module_dir)
    return answer.strip()


def _module_source(module_dir: Path, module: str) -> Path:
    answer = _go(["mod", "download", "-json", module], module_dir)
    return Path(json.loads(answer)["Dir"])


def _go(arguments: list[str], directory: Path) -> str:
    answer = subprocess.run(  # noqa: S603 - the machine's go, our arguments
        ["go", *arguments],  # noqa: S607
        cwd=directory,
        env=_go_environment(),
        capture_output=True,
        text=True,
        check=False,
    )
    if answer.returncode != 0:
        tail = "\n".join(answer.stderr.splitlines()[-20:])
        raise StackBuildError(f"go {' '.join(arguments)} in {directory} failed:\n{tail}")
    return answer.stdout


def version_flags(program: Program, versions: Mapping[str, str]) -> list[str]:
    """``-X`` linker flags telling the binary its release (``v1.36.3`` → major 1, minor 36)."""
    if not program.version_of:
        return []
    version = versions[program.version_of]
    major, minor = version.removeprefix("v").split(".")[:2]
    filled = (f.format(version=version, major=major, minor=minor) for f in program.version_flags)
    return [item for flag in filled for item in ("-X", flag)]


def _build(
    program: Program,
    tools: Path,
    stack: BuiltStack,
    versions: Mapping[str, str],
    progress: Progress,
) -> None:
    target = stack.program(program.name)
    if target.is_file():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    progress(f"building {program.name} ({program.package}) ...")
    started = time.monotonic()
    handle, partial = tempfile.mkstemp(dir=target.parent, prefix=f".{program.name}.")
    os.close(handle)
    ldflags = " ".join(["-s", "-w", *version_flags(program, versions)])
    arguments = ["build", "-trimpath", f"-ldflags={ldflags}", "-o", partial]
    if program.tags:
        arguments.append(f"-tags={','.join(program.tags)}")
    try:
        _go([*arguments, program.package], tools / program.module)
        Path(partial).chmod(0o755)
        Path(partial).replace(target)
    finally:
        Path(partial).unlink(missing_ok=True)
    size = target.stat().st_size / 1e6
    progress(f"built {program.name} in {time.monotonic() - started:.0f} s ({size:.0f} MB)")


def _copy_program(earlier: Path, target: Path, progress: Progress) -> None:
    """``earlier`` copied beside ``target`` and renamed, so nothing half-copied is ever run."""
    if target.is_file():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, partial = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    os.close(handle)
    try:
        shutil.copy2(earlier, partial)
        Path(partial).replace(target)
    finally:
        Path(partial).unlink(missing_ok=True)
    progress(f"{target.name}: the same module as {earlier.parent.parent.name}'s build, copied")


def _copy_manifests(manifests: Manifests, tools: Path, stack: BuiltStack) -> None:
    source = _module_source(tools / manifests.within, manifests.module)
    target = stack.manifests / manifests.into
    target.mkdir(parents=True, exist_ok=True)
    found = [
        path
        for pattern in manifests.patterns
        for path in sorted(source.glob(pattern))
        if not NOT_CRDS.search(path.name)
    ]
    if not found:
        raise StackBuildError(f"{manifests.module} at {source} has no {manifests.patterns}")
    for path in found:
        name = path.name if manifests.into == "crds" else f"{path.parent.name}-{path.name}"
        shutil.copyfile(path, target / name)
