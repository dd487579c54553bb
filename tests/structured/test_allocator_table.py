"""One table of allocator cases, run against the stable and the experimental allocator.

Each case is named for what it pins; the harness (``alloc_harness``) builds the
snapshot, the cache state and the claims' ``ClaimSpec`` and calls
``NodeAllocator.allocate`` directly. Cases that use no experiment run on both
variants and must agree; cases that use one run on the experimental variant only.
"""

from __future__ import annotations

import pytest
from alloc_harness import (
    GPU,
    NIC,
    PKEY,
    SLOTS,
    SUBNET,
    UNGUARDED,
    VARIANTS,
    Case,
    Held,
    check,
    dclass,
    device,
    exact,
    first,
    nic_config,
    rclaim,
    rslice,
    run,
    sub,
    supports,
)

from dra_affinity.structured import reasons
from dra_affinity.structured.experiments import ExperimentHooks
from dra_affinity.structured.model import Result

GPUS = dclass("gpu")
NICS = dclass("nic", NIC)


def gid(name: str, pool: str = "node-1") -> str:
    return f"{GPU}/{pool}/{name}"


def nid(name: str, pool: str = "node-1") -> str:
    return f"{NIC}/{pool}/{name}"


def gpus(*names: str, **kw: object) -> list[dict[str, object]]:
    return [device(n, **kw) for n in names]  # type: ignore[arg-type]


def nics(*names: str, slots: str = "16", **kw: object) -> list[dict[str, object]]:
    return [device(n, multi=True, caps={SLOTS: slots}, **kw) for n in names]  # type: ignore[arg-type]


ONE_POOL = [rslice("s", gpus("gpu-0", "gpu-1", "gpu-2"))]
NIC_POOL = [rslice("meta", driver=NIC, count=2, affinity={"subnet": SUBNET}),
            rslice("nics", nics("eth1", "eth2"), driver=NIC, count=2)]
NIC_POOL_ONE = [rslice("meta", driver=NIC, count=2, affinity={"subnet": SUBNET}),
                rslice("nics", nics("eth1"), driver=NIC, count=2)]
C, C2 = "default/c", "default/c2"


def nic_claim(name: str = "c", subnet: str | None = "X", slots: str = "1",
              pkey: str | None = None) -> object:
    cfg = [nic_config(subnet, pkey)] if subnet is not None or pkey is not None else []
    return rclaim(name, exact("r", "nic", capacity={SLOTS: slots}), config=cfg)


