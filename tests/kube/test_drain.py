"""Applying watched changes: what is converted, what listeners are told, and that the
view holds what a conversion of the server's object would, whichever way it got there."""

from __future__ import annotations

import copy
import queue
from typing import Any

import pytest

from dra_affinity.api.meta import TypedObject
from dra_affinity.kube import view as view_module
from dra_affinity.kube.convert import content_digest, to_model
from dra_affinity.kube.fifo import ChangeFIFO
from dra_affinity.kube.informer import MODIFIED, Change, Reflector, as_informed
from dra_affinity.kube.runner import SchedulerProcess
from dra_affinity.kube.view import PACKED, KubeView
from dra_affinity.scheduler.view import WriteFailed

from .fakeapi import FakeApi
from .test_process import _process, _run
from .world import build, claim, pod, sync


class Recorder:
    """Counts conversions (``to_model`` as the view calls it) and listener calls."""

    def __init__(self, view: KubeView, monkeypatch: pytest.MonkeyPatch) -> None:
        self.converted: list[str] = []
        self.told: list[tuple[str, TypedObject | None, TypedObject | None]] = []
        real = view_module.to_model
        monkeypatch.setattr(view_module, "to_model", lambda kind, raw, shared=None: (
            self.converted.append(kind), real(kind, raw, shared))[1])
        view.subscribe(self)  # type: ignore[arg-type]

    def on_change(self, kind: str, old: TypedObject | None, new: TypedObject | None) -> None:
        self.told.append((kind, old, new))

    def clear(self) -> None:
        self.converted.clear()
        self.told.clear()


def watch(api: FakeApi, view: KubeView, kind: str, since: int) -> int:
    """The watch events of ``kind`` after ``since``, through a reflector and the FIFO
    as in the process; returns how many changes were applied."""
    fifo = ChangeFIFO()
    r = Reflector(api, kind, fifo)
    r.resource_version = str(since)
    r.watch_once()
    n = 0
    while True:
        try:
            ch = fifo.get_nowait()
        except queue.Empty:
            return n
        view.apply(ch)
        n += 1


def as_converted(kind: str, raw: dict[str, Any]) -> TypedObject:
    return to_model(kind, as_informed(raw, kind)).model


def assert_holds(view: KubeView, kind: str, key: str, raw: dict[str, Any]) -> None:
    """The view's model of ``key`` is what converting ``raw`` gives, typed or packed."""
    want = as_converted(kind, raw)
    got = view.claim(key) if kind == "ResourceClaim" else view.pod(key)
    assert got == want
    e = view._store[kind][key]
    if kind in PACKED:
        assert isinstance(e.kept, str)
        assert PACKED[kind].model_validate_json(e.kept) == want
    assert e.rv == int(raw["metadata"]["resourceVersion"])


def _world(monkeypatch: pytest.MonkeyPatch) -> tuple[FakeApi, SchedulerProcess, Recorder]:
    api = FakeApi()
    build(api)
    api.create("ResourceClaim", claim("a-nic", "x"))
    api.create("Pod", pod("a", "a-nic"))
    proc = _process(api)
    return api, proc, Recorder(proc.view, monkeypatch)


def test_the_fifo_hands_over_key_and_digest_of_the_newest_version() -> None:
    fifo = ChangeFIFO()
    first = as_informed(pod("a", "a-nic"), "Pod")
    first["metadata"].update(namespace="default", resourceVersion="5")
    newer = copy.deepcopy(first)
    newer["metadata"]["resourceVersion"] = "6"
    newer["metadata"]["labels"] = {"app": "x"}
    fifo.put(Change("Pod", MODIFIED, object=first))
    fifo.put(Change("Pod", MODIFIED, object=newer))
    got = fifo.get_nowait()
    assert got.object is newer and got.key == "default/a"
    assert got.digest == content_digest("Pod", newer) != content_digest("Pod", first)


