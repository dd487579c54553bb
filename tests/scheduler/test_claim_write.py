"""What PreBind writes, in plain form (``ClaimWrite``): the typed claim it exports agrees
with the claim built model by model, and neither can change the other afterwards."""

from __future__ import annotations

from builders import Env, claim, device_slice, meta_slice, nic_class, nic_params, pod
from dra_affinity.api.core import Pod
from dra_affinity.api.meta import NodeSelector
from dra_affinity.api.podclaims import reservation
from dra_affinity.api.resource import (
    AllocationResult,
    DeviceAllocationConfiguration,
    DeviceAllocationResult,
    DeviceRequestAllocationResult,
    ResourceClaim,
)
from dra_affinity.scheduler.binding import Binding
from dra_affinity.scheduler.reserve import ClaimWrite, allocation_rows
from dra_affinity.structured.model import Result
from dra_affinity.structured.nodes import selector_for_node


def reserved(env: Env, name: str) -> Binding:
    """The scheduling cycle of pod ``name``, ended at Reserve (its binding not run)."""
    out = env.scheduler.scheduling_cycle(f"default/{name}")
    assert isinstance(out, Binding), out
    return out


def env_with(*claims: ResourceClaim) -> Env:
    env = Env(nic_class(config=[nic_params("subnet-A")]),
              meta_slice("node-1", {"subnet": 'object.subnetID'}), device_slice("node-1", ["eth1", "eth2"]))
    for c in claims:
        env.apply(c)
    return env


def by_models(w: ClaimWrite, pod_: Pod) -> ResourceClaim:
    """The claim PreBind wrote before the plain form: each part built as a model, then
    the status and the claim copied with the update."""
    assert w.shares is not None and w.reserve_for is not None
    status = w.claim.status
    results = [DeviceRequestAllocationResult(
        request=s.request, driver=s.device.driver, pool=s.device.pool, device=s.device.name,
        share_id=s.share_id, consumed_capacity=dict(s.consumed)) for s in w.shares]
    config = [DeviceAllocationConfiguration(source=source, requests=list(requests), opaque=opaque)  # type: ignore[arg-type]
              for source, requests, opaque in w.config]
    allocation = AllocationResult(devices=DeviceAllocationResult(results=results, config=config),
                                  node_selector=w.node_selector)
    new = status.model_copy(update={"reserved_for": [*status.reserved_for, reservation(pod_)],
                                    "allocation": allocation})
    return w.claim.model_copy(update={"status": new})


def test_export_equals_the_claim_built_model_by_model() -> None:
    env = env_with(claim("a-nic", nic_params("subnet-A")), pod("a"))
    b = reserved(env, "a")
    [w] = b.claims
    assert w.changes and w.allocates and w.key == "default/a-nic"
    got, want = w.export(), by_models(w, b.cycle.pod)
    assert got == want
    # The same fields count as set at every level: the manifest is the same.
    assert got.to_dict() == want.to_dict()
    assert got.model_dump_json(exclude_unset=True) == want.model_dump_json(exclude_unset=True)
    alloc = got.status.allocation
    assert alloc is not None and alloc.node_selector == selector_for_node("node-1")
    assert [c.source for c in alloc.devices.config] == ["FromClass", "FromClaim"]
    [r] = alloc.devices.results
    assert r.share_id is not None and r.device == "eth1" and str(r.consumed_capacity[next(iter(r.consumed_capacity))]) == "1"
    # The attempt's rows, without exporting, are those of the exported claim.
    assert w.rows() == allocation_rows(got)


def test_a_claim_with_nothing_to_write_is_handed_on_uncopied() -> None:
    env = env_with(claim("a-nic", nic_params("subnet-A")), pod("a"))
    assert env.schedule("a").result is Result.SCHEDULED
    stored = env.cluster.claim("default/a-nic")
    assert stored is not None
    w = ClaimWrite(stored, "default/a-nic")
    assert not w.changes and not w.allocates
    assert w.export() is stored
    assert w.rows() == allocation_rows(stored) != []


def test_only_a_reservation_keeps_the_allocation_and_adds_the_pod() -> None:
    env = env_with(claim("a-nic", nic_params("subnet-A")), pod("a"))
    assert env.schedule("a").result is Result.SCHEDULED
    stored = env.cluster.claim("default/a-nic")
    assert stored is not None
    w = ClaimWrite(stored, "default/a-nic", {"resource": "pods", "name": "b", "uid": "uid-b"})
    got = w.export()
    assert w.changes and not w.allocates
    assert got.status.allocation == stored.status.allocation
    assert [(r.name, r.uid) for r in got.status.reserved_for] == [
        *((r.name, r.uid) for r in stored.status.reserved_for), ("b", "uid-b")]
    assert len(stored.status.reserved_for) == 1  # the cache's claim is not changed


def test_mutation_after_export_changes_neither_the_record_nor_other_exports() -> None:
    env = env_with(claim("a-nic", nic_params("subnet-A")), pod("a"))
    [w] = reserved(env, "a").claims
    reserve_for = {"resource": "pods", "name": "x", "uid": "u"}
    w2 = ClaimWrite(w.claim, w.key, reserve_for, w.shares, w.config, w.node_selector)
    reserve_for["name"] = "changed"  # the caller's dict, after the record was made
    first = w2.export()
    before = first.to_dict()
    assert first.status.reserved_for[-1].name == "x"
    # Mutate everything mutable in the exported claim.
    alloc = first.status.allocation
    assert alloc is not None
    alloc.devices.results[0].consumed_capacity.clear()
    alloc.devices.results.append(alloc.devices.results[0])
    alloc.devices.config[0].requests.append("other")
    first.status.reserved_for.clear()
    second = w2.export()
    assert second.to_dict() == before
    assert second.status.allocation is not None
    assert second.status.allocation.devices.results is not alloc.devices.results
    # The claim as read is untouched by either.
    assert w.claim.status.allocation is None and w.claim.status.reserved_for == []


def test_no_node_selector_when_a_device_is_not_node_local() -> None:
    env = Env(nic_class(), meta_slice("node-1", {}), device_slice("node-1", ["eth1"]))
    env.add_pod("a", None)
    [w] = reserved(env, "a").claims
    w2 = ClaimWrite(w.claim, w.key, None, w.shares, w.config, None)
    alloc = w2.export().status.allocation
    assert alloc is not None and alloc.node_selector is None
    assert isinstance(w.node_selector, NodeSelector)
