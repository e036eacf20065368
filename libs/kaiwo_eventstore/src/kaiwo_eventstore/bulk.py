"""Working through many stored events without the cyclic garbage collector.

Decoding a read and replaying it allocate millions of small dicts and lists, which makes the
collector run often, and each full collection walks every object the process holds, the
events already decoded included. Measured on a 17,000-event history (CPU time): reads three
times and replay a quarter faster with it paused. JSON-decoded events hold no reference
cycles, so pausing it frees nothing later than reference counting does; the few cycles
other code makes meanwhile are collected once it runs again.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for the block; a collector paused before stays so."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
