"""`dra-affinity explain`: per-device verdicts as Filter sees them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from dra_affinity.cli import main

STORY_3 = Path(__file__).resolve().parent.parent / "examples" / "story-3-subnet.yaml"


def explain(*args: str) -> dict[str, Any]:
    res = CliRunner().invoke(main, ["explain", str(STORY_3), *args, "-o", "json"])
    assert res.exit_code == 0, res.output
    out: dict[str, Any] = json.loads(res.output)
    return out


def test_lock_mismatch_and_node_selector_are_told_apart() -> None:
    # Before step 6, node-1's NICs are locked to subnet-X and subnet-Y; pod-e wants
    # subnet-Z and is pinned to node-1 by its nodeSelector.
    out = explain("--pod", "pod-e", "--at-step", "6")
    assert out["pod"] == "default/pod-e"
    nodes = {n["node"]: n for n in out["nodes"]}
    n1, n2 = nodes["node-1"], nodes["node-2"]
    assert n1["fits"] is False and n2["fits"] is False
    v1 = {r["device"].rsplit("/", 1)[1]: r for r in n1["devices"]}
    assert {r["verdict"] for r in v1.values()} == {"AffinityLockMismatch"}
    assert "subnet-X" in v1["eth1"]["message"] and "subnet-Y" in v1["eth2"]["message"]
    assert all("subnet-Z" in r["message"] for r in v1.values())
    # node-2's devices would take the request; the node is out for the nodeSelector only
    assert [r["code"] for r in n2["reasons"]] == ["NodeSelectorMismatch"]
    assert [r["verdict"] for r in n2["devices"]] == ["Fits", "Fits"]
    assert all(r["keys"] == {"subnet": "subnet-Z"} for r in n2["devices"])