CASES: list[Case] = [
    # ------------------------------------------------------------------ exact count
    Case("exact-one", ONE_POOL, [GPUS], [rclaim("c", exact("r"))],
         devices=[(C, "r", gid("gpu-0"))]),
    Case("exact-two-first-fit", ONE_POOL, [GPUS], [rclaim("c", exact("r", count=2))],
         devices=[(C, "r", gid("gpu-0")), (C, "r", gid("gpu-1"))]),
    Case("exact-count-more-than-devices", ONE_POOL, [GPUS], [rclaim("c", exact("r", count=4))],
         unschedulable=frozenset({reasons.NO_DEVICES})),
    Case("exact-skips-allocated", ONE_POOL, [GPUS], [rclaim("c", exact("r"))],
         held=[Held(gid("gpu-0"), exclusive=True)], devices=[(C, "r", gid("gpu-1"))]),
    Case("exact-all-allocated", [rslice("s", gpus("gpu-0"))], [GPUS], [rclaim("c", exact("r"))],
         held=[Held(gid("gpu-0"), exclusive=True)], unschedulable=frozenset({reasons.DEVICE_ALLOCATED})),
    Case("exact-devices-on-other-node", [rslice("s", gpus("gpu-0"), node="node-2")], [GPUS],
         [rclaim("c", exact("r"))], unschedulable=frozenset({reasons.NO_DEVICES})),
    Case("exact-two-claims-not-enough-devices", [rslice("s", gpus("a", "b"))],
         [GPUS], [rclaim("c", exact("r")), rclaim("c2", exact("r", count=2))],
         unschedulable=frozenset({reasons.DEVICE_ALLOCATED})),
    # ------------------------------------------------------------------ allocationMode All
    Case("all-devices", ONE_POOL, [GPUS], [rclaim("c", exact("r", all_=True))],
         devices=[(C, "r", gid("gpu-0")), (C, "r", gid("gpu-1")), (C, "r", gid("gpu-2"))]),
    Case("all-one-allocated", ONE_POOL, [GPUS], [rclaim("c", exact("r", all_=True))],
         held=[Held(gid("gpu-1"), exclusive=True)], unschedulable=frozenset({reasons.DEVICE_ALLOCATED})),
    Case("all-needs-at-least-one", [rslice("s", nics("eth1"), driver=NIC)], [GPUS, NICS],
         [rclaim("c", exact("r", all_=True))], unschedulable=frozenset({reasons.SELECTOR_MISMATCH})),
    Case("all-selector-subset",
         [rslice("s", [device("a", attrs={"model": "x"}), device("b", attrs={"model": "y"}),
                       device("c", attrs={"model": "x"})])],
         [dclass("gpu-x", expr=f'device.attributes["{GPU}"].model == "x"')],
         [rclaim("c", exact("r", "gpu-x", all_=True))],
         devices=[(C, "r", gid("a")), (C, "r", gid("c"))]),
    # ------------------------------------------------------------------ firstAvailable
    Case("first-available-first-fits", ONE_POOL, [GPUS],
         [rclaim("c", first("r", sub("big", count=2), sub("small")))],
         devices=[(C, "r/big", gid("gpu-0")), (C, "r/big", gid("gpu-1"))]),
    Case("first-available-falls-back", ONE_POOL, [GPUS],
         [rclaim("c", first("r", sub("big", count=4), sub("small", count=1)))],
         devices=[(C, "r/small", gid("gpu-0"))]),
    Case("first-available-all-then-one", ONE_POOL, [GPUS],
         [rclaim("c", first("r", sub("all", all_=True), sub("one")))],
         held=[Held(gid("gpu-0"), exclusive=True)], devices=[(C, "r/one", gid("gpu-1"))]),
    # ------------------------------------------------------------------ selectors and classes
    Case("class-selector-filters",
         [rslice("s", [device("a", attrs={"mem": 8}), device("b", attrs={"mem": 16})])],
         [dclass("big", expr=f'device.attributes["{GPU}"].mem >= 16')],
         [rclaim("c", exact("r", "big"))], devices=[(C, "r", gid("b"))]),
    Case("class-and-request-selectors-both-apply",
         [rslice("s", [device("a", attrs={"mem": 16, "fast": False}),
                       device("b", attrs={"mem": 8, "fast": True}),
                       device("c", attrs={"mem": 16, "fast": True})])],
         [dclass("big", expr=f'device.attributes["{GPU}"].mem >= 16')],
         [rclaim("c", exact("r", "big", expr=f'device.attributes["{GPU}"].fast'))],
         devices=[(C, "r", gid("c"))]),
    Case("unknown-class-is-unresolvable", ONE_POOL, [GPUS], [rclaim("c", exact("r", "nope"))],
         abort=(Result.UNRESOLVABLE, reasons.DEVICE_CLASS_NOT_FOUND)),
    # ------------------------------------------------------------------ matchAttribute
    Case("match-attribute-backtracks",
         [rslice("s", [device("a", attrs={"numa": 0}), device("b", attrs={"numa": 1}),
                       device("c", attrs={"numa": 1})])], [GPUS],
         [rclaim("c", exact("r1"), exact("r2"),
                 constraints=[{"requests": ["r1", "r2"], "matchAttribute": f"{GPU}/numa"}])],
         devices=[(C, "r1", gid("b")), (C, "r2", gid("c"))]),
    Case("match-attribute-missing-on-device",
         [rslice("s", [device("a"), device("b", attrs={"numa": 1})])], [GPUS],
         [rclaim("c", exact("r1"), exact("r2"),
                 constraints=[{"requests": ["r1", "r2"], "matchAttribute": f"{GPU}/numa"}])],
         unschedulable=frozenset({reasons.CONSTRAINT_MISMATCH, reasons.DEVICE_ALLOCATED})),
    Case("match-attribute-all-requests-missing",
         [rslice("s", [device("a"), device("b")])], [GPUS],
         [rclaim("c", exact("r1"), constraints=[{"matchAttribute": f"{GPU}/numa"}])],
         unschedulable=frozenset({reasons.CONSTRAINT_MISMATCH})),
    Case("match-attribute-compares-types",
         [rslice("s", [device("a", attrs={"flag": 1}), device("b", attrs={"flag": True})])], [GPUS],
         [rclaim("c", exact("r1"), exact("r2"),
                 constraints=[{"requests": ["r1", "r2"], "matchAttribute": f"{GPU}/flag"}])],
         unschedulable=frozenset({reasons.CONSTRAINT_MISMATCH, reasons.DEVICE_ALLOCATED})),
    Case("match-attribute-subrequest",
         [rslice("s", [device("a", attrs={"numa": 0}), device("b", attrs={"numa": 1}),
                       device("c", attrs={"numa": 1})])], [GPUS],
         [rclaim("c", exact("r1"), first("r2", sub("x", expr=f'device.attributes["{GPU}"].numa == 1')),
                 constraints=[{"requests": ["r1", "r2"], "matchAttribute": f"{GPU}/numa"}])],
         devices=[(C, "r1", gid("b")), (C, "r2/x", gid("c"))]),
    # ------------------------------------------------------------------ distinctAttribute
    Case("distinct-attribute-one-shared-device",
         [rslice("s", nics("eth1", attrs={"port": "p1"}), driver=NIC)], [NICS],
         [rclaim("c", exact("r1", "nic", capacity={SLOTS: "1"}), exact("r2", "nic", capacity={SLOTS: "1"}),
                 constraints=[{"requests": ["r1", "r2"], "distinctAttribute": f"{NIC}/port"}])],
         unschedulable=frozenset({reasons.CONSTRAINT_MISMATCH})),
    Case("distinct-attribute-spreads",
         [rslice("s", nics("eth1", attrs={"port": "p1"}) + nics("eth2", attrs={"port": "p2"}),
                 driver=NIC)], [NICS],
         [rclaim("c", exact("r1", "nic", capacity={SLOTS: "1"}), exact("r2", "nic", capacity={SLOTS: "1"}),
                 constraints=[{"requests": ["r1", "r2"], "distinctAttribute": f"{NIC}/port"}])],
         devices=[(C, "r1", nid("eth1")), (C, "r2", nid("eth2"))]),
    Case("distinct-attribute-equal-values",
         [rslice("s", [device("a", attrs={"rack": "r1"}), device("b", attrs={"rack": "r1"})])],
         [GPUS], [rclaim("c", exact("r", count=2), constraints=[{"distinctAttribute": f"{GPU}/rack"}])],
         unschedulable=frozenset({reasons.CONSTRAINT_MISMATCH})),
    Case("distinct-attribute-missing",
         [rslice("s", [device("a", attrs={"rack": "r1"}), device("b")])],
         [GPUS], [rclaim("c", exact("r", count=2), constraints=[{"distinctAttribute": f"{GPU}/rack"}])],
         unschedulable=frozenset({reasons.CONSTRAINT_MISMATCH})),
    Case("distinct-attribute-skips-duplicate",
         [rslice("s", [device("a", attrs={"rack": "r1"}), device("b", attrs={"rack": "r1"}),
                       device("c", attrs={"rack": "r2"})])],
         [GPUS], [rclaim("c", exact("r", count=2), constraints=[{"distinctAttribute": f"{GPU}/rack"}])],
         devices=[(C, "r", gid("a")), (C, "r", gid("c"))]),
    Case("distinct-attribute-other-requests-free",
         [rslice("s", [device("a", attrs={"rack": "r1"}), device("b", attrs={"rack": "r1"})])],
         [GPUS], [rclaim("c", exact("r1"), exact("r2"), exact("r3"),
                         constraints=[{"requests": ["r1", "r2"], "distinctAttribute": f"{GPU}/rack"}])],
         unschedulable=frozenset({reasons.CONSTRAINT_MISMATCH, reasons.DEVICE_ALLOCATED})),
    # ------------------------------------------------------------------ consumable capacity
    Case("capacity-request-fits", [rslice("s", nics("eth1"), driver=NIC)], [NICS],
         [rclaim("c", exact("r", "nic", capacity={SLOTS: "4"}))],
         devices=[(C, "r", nid("eth1"))], consumed={nid("eth1"): {SLOTS: "4"}}),
    Case("capacity-no-request-takes-all", [rslice("s", nics("eth1"), driver=NIC)], [NICS],
         [rclaim("c", exact("r", "nic")), rclaim("c2", exact("r", "nic", capacity={SLOTS: "1"}))],
         unschedulable=frozenset({reasons.INSUFFICIENT_CAPACITY})),
    Case("capacity-policy-default",
         [rslice("s", [device("eth1", multi=True, caps={SLOTS: {"value": "16", "requestPolicy": {
             "default": "2", "validRange": {"min": "1"}}}})], driver=NIC)], [NICS],
         [rclaim("c", exact("r", "nic"))],
         devices=[(C, "r", nid("eth1"))], consumed={nid("eth1"): {SLOTS: "2"}}),
    Case("capacity-valid-values-round-up",
         [rslice("s", [device("eth1", multi=True, caps={SLOTS: {"value": "16", "requestPolicy": {
             "default": "2", "validValues": ["2", "4", "8"]}}})], driver=NIC)], [NICS],
         [rclaim("c", exact("r", "nic", capacity={SLOTS: "3"}))],
         devices=[(C, "r", nid("eth1"))], consumed={nid("eth1"): {SLOTS: "4"}}),
    Case("capacity-valid-values-exceeded",
         [rslice("s", [device("eth1", multi=True, caps={SLOTS: {"value": "16", "requestPolicy": {
             "default": "2", "validValues": ["2", "4", "8"]}}})], driver=NIC)], [NICS],
         [rclaim("c", exact("r", "nic", capacity={SLOTS: "9"}))],
         unschedulable=frozenset({reasons.INVALID_CAPACITY_REQUEST})),
    Case("capacity-valid-range-step",
         [rslice("s", [device("eth1", multi=True, caps={SLOTS: {"value": "16", "requestPolicy": {
             "default": "1", "validRange": {"min": "1", "step": "2"}}}})], driver=NIC)], [NICS],
         [rclaim("c", exact("r", "nic", capacity={SLOTS: "2"}))],
         devices=[(C, "r", nid("eth1"))], consumed={nid("eth1"): {SLOTS: "3"}}),
    Case("capacity-valid-range-below-min",
         [rslice("s", [device("eth1", multi=True, caps={SLOTS: {"value": "16", "requestPolicy": {
             "default": "4", "validRange": {"min": "4"}}}})], driver=NIC)], [NICS],
         [rclaim("c", exact("r", "nic", capacity={SLOTS: "1"}))],
         devices=[(C, "r", nid("eth1"))], consumed={nid("eth1"): {SLOTS: "4"}}),
    Case("capacity-valid-range-above-max",
         [rslice("s", [device("eth1", multi=True, caps={SLOTS: {"value": "16", "requestPolicy": {
             "default": "1", "validRange": {"min": "1", "max": "4"}}}})], driver=NIC)], [NICS],
         [rclaim("c", exact("r", "nic", capacity={SLOTS: "5"}))],
         unschedulable=frozenset({reasons.INVALID_CAPACITY_REQUEST})),
    Case("capacity-remaining-too-small", [rslice("s", nics("eth1"), driver=NIC)], [NICS],
         [rclaim("c", exact("r", "nic", capacity={SLOTS: "4"}))],
         held=[Held(nid("eth1"), consumed={SLOTS: "14"})],
         unschedulable=frozenset({reasons.INSUFFICIENT_CAPACITY}), message="not enough"),
    Case("capacity-not-published", [rslice("s", nics("eth1"), driver=NIC)], [NICS],
         [rclaim("c", exact("r", "nic", capacity={f"{NIC}/bandwidth": "1"}))],
         unschedulable=frozenset({reasons.INVALID_CAPACITY_REQUEST})),
    Case("capacity-two-requests-share-device", [rslice("s", nics("eth1", slots="2"), driver=NIC)],
         [NICS], [rclaim("c", exact("r1", "nic", capacity={SLOTS: "1"}),
                         exact("r2", "nic", capacity={SLOTS: "1"}))],
         devices=[(C, "r1", nid("eth1")), (C, "r2", nid("eth1"))]),
    Case("capacity-exclusive-device-too-small",
         [rslice("s", [device("a", caps={SLOTS: "2"}), device("b", caps={SLOTS: "8"})], driver=NIC)],
         [NICS], [rclaim("c", exact("r", "nic", capacity={SLOTS: "4"}))],
         devices=[(C, "r", nid("b"))]),
    # ------------------------------------------------------------------ All + consumable capacity
    Case("all-capacity-leaves-out-device-without-capacity",
         [rslice("s", [*nics("eth1"), device("eth2", multi=True)], driver=NIC)], [NICS],
         [rclaim("c", exact("r", "nic", all_=True, capacity={SLOTS: "4"}))],
         devices=[(C, "r", nid("eth1"))]),
    Case("all-capacity-leaves-out-too-small",
         [rslice("s", nics("eth1") + nics("eth2", slots="2"), driver=NIC)], [NICS],
         [rclaim("c", exact("r", "nic", all_=True, capacity={SLOTS: "4"}))],
         devices=[(C, "r", nid("eth1"))]),
    Case("all-capacity-leaves-out-policy-misfit",
         [rslice("s", [*nics("eth1"), device("eth2", multi=True, caps={SLOTS: {
             "value": "16", "requestPolicy": {"default": "1", "validValues": ["1", "2"]}}})],
                 driver=NIC)], [NICS],
         [rclaim("c", exact("r", "nic", all_=True, capacity={SLOTS: "4"}))],
         devices=[(C, "r", nid("eth1"))]),
    Case("all-capacity-used-device-fails",
         [rslice("s", nics("eth1", "eth2"), driver=NIC)], [NICS],
         [rclaim("c", exact("r", "nic", all_=True, capacity={SLOTS: "4"}))],
         held=[Held(nid("eth2"), consumed={SLOTS: "14"})],
         unschedulable=frozenset({reasons.INSUFFICIENT_CAPACITY})),
    Case("all-capacity-exclusive-too-small-left-out",
         [rslice("s", [device("a", caps={SLOTS: "2"}), device("b", caps={SLOTS: "8"})], driver=NIC)],
         [NICS], [rclaim("c", exact("r", "nic", all_=True, capacity={SLOTS: "4"}))],
         devices=[(C, "r", nid("b"))]),
    Case("all-capacity-none-can-fit",
         [rslice("s", nics("eth1", slots="2"), driver=NIC)], [NICS],
         [rclaim("c", exact("r", "nic", all_=True, capacity={SLOTS: "4"}))],
         unschedulable=frozenset({reasons.INSUFFICIENT_CAPACITY})),
    # ------------------------------------------------------------------ incomplete and invalid pools
    Case("incomplete-pool-exclusive-device",
         [rslice("s", gpus("gpu-0"), count=2)], [GPUS], [rclaim("c", exact("r"))],
         unschedulable=frozenset({reasons.POOL_INCOMPLETE}), message="1 of 2 slices published"),
    Case("incomplete-pool-multi-device",
         [rslice("s", nics("eth1"), driver=NIC, count=2)], [NICS], [nic_claim()],
         unschedulable=frozenset({reasons.AFFINITY_POOL_INCOMPLETE})),
    Case("incomplete-pool-multi-device-gate-off",
         [rslice("s", nics("eth1"), driver=NIC, count=2)], [NICS], [nic_claim()], affinity=False,
         unschedulable=frozenset({reasons.POOL_INCOMPLETE})),
    Case("incomplete-pool-counted-across-nodes",
         [rslice("a", gpus("gpu-0"), pool="p", count=2),
          rslice("b", gpus("gpu-1"), pool="p", node="node-2", count=2)], [GPUS],
         [rclaim("c", exact("r"))], devices=[(C, "r", gid("gpu-0", "p"))]),
    Case("incomplete-newer-generation-hides-older",
         [rslice("old-a", gpus("gpu-0"), count=2), rslice("old-b", gpus("gpu-1"), count=2),
          rslice("new-a", gpus("gpu-0"), count=2, generation=2)], [GPUS],
         [rclaim("c", exact("r"))], unschedulable=frozenset({reasons.POOL_INCOMPLETE}),
         message="generation 2: 1 of 2 slices published"),
    Case("older-generation-ignored",
         [rslice("old", gpus("gpu-9"), count=1),
          rslice("new", gpus("gpu-0"), count=1, generation=2)], [GPUS],
         [rclaim("c", exact("r", all_=True))], devices=[(C, "r", gid("gpu-0"))]),
    Case("too-many-slices-is-incomplete",
         [rslice("a", gpus("gpu-0")), rslice("b", gpus("gpu-1"))], [GPUS],
         [rclaim("c", exact("r"))], unschedulable=frozenset({reasons.POOL_INCOMPLETE}),
         message="2 slices published but resourceSliceCount is 1"),
    Case("incomplete-pool-other-pool-allocates",
         [rslice("a", gpus("gpu-0"), pool="p1", count=2), rslice("b", gpus("gpu-1"), pool="p2")],
         [GPUS], [rclaim("c", exact("r"))], devices=[(C, "r", gid("gpu-1", "p2"))]),
    Case("invalid-pool-duplicate-device",
         [rslice("a", gpus("gpu-0"), count=2), rslice("b", gpus("gpu-0"), count=2)], [GPUS],
         [rclaim("c", exact("r"))], unschedulable=frozenset({reasons.POOL_INVALID})),
    Case("all-incomplete-pool",
         [rslice("s", gpus("gpu-0"), count=2)], [GPUS], [rclaim("c", exact("r", all_=True))],
         unschedulable=frozenset({reasons.POOL_INCOMPLETE}),
         message=f"claim {C}, request r: asks for all devices, but resource pool {GPU}/node-1 "
                 "is currently being updated"),
    Case("all-invalid-pool",
         [rslice("a", gpus("gpu-0"), count=2), rslice("b", gpus("gpu-0"), count=2)], [GPUS],
         [rclaim("c", exact("r", all_=True))], unschedulable=frozenset({reasons.POOL_INVALID}),
         message=f"claim {C}, request r: asks for all devices, but resource pool {GPU}/node-1 "
                 "is currently invalid"),
    Case("all-incomplete-pool-of-other-driver",
         [rslice("g", gpus("gpu-0")), rslice("n", nics("eth1"), driver=NIC, count=2)],
         [GPUS], [rclaim("c", exact("r", all_=True))], unschedulable=frozenset({reasons.POOL_INCOMPLETE}),
         message=f"resource pool {NIC}/node-1 is currently being updated"),
    Case("all-incomplete-pool-on-other-node",
         [rslice("g", gpus("gpu-0")), rslice("n", nics("eth1"), driver=NIC, node="node-2", count=2)],
         [GPUS], [rclaim("c", exact("r", all_=True))], devices=[(C, "r", gid("gpu-0"))]),
    Case("all-subrequest-incomplete-pool-fails-node",
         [rslice("g", gpus("gpu-0")), rslice("h", gpus("gpu-1"), pool="p", count=2)],
         [GPUS], [rclaim("c", first("r", sub("one"), sub("all", all_=True)))],
         unschedulable=frozenset({reasons.POOL_INCOMPLETE}), message="request r/all: asks for all devices"),
    # ------------------------------------------------------------------ sharing affinity
    Case("affinity-clean-device-locks", NIC_POOL, [NICS], [nic_claim()],
         devices=[(C, "r", nid("eth1"))], keys={nid("eth1"): {"subnet": "X"}}),
    Case("affinity-joins-matching-lock", NIC_POOL, [NICS], [nic_claim()],
         held=[Held(nid("eth2"), consumed={SLOTS: "1"}, keys={"subnet": "X"}, gated=True),
               Held(nid("eth1"), consumed={SLOTS: "1"}, keys={"subnet": "Y"}, gated=True)],
         devices=[(C, "r", nid("eth2"))]),
    Case("affinity-lock-mismatch", NIC_POOL_ONE, [NICS], [nic_claim()],
         held=[Held(nid("eth1"), consumed={SLOTS: "1"}, keys={"subnet": "Y"}, gated=True)],
         unschedulable=frozenset({reasons.AFFINITY_LOCK_MISMATCH}), message="locked to incompatible"),
    Case("affinity-unreconstructable", NIC_POOL_ONE, [NICS], [nic_claim()],
         held=[Held(nid("eth1"), consumed={SLOTS: "1"}, keys=None, gated=True)],
         unschedulable=frozenset({reasons.AFFINITY_UNRECONSTRUCTABLE})),
    Case("affinity-no-keys", NIC_POOL, [NICS], [nic_claim(subnet=None)],
         unschedulable=frozenset({reasons.AFFINITY_NO_KEYS})),
    Case("affinity-cel-error",
         [rslice("meta", driver=NIC, count=2, affinity={"subnet": UNGUARDED}),
          rslice("nics", nics("eth1"), driver=NIC, count=2)], [NICS], [nic_claim(subnet=None, pkey="1")],
         abort=(Result.ERROR, reasons.AFFINITY_CEL_ERROR)),
    Case("affinity-self-inconsistent", NIC_POOL, [NICS],
         [rclaim("c", exact("r", "nic", capacity={SLOTS: "1"}),
                 config=[nic_config("X"), nic_config("Y")])],
         abort=(Result.UNRESOLVABLE, reasons.AFFINITY_SELF_INCONSISTENT)),
    Case("affinity-two-requests-one-device-mismatch", NIC_POOL_ONE, [NICS],
         [rclaim("c", exact("r1", "nic", capacity={SLOTS: "1"}), exact("r2", "nic", capacity={SLOTS: "1"}),
                 config=[nic_config("X", requests=["r1"]), nic_config("Y", requests=["r2"])])],
         unschedulable=frozenset({reasons.AFFINITY_LOCK_MISMATCH}), message="picked for another request"),
    Case("affinity-two-keys-lock",
         [rslice("meta", driver=NIC, count=2, affinity={"subnet": SUBNET, "pkey": PKEY}),
          rslice("nics", nics("eth1"), driver=NIC, count=2)], [NICS], [nic_claim(pkey="0x1")],
         devices=[(C, "r", nid("eth1"))], keys={nid("eth1"): {"subnet": "X", "pkey": "0x1"}}),
    Case("affinity-gate-off-pool-unallocatable", NIC_POOL, [NICS], [nic_claim()], affinity=False,
         unschedulable=frozenset({reasons.AFFINITY_FEATURE_DISABLED})),
    Case("affinity-invalid-pool",
         [rslice("meta-a", driver=NIC, count=3, affinity={"subnet": SUBNET}),
          rslice("meta-b", driver=NIC, count=3, affinity={"subnet": PKEY}),
          rslice("nics", nics("eth1"), driver=NIC, count=3)], [NICS], [nic_claim()],
         unschedulable=frozenset({reasons.AFFINITY_INVALID_POOL})),
    Case("affinity-exclusive-device-not-gated",
         [rslice("meta", driver=NIC, count=2, affinity={"subnet": SUBNET}),
          rslice("nics", [device("eth1", caps={SLOTS: "16"})], driver=NIC, count=2)], [NICS],
         [nic_claim(subnet=None)], devices=[(C, "r", nid("eth1"))], keys={}),
    # ------------------------------------------------------------------ experiments
    Case("experiment-never-set-lock-rejects-clean", NIC_POOL_ONE, [NICS], [nic_claim()],
         experiment=lambda memo: ExperimentHooks(frozenset({C})),
         unschedulable=frozenset({reasons.AFFINITY_NEVER_SET_LOCK})),
    Case("experiment-never-set-lock-joins", NIC_POOL, [NICS], [nic_claim()],
         held=[Held(nid("eth2"), consumed={SLOTS: "1"}, keys={"subnet": "X"}, gated=True)],
         experiment=lambda memo: ExperimentHooks(frozenset({C})),
         devices=[(C, "r", nid("eth2"))]),
]


def test_case_names_are_unique() -> None:
    names = [c.name for c in CASES]
    assert len(names) == len(set(names))
    assert len(CASES) >= 40


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_allocator(case: Case, variant: str) -> None:
    if not supports(case, variant):
        pytest.skip(f"{variant} allocator does not run experiments")
    check(case, run(case, variant))


@pytest.mark.parametrize("case", [c for c in CASES if c.experiment is None],
                         ids=[c.name for c in CASES if c.experiment is None])
def test_variants_agree(case: Case) -> None:
    """Without experiments the experimental allocator is the stable one."""
    assert run(case, "stable") == run(case, "experimental")