def test_digest_ignores_only_the_resource_version() -> None:
    a = as_informed(pod("a", "a-nic"), "Pod")
    a["metadata"]["resourceVersion"] = "1"
    b = copy.deepcopy(a)
    b["metadata"]["resourceVersion"] = "2"
    assert content_digest("Pod", a) == content_digest("Pod", b)
    listed = {k: v for k, v in b.items() if k not in ("kind", "apiVersion")}
    assert content_digest("Pod", {**listed, "kind": "Pod"}) == content_digest("Pod", b)
    c = copy.deepcopy(b)
    c["status"]["phase"] = "Running"
    dc, db = content_digest("Pod", c), content_digest("Pod", b)
    assert dc is not None and db is not None
    assert dc != db and dc[:16] == db[:16]  # the status half alone differs
    d = copy.deepcopy(b)
    d["spec"]["nodeName"] = "n"
    dd = content_digest("Pod", d)
    assert dd is not None and dd[:16] != db[:16]
    assert content_digest("Pod", {"metadata": {"name": "x"}, "spec": object()}) is None


def test_only_pods_and_nodes_are_digested() -> None:
    """Updates that change nothing are common for them (kubelets); for other kinds the
    digest costs more than the conversions it saves."""
    claim_raw = as_informed(claim("a-nic", "x"), "ResourceClaim")
    assert content_digest("ResourceClaim", claim_raw) is None
    assert content_digest("Pod", as_informed(pod("a", "a-nic"), "Pod")) is not None


@pytest.mark.parametrize("kind,key", [("Pod", "default/a")])
def test_an_update_of_the_resource_version_alone_is_not_converted_nor_told(
        monkeypatch: pytest.MonkeyPatch, kind: str, key: str) -> None:
    api, proc, rec = _world(monkeypatch)
    view = proc.view
    since = api.rv
    cur = api.get(kind, key)
    assert cur is not None
    cur["metadata"]["managedFields"] = [{"manager": "someone-else", "operation": "Apply"}]
    api.update(kind, cur)  # the informer drops managedFields: nothing else moved
    assert watch(api, view, kind, since) == 1
    assert rec.converted == [] and rec.told == []
    stored = api.get(kind, key)
    assert stored is not None
    assert_holds(view, kind, key, stored)  # the model's resourceVersion moved too


