"""Where the stack's executables come from.

By default, the build of ``tools/k8s`` (:mod:`kaiwo_envtest.stack`, ``make stack``). A user
with binaries of their own points ``KAIWO_ENVTEST_ASSETS`` at a directory of them: plain
executables (``etcd``, ``kube-apiserver``, ...), or ``<name>.xz`` archives, unpacked once into
a cache directory keyed by the archives' size and modification time.
"""

from __future__ import annotations

import hashlib
import lzma
import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from kaiwo_envtest.stack import StackBuildError, StackNotBuiltError, built_stack

ASSETS_VARIABLE: Final = "KAIWO_ENVTEST_ASSETS"
CACHE_VARIABLE: Final = "KAIWO_ENVTEST_CACHE"
REQUIRED: Final = ("etcd", "kube-apiserver")


class AssetsNotFoundError(FileNotFoundError):
    """No usable binaries; the message says where it looked and how to get them."""


@dataclass(frozen=True, slots=True)
class Binaries:
    """Executables by name in one directory, and where that directory came from."""

    directory: Path
    origin: str
    """For messages: ``KAIWO_ENVTEST_ASSETS=...`` or the built stack."""

    def has(self, name: str) -> bool:
        return (self.directory / name).is_file()

    def path(self, name: str) -> Path:
        """The executable ``name``; a missing one is an error naming both."""
        if not self.has(name):
            raise AssetsNotFoundError(f"{self.origin} holds no {name}")
        return self.directory / name


@dataclass(frozen=True, slots=True)
class Assets:
    """A directory holding ``etcd.xz`` and ``kube-apiserver.xz`` (and perhaps others)."""

    directory: Path

    def archive(self, name: str) -> Path:
        return self.directory / f"{name}.xz"

    def has(self, name: str) -> bool:
        return self.archive(name).is_file()

    def names(self) -> list[str]:
        return sorted(path.name.removesuffix(".xz") for path in self.directory.glob("*.xz"))


@dataclass(frozen=True, slots=True)
class ArchiveStamp:
    """What the cache key is made of: an archive's name, size and modification time."""

    name: str
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, path: Path) -> ArchiveStamp:
        stat = path.stat()
        return cls(name=path.name, size=stat.st_size, mtime_ns=stat.st_mtime_ns)


def find_binaries(environ: Mapping[str, str] | None = None) -> Binaries:
    """The directory named by ``KAIWO_ENVTEST_ASSETS``, else the built stack.

    A set variable is the only place looked at: pointing it somewhere wrong is a mistake to
    report, not a reason to use another directory.
    """
    environ = os.environ if environ is None else environ
    configured = environ.get(ASSETS_VARIABLE)
    if configured:
        return binaries_in(Path(configured), environ=environ)
    try:
        stack = built_stack()
    except (StackNotBuiltError, StackBuildError) as error:
        raise AssetsNotFoundError(f"{ASSETS_VARIABLE} is not set, and {error}") from error
    return Binaries(directory=stack.bin, origin=f"the built stack {stack.directory}")


def binaries_in(directory: Path, *, environ: Mapping[str, str] | None = None) -> Binaries:
    """The executables of ``directory``, or of its ``.xz`` archives once unpacked."""
    origin = f"{ASSETS_VARIABLE}={directory}"
    assets = Assets(directory=directory)
    if all(assets.has(name) for name in REQUIRED):
        unpacked = unpack(assets, cache_root=default_cache_root(environ))
        return Binaries(directory=unpacked, origin=origin)
    binaries = Binaries(directory=directory, origin=origin)
    missing = [name for name in REQUIRED if not binaries.has(name)]
    if missing:
        wanted = " or ".join(f"{name} (or {name}.xz)" for name in missing)
        raise AssetsNotFoundError(f"{origin} holds no {wanted}")
    return binaries


def cache_key(stamps: Iterable[ArchiveStamp]) -> str:
    """16 hex digits naming one set of archives; another size or mtime gives another key."""
    text = "\n".join(f"{s.name}:{s.size}:{s.mtime_ns}" for s in sorted(stamps, key=_by_name))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _by_name(stamp: ArchiveStamp) -> str:
    return stamp.name


def default_cache_root(environ: Mapping[str, str] | None = None) -> Path:
    """``KAIWO_ENVTEST_CACHE``, else ``$XDG_CACHE_HOME/kaiwo-envtest``, else
    ``~/.cache/kaiwo-envtest``."""
    environ = os.environ if environ is None else environ
    if environ.get(CACHE_VARIABLE):
        return Path(environ[CACHE_VARIABLE])
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "kaiwo-envtest"


def unpack(assets: Assets, *, cache_root: Path) -> Path:
    """Unpack every archive of ``assets`` into ``cache_root/<key>/`` unless already there."""
    names = assets.names()
    key = cache_key(ArchiveStamp.of(assets.archive(name)) for name in names)
    target = cache_root / key
    target.mkdir(parents=True, exist_ok=True)
    for name in names:
        _unpacked(assets.archive(name), target / name)
    return target


def _unpacked(archive: Path, executable: Path) -> Path:
    if executable.is_file():
        return executable
    # Into a temporary file beside the target, then renamed: a concurrent test session
    # unpacking the same archive never sees (or runs) half a binary.
    handle, partial = tempfile.mkstemp(dir=executable.parent, prefix=f".{executable.name}.")
    try:
        with os.fdopen(handle, "wb") as out, lzma.open(archive) as source:
            shutil.copyfileobj(source, out, length=1 << 20)
        Path(partial).chmod(0o755)
        Path(partial).replace(executable)
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise
    return executable
