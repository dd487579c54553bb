"""AllocatedState's lock bookkeeping: first share locks, last share clears, and Locked
states are shared between devices locked alike without ever mixing them up."""

from __future__ import annotations

import pytest

from dra_affinity.structured import state as state_mod
from dra_affinity.structured.state import CLEAN, AffinityStatus, AllocatedState, Share

A = (("subnet", "a"),)
B = (("subnet", "b"),)


def share(claim: str, keys: tuple[tuple[str, str], ...] | None) -> Share:
    return Share(claim, "nic", None, (), keys, gated=True)


def test_devices_locked_alike_share_one_state_and_clear_on_drain() -> None:
    st = AllocatedState()
    st.add("d1", share("ns/c1", A), exclusive=False)
    st.add("d2", share("ns/c2", tuple([("subnet", "a")])), exclusive=False)  # equal, not identical
    st.add("d3", share("ns/c3", B), exclusive=False)
    assert st.affinity("d1") is st.affinity("d2")
    assert st.affinity("d1").locked_affinity == A and st.affinity("d3").locked_affinity == B
    assert st.affinity("d1") is not st.affinity("d3")
    st.remove("d1", "ns/c1")
    assert st.affinity("d1") is CLEAN and st.affinity("d2").locked_affinity == A
    # re-locking a drained device to other keys is a lock change
    before = st.lock_version.get("d1", 0)
    st.add("d1", share("ns/c4", B), exclusive=False)
    assert st.affinity("d1").locked_affinity == B and st.lock_version["d1"] == before + 1


def test_a_second_share_with_other_keys_fails_closed() -> None:
    st = AllocatedState()
    st.add("d1", share("ns/c1", A), exclusive=False)
    st.add("d1", share("ns/c2", B), exclusive=False)
    assert st.affinity("d1").status is AffinityStatus.UNRECONSTRUCTABLE
    # ... and the shared Locked state of A is untouched
    st.add("d2", share("ns/c3", A), exclusive=False)
    assert st.affinity("d2").status is AffinityStatus.LOCKED and st.affinity("d2").locked_affinity == A


def test_the_shared_states_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(state_mod, "LOCKED_STATES_MAX", 4)
    st = AllocatedState()
    for i in range(10):
        st.add(f"d{i}", share(f"ns/c{i}", (("subnet", f"v{i}"),)), exclusive=False)
    assert [st.affinity(f"d{i}").locked_affinity for i in range(10)] == \
        [(("subnet", f"v{i}"),) for i in range(10)]
    assert len(st._locked) <= 4