def test_a_claim_write_after_an_update_of_the_version_alone_needs_no_second_try(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The claim's model carries the new resourceVersion: PreBind's writes, which send it
    as their precondition, are not refused."""
    api, proc, _ = _world(monkeypatch)
    since = api.rv
    cur = api.get("ResourceClaim", "default/a-nic")
    assert cur is not None
    api.update("ResourceClaim", cur)
    watch(api, proc.view, "ResourceClaim", since)
    _run(proc, api, rounds=1)
    assert api.get("Pod", "default/a")["spec"].get("nodeName")  # type: ignore[index]
    gets = [p for m, p in api.requests if m == "GET" and "resourceclaims/a-nic" in p]
    assert gets == []  # no 409 was answered, so nothing was read again


@pytest.mark.parametrize("change", ["label", "spec"])
def test_a_real_change_is_converted_and_told(monkeypatch: pytest.MonkeyPatch, change: str) -> None:
    api, proc, rec = _world(monkeypatch)
    view = proc.view
    since = api.rv
    cur = api.get("Pod", "default/a")
    assert cur is not None
    if change == "label":
        cur["metadata"]["labels"] = {"app": "web"}
    else:
        cur["spec"]["priority"] = 7
    api.update("Pod", cur)
    before = view.pod("default/a")
    watch(api, view, "Pod", since)
    assert rec.converted == ["Pod"]
    assert [(k, old) for k, old, _ in rec.told] == [("Pod", before)]
    stored = api.get("Pod", "default/a")
    assert stored is not None
    assert_holds(view, "Pod", "default/a", stored)


def test_a_pod_status_update_is_told_without_a_conversion(monkeypatch: pytest.MonkeyPatch) -> None:
    """A pod's status is kept as sent: the claim controller's resourceClaimStatuses or a
    PodScheduled condition make a new model with that status, equal to a conversion."""
    api, proc, rec = _world(monkeypatch)
    view = proc.view
    since = api.rv
    cur = api.get("Pod", "default/a")
    assert cur is not None
    cur["status"]["resourceClaimStatuses"] = [{"name": "nic", "resourceClaimName": "a-nic"}]
    cur["status"]["conditions"] = [{"type": "PodScheduled", "status": "False",
                                    "reason": "Unschedulable", "message": "no"}]
    api.update("Pod", cur, status=True)
    before = view.pod("default/a")
    watch(api, view, "Pod", since)
    assert rec.converted == []
    assert len(rec.told) == 1 and rec.told[0][1] == before and rec.told[0][2] != before
    stored = api.get("Pod", "default/a")
    assert stored is not None
    assert_holds(view, "Pod", "default/a", stored)
    # The condition is what set_unschedulable reads to skip writing it again.
    p = view.pod("default/a")
    assert p is not None
    assert not proc.view.set_unschedulable(p, "Unschedulable", "no")


def test_a_status_that_is_not_an_object_is_converted_and_reported(
        monkeypatch: pytest.MonkeyPatch) -> None:
    problems: list[tuple[str, str, str]] = []
    view = KubeView(FakeApi(), on_problem=lambda *a: problems.append(a))
    rec = Recorder(view, monkeypatch)
    raw = as_informed(pod("a", "a-nic"), "Pod")
    raw["metadata"].update(namespace="default", resourceVersion="1")
    view.apply(Change("Pod", "ADDED", object=copy.deepcopy(raw)))
    raw["metadata"]["resourceVersion"] = "2"
    raw["status"] = ["not", "a", "status"]
    view.apply(Change("Pod", MODIFIED, object=raw))
    assert rec.converted == ["Pod", "Pod"]
    assert view.pod("default/a") is None and problems


def test_a_scheduled_pods_own_claim_events_are_neither_converted_nor_told(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The finalizer's write is recorded from its answer's metadata alone, the status's
    from its answer; the watch's event is then an echo: not converted, not told."""
    api, proc, rec = _world(monkeypatch)
    view = proc.view
    since = api.rv
    _run(proc, api, rounds=1)
    assert rec.converted == ["ResourceClaim"]  # the status write's answer
    assert [k for k, _, _ in rec.told].count("ResourceClaim") == 2  # finalizer, then status
    rec.clear()
    assert watch(api, view, "ResourceClaim", since) == 1  # the FIFO keeps the newest
    assert rec.converted == [] and rec.told == []
    stored = api.get("ResourceClaim", "default/a-nic")
    assert stored is not None
    assert_holds(view, "ResourceClaim", "default/a-nic", stored)
    assert view._assumed["ResourceClaim"] == {}


def test_each_event_of_the_write_alone_is_its_echo(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loop applies the finalizer's event before the status is written, then the
    status's: each is the echo of an answer recorded, neither converted nor told."""
    api, proc, rec = _world(monkeypatch)
    view = proc.view
    since = api.rv
    delivered: list[int] = []
    api.on("PATCH", "/status", lambda: delivered.append(watch(api, view, "ResourceClaim", since)))
    _run(proc, api, rounds=1)
    assert delivered == [1]  # the finalizer's event, applied between the two writes
    events = [h for h in api.history if h[1] == "ResourceClaim" and h[0] > since]
    assert [h[2] for h in events] == ["MODIFIED", "MODIFIED"]
    assert rec.converted == ["ResourceClaim"]  # the status write's answer only
    rec.clear()
    view.apply(Change("ResourceClaim", MODIFIED,
                      object=as_informed(copy.deepcopy(events[1][3]), "ResourceClaim")))
    assert rec.converted == [] and rec.told == []
    assert view._assumed["ResourceClaim"] == {}
    assert_holds(view, "ResourceClaim", "default/a-nic", events[1][3])


def test_an_answer_the_watch_brought_first_is_not_converted_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    api, proc, rec = _world(monkeypatch)
    view = proc.view
    since = api.rv
    real = api.request

    def request(method: str, path: str, **kw: Any) -> Any:
        out = real(method, path, **kw)
        if method == "PATCH" and path.endswith("/status"):
            watch(api, view, "ResourceClaim", since)  # the echo is applied before the answer
        return out

    monkeypatch.setattr(api, "request", request)
    _run(proc, api, rounds=1)
    stored = api.get("ResourceClaim", "default/a-nic")
    assert stored is not None
    assert rec.converted == ["ResourceClaim"]  # the watch's event; the answer then reused
    assert_holds(view, "ResourceClaim", "default/a-nic", stored)
    assert view._assumed["ResourceClaim"] == {}


def test_a_status_write_refused_after_the_finalizer_leaves_the_finalizer_seen(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The finalizer is stored, the status write is refused: the view shows the claim
    with the finalizer, as the server has it, and the watch's event of it is its echo."""
    api, proc, rec = _world(monkeypatch)
    view = proc.view
    _run(proc, api, rounds=1)  # a-nic allocated: its status serves as the one to write
    done = view.claim("default/a-nic")
    assert done is not None and done.status.allocation is not None
    api.create("ResourceClaim", claim("b-nic", "x"))
    sync(api, view)
    since = api.rv
    fresh = view.claim("default/b-nic")
    assert fresh is not None and not fresh.metadata.finalizers
    api.fail("PATCH", "b-nic/status", "server-error")
    rec.clear()
    with pytest.raises(WriteFailed) as e:
        view.write_claim_status(fresh.model_copy(update={"status": done.status}))
    assert e.value.maybe_applied
    assert rec.converted == []
    seen = view.claim("default/b-nic")
    assert seen is not None and seen.status == fresh.status
    assert seen.metadata.finalizers == ["resource.kubernetes.io/delete-protection"]
    assert watch(api, view, "ResourceClaim", since) == 1
    assert rec.converted == [] and len(rec.told) == 1  # told of the finalizer, once
    stored = api.get("ResourceClaim", "default/b-nic")
    assert stored is not None
    assert_holds(view, "ResourceClaim", "default/b-nic", stored)
    assert view._assumed["ResourceClaim"] == {}


def test_a_finalizer_answer_older_than_what_the_view_holds_is_not_recorded(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two bindings of one claim: an answer that comes late never replaces a newer write."""
    api, proc, rec = _world(monkeypatch)
    view = proc.view
    _run(proc, api, rounds=1)
    held = view.claim("default/a-nic")
    assert held is not None
    late = api.get("ResourceClaim", "default/a-nic")
    assert late is not None
    late["metadata"]["resourceVersion"] = str(int(late["metadata"]["resourceVersion"]) - 1)
    late["metadata"]["labels"] = {"late": "yes"}
    rec.clear()
    view._assume_metadata("default/a-nic", held, late)
    assert view.claim("default/a-nic") is held and rec.told == []


def test_listers_show_a_slice_and_a_class_at_their_new_version(
        monkeypatch: pytest.MonkeyPatch) -> None:
    api, proc, _ = _world(monkeypatch)
    view = proc.view
    assert view.slices() and view.classes()
    since = api.rv
    for kind, key in (("ResourceSlice", "node-1-nics"), ("DeviceClass", "shared-nic")):
        cur = api.get(kind, key)
        assert cur is not None
        api.update(kind, cur)
        watch(api, view, kind, since)
        stored = api.get(kind, key)
        assert stored is not None
        version = stored["metadata"]["resourceVersion"]
        if kind == "ResourceSlice":
            listed = [s for s in view.slices() if s.name == key]
            assert [s.metadata.resource_version for s in listed] == [version]
        else:
            assert view.classes()[key] == as_converted(kind, stored)
