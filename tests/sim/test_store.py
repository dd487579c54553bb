"""The cluster store: compact objects at rest read back equal, the typed set is bounded,
and a cluster that compacts everything behaves exactly like one that compacts nothing."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dra_affinity.api.core import Pod
from dra_affinity.api.meta import ObjectMeta
from dra_affinity.api.resource import ResourceClaim
from dra_affinity.cli import main
from dra_affinity.features import Features
from dra_affinity.scheduler.fastpath import FastPaths
from dra_affinity.scheduler.scheduler import Scheduler
from dra_affinity.sim import runner
from dra_affinity.sim.cluster import Cluster
from dra_affinity.sim.store import Compact, ObjectStore, _Codec
from dra_affinity.sim.workload import WorkloadSpec, device_class, pod_objects, slices
from dra_affinity.structured.model import Result

ROOT = Path(__file__).resolve().parents[2]


def _scheduled_cluster(hot: int | None, pods: int = 12) -> tuple[Cluster, Scheduler]:
    cluster = Cluster(hot=hot)
    assert cluster.apply(device_class()).applied
    spec = WorkloadSpec(nodes=3, devices_per_node=2, slots=2)
    for i in range(spec.nodes):
        for s in slices(spec, i):
            assert cluster.apply(s).applied
    sched = Scheduler(cluster, Features(), fast_paths=FastPaths.all())
    sched.start()
    for i in range(pods):
        claim, pod = pod_objects(f"pod-{i:07d}", i % 3)
        assert cluster.apply(claim).applied and cluster.apply(pod).applied
        assert sched.schedule(f"default/pod-{i:07d}").result is Result.SCHEDULED
    return cluster, sched


def test_codec_round_trip_is_exact_for_allocated_claims_and_bound_pods() -> None:
    cluster, _ = _scheduled_cluster(hot=None, pods=4)
    codec = _Codec()
    objs = [*cluster.list_objects("ResourceClaim"), *cluster.list_objects("Pod"),
            *cluster.list_objects("ResourceSlice"), *cluster.list_objects("DeviceClass")]
    assert objs
    for obj in objs:
        back = codec.decode(codec.encode(obj))
        assert type(back) is type(obj)
        assert back == obj
        # What was set (exclude_unset dumps, manifests) survives, and key order with it.
        assert back.to_dict() == obj.to_dict()
        assert back.model_dump_json() == obj.model_dump_json()
        assert back.model_fields_set == obj.model_fields_set
    claim = cluster.claim("default/pod-0000000-nic")
    assert claim is not None and claim.status.allocation is not None


def test_codec_shares_shapes_and_keeps_nones_out_of_the_values() -> None:
    codec = _Codec()
    a, b = (codec.encode(pod_objects(f"pod-{i}", 1)[1]) for i in range(2))
    assert a.shape is b.shape  # one shared shape for pods alike
    assert None not in a.values and "pod-0" in a.values and "pod-1" in b.values


def test_decoded_objects_are_independent_copies() -> None:
    codec = _Codec()
    _, pod = pod_objects("pod-a", 0)
    pod = pod.model_copy(deep=True)  # every part its own
    c = codec.encode(pod)
    assert all(type(v) in (str, int) for v in c.values)  # all of it encoded
    one, two = codec.decode(c), codec.decode(c)
    one.spec.containers.append({"name": "x"})
    one.metadata.labels["k"] = "v"
    assert two == pod and codec.decode(c) == pod


def test_parts_shared_with_other_objects_are_kept_as_they_are() -> None:
    """A part that something else references too (here the prototype ``pod_objects``
    copies from) is one leaf, the very object; the object's own parts are encoded."""
    codec = _Codec()
    _, pod = pod_objects("pod-b", 0)
    proto = pod_objects("pod-c", 0)[1]
    assert pod.spec.containers is proto.spec.containers  # shared by construction
    c = codec.encode(pod)
    assert any(v is pod.spec.containers for v in c.values)
    assert not any(v is pod.spec for v in c.values)  # its own spec is encoded
    assert "pod-b" in c.values
    back = codec.decode(c)
    assert back == pod and back.to_dict() == pod.to_dict()
    assert back.spec.containers is pod.spec.containers
    assert back.spec is not pod.spec and back.metadata is not pod.metadata
    # Once nothing else holds the part, it is encoded like any other.
    alone = pod.model_copy(deep=True)
    assert not any(v is alone.spec.containers for v in codec.encode(alone).values)


def _fresh(obj: Any) -> tuple[Any, tuple[Any, ...]]:
    """What a codec that has seen nothing makes of ``obj``: no matcher involved."""
    values: list[Any] = []
    return _Codec()._shape(obj, values), tuple(values)


