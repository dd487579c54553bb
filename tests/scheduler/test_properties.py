"""Property: random timelines over small random clusters keep the KEP-5981 invariants.

A ``RuleBasedStateMachine`` builds a cluster of 1-3 nodes, one pool per node
(1-3 devices, 2-4 slots, mostly multi-allocatable, some pools without
sharingAffinity), then runs random steps: create pods and claims (2-3
subnets, configs yielding no keys, two configs, two requests), schedule one
pod, schedule 2-3 pods concurrently, schedule with an API failure injected
through the scheduler's port (a conflict, a refusal, a 500, or a lost answer
with the write stored or not, on PreBind's claim write, on Bind, and maybe on
Unreserve's undo or the later read-back too),
delete pods, restart the scheduler (same or flipped DRASharingAffinity),
republish a pool (rename a key, add a pkey extractor, remove or restore
sharingAffinity, bump the generation), apply claims that arrive already
allocated (consistent with the device's lock or not), allocate a pending
pod's claim behind the scheduler's back, and add pods sharing another pod's
claim.

After every step it checks, with keys computed here from each claim's opaque
config and the extractors currently published in the cluster:

1. every holder of a Locked device extracts exactly the lock, and every
   allocation the scheduler makes on a gated device agrees with all its
   co-holders;
2. no device's consumed capacity exceeds its capacity; exclusive devices are
   allocated at most once;
3. the scheduler's cache holds exactly the cluster's allocation results, with
   no tentative share left over (a claim whose state an injected failure left
   unknown may be held as written, never less, until it is read back);
4. a fresh scheduler started on the same cluster reconstructs the same
   AffinityStates (relaxed for devices whose pool's extractors changed after
   their claims were allocated: the live one may then be Unreconstructable);
5. no step raises, and every attempt ends in a documented result;
6. devices are Locked only with the gate on; with it off no device in a pool
   declaring sharingAffinity gets a new allocation.

Also: a bound pod's claims are allocated on its node and reserved for it (by
UID), and a failed attempt leaves its claims as they were, unless the outcome of
one of its writes is unknown to the scheduler (then the claim is unresolved, or
the pod may be bound).

Budget: MAX_EXAMPLES x STEPS = 120 x 40, so at most 4,800 steps; hypothesis
ends many timelines early and a run executes about 3,500 steps, each followed
by the invariants and a fresh-scheduler reconstruction (~20 s on an idle
2-core machine, ~40 s under load). No slow marker: this default is the budget.
Raise MAX_EXAMPLES locally for a deeper search.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from builders import (
    DRIVER,
    PKEY,
    SLOTS,
    SUBNET,
    Env,
    claim,
    dev,
    device_slice,
    meta_slice,
    nic_class,
    nic_params,
    pod,
)
from dra_affinity.api.podclaims import is_reserved_for
from dra_affinity.api.resource import ResourceClaim, ResourceSlice
from dra_affinity.cel import ConfigObject, Extractor, extract
from dra_affinity.features import Features
from dra_affinity.scheduler.scheduler import Attempt, Scheduler
from dra_affinity.sim.cluster import Cluster
from dra_affinity.sim.faults import Failure, Fault, FaultInjectingView
from dra_affinity.structured.model import Result
from dra_affinity.structured.state import AffinityKeys, AffinityState, AffinityStatus

MAX_EXAMPLES = 120
STEPS = 40

SUBNETS = ("subnet-A", "subnet-B", "subnet-C")
PKEYS = ("0x1", "0x2")
# has()-guarded, so NICConfigs without ibPKey yield "" instead of a missing-field error.
PKEY_GUARDED = (
    'object.apiVersion == "networking.example.com/v1" && object.kind == "NICConfig" '
    '&& has(object.ibPKey) ? object.ibPKey : ""'
)
BASE = {"subnet": SUBNET}
VARIANTS: dict[str, dict[str, str] | None] = {
    "rename": {"net": SUBNET},
    "pkey": {"subnet": SUBNET, "pkey": PKEY_GUARDED},
    # Unguarded: claims without ibPKey make it a slice authoring error (Error result).
    "pkey-raw": {"subnet": SUBNET, "pkey": PKEY},
    "remove": None,
    "restore": BASE,
}
NO_KEYS = {"apiVersion": "networking.example.com/v1", "kind": "Other"}

ResultRow = tuple[str, str, str, str | None]  # device, claim, request, shareID


# ====================================================================== model
@dataclass
class PoolModel:
    """What the test published for one node's pool."""

    node: str
    devices: list[str]
    slots: int
    multi: bool
    extractors: dict[str, str] | None
    generation: int = 1
    epoch: int = 0  # bumped whenever the extractor set changes

    def device_ids(self) -> list[str]:
        return [f"{DRIVER}/{self.node}/{d}" for d in self.devices]


