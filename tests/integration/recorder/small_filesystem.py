"""A real small filesystem for tests that fill a disk: a tmpfs of a few MiB mounted on a
directory of the test's own, and a filler file that takes all of it but what the test leaves.

Mounting needs root (CI runs as root). Without it the test is skipped with the reason, or
fails under ``KAIWO_REQUIRE_REAL_APISERVER=1`` (CI), as the real-API-server tests do: a disk
that only pretends to be full proves nothing about what SQLite does on one.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

REQUIRE_VARIABLE = "KAIWO_REQUIRE_REAL_APISERVER"
_CHUNK = 64 * 1024


def _unavailable(reason: str) -> None:
    if os.environ.get(REQUIRE_VARIABLE) == "1":
        pytest.fail(f"{REQUIRE_VARIABLE}=1 but {reason}")
    pytest.skip(reason)


@contextlib.contextmanager
def small_filesystem(directory: Path, *, size_mib: int) -> Iterator[Path]:
    """``directory`` with a tmpfs of ``size_mib`` MiB mounted on it, unmounted afterwards."""
    mount = shutil.which("mount")
    if os.geteuid() != 0 or mount is None:
        _unavailable("a small filesystem needs root and mount(8) to mount a tmpfs")
    directory.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        [str(mount), "-t", "tmpfs", "-o", f"size={size_mib}m,mode=0700", "tmpfs", str(directory)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        _unavailable(f"mounting a tmpfs failed: {mounted.stderr.strip()}")
    try:
        yield directory
    finally:
        subprocess.run(
            [str(shutil.which("umount") or "umount"), "-l", str(directory)],
            capture_output=True,
            check=False,
        )


def fill(filler: Path, *, leave_bytes: int) -> int:
    """Write ``filler`` until the filesystem is full, then give back ``leave_bytes``; its size."""
    written = 0
    descriptor = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        while True:
            written += os.write(descriptor, b"\0" * _CHUNK)
    except OSError as error:
        if error.errno != errno.ENOSPC:
            raise
    finally:
        os.close(descriptor)
    size = max(0, written - leave_bytes)
    os.truncate(filler, size)
    return size
