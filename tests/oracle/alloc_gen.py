"""A seeded generator of single-node allocation problems (no sharing affinity).

A problem is plain Kubernetes JSON (``resource.k8s.io/v1`` and ``v1``):
ResourceSlices of several pools (several slices, old and current
generations, complete and incomplete, local to this node, to another node, or
to all nodes), DeviceClasses with CEL selectors, the claims to allocate
(``exactly`` with ExactCount and All, ``firstAvailable``, request selectors,
``matchAttribute``/``distinctAttribute`` constraints, capacity requests
against every request policy) and claims that already hold devices. Both
sides get the same JSON. Each problem is tagged with the features it uses,
for grouping and allow-listing.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Final

NODE: Final = "node-1"
GPU: Final = "gpu.example.com"
NIC: Final = "nic.example.com"
FEATURES: Final = {"consumableCapacity": True, "prioritizedList": True}


@dataclass
class Problem:
    """One allocation problem; ``tags`` name the features it exercises."""

    id: str
    slices: list[dict[str, Any]]
    classes: list[dict[str, Any]]
    claims: list[dict[str, Any]]
    allocated_claims: list[dict[str, Any]]
    node: dict[str, Any]
    tags: frozenset[str] = field(default_factory=frozenset)

    def request(self) -> dict[str, Any]:
        return {"op": "allocate", "id": self.id, "features": FEATURES, "node": self.node,
                "slices": self.slices, "classes": self.classes, "claims": self.claims,
                "allocatedClaims": self.allocated_claims}


CLASSES: Final[list[dict[str, Any]]] = [
    {"name": "gpu", "selectors": [f"device.driver == '{GPU}'"]},
    {"name": "gpu-big", "selectors": [f"device.driver == '{GPU}'",
                                      f"device.capacity['{GPU}'].memory.compareTo(quantity('16Gi')) >= 0"]},
    {"name": "nic", "selectors": [f"device.driver == '{NIC}'"]},
    {"name": "any", "selectors": []},
    {"name": "shared", "selectors": ["device.allowMultipleAllocations"]},
]

REQUEST_SELECTORS: Final = (
    f"device.attributes['{GPU}'].model == 'a100'",
    f"device.attributes['{GPU}'].numa == 0",
    f"device.attributes['{GPU}'].index % 2 == 1",
    f"device.capacity['{GPU}'].memory.isGreaterThan(quantity('8Gi'))",
    f"has(device.attributes['{NIC}'].speed) && device.attributes['{NIC}'].speed >= 100",
    "device.allowMultipleAllocations",
    f"device.attributes['{GPU}'].driverVersion.isGreaterThan(semver('1.5.0'))",
)

POLICIES: Final = ("none", "default", "validValues", "validRange", "validRangeStep")


class Generator:
    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)

    # ------------------------------------------------------------------ devices
    def _device(self, driver: str, name: str, index: int, tags: set[str]) -> dict[str, Any]:
        r = self.r
        attrs: dict[str, Any]
        caps: dict[str, Any]
        if driver == GPU:
            attrs = {"model": {"string": r.choice(["a100", "h100", "t4"])},
                     "index": {"int": index}, "numa": {"int": r.choice([0, 1])},
                     "driverVersion": {"version": r.choice(["1.2.0", "1.10.0", "2.0.0"])}}
            caps = {"memory": {"value": r.choice(["8Gi", "16Gi", "40Gi", "80Gi"])}}
        else:
            attrs = {"speed": {"int": r.choice([10, 100, 400])}, "index": {"int": index},
                     "numa": {"int": r.choice([0, 1])}}
            caps = {}
        if r.random() < 0.15:
            del attrs["numa"]
        dev: dict[str, Any] = {"name": name, "attributes": attrs, "capacity": caps}
        if r.random() < 0.35:
            tags.add("consumable")
            dev["allowMultipleAllocations"] = True
            policy = r.choice(POLICIES)
            tags.add(f"policy.{policy}")
            cap: dict[str, Any] = {"value": r.choice(["8", "16", "10"])}
            if policy == "default":
                cap["requestPolicy"] = {"default": r.choice(["1", "2", "4"])}
            elif policy == "validValues":
                cap["requestPolicy"] = {"default": "2", "validValues": ["2", "4", "8"]}
            elif policy == "validRange":
                cap["requestPolicy"] = {"default": "2", "validRange": {"min": "2", "max": "6"}}
            elif policy == "validRangeStep":
                cap["requestPolicy"] = {"default": "2",
                                        "validRange": {"min": "2", "max": "8", "step": "2"}}
            caps["slots"] = cap
        return dev

    def _slices(self, tags: set[str]) -> tuple[list[dict[str, Any]], list[tuple[str, str, str, dict[str, Any]]]]:
        """Slices of 1-3 pools, and the devices of current complete-or-not local pools."""
        r = self.r
        slices: list[dict[str, Any]] = []
        visible: list[tuple[str, str, str, dict[str, Any]]] = []
        for p in range(r.randint(1, 3)):
            driver = r.choice([GPU, GPU, NIC])
            pool = f"pool-{p}"
            where = r.choices(["node", "all", "other"], [8, 2, 1])[0]
            tags.add(f"pool.{where}")
            generation = r.choice([1, 1, 2, 3])
            count = r.choice([1, 1, 2, 3])
            published = count
            if r.random() < 0.12:
                published = r.randint(1, count) - (1 if count > 1 else 0) or 1
                if published < count:
                    tags.add("incomplete")
            index = 0
            for s in range(published):
                devices = []
                for _ in range(r.randint(1, 3)):
                    devices.append(self._device(driver, f"dev-{index}", index, tags))
                    index += 1
                spec: dict[str, Any] = {"driver": driver,
                                        "pool": {"name": pool, "generation": generation,
                                                 "resourceSliceCount": count},
                                        "devices": devices}
                if where == "node":
                    spec["nodeName"] = NODE
                elif where == "other":
                    spec["nodeName"] = "node-2"
                else:
                    spec["allNodes"] = True
                slices.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                               "metadata": {"name": f"{pool}-{driver.split('.')[0]}-g{generation}-{s}"},
                               "spec": spec})
                if where != "other":
                    visible += [(driver, pool, d["name"], d) for d in devices]
            if generation > 1 and r.random() < 0.4:
                tags.add("old-generation")
                old = {"driver": driver, "pool": {"name": pool, "generation": generation - 1,
                                                  "resourceSliceCount": 1},
                       "devices": [self._device(driver, "old-0", 99, set())]}
                if where == "other":
                    old["nodeName"] = "node-2"
                elif where == "node":
                    old["nodeName"] = NODE
                else:
                    old["allNodes"] = True
                slices.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                               "metadata": {"name": f"{pool}-{driver.split('.')[0]}-old"},
                               "spec": old})
        # Devices of the same (driver, pool) in different slices of the generator
        # never collide: names are unique per pool.
        return slices, visible

    # ------------------------------------------------------------------ claims
    def _exact(self, tags: set[str], consumable: bool) -> dict[str, Any]:
        r = self.r
        ex: dict[str, Any] = {"deviceClassName": r.choice([c["name"] for c in CLASSES])}
        mode = r.choices(["ExactCount", "All", None], [5, 1, 4])[0]
        if mode == "All":
            tags.add("mode.All")
            ex["allocationMode"] = "All"
        else:
            # As the API server defaults it: ExactCount, count 1.
            ex["allocationMode"] = "ExactCount"
            ex["count"] = 1
            if r.random() < 0.5:
                ex["count"] = r.choice([1, 2, 3])
                tags.add("count")
        if r.random() < 0.35:
            tags.add("request-selector")
            expr = r.choice(REQUEST_SELECTORS)
            if r.random() < 0.9:
                # Guarded, so that it never reads another driver's attributes.
                domain = NIC if NIC in expr else GPU
                expr = f"device.driver == '{domain}' && ({expr})"
            else:
                tags.add("unguarded-selector")
            ex["selectors"] = [{"cel": {"expression": expr}}]
        if consumable and r.random() < 0.5:
            tags.add("capacity-request")
            ex["capacity"] = {"requests": {"slots": r.choice(["1", "2", "3", "4", "5", "7"])}}
        return ex

    def _claim(self, name: str, tags: set[str], consumable: bool) -> dict[str, Any]:
        r = self.r
        requests: list[dict[str, Any]] = []
        for i in range(r.choices([1, 2, 3], [6, 3, 1])[0]):
            rname = f"r{i}"
            if r.random() < 0.25:
                tags.add("firstAvailable")
                subs = []
                for j in range(r.randint(1, 3)):
                    sub = self._exact(tags, consumable)
                    subs.append({"name": f"s{j}", **sub})
                requests.append({"name": rname, "firstAvailable": subs})
            else:
                requests.append({"name": rname, "exactly": self._exact(tags, consumable)})
        devices: dict[str, Any] = {"requests": requests}
        if r.random() < 0.35:
            constraints = []
            for _ in range(r.randint(1, 2)):
                c: dict[str, Any] = {}
                if r.random() < 0.5:
                    c["requests"] = sorted(r.sample([q["name"] for q in requests],
                                                    r.randint(1, len(requests))))
                attr = r.choice([f"{GPU}/model", f"{GPU}/numa", f"{NIC}/numa", f"{GPU}/index",
                                 f"{NIC}/speed"])
                if r.random() < 0.6:
                    tags.add("matchAttribute")
                    c["matchAttribute"] = attr
                else:
                    tags.add("distinctAttribute")
                    c["distinctAttribute"] = attr
                constraints.append(c)
            devices["constraints"] = constraints
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
                "spec": {"devices": devices}}

    def _allocated(self, visible: list[tuple[str, str, str, dict[str, Any]]],
                   tags: set[str]) -> list[dict[str, Any]]:
        r = self.r
        out: list[dict[str, Any]] = []
        if not visible or r.random() < 0.5:
            return out
        tags.add("already-allocated")
        for k in range(r.randint(1, 2)):
            driver, pool, name, dev = r.choice(visible)
            result: dict[str, Any] = {"request": "r0", "driver": driver, "pool": pool, "device": name}
            if dev.get("allowMultipleAllocations"):
                tags.add("already-consumed")
                result["shareID"] = f"0000000{k}-0000-4000-8000-00000000000{k}"
                result["consumedCapacity"] = {"slots": r.choice(["1", "2", "4", "6"])}
            out.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                        "metadata": {"name": f"held-{k}", "namespace": "default", "uid": f"uid-held-{k}"},
                        "spec": {"devices": {"requests": [{"name": "r0", "exactly": {"deviceClassName": "any"}}]}},
                        "status": {"allocation": {"devices": {"results": [result]}}}})
        return out

    def problem(self, i: int) -> Problem:
        r = self.r
        tags: set[str] = set()
        slices, visible = self._slices(tags)
        consumable = "consumable" in tags
        claims = [self._claim(f"claim-{c}", tags, consumable) for c in range(r.choices([1, 2, 3], [6, 3, 1])[0])]
        classes = [{"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                    "metadata": {"name": c["name"]},
                    "spec": {"selectors": [{"cel": {"expression": e}} for e in c["selectors"]]}}
                   for c in CLASSES]
        node = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": NODE, "labels": {"kubernetes.io/hostname": NODE}}}
        return Problem(f"p{i}", slices, classes, claims, self._allocated(visible, tags), node,
                       frozenset(tags))


def generate(seed: int, n: int) -> list[Problem]:
    g = Generator(seed)
    return [g.problem(i) for i in range(n)]
