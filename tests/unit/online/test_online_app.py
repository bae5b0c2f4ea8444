"""online.app: what start-up built is taken out of the garbage collector's generations."""

from __future__ import annotations

import gc

from online.app import freeze_startup_objects


def test_start_up_objects_are_frozen_out_of_the_collectors_walk() -> None:
    """An object that exists when the service freezes is no longer tracked by the collector's
    generations (gc.get_objects), and the frozen count grows; one made after is tracked."""
    before = [object()]
    try:
        freeze_startup_objects()
        after = [object()]
        assert gc.get_freeze_count() > 0
        tracked = {id(o) for o in gc.get_objects()}
        assert id(before) not in tracked
        assert id(after) in tracked
    finally:
        gc.unfreeze()