@dataclass
class PoolView:
    """A pool as the cluster currently stores it (newest generation only)."""

    declares: bool
    extractors: list[Extractor]
    devices: dict[str, tuple[int, bool]] = field(default_factory=dict)  # id -> (slots, multi)
    # All resourceSliceCount slices of the newest generation are published. While not,
    # a republish is in progress and nothing about affinity is decided (locks are kept).
    complete: bool = True


@st.composite
def pool_models(draw: st.DrawFn) -> list[PoolModel]:
    pools: list[PoolModel] = []
    for i in range(draw(st.integers(1, 3))):
        ndev = draw(st.integers(1, 3))
        pools.append(PoolModel(
            node=f"node-{i + 1}",
            devices=[f"eth{j + 1}" for j in range(ndev)],
            slots=draw(st.integers(2, 4)),
            multi=draw(st.sampled_from([True, True, True, False])),  # mostly shareable
            # The first pool always declares it, so one-node clusters exercise locks.
            extractors=dict(BASE) if draw(st.booleans()) or i == 0 else None,
        ))
    return pools


@st.composite
def opaque_params(draw: st.DrawFn) -> dict[str, Any] | None:
    kind = draw(st.sampled_from(["nic", "nic", "nic", "nic", "nokeys", "none", "nosubnet"]))
    if kind == "nokeys":
        return dict(NO_KEYS)
    if kind == "none":
        return None  # a legacy claim: no opaque config at all
    p: dict[str, Any] = {"apiVersion": "networking.example.com/v1", "kind": "NICConfig"}
    if kind == "nic":
        p["subnetID"] = draw(st.sampled_from(SUBNETS))
    # "nosubnet": the unguarded subnet extractor fails on it (a CEL missing-field error).
    pk = draw(st.sampled_from((None, *PKEYS)))
    if pk is not None:
        p["ibPKey"] = pk
    p["mtu"] = 9000  # driver-private, never extracted
    return p


def _opaque(params: dict[str, Any], requests: list[str]) -> dict[str, Any]:
    return {"requests": requests, "opaque": {"driver": DRIVER, "parameters": params}}


def _request(name: str, slots: str) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": "shared-nic",
                                      "capacity": {"requests": {SLOTS: slots}}}}


# ====================================================================== independent views
def pool_views(cluster: Cluster) -> dict[str, PoolView]:
    """Re-derive each pool's extractors and devices from the stored slices."""
    by_pool: dict[str, list[ResourceSlice]] = {}
    for s in cluster.slices():
        by_pool.setdefault(s.spec.pool.name, []).append(s)
    out: dict[str, PoolView] = {}
    for name, slices in by_pool.items():
        gen = max(s.spec.pool.generation for s in slices)
        newest = [s for s in slices if s.spec.pool.generation == gen]
        counts = {s.spec.pool.resource_slice_count for s in newest}
        view = PoolView(
            declares=any(s.spec.sharing_affinity for s in newest),
            extractors=[Extractor(e.name, e.expression) for s in newest
                        for e in (s.spec.sharing_affinity or [])],
            complete=counts == {len(newest)})
        for s in newest:
            for d in s.spec.devices:
                cap = d.capacity[SLOTS].value.value
                view.devices[f"{DRIVER}/{name}/{d.name}"] = (int(cap), bool(d.allow_multiple_allocations))
        out[name] = view
    return out


def claim_keys(c: ResourceClaim, request: str, extractors: Sequence[Extractor]) -> AffinityKeys | None:
    """The request's effective affinity map, or None when it cannot be extracted."""
    parent = request.split("/", 1)[0]
    configs = [
        ConfigObject(f"config[{i}]", cfg.opaque.parameters)
        for i, cfg in enumerate(c.spec.devices.config)
        if cfg.opaque is not None and cfg.opaque.driver == DRIVER
        and (not cfg.requests or request in cfg.requests or parent in cfg.requests)
    ]  # the DeviceClass carries no config, so only the claim's configs are in scope
    res = extract(extractors, configs)
    return res.keys if res.ok else None


def result_rows(cluster: Cluster) -> Counter[ResultRow]:
    rows: Counter[ResultRow] = Counter()
    for c in cluster.claims():
        if c.status.allocation is None:
            continue
        for r in c.status.allocation.devices.results:
            rows[(r.device_id, f"{c.namespace}/{c.name}", r.request, r.share_id)] += 1
    return rows


