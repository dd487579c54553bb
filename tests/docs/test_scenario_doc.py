"""docs/scenario.md describes the JSON output `simulate` really prints."""

from __future__ import annotations

import json
import re
from pathlib import Path

from click.testing import CliRunner

from dra_affinity.cli import main

from .test_commands import ROOT

PAGE = (ROOT / "docs" / "scenario.md").read_text(encoding="utf-8")


def simulate(path: Path) -> dict[str, object]:
    res = CliRunner().invoke(main, ["simulate", str(path), "--output", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert isinstance(out, dict)
    return out


def documented_block(after: str) -> str:
    """The first ```json block after the heading ``after``."""
    rest = PAGE.split(after, 1)[1]
    return rest.split("```json\n", 1)[1].split("```", 1)[0]


def test_top_level_keys_are_the_documented_ones_in_order() -> None:
    documented = re.findall(r'^  "(\w+)":', documented_block("## JSON output"), re.M)
    out = simulate(ROOT / "examples" / "story-3-subnet.yaml")
    assert documented == list(out)


def test_device_entry_keys_are_documented() -> None:
    documented = json.loads(documented_block("### `devices`"))
    out = simulate(ROOT / "examples" / "legacy-migration.yaml")
    unknown = [d for d in out["devices"] if d["status"] == "Unreconstructable"]  # type: ignore[index, union-attr]
    locked = [d for d in out["devices"] if d["status"] != "Unreconstructable"]  # type: ignore[index, union-attr]
    assert set(documented) == {"device", "status", "lock", "claims", "holders", "reason"}
    for d in locked:
        assert list(d) == [k for k in documented if k != "reason"]
        assert all(set(h) == {"claim", "request"} for h in d["holders"])
    for d in unknown:
        assert list(d) == list(documented)


SLICE_WITH_GATE_OFF = """\
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: node-1-meta}
spec:
  driver: networking.example.com
  nodeName: node-1
  pool: {name: node-1, generation: 1, resourceSliceCount: 1}
  sharingAffinity:
  - {name: subnet, expression: 'has(object.subnetID) ? object.subnetID : ""'}
---
apiVersion: simulation.dra-affinity.io/v1alpha1
kind: Scenario
metadata: {name: gate-off}
spec:
  featureGates: {apiserver: {DRASharingAffinity: false}}
  steps:
  - restart: {}
"""


def test_warnings_entries_are_as_documented(tmp_path: Path) -> None:
    """`warnings[]`: {object, document, warning}, the document counted from 1."""
    path = tmp_path / "gate-off.yaml"
    path.write_text(SLICE_WITH_GATE_OFF)
    out = simulate(path)
    assert "`warnings[]`: `{object, document, warning}`" in PAGE
    [w] = out["warnings"]  # type: ignore[misc]
    assert list(w) == ["object", "document", "warning"]
    assert w["object"] == "ResourceSlice node-1-meta" and w["document"] == "1"
    assert "DRASharingAffinity" in w["warning"]


def test_metrics_text_has_no_created_samples() -> None:
    assert "It has no `_created` samples." in PAGE
    res = CliRunner().invoke(main, ["metrics", str(ROOT / "examples" / "story-3-subnet.yaml")])
    assert res.exit_code == 0
    assert "sharing_affinity_filter_duration_seconds_bucket" in res.stdout
    assert "_created" not in res.stdout


def test_validate_exit_status_row() -> None:
    row = next(line for line in PAGE.splitlines() if line.startswith("| `validate` |"))
    assert row.split("|")[4].strip() == "a path that cannot be read or parsed"
    res = CliRunner().invoke(main, ["validate", str(ROOT / "no-such-file.yaml")])
    assert res.exit_code == 2


def test_expect_device_on_an_unknown_device_fails(tmp_path: Path) -> None:
    path = tmp_path / "typo.yaml"
    path.write_text(SLICE_WITH_GATE_OFF.replace(
        "  - restart: {}", "  - expectDevice: {device: networking.example.com/node-1/eht1}"))
    res = CliRunner().invoke(main, ["simulate", str(path), "--output", "json"])
    assert res.exit_code == 1
    [step] = json.loads(res.stdout)["steps"]
    message = "no such device in any published slice"
    assert message in step["expectations"][0]["message"] and f"`{message}`" in PAGE
