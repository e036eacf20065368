"""What ``python -m kaiwo_recorder`` does to its own process before recording."""

from __future__ import annotations

import gc

from kaiwo_recorder.__main__ import freeze_startup_objects


def test_start_up_objects_are_frozen_out_of_full_collections() -> None:
    gc.unfreeze()
    try:
        freeze_startup_objects()

        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
