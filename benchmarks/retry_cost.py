"""What a retry of a pod that never fits costs, in process (the unschedulable soak's flush).

Builds the bench workload's cluster (N nodes x D NICs x S slots, sharingAffinity
published), fills every slot with one-slot pods (a subnet of its own for each NIC;
``--taken T``: T slots of each NIC), then creates P pods that can never fit, of four
claim signatures in turn:

* ``too-big``: one NIC with S+1 slots (the soak's pod: more than any NIC has);
* ``new-subnet``: one slot of a subnet no NIC is locked to (every NIC is full, or
  locked to another subnet);
* ``two-nics``: two NICs of one slot each (not a one-device pod);
* ``selector``: one slot on a node with a label no node has (NodeAffinity rejects).

Each pod has its own claim, as a ResourceClaimTemplate gives it. Every pod is tried
once (the first attempts; the first pod of each signature finds nothing kept and is
reported apart), then every pod again, twice (the retries a flush makes: nothing
changed in between). Reported per round: the process's CPU time
(``time.process_time``) per attempt, in all and by signature, and the verdict cache's
counters over the round.
Every attempt's message is checked to equal the pod's first one.

    python benchmarks/retry_cost.py [--nodes 200] [--devices 8] [--slots 2] [--pods 1000] [--taken T]
"""

from __future__ import annotations

import argparse
import gc
import json
import time
from typing import Any

from dra_affinity.api.core import Pod
from dra_affinity.api.resource import ResourceClaim
from dra_affinity.features import Features
from dra_affinity.scheduler.scheduler import Scheduler
from dra_affinity.sim.workload import DRIVER, SLOTS, WorkloadSpec, pod_objects
from dra_affinity.structured.model import Result

from dra_affinity.bench.throughput import CountingRecorder, build_cluster  # isort: skip

SIGNATURES = ("too-big", "new-subnet", "two-nics", "selector")


def never_fitting(name: str, kind: str, slots: int) -> tuple[ResourceClaim, Pod]:
    """A pod of signature ``kind`` and its own claim (``<name>-nic``)."""
    params = {"apiVersion": "networking.example.com/v1", "kind": "NICConfig",
              "subnetID": "subnet-new" if kind == "new-subnet" else "subnet-000",
              "ibPKey": "0x8000", "mtu": 9000}
    exactly: dict[str, Any] = {"deviceClassName": "shared-nic",
                               "capacity": {"requests": {SLOTS: str(slots + 1 if kind == "too-big" else 1)}}}
    if kind == "two-nics":
        exactly["count"] = 2
    claim = ResourceClaim.model_validate({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": f"{name}-nic", "namespace": "default"},
        "spec": {"devices": {"requests": [{"name": "nic", "exactly": exactly}],
                             "config": [{"requests": ["nic"], "opaque": {"driver": DRIVER,
                                                                         "parameters": params}}]}}})
    spec: dict[str, Any] = {"resourceClaims": [{"name": "nic", "resourceClaimName": f"{name}-nic"}],
                            "containers": [{"name": "app", "image": "registry.example/app"}]}
    if kind == "selector":
        spec["nodeSelector"] = {"example.com/pool": "none"}
    pod = Pod.model_validate({"apiVersion": "v1", "kind": "Pod",
                              "metadata": {"name": name, "namespace": "default"}, "spec": spec})
    return claim, pod


def run(nodes: int, devices: int, slots: int, pods: int, rounds: int,
        taken: int | None = None) -> dict[str, Any]:
    spec = WorkloadSpec(nodes=nodes, devices_per_node=devices, slots=slots)
    cluster = build_cluster(spec)
    sched = Scheduler(cluster, Features(), recorder=CountingRecorder())
    sched.start()
    taken = slots if taken is None else taken
    for i in range(nodes * devices * taken):
        claim, pod = pod_objects(f"fill-{i}", i // taken)  # a subnet of its own per NIC
        cluster.apply(claim, owned=True)
        cluster.apply(pod, owned=True)
        assert sched.schedule(f"default/fill-{i}").result is Result.SCHEDULED
    keys = []
    for i in range(pods):
        name = f"never-{i}"
        for obj in never_fitting(name, SIGNATURES[i % len(SIGNATURES)], slots):
            assert cluster.apply(obj, owned=True).applied
        keys.append(f"default/{name}")
    first: dict[str, str] = {}
    out: list[dict[str, Any]] = []
    for r in range(1 + rounds):
        v = sched.verdicts
        assert v is not None
        reused, computed = v.reused, v.computed
        gc.collect()
        attempts, times = [], []
        for k in keys:
            t0 = time.process_time()
            attempts.append(sched.schedule(k))
            times.append(time.process_time() - t0)
        cpu = sum(times)
        if r == 0:
            # The first pod of each signature: nothing kept for it yet.
            cold = times[:len(SIGNATURES)]
            out.append({"round": "first attempt, first pod of its signature",
                        "msPerAttempt": round(1000 * sum(cold) / len(cold), 3)})
        for k, a in zip(keys, attempts, strict=True):
            assert a.result is Result.UNSCHEDULABLE, (k, a.message)
            assert first.setdefault(k, a.message) == a.message, k
        by_signature = {sig: round(1000 * sum(times[j::len(SIGNATURES)]) / len(times[j::len(SIGNATURES)]), 3)
                        for j, sig in enumerate(SIGNATURES)}
        row: dict[str, Any] = {"round": "first attempts" if r == 0 else f"retry {r}",
                               "msPerAttempt": round(1000 * cpu / len(keys), 3),
                               "msBySignature": by_signature,
                               "verdictsReused": v.reused - reused, "verdictsComputed": v.computed - computed}
        out.append(row)
    return {"nodes": nodes, "devicesPerNode": devices, "slots": slots, "slotsTaken": taken, "pods": pods,
            "signatures": list(SIGNATURES), "rounds": out,
            "retryOverColdFirst": round(out[-1]["msPerAttempt"] / out[0]["msPerAttempt"], 4)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=200)
    ap.add_argument("--devices", type=int, default=8)
    ap.add_argument("--slots", type=int, default=2)
    ap.add_argument("--pods", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=2, help="retries of every pod after its first attempt")
    ap.add_argument("--taken", type=int, default=None,
                    help="slots taken on each NIC before the pods come (default: all); with room "
                         "left, a new subnet meets AffinityLockMismatch, whose text names the claim")
    args = ap.parse_args()
    print(json.dumps(run(args.nodes, args.devices, args.slots, args.pods, args.rounds, args.taken),
                     indent=2))


if __name__ == "__main__":
    main()