class _OtherMeta(ObjectMeta):
    """Another model class with ObjectMeta's fields."""


_SHARED_EMPTY: list[Any] = []


def _variants(claim: ResourceClaim, pod: Pod) -> list[tuple[Any, Any]]:
    """(base, variant) pairs: each variant differs from its base in one way a shape
    records (or in none: only values), and shares no part with it."""
    own_pod, own_claim = pod.model_copy(deep=True), claim.model_copy(deep=True)

    def changed(base: Any, change: Any) -> tuple[Any, Any]:
        v = base.model_copy(deep=True)
        change(v)
        return base, v

    def rename(p: Any) -> None:
        p.metadata.name = "another-name"
        p.metadata.uid = "another-uid"

    def with_label(p: Any) -> None:
        p.metadata.labels["app"] = "x"  # an empty dict made a dict with a key

    def unset_node(p: Any) -> None:
        p.spec.node_name = None  # a scalar made None

    def longer_list(p: Any) -> None:
        p.spec.resource_claims.append(p.spec.resource_claims[0].model_copy())

    def empty_list(p: Any) -> None:
        p.spec.resource_claims = []

    def fewer_set(p: Any) -> None:
        m = p.metadata  # other set fields
        p.metadata = m.model_construct(m.model_fields_set - {"generation"}, **dict(m))

    def share(p: Any) -> None:
        p.spec.containers = pod.spec.containers  # a part held elsewhere too: a leaf

    def int_for_str(p: Any) -> None:
        p.metadata.name = 7  # another scalar type: the same shape

    def model_for_str(c: Any) -> None:
        c.metadata.name = c.spec  # a part where a scalar was: not the same shape

    def capacity_keys(c: Any) -> None:
        consumed = c.status.allocation.devices.results[0].consumed_capacity
        (name, amount), = consumed.items()
        c.status.allocation.devices.results[0].consumed_capacity = {
            "example.com/other": amount, name: amount}  # other keys, another order

    def capacity_order(c: Any) -> None:
        result = c.status.allocation.devices.results[0]
        result.consumed_capacity = dict(reversed(list(result.consumed_capacity.items())))

    def no_reservations(c: Any) -> None:
        c.status.reserved_for = []

    def deallocated(c: Any) -> None:
        c.status.allocation = None  # a sub-model made None

    # The same set fields, so that nothing else changes with the value.
    def set_a_none(p: Any) -> None:
        m = p.metadata
        assert m.generate_name is None  # None made a scalar
        p.metadata = m.model_construct(set(m.model_fields_set), **{**dict(m), "generate_name": "x"})

    def fill_an_empty_list(p: Any) -> None:
        m = p.metadata
        assert m.finalizers == []
        p.metadata = m.model_construct(set(m.model_fields_set), **{**dict(m), "finalizers": ["x"]})

    def another_class(p: Any) -> None:
        p.metadata = _OtherMeta.model_validate(p.metadata.to_dict())  # same fields

    def drop_a_shared_part(p: Any) -> None:
        p.spec.containers = None

    def share_an_empty_list(p: Any) -> None:
        p.spec.containers = _SHARED_EMPTY  # held elsewhere, but an empty list all the same

    pairs = [changed(own_pod, f) for f in (
        rename, with_label, unset_node, longer_list, empty_list, fewer_set, share, int_for_str,
        set_a_none, fill_an_empty_list, another_class)]
    pairs += [changed(pod, f) for f in (drop_a_shared_part, share_an_empty_list)]
    pairs += [changed(own_claim, f) for f in (rename, model_for_str, capacity_keys,
                                              no_reservations, deallocated)]
    base = own_claim.model_copy(deep=True)
    capacity_keys(base)
    pairs.append(changed(base, capacity_order))  # same keys, another order
    pairs.append((pod, pod.model_copy(deep=True)))  # held elsewhere in the base only
    return pairs


