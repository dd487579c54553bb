"""The binding cycle: PreBind, Bind, and what follows either (commit or Unreserve).

As in kube-scheduler's DynamicResources plugin, the cache is *assumed after the
API call*: Reserve records a cycle's shares as tentative (and marks its claims
in flight, so the cluster's echo of its own writes is not accounted twice);
only when PreBind's claim writes and Bind's binding have all been stored are the
shares committed. Each step is a function of its own over one
:class:`Binding`, so that a caller can run them apart (binding off the
scheduling thread).

When a step fails, :func:`unreserve` takes out exactly this cycle's tentative
shares, and undoes on the server exactly what this cycle's writes stored: the
pod's reservation, and an allocation this cycle made, never one another writer
made (the view compares the server's copy with what this cycle wrote). The
cache then holds each claim this cycle touched *as the server has it*:

* when the undo succeeded, as the undo left it;
* when the outcome is unknown (an answer was lost and the server could not be
  read back), as this cycle wrote it: an allocation that may exist is accounted,
  so its device cannot be locked to other keys meanwhile (fail closed). Such a
  claim is *unresolved* until a read of the server settles it
  (:meth:`Binding`'s scheduler retries that read before each attempt);
* when Bind's own answer was lost, nothing is undone at all: the pod may be
  bound, and clearing its claims would leave a bound pod without its devices.
  Its claims stay allocated and reserved for it, and the pod's next attempt
  (if it was not bound) uses them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dra_affinity.api.keys import key_of
from dra_affinity.api.resource import ResourceClaim
from dra_affinity.observe.metrics import COMPATIBLE_REUSE, SchedulerMetrics

from .cache import SchedulerCache
from .cycle import CycleState
from .reconstruct import Reconstructor
from .reserve import ClaimWrite, result_tuples, unreserve_shares
from .view import ClusterView, WriteError

__all__ = ["Binding", "Written", "bind", "commit", "prebind", "unreserve"]


@dataclass(frozen=True)
class Written:
    """One claim PreBind wrote (or may have written: ``stored`` is None then)."""

    asked: ResourceClaim  # the claim as PreBind asked it stored
    stored: ResourceClaim | None  # as the server stored it; None: the answer was lost
    allocated: bool  # this cycle set the allocation (not only the reservation)

    @property
    def key(self) -> str:
        return key_of(self.asked)


@dataclass
class Binding:
    """One pod's binding cycle, from Reserve to commit or Unreserve."""

    cycle: CycleState
    node: str
    # Every claim of the pod as PreBind writes it (plain; typed when written): reserved for
    # the pod, and allocated where this cycle allocates it. ``changes`` are the keys of
    # those that need a write.
    claims: list[ClaimWrite]
    changes: frozenset[str]
    written: list[Written] = field(default_factory=list)
    # Bind's answer was lost: the pod may be bound.
    maybe_bound: bool = False

    @property
    def key(self) -> str:
        return self.cycle.key

    def in_flight(self) -> list[str]:
        return sorted(self.changes)

    def allocation_rows(self) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for c in self.claims:
            rows.extend(c.rows())
        return rows


def begin(cache: SchedulerCache, binding: Binding) -> None:
    """After Reserve: the cycle's claims are in flight until commit or Unreserve."""
    for key in binding.changes:
        cache.in_flight[key] = binding.key


def prebind(view: ClusterView, binding: Binding) -> None:
    """PreBind: write each claim that changes (allocation, reservation). Raises the
    view's :class:`~.view.WriteError`; what was written is in ``binding.written``."""
    for w in binding.claims:
        if w.key not in binding.changes:
            continue
        c = w.export()
        allocated = w.allocates
        try:
            stored = view.write_claim_status(c)
        except WriteError as e:
            if e.maybe_applied:
                binding.written.append(Written(c, None, allocated))
            raise
        binding.written.append(Written(c, stored, allocated))


def bind(view: ClusterView, binding: Binding) -> None:
    """Bind: the pod to the node. Raises the view's :class:`~.view.WriteError`."""
    try:
        view.bind_pod(binding.cycle.pod, binding.node)
    except WriteError as e:
        binding.maybe_bound = e.maybe_applied
        raise


def commit(cache: SchedulerCache, metrics: SchedulerMetrics, binding: Binding) -> None:
    """Every write was stored: the cycle's shares become the claims' allocations."""
    assert binding.cycle.chosen is not None
    state = cache.state
    for s in binding.cycle.chosen.shares:
        state.commit(s.device.id, s.claim)
        if s.reused_lock:
            metrics.pending[COMPATIBLE_REUSE] += 1
    for w in binding.written:
        cache.recorded[w.key] = result_tuples(w.stored or w.asked)
    for key in binding.changes:
        cache.in_flight.pop(key, None)


def unreserve(view: ClusterView, cache: SchedulerCache, reconstructor: Reconstructor,
              binding: Binding) -> list[str]:
    """Undo this cycle (see the module's docstring). Returns the keys of claims whose
    state on the server is not known now (accounted as written, until read back)."""
    unreserve_shares(cache.state, binding.cycle)
    for key in binding.changes:
        cache.in_flight.pop(key, None)
    unknown: list[str] = []
    for w in reversed(binding.written):
        truth: ResourceClaim | None
        if binding.maybe_bound:
            truth = w.stored or w.asked
            unknown.append(w.key)
        else:
            try:
                truth = view.unreserve_claim(w.stored or w.asked, binding.cycle.pod,
                                             allocated=w.allocated)
            except WriteError:
                truth = w.stored or w.asked
                unknown.append(w.key)
        reconstructor.account(w.key, truth)
    return unknown
