"""Builders for real API objects used by scheduler tests (no mocks)."""

from __future__ import annotations

from typing import Any

from dra_affinity.api.core import Pod
from dra_affinity.api.resource import (
    DeviceClass,
    ResourceClaim,
    ResourceClaimTemplate,
    ResourceSlice,
)
from dra_affinity.features import Features
from dra_affinity.scheduler.scheduler import Scheduler
from dra_affinity.sim.cluster import Cluster
from dra_affinity.sim.faults import Failure, Fault, FaultInjectingView

DRIVER = "networking.example.com"
SLOTS = f"{DRIVER}/slots"

SUBNET = (
    'object.apiVersion == "networking.example.com/v1" && object.kind == "NICConfig" '
    '? object.subnetID : ""'
)
PKEY = (
    'object.apiVersion == "networking.example.com/v1" && object.kind == "NICConfig" '
    '? object.ibPKey : ""'
)


def nic_class(name: str = "shared-nic", config: list[dict[str, Any]] | None = None) -> DeviceClass:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}
    if config:
        spec["config"] = [{"opaque": {"driver": DRIVER, "parameters": p}} for p in config]
    return DeviceClass.model_validate({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                                       "metadata": {"name": name}, "spec": spec})


def meta_slice(node: str, extractors: dict[str, str] | None = None, *, name: str | None = None,
               pool: str | None = None, generation: int = 1, count: int = 2) -> ResourceSlice:
    ex = extractors if extractors is not None else {"subnet": SUBNET}
    return ResourceSlice.model_validate({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": name or f"{node}-meta"},
        "spec": {"driver": DRIVER, "nodeName": node,
                 "pool": {"name": pool or node, "generation": generation, "resourceSliceCount": count},
                 "sharingAffinity": [{"name": k, "expression": v} for k, v in ex.items()]},
    })


def device_slice(node: str, devices: list[str] | None = None, *, slots: str = "16",
                 name: str | None = None, pool: str | None = None, generation: int = 1,
                 count: int = 2, multi: bool = True, policy: dict[str, Any] | None = None,
                 extra: dict[str, Any] | None = None) -> ResourceSlice:
    devs = []
    for d in devices or ["eth1", "eth2"]:
        cap: dict[str, Any] = {"value": slots}
        if policy:
            cap["requestPolicy"] = policy
        dev: dict[str, Any] = {"name": d, "capacity": {SLOTS: cap},
                               "attributes": {f"{DRIVER}/type": {"string": "sriov-vf"}}}
        if multi:
            dev["allowMultipleAllocations"] = True
        devs.append(dev)
    spec: dict[str, Any] = {"driver": DRIVER, "nodeName": node,
                            "pool": {"name": pool or node, "generation": generation,
                                     "resourceSliceCount": count},
                            "devices": devs}
    if extra:
        spec.update(extra)
    return ResourceSlice.model_validate({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                                         "metadata": {"name": name or f"{node}-devices"}, "spec": spec})


def nic_params(subnet: str | None = "subnet-X", pkey: str | None = None, **extra: Any) -> dict[str, Any]:
    p: dict[str, Any] = {"apiVersion": "networking.example.com/v1", "kind": "NICConfig"}
    if subnet is not None:
        p["subnetID"] = subnet
    if pkey is not None:
        p["ibPKey"] = pkey
    p.update(extra)
    return p


def claim(name: str, *params: dict[str, Any] | None, requests: list[dict[str, Any]] | None = None,
          config: list[dict[str, Any]] | None = None, slots: str | None = "1",
          namespace: str = "default", status: dict[str, Any] | None = None) -> ResourceClaim:
    if requests is None:
        ex: dict[str, Any] = {"deviceClassName": "shared-nic"}
        if slots is not None:
            ex["capacity"] = {"requests": {SLOTS: slots}}
        requests = [{"name": "nic", "exactly": ex}]
    if config is None:
        config = [{"requests": ["nic"], "opaque": {"driver": DRIVER, "parameters": p}}
                  for p in params if p is not None]
    body: dict[str, Any] = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                            "metadata": {"name": name, "namespace": namespace},
                            "spec": {"devices": {"requests": requests, "config": config}}}
    if status:
        body["status"] = status
    return ResourceClaim.model_validate(body)


def pod(name: str, claims: list[str] | None = None, *, node: str | None = None,
        templates: dict[str, str] | None = None, node_selector: dict[str, str] | None = None,
        uid: str | None = None) -> Pod:
    rcs: list[dict[str, Any]] = [{"name": f"c{i}", "resourceClaimName": c}
                                 for i, c in enumerate(claims if claims is not None else [f"{name}-nic"])]
    for pc, t in (templates or {}).items():
        rcs.append({"name": pc, "resourceClaimTemplateName": t})
    spec: dict[str, Any] = {"resourceClaims": rcs, "containers": [{"name": "app", "image": "x"}]}
    if node:
        spec["nodeName"] = node
    if node_selector:
        spec["nodeSelector"] = node_selector
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if uid:
        meta["uid"] = uid
    return Pod.model_validate({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})


def template(name: str, params: dict[str, Any]) -> ResourceClaimTemplate:
    c = claim("x", params)
    return ResourceClaimTemplate.model_validate({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"spec": c.spec.to_dict()}})


class Env:
    """A cluster and a started scheduler; apply() asserts the API server accepted."""

    def __init__(self, *objs: Any, gates: dict[str, bool] | None = None,
                 apiserver: dict[str, bool] | None = None) -> None:
        self.cluster = Cluster(Features.parse(apiserver=apiserver))
        for o in objs:
            self.apply(o)
        self.gates = Features.parse(scheduler=gates)
        # The scheduler's port: failures are injected here (env.view.fail(...)).
        self.view = FaultInjectingView(self.cluster)
        self.scheduler = Scheduler(self.view, self.gates)
        self.scheduler.start()

    def apply(self, obj: Any) -> Any:
        res = self.cluster.apply(obj)
        assert res.applied, [e.render() for e in res.errors]
        return res

    def restart(self, gates: dict[str, bool] | None = None) -> Scheduler:
        self.scheduler.stop()
        if gates is not None:
            self.gates = Features.parse(scheduler=gates)
        self.scheduler = Scheduler(self.view, self.gates, metrics=self.scheduler.metrics,
                                   recorder=self.scheduler.recorder)
        self.scheduler.start()
        return self.scheduler

    def schedule(self, name: str, fail: tuple[str, Fault] | None = None) -> Any:
        """One attempt; ``fail``: the write (``claim``, ``bind``) refused with the fault."""
        if fail is not None:
            write, fault = fail
            obj = f"default/{name}" if write == "bind" else f"default/{name}-nic"
            self.view.fail(write, obj, Failure(fault))
        return self.scheduler.schedule(f"default/{name}")

    def add_pod(self, name: str, *params: dict[str, Any] | None, **kw: Any) -> None:
        self.apply(claim(f"{name}-nic", *params, **{k: v for k, v in kw.items() if k in ("slots", "requests", "config")}))
        self.apply(pod(name, **{k: v for k, v in kw.items() if k in ("node", "node_selector")}))

    def status(self, device: str) -> tuple[str, dict[str, str]]:
        st = self.scheduler.state.affinity(device)
        return st.status.label, st.lock_dict()

    def metric(self, name: str) -> int:
        return self.scheduler.metrics.values()[name]


def dev(node: str, name: str, pool: str | None = None) -> str:
    return f"{DRIVER}/{pool or node}/{name}"
