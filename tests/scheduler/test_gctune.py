"""The long-running process's collector settings: applied inside, restored after."""

from __future__ import annotations

import gc

import pytest

from dra_affinity.scheduler.gctune import FULL_EVERY, YOUNG_THRESHOLD, tuned_gc


def test_tuned_gc_freezes_what_exists_and_restores_the_thresholds() -> None:
    before = gc.get_threshold()
    kept = [[i] for i in range(1000)]  # containers alive before entering
    try:
        with tuned_gc():
            assert gc.get_threshold() == (YOUNG_THRESHOLD, before[1], FULL_EVERY)
            assert gc.get_freeze_count() >= len(kept)
            assert gc.is_tracked(kept[0])
        assert gc.get_threshold() == before
        assert gc.get_freeze_count() >= len(kept)  # frozen stays frozen
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)


def test_tuned_gc_restores_the_thresholds_when_the_body_raises() -> None:
    before = gc.get_threshold()
    try:
        with pytest.raises(RuntimeError), tuned_gc():
            raise RuntimeError("boom")
        assert gc.get_threshold() == before
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
