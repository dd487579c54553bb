"""``dra-affinity locks --kubeconfig``: every device's lock state, rebuilt from the cluster.

The same code a scheduler runs on start (``Scheduler.start``: AffinityStates
rebuilt from allocated claims and the pools' extractors) over one list of each
kind, without a running scheduler and without writing anything. What it
prints is what a scheduler starting now would enforce.
"""

from __future__ import annotations

from typing import Any

from dra_affinity.features import Features
from dra_affinity.observe.events import Recorder
from dra_affinity.scheduler.locks import listed_devices
from dra_affinity.scheduler.scheduler import Scheduler
from dra_affinity.structured.affinity import AffinityStatus

from .api import Api
from .informer import REPLACE, SYNCED, Change, Reflector
from .view import WATCHED_KINDS, KubeView

__all__ = ["cluster_locks", "listed_view", "lock_rows", "started_scheduler", "view_locks"]


def listed_view(api: Api) -> KubeView:
    """A view filled by one (paginated) list of each watched kind."""
    view = KubeView(api)
    for kind in WATCHED_KINDS:
        sink: Any = _Sink()
        Reflector(api, kind, sink).list_once()
        for ch in sink.items:
            view.apply(ch)
    return view


class _Sink:
    def __init__(self) -> None:
        self.items: list[Change] = []

    def put(self, ch: Change) -> None:
        if ch.type in (REPLACE, SYNCED):
            self.items.append(ch)


def lock_rows(scheduler: Scheduler) -> list[dict[str, Any]]:
    """The devices :func:`~dra_affinity.scheduler.locks.listed_devices` names: status,
    lock, holders (and why, when Unreconstructable)."""
    state = scheduler.state
    rows: list[dict[str, Any]] = []
    for did in listed_devices(scheduler):
        st = state.affinity(did)
        shares = state.shares(did)
        row: dict[str, Any] = {
            "device": did, "status": st.status.label,
            "lock": st.lock_dict() if st.status is AffinityStatus.LOCKED else {},
            "claims": sorted({sh.claim for sh in shares}),
            "holders": [{"claim": sh.claim, "request": sh.request, "tentative": sh.tentative,
                         "keys": dict(sh.keys) if sh.keys is not None else None} for sh in shares]}
        if st.status is AffinityStatus.UNRECONSTRUCTABLE and st.reason:
            row["reason"] = st.reason
        rows.append(row)
    return rows


def cluster_locks(api: Api, features: Features | None = None) -> tuple[list[dict[str, Any]], Recorder]:
    """Rebuild the locks from the cluster as a starting scheduler would; nothing is written."""
    return view_locks(listed_view(api), features)


def view_locks(view: KubeView, features: Features | None = None
               ) -> tuple[list[dict[str, Any]], Recorder]:
    """:func:`lock_rows` of a scheduler started on ``view`` (filled, never written to)."""
    sched, recorder = started_scheduler(view, features)
    return lock_rows(sched), recorder


def started_scheduler(view: KubeView, features: Features | None = None
                      ) -> tuple[Scheduler, Recorder]:
    """A scheduler started on ``view`` as a live one starts (state rebuilt from the
    allocated claims), for questions only: nothing schedules through it."""
    recorder = Recorder()
    sched = Scheduler(view, features or Features(), recorder=recorder)
    sched.start()
    return sched, recorder
