"""Placement constraints the scheduler does not evaluate fail closed (UnsupportedPlacement)."""

from __future__ import annotations

from typing import Any

import pytest

from builders import Env, claim, dev, device_slice, meta_slice, nic_class, nic_params, pod
from dra_affinity.api.core import Pod
from dra_affinity.scheduler.unsupported import unsupported_placement
from dra_affinity.structured import reasons
from dra_affinity.structured.model import Result

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
TERM = {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "kubernetes.io/hostname"}


def with_spec(**spec: Any) -> Pod:
    base = pod("p").to_dict()
    base["spec"].update(spec)
    return Pod.model_validate(base)


@pytest.mark.parametrize(("spec", "fields"), [
    ({"volumes": [{"name": "cfg", "configMap": {"name": "c"}},
                  {"name": "data", "persistentVolumeClaim": {"claimName": "d"}},
                  {"name": "tmp", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]},
     ["spec.volumes[1].persistentVolumeClaim", "spec.volumes[2].ephemeral"]),
    # Evaluated by the placement filters (scheduler/placement/), or preferences only.
    ({"affinity": {"podAffinity": {REQUIRED: [TERM]}, "podAntiAffinity": {REQUIRED: [TERM]}}}, []),
    ({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                                     "whenUnsatisfiable": "DoNotSchedule"}]}, []),
    ({"containers": [{"name": "a", "ports": [{"containerPort": 8080, "hostPort": 8080}]}]}, []),
    ({"affinity": {"podAffinity": {PREFERRED: [{"weight": 1, "podAffinityTerm": TERM}]},
                   "podAntiAffinity": {PREFERRED: [{"weight": 1, "podAffinityTerm": TERM}]},
                   "nodeAffinity": {PREFERRED: [{"weight": 1, "preference": {}}]}}}, []),
    ({"containers": [{"name": "a", "ports": [{"containerPort": 80}]}],
      "volumes": [{"name": "e", "emptyDir": {}}]}, []),
])
def test_unsupported_fields_are_named(spec: dict[str, Any], fields: list[str]) -> None:
    assert unsupported_placement(with_spec(**spec)) == fields


def test_pod_with_unsupported_placement_fails_closed() -> None:
    """Never placed, one event naming the field, no claim written, no lock taken."""
    env = Env(nic_class(), meta_slice("node-1"), device_slice("node-1", ["eth1"]))
    env.apply(claim("p-nic", nic_params("subnet-X")))
    env.apply(with_spec(volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "d"}}]))
    a = env.scheduler.schedule("default/p")
    assert a.result is Result.UNRESOLVABLE and a.node is None
    assert [r.code for r in a.reasons] == [reasons.UNSUPPORTED_PLACEMENT]
    assert "spec.volumes[0].persistentVolumeClaim" in a.message
    events = [e for e in env.scheduler.recorder.events if e.object == "Pod default/p"]
    assert [(e.reason, e.type) for e in events] == [("FailedScheduling", "Warning")]
    assert "spec.volumes[0].persistentVolumeClaim" in events[0].message
    assert env.cluster.claim("default/p-nic").status.allocation is None  # type: ignore[union-attr]
    assert env.cluster.pod("default/p").spec.node_name is None  # type: ignore[union-attr]
    assert env.status(dev("node-1", "eth1")) == ("Clean", {})
