"""The assume cache: the view shows this process's writes until the watch has them."""

from __future__ import annotations

import copy

import pytest

from dra_affinity.kube import view as view_module
from dra_affinity.kube.convert import to_model
from dra_affinity.kube.informer import Change, as_informed
from dra_affinity.kube.view import KubeView

from .fakeapi import FakeApi
from .test_process import _process, _run
from .world import build, claim, pod, sync


def _change(kind: str, typ: str, obj: dict) -> Change:
    return Change(kind, typ, object=copy.deepcopy(obj))


def test_claim_write_is_seen_before_the_echo_and_older_events_do_not_undo_it() -> None:
    api = FakeApi()
    build(api)
    api.create("ResourceClaim", claim("a-nic", "x"))
    api.create("Pod", pod("a", "a-nic"))
    proc = _process(api)
    stale = api.get("ResourceClaim", "default/a-nic")
    assert stale is not None
    _run(proc, api, rounds=1)
    view = proc.view
    c = view.claim("default/a-nic")
    assert c is not None and c.status.allocation is not None
    # a late MODIFIED carrying the pre-write version changes nothing
    view.apply(_change("ResourceClaim", "MODIFIED", stale))
    c = view.claim("default/a-nic")
    assert c is not None and c.status.allocation is not None
    # the echo (same resourceVersion as our write) replaces the assumed copy
    echo = api.get("ResourceClaim", "default/a-nic")
    assert echo is not None
    view.apply(_change("ResourceClaim", "MODIFIED", echo))
    assert view._assumed["ResourceClaim"] == {}
    assert view.claim("default/a-nic") == to_model("ResourceClaim", as_informed(echo, "ResourceClaim")).model


def test_the_echo_of_a_claim_write_and_the_steps_before_it_are_not_converted_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    api = FakeApi()
    build(api)
    api.create("ResourceClaim", claim("a-nic", "x"))
    api.create("Pod", pod("a", "a-nic"))
    proc = _process(api)
    _run(proc, api, rounds=1)
    view = proc.view
    stored = api.get("ResourceClaim", "default/a-nic")
    assert stored is not None
    step = copy.deepcopy(stored)  # the finalizer's write, before the status one
    step["metadata"]["resourceVersion"] = str(int(stored["metadata"]["resourceVersion"]) - 1)
    step["status"] = {}
    seen: list[str] = []

    class Listener:
        def on_change(self, kind: str, old: object, new: object) -> None:
            seen.append(kind)

    view.listeners.append(Listener())  # type: ignore[arg-type]
    converted: list[str] = []
    real = view_module.to_model
    monkeypatch.setattr(view_module, "to_model", lambda kind, raw, shared=None: (
        converted.append(kind), real(kind, raw, shared))[1])
    view.apply(_change("ResourceClaim", "MODIFIED", step))
    c = view.claim("default/a-nic")
    assert c is not None and c.status.allocation is not None
    view.apply(_change("ResourceClaim", "MODIFIED", stored))  # the echo
    assert converted == [] and seen == []
    assert view._assumed["ResourceClaim"] == {}
    assert view.claim("default/a-nic") == to_model("ResourceClaim", as_informed(stored, "ResourceClaim")).model


def test_bound_pod_stays_bound_until_the_informer_shows_the_binding() -> None:
    api = FakeApi()
    build(api)
    api.create("ResourceClaim", claim("a-nic", "x"))
    api.create("Pod", pod("a", "a-nic"))
    proc = _process(api)
    before = api.get("Pod", "default/a")
    assert before is not None
    _run(proc, api, rounds=1)
    view = proc.view
    assert "default/a" not in proc.queue
    # a status update of the still-pending copy arrives late (newer resourceVersion)
    late = copy.deepcopy(before)
    late["metadata"]["resourceVersion"] = str(api.rv + 100)
    late["status"]["conditions"] = [{"type": "PodScheduled", "status": "False"}]
    view.apply(_change("Pod", "MODIFIED", late))
    p = view.pod("default/a")
    assert p is not None and p.spec.node_name == "node-1"
    assert "default/a" not in proc.queue
    sync(api, view)
    assert view._assumed["Pod"] == {}


def test_objects_that_do_not_validate_are_ignored_and_reported_once() -> None:
    api = FakeApi()
    problems: list[tuple[str, str, str]] = []
    view = KubeView(api, on_problem=lambda *a: problems.append(a))
    bad = claim("bad", "x")
    bad["spec"]["devices"]["requests"][0]["exactly"]["count"] = "two"
    api.create("ResourceClaim", bad)
    sync(api, view, ("ResourceClaim",))
    sync(api, view, ("ResourceClaim",))
    assert view.claim("default/bad") is None
    assert len(problems) == 1
    kind, key, msg = problems[0]
    assert (kind, key) == ("ResourceClaim", "default/bad")
    assert "spec.devices.requests[0].exactly.count" in msg


def test_missing_claims_of_a_template_entry_follow_the_recorded_name() -> None:
    """A template's claim is missing until the resourceclaim controller records its name
    in the pod's status (an entry without a name records none), then until the cache
    holds that claim."""
    from dra_affinity.api.core import Pod

    api = FakeApi()
    build(api)
    api.create("ResourceClaim", claim("a-nic-x7k2p", "x"))
    proc = _process(api)
    _run(proc, api, rounds=1)
    raw = pod("a", "unused")
    raw["spec"]["resourceClaims"] = [{"name": "nic", "resourceClaimTemplateName": "nic-tmpl"}]
    waiting = ["default/<nic from nic-tmpl>"]
    assert proc.view.missing_claims(Pod.model_validate(raw)) == waiting
    raw["status"]["resourceClaimStatuses"] = [{"name": "nic"}]
    assert proc.view.missing_claims(Pod.model_validate(raw)) == waiting
    raw["status"]["resourceClaimStatuses"] = [{"name": "nic", "resourceClaimName": "a-nic-other"}]
    assert proc.view.missing_claims(Pod.model_validate(raw)) == ["default/a-nic-other"]
    raw["status"]["resourceClaimStatuses"] = [{"name": "nic", "resourceClaimName": "a-nic-x7k2p"}]
    assert proc.view.missing_claims(Pod.model_validate(raw)) == []