# Two variants hold values of the wrong type (the codec takes any): dumping them warns.
@pytest.mark.filterwarnings("ignore:Pydantic serializer warnings")
def test_an_object_of_the_last_shape_is_encoded_as_a_fresh_codec_would() -> None:
    """Objects of one kind and shape skip making a shape (a matcher checks the shape
    while it takes the values): the result is what a codec that has seen nothing
    makes, for the same object and for any object that differs in its shape."""
    cluster, _ = _scheduled_cluster(hot=None, pods=6)
    claims = cluster.list_objects("ResourceClaim")
    pods = cluster.list_objects("Pod")
    codec = _Codec()
    for obj in [*claims, *pods]:  # each kind twice in a row: matchers are made
        got = codec.encode(obj)
        shape, values = _fresh(obj)
        assert got.shape == shape and got.values == values
        assert all(a is b for a, b in zip(got.values, values, strict=True))
    assert all(fits is not None for _, fits in codec._last.values())
    claim, pod = claims[0], pods[0]
    assert isinstance(claim, ResourceClaim) and isinstance(pod, Pod)
    matched = 0
    for base, obj in _variants(claim, pod):
        codec = _Codec()
        codec.encode(base)
        codec.encode(base)
        assert codec._last[type(base)][1] is not None  # base's matcher is tried on obj
        got = codec.encode(obj)
        shape, values = _fresh(obj)
        assert got.shape == shape and got.values == values, obj
        assert all(a is b for a, b in zip(got.values, values, strict=True))
        matched += got.shape is codec._last[type(base)][0] and shape == _fresh(base)[0]
        back = codec.decode(got)
        assert back == obj and back.model_dump_json() == obj.model_dump_json()
    assert matched == 3  # the renamed pod and claim, the other scalar type: base's shape


def test_a_shape_seen_once_gets_no_matcher() -> None:
    """Only a shape made twice in a row is worth a matcher: objects whose shapes
    alternate are encoded the ordinary way, and right."""
    codec = _Codec()
    _, pod = pod_objects("pod-x", 0)
    other = pod.model_copy(deep=True)
    other.spec.node_name = None
    for obj in (pod, other, pod, other):
        got = codec.encode(obj)
        assert codec._last[Pod][1] is None
        assert (got.shape, got.values) == _fresh(obj)


def test_store_keeps_at_most_hot_typed_and_reads_back_equal() -> None:
    store: ObjectStore[Pod] = ObjectStore(hot=2)
    pods = {f"p{i}": pod_objects(f"p{i}", i)[1] for i in range(5)}
    for k, p in pods.items():
        store.put(k, p)
    assert len(store) == 5 and store.compact_count() == 3
    assert store.get("p0") == pods["p0"]  # materialised, and now recently used
    assert store.compact_count() == 3  # another one went to rest in its place
    assert store.get("p0") is store.get("p0")  # typed while hot: the same object
    assert store.get("nope") is None and "p4" in store and "nope" not in store


def test_store_order_listing_and_pop() -> None:
    store: ObjectStore[Pod] = ObjectStore(hot=1)
    pods = [pod_objects(f"p{i}", i)[1] for i in range(4)]
    for i, p in enumerate(pods):
        store.put(f"p{i}", p)
    store.put("p1", pods[1])  # an update keeps the position
    assert [k for k, _ in store.items()] == ["p0", "p1", "p2", "p3"]
    assert list(store.values()) == pods
    assert store.compact_count() == 3  # listing materialises without promoting
    popped = store.pop("p2")
    assert popped == pods[2] and not isinstance(popped, Compact)
    assert store.pop("p2") is None and len(store) == 3
    assert list(store.keys()) == ["p0", "p1", "p3"]


def test_store_without_a_bound_never_compacts() -> None:
    store: ObjectStore[Pod] = ObjectStore(hot=None)
    for i in range(50):
        store.put(f"p{i}", pod_objects(f"p{i}", i)[1])
    assert store.compact_count() == 0


@pytest.mark.parametrize("bad", [0, -3])
def test_store_rejects_a_bound_below_one(bad: int) -> None:
    with pytest.raises(ValueError, match="hot must be at least 1"):
        ObjectStore(hot=bad)


def test_a_compacting_cluster_schedules_exactly_like_an_all_typed_one() -> None:
    typed, s1 = _scheduled_cluster(hot=None)
    compact, s2 = _scheduled_cluster(hot=1)
    assert compact.count("Pod") == typed.count("Pod") == 12
    for kind in ("Pod", "ResourceClaim"):
        assert [o.model_dump_json() for o in compact.list_objects(kind)] == \
               [o.model_dump_json() for o in typed.list_objects(kind)]
    # Departures read cold objects: the claims are deallocated alike.
    for cl in (typed, compact):
        cl.delete("Pod", "default/pod-0000003")
    c1, c2 = typed.claim("default/pod-0000003-nic"), compact.claim("default/pod-0000003-nic")
    assert c1 is not None and c2 is not None and c1.status.allocation is None
    assert c1.model_dump_json() == c2.model_dump_json()
    assert s1.state.version == s2.state.version


