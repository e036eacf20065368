"""Where the control plane's binaries come from: ``<name>.xz`` archives in an assets directory,
unpacked once into a cache directory keyed by the archives' size and modification time."""

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

ASSETS_VARIABLE: Final = "KAIWO_ENVTEST_ASSETS"
CACHE_VARIABLE: Final = "KAIWO_ENVTEST_CACHE"
REQUIRED: Final = ("etcd", "kube-apiserver")
CONTROLLER_MANAGER: Final = "kube-controller-manager"


class AssetsNotFoundError(FileNotFoundError):
    """No usable assets directory; the message says where it looked."""


@dataclass(frozen=True, slots=True)
class Assets:
    """A directory holding ``etcd.xz`` and ``kube-apiserver.xz`` (and perhaps
    ``kube-controller-manager.xz``)."""

    directory: Path

    def archive(self, name: str) -> Path:
        return self.directory / f"{name}.xz"

    def has(self, name: str) -> bool:
        return self.archive(name).is_file()


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


@dataclass(frozen=True, slots=True)
class Binaries:
    """Paths of the unpacked executables."""

    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path | None


def find_assets(*, fallback: Path | None, environ: Mapping[str, str] | None = None) -> Assets:
    """The directory named by ``KAIWO_ENVTEST_ASSETS``, else ``fallback``.

    A set variable is the only place looked at: pointing it somewhere wrong is a mistake to
    report, not a reason to use another directory.
    """
    environ = os.environ if environ is None else environ
    configured = environ.get(ASSETS_VARIABLE)
    if configured:
        return _usable(Path(configured), f"{ASSETS_VARIABLE}={configured}")
    if fallback is None:
        raise AssetsNotFoundError(f"{ASSETS_VARIABLE} is not set")
    return _usable(fallback, f"{ASSETS_VARIABLE} is not set and {fallback}")


def _usable(directory: Path, described: str) -> Assets:
    assets = Assets(directory=directory)
    missing = [f"{name}.xz" for name in REQUIRED if not assets.has(name)]
    if missing:
        raise AssetsNotFoundError(f"{described} holds no {' or '.join(missing)}")
    return assets


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


def unpack(assets: Assets, *, cache_root: Path) -> Binaries:
    """Unpack every archive present into ``cache_root/<key>/`` unless already there."""
    names = [*REQUIRED, *([CONTROLLER_MANAGER] if assets.has(CONTROLLER_MANAGER) else [])]
    key = cache_key(ArchiveStamp.of(assets.archive(name)) for name in names)
    target = cache_root / key
    target.mkdir(parents=True, exist_ok=True)
    paths = {name: _unpacked(assets.archive(name), target / name) for name in names}
    return Binaries(
        etcd=paths["etcd"],
        kube_apiserver=paths["kube-apiserver"],
        kube_controller_manager=paths.get(CONTROLLER_MANAGER),
    )


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
