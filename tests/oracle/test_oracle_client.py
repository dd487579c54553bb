"""The oracle machinery itself: build cache, client error paths, protocol, allow-list logic."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from differential import Finding, Known, judge, render
from ours import CelOutcome, alloc_oracle_outcome, cel_oracle_outcome, tag_oracle, tag_ours
from test_cel_oracle import _same_up_to_map_order

from dra_affinity.cel import Quantity, UInt
from oracle import BUILD_SCRIPT, Oracle, OracleError, require_go

pytestmark = pytest.mark.oracle


# ------------------------------------------------------------------ go toolchain gate
def test_missing_go_skips_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="Go toolchain"):
        require_go()


def test_missing_go_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setenv("CI", "1")
    with pytest.raises(pytest.fail.Exception, match="CI is set"):
        require_go()


# ------------------------------------------------------------------------ build cache
def test_build_script_is_idempotent_and_content_addressed(oracle: Oracle) -> None:
    first = subprocess.run(["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, check=True)
    second = subprocess.run(["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, check=True)
    path = Path(first.stdout.strip())
    assert path == Path(second.stdout.strip())
    assert path.name == "oracle" and path.is_file()
    assert len(path.parent.name) == 16 and path.parent.parent.name == "oracle"
    assert second.stderr == ""  # nothing was compiled the second time


# ---------------------------------------------------------------------------- protocol
def test_ping_and_request_ids(oracle: Oracle) -> None:
    answers = oracle.batch([{"op": "ping", "id": 7}, {"op": "ping", "id": "x"}])
    assert answers == [{"pong": True, "id": 7}, {"pong": True, "id": "x"}]


@pytest.mark.parametrize(("request_", "message"), [
    ({"op": "nope"}, "unknown op"),
    ({"op": "cel", "env": "moon", "expression": "1"}, "unknown env"),
    ({"op": "cel", "env": "device", "expression": "true"}, "needs a device"),
    ({"op": "allocate", "claims": []}, "node is required"),
    ({"op": "allocate", "node": {}, "claims": [None]}, r"claims\[0\] is null"),
    ({"op": "cel", "expression": "1", "object": {"a": 1e999}}, "object"),
    ({"op": "placement", "nodes": []}, "without pod"),
    ({"op": "placement", "nodes": [None], "pod": {}}, r"nodes\[0\] is null"),
    ({"op": "placement", "pods": [{"metadata": {"name": "x"}}], "pod": {}}, "not bound"),
])
def test_malformed_requests_raise_and_the_process_survives(
    oracle: Oracle, request_: dict[str, object], message: str
) -> None:
    with pytest.raises(OracleError, match=message):
        oracle.request(request_)
    assert oracle.request({"op": "ping"})["pong"] is True


def test_placement_answers_the_default_profile(oracle: Oracle) -> None:
    """The framework the oracle builds is kube-scheduler's default profile: its filter
    order and score weights, and a rejection names the plugin with its FitError reason."""
    node = {"metadata": {"name": "n1", "labels": {"kubernetes.io/hostname": "n1"}},
            "spec": {"unschedulable": True}, "status": {"allocatable": {"cpu": "1", "pods": "10"}}}
    free = {"metadata": {"name": "n2", "labels": {"kubernetes.io/hostname": "n2"}},
            "status": {"allocatable": {"cpu": "1", "pods": "10"}}}
    pod = {"metadata": {"name": "p", "namespace": "default"}, "spec": {"containers": [{"name": "c"}]}}
    a = oracle.request({"op": "placement", "nodes": [node, free], "pod": pod})
    assert a["filterPlugins"] == ["NodeName", "NodeUnschedulable", "TaintToleration", "NodeAffinity",
                                  "NodePorts", "NodeResourcesFit", "PodTopologySpread", "InterPodAffinity"]
    assert a["weights"] == {"TaintToleration": 3, "NodeAffinity": 2, "NodeResourcesFit": 1,
                            "PodTopologySpread": 2, "InterPodAffinity": 2, "NodeResourcesBalancedAllocation": 1}
    assert a["feasible"] == ["n2"]
    assert a["rejected"] == {"n1": {"plugin": "NodeUnschedulable", "code": "UnschedulableAndUnresolvable",
                                    "reasons": ["node(s) were unschedulable"]}}
    assert set(a["scores"]["n2"]) <= set(a["weights"])


def test_cel_error_classes_and_values(oracle: Oracle) -> None:
    def ask(expr: str, obj: object = None) -> CelOutcome:
        return cel_oracle_outcome(oracle.request({"op": "cel", "expression": expr, "object": obj}))

    assert ask("object.a + 1", {"a": 41}).value == ("int", "42")
    assert ask("object.a", {"a": 2.5}).value == ("double", "2.5")
    assert ask("object.a", {"a": 3}).value == ("int", "3")  # JSON integers stay int64
    assert ask("1 +").kind == "compile"
    assert ask("object.missing", {}).kind == "runtime"
    big = "lists.range(1000).all(i, lists.range(1000).all(j, i + j >= 0))"
    assert ask(big).kind == "cost"
    out = ask("object", {"b": 1, "a": [True, None]})
    assert out.value == ("map", ((("string", "a"), ("list", (("bool", True), ("null_type", None)))),
                                 (("string", "b"), ("int", "1"))))
    assert ask("1u").value == ("uint", "1")
    assert ask("quantity('1.5Gi')").value == ("kubernetes.Quantity", "1536Mi")
    assert ask("optional.none()").value == ("optional_type", None)
    cost = ask("'abc'.size()", {})
    assert cost.estimate is not None and cost.cost is not None


def test_device_selector_environment(oracle: Oracle) -> None:
    device = {"driver": "gpu.example.com", "attributes": {"model": {"string": "a100"}},
              "capacity": {"memory": {"value": "40Gi"}}}

    def ask(expr: str) -> CelOutcome:
        return cel_oracle_outcome(oracle.request(
            {"op": "cel", "env": "device", "expression": expr, "device": device}))

    assert ask("device.attributes['gpu.example.com'].model == 'a100'").value == ("bool", True)
    assert ask("device.capacity['gpu.example.com'].memory.isGreaterThan(quantity('1Gi'))").value \
        == ("bool", True)
    assert ask("device.driver").kind == "compile"  # not a bool
    assert ask("device.attributes['gpu.example.com'].nope").kind == "runtime"


def test_allocate_outcomes(oracle: Oracle) -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}
    slice_ = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
              "spec": {"driver": "d.example.com", "nodeName": "n1",
                       "pool": {"name": "p", "generation": 1, "resourceSliceCount": 1},
                       "devices": [{"name": "x", "allowMultipleAllocations": True,
                                    "capacity": {"slots": {"value": "4"}}}]}}
    cls = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "c"},
           "spec": {"selectors": [{"cel": {"expression": "device.driver == 'd.example.com'"}}]}}

    def claim(slots: str, expr: str = "true") -> dict[str, object]:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": "k", "namespace": "default", "uid": "u"},
                "spec": {"devices": {"requests": [{"name": "r", "exactly": {
                    "deviceClassName": "c", "allocationMode": "ExactCount", "count": 1,
                    "selectors": [{"cel": {"expression": expr}}],
                    "capacity": {"requests": {"slots": slots}}}}]}}}

    def ask(c: dict[str, object]) -> dict[str, object]:
        return oracle.request({"op": "allocate", "node": node, "slices": [slice_], "classes": [cls],
                               "claims": [c], "features": {"consumableCapacity": True}})

    got = alloc_oracle_outcome(ask(claim("2")))
    assert got.outcome == "allocated"
    assert got.allocations == ((("r", "d.example.com", "p", "x", True, (("slots", "2"),)),),)
    assert alloc_oracle_outcome(ask(claim("5"))).outcome == "unschedulable"
    failing = alloc_oracle_outcome(ask(claim("1", "device.attributes['d.example.com'].nope")))
    assert failing.outcome == "error" and "nope" in failing.message


def test_a_dead_process_is_reported() -> None:
    true = shutil.which("true")
    assert true is not None
    proc = Oracle(Path(true))
    try:
        with pytest.raises(OracleError, match=r"oracle (closed stdout|exited)|writing to the oracle failed"):
            proc.batch([{"op": "ping"}])
    finally:
        proc.close()


# --------------------------------------------------------------------- normalization
def test_tagging_agrees_between_sides() -> None:
    assert tag_ours(UInt(3)) == tag_oracle({"t": "uint", "v": "3"})
    assert tag_ours(0.1) == tag_oracle({"t": "double", "v": "0.1"})
    assert tag_ours(float("nan")) == tag_oracle({"t": "double", "v": "NaN"})
    assert tag_ours(float("-inf")) == tag_oracle({"t": "double", "v": "-Inf"})
    assert tag_ours(1e21) == tag_oracle({"t": "double", "v": "1e+21"})
    assert tag_ours(b"\xff") == tag_oracle({"t": "bytes", "v": "/w=="})
    assert tag_ours({"b": 1, "a": 2}) == tag_oracle({"t": "map", "v": [
        [{"t": "string", "v": "a"}, {"t": "int", "v": "2"}],
        [{"t": "string", "v": "b"}, {"t": "int", "v": "1"}]]})
    assert tag_ours(Quantity.parse("1536Mi")) == ("kubernetes.Quantity", "1536Mi")
    assert tag_ours(True) != tag_ours(1)  # bool is not int


def test_map_order_tolerance_is_limited_to_map_and_filter() -> None:
    from cel_gen import CelCase

    a = CelOutcome("value", ("list", (("string", "a"), ("string", "b"))))
    b = CelOutcome("value", ("list", (("string", "b"), ("string", "a"))))
    assert _same_up_to_map_order(CelCase("x", "object", "{'a': 1, 'b': 2}.map(k, k)", None), a, b)
    assert not _same_up_to_map_order(CelCase("x", "object", "['a', 'b']", None), a, b)
    c = CelOutcome("value", ("list", (("string", "a"), ("string", "c"))))
    assert not _same_up_to_map_order(CelCase("x", "object", "{'a': 1}.map(k, k)", None), a, c)


# ------------------------------------------------------------------------- allow-list
def test_judge_reports_unexplained_findings_and_unused_entries() -> None:
    f1 = Finding("fam", "cost", "1 + 1", "detail", 5)
    f2 = Finding("fam", "value", "2 + 2", "detail", 5)
    known = [Known("costs", "why", frozenset({"cost"})),
             Known("never", "why", frozenset({"cost"}), subject=r"zzz")]
    verdict = judge([f1, f2], known)
    assert verdict.unexplained == [f2]
    assert verdict.explained["costs"] == [f1]
    assert [k.name for k in verdict.unused] == ["never"]
    text = render("t", 2, verdict, known)
    assert "Unexplained" in text and "remove the entry" in text
    assert render("t", 2, verdict, known) == text  # deterministic