def holders(cluster: Cluster) -> dict[str, list[tuple[ResourceClaim, str, Fraction]]]:
    """device id -> [(claim, request, consumed slots)] over the cluster's allocations."""
    out: dict[str, list[tuple[ResourceClaim, str, Fraction]]] = {}
    for c in cluster.claims():
        if c.status.allocation is None:
            continue
        for r in c.status.allocation.devices.results:
            used = r.consumed_capacity.get(SLOTS)
            out.setdefault(r.device_id, []).append(
                (c, r.request, used.value if used is not None else Fraction(0)))
    return out


def _amount(v: object) -> Fraction:
    """A cached amount as a number, whether the cache keeps Quantities or plain numbers."""
    if v is None:
        return Fraction(0)
    raw = getattr(v, "value", v)
    assert isinstance(raw, int | Fraction), raw
    return Fraction(raw)


def cache_rows(s: Scheduler) -> Counter[ResultRow]:
    return Counter((d, sh.claim, sh.request, sh.share_id)
                   for d in s.state.devices() for sh in s.state.shares(d))


def check_cache(s: Scheduler, cluster: Cluster, who: str) -> None:
    """Invariant 3: the cache holds exactly the cluster's allocations, nothing tentative;
    an unresolved claim may be held as its last write asked (never less)."""
    cached, stored = cache_rows(s), result_rows(cluster)
    unknown = set(s.unresolved)
    assert (+Counter({r: n for r, n in cached.items() if r[1] not in unknown})
            == +Counter({r: n for r, n in stored.items() if r[1] not in unknown})), (
        f"{who} cache disagrees with the cluster")
    for r, n in stored.items():
        if r[1] in unknown:
            assert cached[r] >= n, f"{who}: unresolved {r[1]} held as less than the cluster has"
    if unknown:
        return  # capacity and drained-state checks need the exact allocations
    for d in s.state.devices():
        assert not any(sh.tentative for sh in s.state.shares(d)), f"{who}: tentative share on {d}"
        assert s.state.is_allocated(d), f"{who}: empty usage entry for {d}"
    per_device: dict[str, Fraction] = {}
    for d, rows in holders(cluster).items():
        per_device[d] = sum((u for _c, _r, u in rows), Fraction(0))
    for d in s.state.devices():
        assert _amount(s.state.consumed(d).get(SLOTS)) == per_device.get(d, 0), (
            f"{who}: consumed capacity of {d} disagrees with the cluster")
    # A lock (or Unreconstructable) only lives while the device has holders.
    assert set(s.state.affinity_states) <= set(s.state.devices()), f"{who}: state on a drained device"


