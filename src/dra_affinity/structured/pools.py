"""Pools as the structured allocator sees them (KEP-4815 completeness, KEP-5981 metadata).

A pool is every ResourceSlice with the same ``(driver, pool.name)``. Only the
newest ``pool.generation`` counts; slices of older generations are leftovers
of a republish in progress and are ignored entirely (they neither complete the
pool nor contribute devices or extractors). The pool is complete when the
number of newest-generation slices, counted over every node (not only the node
being filtered), equals the ``resourceSliceCount`` they all agree on. Since
Kubernetes 1.35 no device of an incomplete pool is allocated, whatever its kind
(see :func:`dra_affinity.structured.affinity.pool_gate`).

The API server validates each slice in isolation, so rules that span slices
are checked here, without ever raising: a pool with bad data carries a
reason and the allocator fails closed for its devices.

* ``invalid_reason``: structural problems (duplicate device or counter-set
  names across slices, counters consumed from a set the complete pool lacks).
* ``affinity_invalid_reason``: KEP-5981 problems of the union of the pool's
  metadata slices (duplicate key names, combined cost over budget, an
  extractor that does not compile or return string, a slice with both
  ``devices`` and ``sharingAffinity``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from dra_affinity import cel
from dra_affinity.api.resource import SHARING_AFFINITY_CEL_MAX_COST, ResourceSlice

__all__ = ["Pool", "PoolID", "gather_pools"]

PoolID = tuple[str, str]  # (driver, pool name)


@dataclass(frozen=True)
class Pool:
    """The newest generation of one pool and what is wrong with it, if anything."""

    driver: str
    name: str
    generation: int
    # Models are not hashable; a Pool hashes by its identity fields and reasons.
    slices: tuple[ResourceSlice, ...] = field(hash=False)
    declares_sharing_affinity: bool
    extractors: tuple[cel.Extractor, ...] = field(hash=False)
    incomplete_reason: str | None = None
    invalid_reason: str | None = None
    affinity_invalid_reason: str | None = None
    # The cross-slice KEP-5981 problems by the slice that causes each (the later of two
    # slices declaring one key): (slice name, message), for a Warning event on that slice.
    # Slices whose metadata could not be read at all are not here (the reader tells).
    affinity_problems: tuple[tuple[str, str], ...] = ()

    @property
    def id(self) -> PoolID:
        return (self.driver, self.name)

    @property
    def is_incomplete(self) -> bool:
        return self.incomplete_reason is not None

    @property
    def is_invalid(self) -> bool:
        return self.invalid_reason is not None

    @property
    def is_affinity_invalid(self) -> bool:
        return self.affinity_invalid_reason is not None


def gather_pools(slices: Iterable[ResourceSlice],
                 slice_problems: Mapping[str, str] | None = None) -> dict[PoolID, Pool]:
    """Group slices into pools; the dict is in sorted ``PoolID`` order.

    ``slice_problems`` names slices (by name) whose sharing-affinity metadata the
    caller could not read, with why: a pool whose newest generation holds one
    declares sharing affinity and is invalid for it (its multi-allocatable devices
    fail closed), since the extractors it meant are unknown."""
    groups: dict[PoolID, list[ResourceSlice]] = {}
    for s in slices:
        groups.setdefault((s.spec.driver, s.spec.pool.name), []).append(s)
    return {pid: _build(pid, groups[pid], slice_problems or {}) for pid in sorted(groups)}


def _join(reasons: list[str]) -> str | None:
    return "; ".join(reasons) if reasons else None


def _build(pid: PoolID, members: list[ResourceSlice], slice_problems: Mapping[str, str]) -> Pool:
    driver, name = pid
    generation = max(s.spec.pool.generation for s in members)
    newest = tuple(
        sorted(
            (s for s in members if s.spec.pool.generation == generation),
            key=lambda s: s.metadata.name,
        )
    )
    label = f"pool {driver}/{name} generation {generation}"
    incomplete = _incomplete_reason(newest)
    meta = [s for s in newest if s.spec.sharing_affinity]
    extractors = tuple(
        cel.Extractor(e.name, e.expression) for s in meta for e in (s.spec.sharing_affinity or [])
    )
    unreadable = [slice_problems[s.metadata.name] for s in newest if s.metadata.name in slice_problems]
    problems = _affinity_problems(meta)
    return Pool(
        driver=driver,
        name=name,
        generation=generation,
        slices=newest,
        declares_sharing_affinity=bool(meta) or bool(unreadable),
        extractors=extractors,
        incomplete_reason=f"{label}: {incomplete}" if incomplete else None,
        invalid_reason=_prefixed(label, _structural_problems(newest, complete=incomplete is None)),
        affinity_invalid_reason=_prefixed(label, [r for _, r in problems] + unreadable),
        affinity_problems=tuple((sname, f"{label}: {r}") for sname, r in problems),
    )


def _prefixed(label: str, reasons: list[str]) -> str | None:
    joined = _join(reasons)
    return f"{label}: {joined}" if joined else None


def _incomplete_reason(newest: tuple[ResourceSlice, ...]) -> str | None:
    counts = sorted({s.spec.pool.resource_slice_count for s in newest})
    if len(counts) > 1:
        return "slices disagree on resourceSliceCount (" + ", ".join(map(str, counts)) + ")"
    want, have = counts[0], len(newest)
    if have < want:
        return f"{have} of {want} slices published"
    if have > want:
        # Not "2 of 1": more slices than the count is a republish in progress (or a
        # driver bug), and the pool is as unusable as one with slices missing.
        return (f"{have} slices published but resourceSliceCount is {want} "
                f"({have - want} more than declared)")
    return None


def _structural_problems(newest: tuple[ResourceSlice, ...], *, complete: bool) -> list[str]:
    reasons: list[str] = []
    seen_slices: set[str] = set()
    for s in newest:
        if s.metadata.name in seen_slices:
            reasons.append(f"slice {s.metadata.name} is listed more than once")
        seen_slices.add(s.metadata.name)
        if s.spec.pool.resource_slice_count < 1:
            reasons.append(
                f"slice {s.metadata.name} has resourceSliceCount {s.spec.pool.resource_slice_count}"
            )

    device_owner: dict[str, str] = {}
    counter_sets: dict[str, set[str]] = {}
    set_owner: dict[str, str] = {}

    def first_owner(owner: dict[str, str], what: str, name: str, slice_name: str) -> bool:
        """Record the slice that names ``name`` first (a name is unique in a pool)."""
        if name in owner:
            reasons.append(f"duplicate {what} name {name} in slices {owner[name]} and {slice_name}")
            return False
        owner[name] = slice_name
        return True

    for s in newest:
        for d in s.spec.devices:
            first_owner(device_owner, "device", d.name, s.metadata.name)
        for cs in s.spec.shared_counters:
            if first_owner(set_owner, "counter set", cs.name, s.metadata.name):
                counter_sets[cs.name] = set(cs.counters)
    if complete:
        # Only a complete pool can tell that a counter set is missing rather than unpublished.
        for s in newest:
            for d in s.spec.devices:
                for c in d.consumes_counters:
                    known = counter_sets.get(c.counter_set)
                    if known is None:
                        reasons.append(
                            f"device {d.name} in slice {s.metadata.name} consumes counters of "
                            f"unknown counter set {c.counter_set}"
                        )
                        continue
                    for counter in sorted(set(c.counters) - known):
                        reasons.append(
                            f"device {d.name} in slice {s.metadata.name} consumes unknown counter "
                            f"{counter} of counter set {c.counter_set}"
                        )
    return reasons


def _affinity_problems(meta: list[ResourceSlice]) -> list[tuple[str, str]]:
    """KEP-5981 checks over the union of the metadata slices' extractors: (the slice that
    causes it, reason) in slice name order. The combined cost is charged to the last
    metadata slice, whose extractors take the sum over the limit."""
    reasons: list[tuple[str, str]] = []
    owner: dict[str, str] = {}
    total = 0
    for s in meta:
        sname = s.metadata.name
        if s.spec.devices:
            reasons.append((sname, f"slice {sname} sets both devices and sharingAffinity"))
        for e in s.spec.sharing_affinity or []:
            # Uniqueness is a set comparison of key names: identical entries collide too.
            if e.name in owner:
                where = (
                    f"twice in slice {sname}"
                    if owner[e.name] == sname
                    else f"in slices {owner[e.name]} and {sname}"
                )
                reasons.append((sname, f"duplicate sharingAffinity key {e.name!r} {where}"))
            else:
                owner[e.name] = sname
            try:
                program = cel.EXTRACTOR_ENV.compile(e.expression)
            except Exception as err:  # admission should have prevented it; fail closed
                reasons.append((
                    sname, f"sharingAffinity key {e.name!r} in slice {sname} does not compile: {err}"
                ))
                continue
            if program.result_type not in ("string", "dyn"):
                reasons.append((
                    sname,
                    f"sharingAffinity key {e.name!r} in slice {sname} returns {program.result_type}, "
                    "must return string",
                ))
            # The data-independent part of the estimate, as at admission (docs/validation.md).
            total += int(program.cost_estimate.min)
    if total > SHARING_AFFINITY_CEL_MAX_COST:
        names = ", ".join(s.metadata.name for s in meta)
        reasons.append((
            meta[-1].metadata.name,
            f"combined estimated cost {total} of the sharingAffinity expressions in slices "
            f"{names} exceeds the limit of {SHARING_AFFINITY_CEL_MAX_COST}",
        ))
    return reasons