EXAMPLES = sorted((ROOT / "examples").glob("*.yaml")) + sorted((ROOT / "tests" / "scenarios").glob("*.yaml"))[:8]


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_simulate_output_is_byte_identical_when_everything_is_compacted(
        path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    want = CliRunner().invoke(main, ["simulate", str(path), "--output", "json"]).output
    monkeypatch.setattr(runner, "Cluster", functools.partial(Cluster, hot=1))
    got = CliRunner().invoke(main, ["simulate", str(path), "--output", "json"]).output
    assert got == want and want.startswith("{")


def test_replace_copies_on_write_and_bumps_the_resource_version() -> None:
    cluster = Cluster()
    claim, _ = pod_objects("p", 0)
    stored = cluster.apply(claim).object
    assert isinstance(stored, ResourceClaim)
    rv = stored.metadata.resource_version
    again = cluster.write_claim_status(stored)
    assert again is not stored and again.spec is stored.spec  # sub-objects shared
    assert stored.metadata.resource_version == rv  # the caller's object is untouched
    assert int(again.metadata.resource_version or 0) == int(rv or 0) + 1
    assert "resource_version" in again.metadata.model_fields_set
    assert cluster.claim("default/p-nic") is again


def test_a_status_write_needs_the_claim_as_it_was_read() -> None:
    from dra_affinity.scheduler.view import WriteConflict

    cluster = Cluster()
    claim, _ = pod_objects("p", 0)
    first = cluster.apply(claim).object
    assert isinstance(first, ResourceClaim)
    second = cluster.write_claim_status(first)  # at the version read: written
    with pytest.raises(WriteConflict, match=r"changed since it was read \(resourceVersion"):
        cluster.write_claim_status(first)  # stale: the claim moved on
    assert cluster.claim("default/p-nic") is second  # nothing was written
    cluster.delete("ResourceClaim", "default/p-nic")
    with pytest.raises(WriteConflict, match="was deleted"):
        cluster.write_claim_status(second)
    assert cluster.claim("default/p-nic") is None


def test_an_owned_write_shares_the_objects_parts_and_changes_none_of_them() -> None:
    cluster = Cluster()
    claim, _ = pod_objects("pod-o", 1)
    meta, spec = claim.metadata, claim.spec
    meta_before, spec_before = meta.to_dict(), spec.to_dict()
    assert cluster.apply(claim, owned=True).applied
    stored = cluster.claim("default/pod-o-nic")
    assert stored is not None and stored.spec is spec  # handed over: parts not copied
    assert stored.metadata.uid and stored.metadata.resource_version == "1"
    # The API server's metadata is new: the metadata handed over (it may be shared, as a
    # prototype's parts are) is as it was, and so is every other part.
    assert stored.metadata is not meta and meta.to_dict() == meta_before
    assert spec.to_dict() == spec_before and "uid" not in meta_before
    # Writing the stored object back copies it (the store's version is never changed).
    again = cluster.apply(stored, owned=True).object
    assert again is not stored and stored.metadata.resource_version == "1"
    assert again is not None and again.metadata.resource_version == "2"
    other, _ = pod_objects("pod-p", 1)
    assert cluster.apply(other).applied
    copied = cluster.claim("default/pod-p-nic")
    assert copied is not None and copied.spec == other.spec and copied.spec is not other.spec


@pytest.mark.parametrize("owned", [False, True])
def test_stamped_metadata_dumps_what_the_api_server_sets(owned: bool) -> None:
    cluster = Cluster()
    claim = ResourceClaim.model_validate({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c"},
        "spec": {"devices": {"requests": [{"name": "r", "exactly": {"deviceClassName": "x"}}]}}})
    assert cluster.apply(claim, owned=owned).applied
    meta = cluster.claim("default/c").to_dict()["metadata"]  # type: ignore[union-attr]
    assert meta == {"name": "c", "namespace": "default", "uid": meta["uid"],
                    "resourceVersion": "1", "generation": 1}
    (s,) = slices(WorkloadSpec(nodes=1, affinity=False), 0)
    assert cluster.apply(s, owned=owned).applied
    smeta = cluster.get("ResourceSlice", s.metadata.name).to_dict()["metadata"]  # type: ignore[union-attr]
    assert "namespace" not in smeta and smeta["resourceVersion"] == "2"
    # An update keeps the uid, bumps the version, and the generation only with the spec.
    again = claim.model_copy(deep=True)
    assert cluster.apply(again, owned=owned).applied
    meta2 = cluster.claim("default/c").to_dict()["metadata"]  # type: ignore[union-attr]
    assert meta2["uid"] == meta["uid"] and meta2["resourceVersion"] == "3" and meta2["generation"] == 1