# ====================================================================== the machine
class Timelines(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.cluster = Cluster()
        self.view = FaultInjectingView(self.cluster)
        self.pools: dict[str, PoolModel] = {}
        self.gates = Features()
        self.sched: Scheduler | None = None
        self.pods: list[str] = []
        self.names = itertools.count()
        # (claim, device) -> pool epoch when the allocation appeared
        self.alloc_epoch: dict[tuple[str, str], int] = {}

    # ------------------------------------------------------------------ helpers
    @property
    def s(self) -> Scheduler:
        assert self.sched is not None
        return self.sched

    def _apply(self, obj: Any) -> None:
        res = self.cluster.apply(obj)
        assert res.applied, [e.render() for e in res.errors]

    def _publish(self, p: PoolModel, *, meta_first: bool = True, only_meta: bool = False) -> None:
        objs: list[Any] = []
        if p.extractors is not None:
            objs.append(meta_slice(p.node, p.extractors, generation=p.generation, count=2))
        if not only_meta:
            objs.append(device_slice(p.node, p.devices, slots=str(p.slots), generation=p.generation,
                                     count=2 if p.extractors is not None else 1, multi=p.multi))
        for o in objs if meta_first else reversed(objs):
            self._apply(o)

    def _pending(self) -> list[str]:
        out = []
        for k in self.pods:
            p = self.cluster.pod(k)
            if p is not None and not p.spec.node_name:
                out.append(k)
        return out

    def _pod_claims(self, key: str) -> list[str]:
        p = self.cluster.pod(key)
        assert p is not None
        return [f"{p.namespace}/{prc.resource_claim_name}" for prc in p.spec.resource_claims]

    def _room(self) -> dict[str, int]:
        """Free slots per device (an exclusive device is all free or not at all)."""
        views = pool_views(self.cluster)
        used = holders(self.cluster)
        room: dict[str, int] = {}
        for v in views.values():
            for d, (slots, multi) in v.devices.items():
                rows = used.get(d, [])
                if multi:
                    room[d] = slots - int(sum((u for _c, _r, u in rows), Fraction(0)))
                else:
                    room[d] = 0 if rows else slots
        return room

    def _multi(self, did: str) -> bool:
        return self.pools[did.split("/")[1]].multi

    def _allocation(self, placements: list[tuple[str, str, int]], first: int) -> dict[str, Any]:
        """status.allocation for (request, device id, slots) placements."""
        views = pool_views(self.cluster)
        results = []
        node = None
        for i, (req, did, slots) in enumerate(placements):
            _drv, pool_name, dev_name = did.split("/", 2)
            multi = views[pool_name].devices[did][1]
            node = self.pools[pool_name].node
            r: dict[str, Any] = {"request": req, "driver": DRIVER, "pool": pool_name, "device": dev_name}
            if multi:
                r["shareID"] = f"{first + i:08d}-0000-4000-8000-000000000000"
                r["consumedCapacity"] = {SLOTS: str(slots)}
            results.append(r)
        sel = {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": [node]}]}]}
        return {"devices": {"results": results}, "nodeSelector": sel}

    def _consistent_params(self, did: str) -> dict[str, Any] | None:
        """Params copied from a current holder, so the keys match the device's lock."""
        for c, req, _u in holders(self.cluster).get(did, []):
            for cfg in c.spec.devices.config:
                if cfg.opaque is not None and (not cfg.requests or req in cfg.requests):
                    return dict(cfg.opaque.parameters)
        return None

    def _schedule(self, keys: list[str], *, concurrent: bool = False) -> None:
        before = result_rows(self.cluster)
        alloc_before = {k: {c: self._allocated(c) for c in self._pod_claims(k)} for k in keys}
        injected = len(self.view.injected)
        if concurrent:
            attempts = self.s.schedule_concurrently(keys)
        else:
            assert len(keys) == 1
            attempts = [self.s.schedule(keys[0])]
        assert [a.pod for a in attempts] == keys
        faults = self.view.injected[injected:]
        for write, _obj, failure in faults:
            event(f"injected {write} {failure.fault.value}{' applied' if failure.applied else ''}")
        # Bind's answer lost: the pod may be bound (then its claims are kept as written).
        maybe_bound = {obj for write, obj, f in faults if write == "bind" and f.fault.answer_lost}
        shared = Counter(ck for k in keys for ck in alloc_before[k])
        for a in attempts:
            # A claim shared with another pod of the batch may be allocated by that pod.
            mine = {ck: v for ck, v in alloc_before[a.pod].items()
                    if shared[ck] == 1 and ck not in self.s.unresolved}
            self._check_attempt(a, mine, may_be_bound=a.pod in maybe_bound)
        self._check_new_allocations(+(result_rows(self.cluster) - before))

    def _plan_failure(self, data: st.DataObject, key: str) -> None:
        """Fail PreBind's claim write or Bind of the pod, and maybe Unreserve's undo and
        the next read-back too."""
        claims = self._pod_claims(key)
        write = data.draw(st.sampled_from(["claim", "bind"]))
        target = key if write == "bind" else data.draw(st.sampled_from(claims))
        fault = data.draw(st.sampled_from(list(Fault)))
        applied = fault.answer_lost and data.draw(st.booleans())
        self.view.fail(write, target, Failure(fault, applied))
        if data.draw(st.booleans()):
            later = data.draw(st.sampled_from(["unreserve", "read"]))
            lfault = data.draw(st.sampled_from([Fault.SERVER_ERROR, Fault.TIMEOUT, Fault.RESET]))
            for ck in claims:
                self.view.fail(later, ck, Failure(lfault, lfault.answer_lost and data.draw(
                    st.booleans())))

    def _bound(self, key: str) -> bool:
        p = self.cluster.pod(key)
        return p is not None and bool(p.spec.node_name)

    def _allocated(self, claim_key: str) -> Any:
        c = self.cluster.claim(claim_key)
        return c.status.allocation if c is not None else None

    def _check_attempt(self, a: Attempt, before: dict[str, Any], *, may_be_bound: bool) -> None:
        """Invariant 5: documented results, and the cluster says the same thing."""
        assert isinstance(a.result, Result), a
        event(f"attempt {a.result.value} {','.join(sorted({r.code for r in a.reasons}))}")
        p = self.cluster.pod(a.pod)
        assert p is not None
        if a.result is Result.SCHEDULED:
            assert p.spec.node_name == a.node, a
            for ck in self._pod_claims(a.pod):
                c = self.cluster.claim(ck)
                assert c is not None and c.status.allocation is not None, f"{ck} not allocated"
                assert is_reserved_for(c, p), f"{ck} not reserved"
        else:
            assert a.reasons, f"{a.pod}: {a.result.value} without a reason"
            if may_be_bound:
                return
            assert not p.spec.node_name, f"{a.pod} bound although {a.result.value}"
            for ck, alloc in before.items():
                assert self._allocated(ck) == alloc, f"{ck} changed by a failed attempt"

    def _check_new_allocations(self, new: Counter[ResultRow]) -> None:
        """Invariants 1 (at placement time) and 6 for what this step allocated."""
        views = pool_views(self.cluster)
        hold = holders(self.cluster)
        for did, ckey, req, _sid in new:
            view = views[did.split("/")[1]]
            multi = view.devices[did][1]
            if not view.declares:
                continue
            assert self.gates.sharing_affinity, (
                f"gate off, yet {ckey} got {did} in a pool declaring sharingAffinity")
            if not multi:
                continue  # exclusive devices are not gated
            c = self.cluster.claim(ckey)
            assert c is not None
            mine = claim_keys(c, req, view.extractors)
            assert mine is not None, f"{ckey}/{req} placed on gated {did} without extractable keys"
            for other, oreq, _u in hold[did]:
                theirs = claim_keys(other, oreq, view.extractors)
                assert theirs == mine, (
                    f"{ckey}/{req} ({dict(mine)}) placed on {did} next to "
                    f"{other.name}/{oreq} ({theirs})")

    # ------------------------------------------------------------------ set-up
    @initialize(pools=pool_models(), gate=st.sampled_from([True, True, True, False]))
    def setup(self, pools: list[PoolModel], gate: bool) -> None:
        self._apply(nic_class())
        for p in pools:
            self.pools[p.node] = p
            self._publish(p)
        self.gates = Features(sharing_affinity=gate)
        self.sched = Scheduler(self.view, self.gates)
        self.sched.start()

    # ------------------------------------------------------------------ rules
    @rule(data=st.data())
    def add_pod(self, data: st.DataObject) -> None:
        name = f"p{next(self.names)}"
        shape = data.draw(st.sampled_from(["one", "one", "one", "two-configs", "two-requests"]))
        slots = data.draw(st.sampled_from(["1", "1", "2"]))
        first = data.draw(opaque_params())
        if shape == "one":
            c = claim(f"{name}-nic", first, slots=slots)
        elif shape == "two-configs":
            second = data.draw(opaque_params())
            c = claim(f"{name}-nic", first, second, slots=slots)
        else:
            second = data.draw(opaque_params())
            scoped = data.draw(st.booleans())  # one config per request, or one for the claim
            if scoped:
                config = [_opaque(p, [r]) for p, r in ((first, "nic"), (second, "nic2")) if p is not None]
            else:
                config = [_opaque(first, [])] if first is not None else []
            c = claim(f"{name}-nic", requests=[_request("nic", slots), _request("nic2", "1")],
                      config=config)
        self._apply(c)
        self._apply(pod(name))
        self.pods.append(f"default/{name}")

    @precondition(lambda self: bool(self.cluster.claims()))
    @rule(data=st.data(), own=st.booleans())
    def add_sharing_pod(self, data: st.DataObject, own: bool) -> None:
        """A pod using an existing claim of another pod, and maybe a claim of its own."""
        claims = sorted(c.name for c in self.cluster.claims())
        shared = data.draw(st.sampled_from(claims))
        name = f"s{next(self.names)}"
        refs = [shared]
        if own:
            self._apply(claim(f"{name}-nic", data.draw(opaque_params())))
            refs.append(f"{name}-nic")
        self._apply(pod(name, refs))
        self.pods.append(f"default/{name}")

    @precondition(lambda self: bool(self._pending()))
    @rule(data=st.data(), mode=st.sampled_from(["plain", "plain", "fault"]))
    def schedule_one(self, data: st.DataObject, mode: str) -> None:
        key = data.draw(st.sampled_from(self._pending()))
        if mode == "fault":
            self._plan_failure(data, key)
        self._schedule([key])

    @precondition(lambda self: len(self.pods) >= 2)
    @rule(data=st.data())
    def schedule_concurrently(self, data: st.DataObject) -> None:
        # Mostly pending pods; an already-bound one takes the "already bound" path.
        pool = self._pending() if len(self._pending()) >= 2 else self.pods
        keys = data.draw(st.lists(st.sampled_from(pool), min_size=2, max_size=3, unique=True))
        # Pods may share a claim within one batch (claims are re-read before Reserve).
        for key in data.draw(st.lists(st.sampled_from(keys), max_size=1)):
            self._plan_failure(data, key)
        self._schedule(keys, concurrent=True)

    @precondition(lambda self: bool(self.pods))
    @rule(data=st.data(), drop_claim=st.booleans())
    def delete_pod(self, data: st.DataObject, drop_claim: bool) -> None:
        key = data.draw(st.sampled_from(self.pods))
        claims = self._pod_claims(key)
        assert self.cluster.delete("Pod", key) is not None
        self.pods.remove(key)
        for ck in claims:
            c = self.cluster.claim(ck)
            if c is None:
                continue  # deleted along with another pod that shared it
            assert all(r.name != key.split("/")[1] for r in c.status.reserved_for)
            # Deallocated once nothing reserves it (a shared claim stays for the others).
            if not c.status.reserved_for:
                assert c.status.allocation is None, f"{ck} still allocated"
                if drop_claim:
                    self.cluster.delete("ResourceClaim", ck)

    @rule(flip=st.booleans())
    def restart(self, flip: bool) -> None:
        self.s.stop()
        if flip:
            self.gates = Features(sharing_affinity=not self.gates.sharing_affinity)
        self.sched = Scheduler(self.view, self.gates)
        self.sched.start()

    @rule(data=st.data(), variant=st.sampled_from([*VARIANTS, "bump"]), bump=st.booleans(),
          meta_first=st.booleans())
    def republish(self, data: st.DataObject, variant: str, bump: bool, meta_first: bool) -> None:
        p = self.pools[data.draw(st.sampled_from(sorted(self.pools)))]
        old = p.extractors
        new = old if variant == "bump" else VARIANTS[variant]
        new = dict(new) if new is not None else None
        count_changes = (old is None) != (new is None)
        if new != old:
            p.epoch += 1
        p.extractors = new
        if count_changes or bump or variant == "bump":
            # A new generation: the pool is incomplete until both slices are republished.
            p.generation += 1
            self._publish(p, meta_first=meta_first)
            if new is None and old is not None:
                self.cluster.delete("ResourceSlice", f"{p.node}-meta")
        else:
            self._publish(p, only_meta=True)  # in-place update of the metadata slice

    @rule(data=st.data(), mode=st.sampled_from(["consistent", "random"]))
    def apply_allocated(self, data: st.DataObject, mode: str) -> None:
        """A claim that arrives already allocated (another scheduler, a restore), and its pod."""
        room = [d for d, free in self._room().items() if free >= 1]
        if not room:
            return
        did = data.draw(st.sampled_from(sorted(room)))
        params = self._consistent_params(did) if mode == "consistent" else None
        if params is None:
            params = data.draw(opaque_params())
        name = f"x{next(self.names)}"
        n = next(self.names)
        self._apply(pod(name, node=self.pools[did.split("/")[1]].node))
        bound = self.cluster.pod(f"default/{name}")
        assert bound is not None
        status = {"allocation": self._allocation([("nic", did, 1)], n),
                  "reservedFor": [{"resource": "pods", "name": name, "uid": bound.metadata.uid}]}
        self._apply(claim(f"{name}-nic", params, status=status))
        self.pods.append(f"default/{name}")

    @precondition(lambda self: bool(self._pending()))
    @rule(data=st.data())
    def allocate_pending(self, data: st.DataObject) -> None:
        """A pending pod's claim allocated by someone else; the pod is scheduled later."""
        key = data.draw(st.sampled_from(self._pending()))
        ck = self._pod_claims(key)[0]
        c = self.cluster.claim(ck)
        if c is None or c.status.allocation is not None:
            return  # deleted with a pod that shared it, or already allocated
        room = self._room()
        node = data.draw(st.sampled_from(sorted(self.pools)))
        placements: list[tuple[str, str, int]] = []
        for r in c.spec.devices.requests:
            assert r.exactly is not None and r.exactly.capacity is not None
            want = int(r.exactly.capacity.requests[SLOTS].value)
            fits = [d for d in self.pools[node].device_ids() if room.get(d, 0) >= want]
            if not fits:
                return
            did = data.draw(st.sampled_from(fits))
            room[did] = room[did] - want if self._multi(did) else 0
            placements.append((r.name, did, want))
        alloc = self._allocation(placements, next(self.names))
        body = c.to_dict()
        body["status"] = {"allocation": alloc}
        self._apply(ResourceClaim.model_validate(body))

    # ------------------------------------------------------------------ invariants
    @invariant()
    def after_every_step(self) -> None:
        if self.sched is None:
            return
        views = pool_views(self.cluster)
        for name, p in self.pools.items():
            v = views[name]
            assert v.declares == (p.extractors is not None)
            assert {e.name: e.expression for e in v.extractors} == (p.extractors or {})
        self._track_epochs()
        self._check_bound_pods()
        self._check_locks(views)
        self._check_capacity(views)
        check_cache(self.s, self.cluster, "live")
        self._check_restart(views)

    def _check_bound_pods(self) -> None:
        """A bound pod's claims are allocated, reserved for it, and reachable from its node."""
        for key in self.pods:
            p = self.cluster.pod(key)
            assert p is not None
            if not p.spec.node_name:
                continue
            for ck in self._pod_claims(key):
                c = self.cluster.claim(ck)
                if c is None:
                    continue  # deleted after a sharing pod went away: not this test's concern
                assert c.status.allocation is not None, f"{key} bound but {ck} not allocated"
                assert is_reserved_for(c, p), f"{key} bound but {ck} not reserved for it"
                for r in c.status.allocation.devices.results:
                    node = self.pools[r.pool].node
                    assert node == p.spec.node_name, (
                        f"{key} on {p.spec.node_name} uses {r.device_id} of {node} via {ck}")

    def _track_epochs(self) -> None:
        now: set[tuple[str, str]] = set()
        for did, ckey, _req, _sid in result_rows(self.cluster):
            k = (ckey, did)
            now.add(k)
            self.alloc_epoch.setdefault(k, self.pools[did.split("/")[1]].epoch)
        for k in set(self.alloc_epoch) - now:
            del self.alloc_epoch[k]

    def _check_locks(self, views: dict[str, PoolView]) -> None:
        """Invariants 1 and 6 over the live cache."""
        hold = holders(self.cluster)
        for did, st_ in self.s.state.affinity_states.items():
            if st_.status is not AffinityStatus.LOCKED:
                continue
            assert self.gates.sharing_affinity, f"{did} Locked with the gate off"
            view = views.get(did.split("/")[1])
            if view is None or not view.complete or did not in view.devices:
                continue  # republish window: the lock is kept until the pool is complete
            assert view.declares and view.devices[did][1], f"{did} Locked outside a gated pool"
            for c, req, _u in hold.get(did, []):
                got = claim_keys(c, req, view.extractors)
                assert got == st_.locked_affinity, (
                    f"{did} locked to {st_.lock_dict()} but holder {c.name}/{req} extracts {got}")
        if not self.gates.sharing_affinity:
            assert not self.s.state.affinity_states, "affinity state with the gate off"

    def _check_capacity(self, views: dict[str, PoolView]) -> None:
        """Invariant 2."""
        devices = {d: v for pv in views.values() for d, v in pv.devices.items()}
        for did, rows in holders(self.cluster).items():
            assert did in devices, f"allocation on unknown device {did}"
            slots, multi = devices[did]
            if multi:
                used = sum((u for _c, _r, u in rows), Fraction(0))
                assert used <= slots, f"{did} over-committed: {used} > {slots}"
            else:
                assert len(rows) == 1, f"exclusive {did} allocated {len(rows)} times"

    def _check_restart(self, views: dict[str, PoolView]) -> None:
        """Invariant 4: a fresh scheduler on the same cluster rebuilds the same states."""
        fresh = Scheduler(self.cluster, self.gates)
        try:
            fresh.start()
        finally:
            fresh.stop()
        check_cache(fresh, self.cluster, "fresh")
        devices = set(self.s.state.affinity_states) | set(fresh.state.affinity_states)
        # Devices an unresolved claim is (conservatively) held on may be locked live only.
        held = {d for d in self.s.state.devices() for sh in self.s.state.shares(d)
                if sh.claim in self.s.unresolved}
        for did in devices - held:
            view = views.get(did.split("/")[1])
            if view is None or not view.complete or did not in view.devices:
                continue  # in a republish window a fresh scheduler cannot know the lock
            live, new = self.s.state.affinity(did), fresh.state.affinity(did)
            event(f"live {live.status.label} / restart {new.status.label}")
            mutated = self._mutated(did)
            _compare_states(did, live, new, mutated)

    def _mutated(self, did: str) -> bool:
        epoch = self.pools[did.split("/")[1]].epoch
        return any(e != epoch for (_c, d), e in self.alloc_epoch.items() if d == did)

    def teardown(self) -> None:
        if self.sched is not None:
            self.sched.stop()


def _compare_states(did: str, live: AffinityState, new: AffinityState, mutated: bool) -> None:
    L, U, C = AffinityStatus.LOCKED, AffinityStatus.UNRECONSTRUCTABLE, AffinityStatus.CLEAN
    # Clean means "no gated holder": both must agree whatever happened to the slices.
    assert (live.status is C) == (new.status is C), f"{did}: live {live} vs restart {new}"
    if live.status is L:
        assert new.status is L and new.locked_affinity == live.locked_affinity, (
            f"{did}: live lock {live.lock_dict()} not reproduced by a restart ({new})")
    if mutated:
        return  # the live one may be Unreconstructable (sticky after a slice mutation)
    # Unreconstructable is sticky until the device drains, so a restart after a partial
    # drain may find a clean lock; the converse (restart more cautious) must not happen.
    if new.status is U:
        assert live.status is U, f"{did}: restart finds it Unreconstructable, live has {live}"


TestTimelines = Timelines.TestCase
TestTimelines.settings = settings(
    max_examples=MAX_EXAMPLES,
    stateful_step_count=STEPS,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


# ====================================================================== reproducers
def test_concurrent_pods_sharing_one_claim() -> None:
    """Found by the state machine (fixed: claims are re-read before Reserve): pods a and b
    use one claim c and are scheduled together.

    Both PreFilter on the same snapshot and see c unallocated; a allocates and
    binds c, then b allocates c again and its Bind writes c from the copy read
    in PreFilter, dropping a from reservedFor. The cache keeps both shares
    while the cluster has one. Deleting b then deallocates c although a still
    runs on eth1, so eth1 turns Clean and can be locked to another subnet
    under a's feet.
    """
    eth1 = dev("node-1", "eth1")
    env = Env(nic_class(), meta_slice("node-1"), device_slice("node-1", ["eth1"], slots="2"))
    env.apply(claim("c", nic_params("subnet-A")))
    env.apply(pod("a", ["c"]))
    env.apply(pod("b", ["c"]))
    env.scheduler.schedule_concurrently(["default/a", "default/b"])
    c = env.cluster.claim("default/c")
    assert c is not None and c.status.allocation is not None
    bound = sorted(n for n in ("a", "b") if env.cluster.pod(f"default/{n}").spec.node_name)  # type: ignore[union-attr]
    # Every pod bound with c is one of c's consumers; c is allocated once.
    assert sorted(r.name for r in c.status.reserved_for) == bound
    assert len(env.scheduler.state.shares(eth1)) == len(c.status.allocation.devices.results) == 1


def test_concurrent_pods_joining_allocated_claim() -> None:
    """The same stale write when c is already allocated: no second allocation, but b,
    bound in the same batch as d, is no longer among c's consumers."""
    env = Env(nic_class(), meta_slice("node-1"), device_slice("node-1", ["eth1"], slots="2"))
    env.apply(claim("c", nic_params("subnet-A")))
    env.apply(pod("a", ["c"]))
    assert env.schedule("a").result is Result.SCHEDULED
    env.apply(pod("b", ["c"]))
    env.apply(pod("d", ["c"]))
    attempts = env.scheduler.schedule_concurrently(["default/b", "default/d"])
    assert [x.result for x in attempts] == [Result.SCHEDULED, Result.SCHEDULED]
    c = env.cluster.claim("default/c")
    assert c is not None
    assert sorted(r.name for r in c.status.reserved_for) == ["a", "b", "d"]


def test_batch_pod_does_not_allocate_a_claim_an_earlier_write_left_unknown() -> None:
    """Found by the state machine: pods a and b use one claim c and are scheduled
    together. a's PreBind write of c times out (not stored) and Unreserve cannot undo
    it on the server, so c is unresolved and held as a's write asked. b had passed
    PreFilter before that; Reserve must now refuse c (as PreFilter would), or b
    allocates c a second time while the cache still holds a's share: the cache then
    has two shares where the cluster has one."""
    eth1 = dev("node-1", "eth1")
    env = Env(nic_class(), meta_slice("node-1"), device_slice("node-1", ["eth1"], slots="2"))
    env.apply(claim("c", nic_params("subnet-A")))
    env.apply(pod("a", ["c"]))
    env.apply(pod("b", ["c"]))
    env.view.fail("claim", "default/c", Failure(Fault.TIMEOUT, False))
    env.view.fail("unreserve", "default/c", Failure(Fault.SERVER_ERROR, False))
    first, second = env.scheduler.schedule_concurrently(["default/a", "default/b"])
    assert first.result is Result.ERROR and second.result is Result.ERROR
    assert "not known yet" in second.message
    assert "default/c" in env.scheduler.unresolved
    assert len(env.scheduler.state.shares(eth1)) == 1  # a's write, held as asked
    c = env.cluster.claim("default/c")
    assert c is not None and c.status.allocation is None
    # The next attempt reads c back first: the cache then holds what the server has.
    assert env.schedule("b").result is Result.SCHEDULED
    c = env.cluster.claim("default/c")
    assert c is not None and c.status.allocation is not None
    assert len(env.scheduler.state.shares(eth1)) == len(c.status.allocation.devices.results) == 1
