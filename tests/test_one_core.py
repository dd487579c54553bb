"""One reading of a slice's extractors, offline and live.

Every command (``validate``, ``eval``, ``simulate``, ``explain``, ``locks FILE``) reads a
pool's extractors as the live scheduler does, through
:func:`dra_affinity.validation.sharing_affinity.slice_extractors`: from
``spec.sharingAffinity`` or from the bridge annotation of the device-less metadata
slice. Here every command runs on the annotated manifests of ``deploy/examples`` and
on their field-form twins, and must give the same answers; and a bad annotation is the
same error everywhere.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from dra_affinity.api.resource import ResourceSlice
from dra_affinity.cli import main
from dra_affinity.kube.convert import to_model
from dra_affinity.validation.sharing_affinity import (
    SHARING_AFFINITY_ANNOTATION,
    effective_slices,
    slice_extractors,
)

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "deploy" / "examples"

SCENARIO = {
    "apiVersion": "simulation.dra-affinity.io/v1alpha1", "kind": "Scenario",
    "metadata": {"name": "subnet-nics"},
    "spec": {"steps": [
        {"schedule": "a1"}, {"schedule": "a2"}, {"schedule": "b1"}, {"schedule": "a3"},
        {"expectDevice": {"device": "networking.example.com/node-1/eth1", "status": "Locked",
                          "lock": {"subnet": "subnet-a"}}},
        {"expectDevice": {"device": "networking.example.com/node-1/eth2", "status": "Locked",
                          "lock": {"subnet": "subnet-b"}}},
        {"restart": {}},
        {"expectDevice": {"device": "networking.example.com/node-1/eth2", "status": "Locked",
                          "lock": {"subnet": "subnet-b"}}},
    ]},
}


def _docs() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for name in ("subnet-nics.yaml", "pods.yaml"):
        out += [d for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d]
    return out


def field_form(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same objects with the annotation's list moved into ``spec.sharingAffinity``."""
    out = copy.deepcopy(docs)
    for d in out:
        ann = (d.get("metadata") or {}).get("annotations") or {}
        text = ann.pop(SHARING_AFFINITY_ANNOTATION, None)
        if text is not None:
            d["spec"]["sharingAffinity"] = json.loads(text)
            if not ann:
                d["metadata"].pop("annotations")
    return out


def write(path: Path, docs: list[dict[str, Any]]) -> str:
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return str(path)


def run(*args: str) -> tuple[int, Any]:
    res = CliRunner().invoke(main, list(args), catch_exceptions=False)
    try:
        return res.exit_code, json.loads(res.stdout)
    except ValueError:
        return res.exit_code, res.output


@pytest.fixture(params=["annotation", "field"])
def form(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, dict[str, str]]:
    """Per form: the scenario, the slices alone and the claim template file."""
    out: dict[str, dict[str, str]] = {}
    for name, docs in (("annotation", _docs()), ("field", field_form(_docs()))):
        d = tmp_path / name
        d.mkdir()
        out[name] = {
            "scenario": write(d / "scenario.yaml", [*docs, SCENARIO]),
            "slices": write(d / "slices.yaml", [x for x in docs if x["kind"] == "ResourceSlice"]),
            "claim": write(d / "claims.yaml", [x for x in docs if x["kind"] == "ResourceClaimTemplate"]),
        }
    return out


def answers(f: dict[str, str]) -> dict[str, Any]:
    """Every command's answer on one form."""
    return {
        "validate": run("validate", f["scenario"], "-o", "json"),
        "simulate": run("simulate", f["scenario"], "-o", "json"),
        "explain": run("explain", f["scenario"], "--pod", "b1", "--at-step", "2", "-o", "json"),
        "locks": run("locks", f["scenario"], "-o", "json"),
        "locks@3": run("locks", f["scenario"], "--at-step", "3", "-o", "json"),
        "eval": run("eval", "--slice", f["slices"], "--claim", f["claim"], "--claim-name",
                    "subnet-b", "-o", "json"),
    }


def test_every_command_answers_alike_on_annotation_and_field(files: dict[str, dict[str, str]]) -> None:
    annotated, fielded = answers(files["annotation"]), answers(files["field"])
    assert annotated == fielded
    # ... and the answer is sharing affinity enforced, not a pool treated as unrestricted.
    code, sim = annotated["simulate"]
    assert code == 0 and sim["expectationsFailed"] == 0
    placed = {s["pod"]: s["allocations"][0]["device"] for s in sim["steps"] if s.get("allocations")}
    assert placed["default/b1"] == "networking.example.com/node-1/eth2"
    assert placed["default/a3"] == "networking.example.com/node-1/eth1"
    code, exp = annotated["explain"]
    assert code == 0
    eth1 = [r for n in exp["nodes"] for r in n["devices"]
            if r["device"] == "networking.example.com/node-1/eth1"]
    assert eth1 and all(r["verdict"] == "AffinityLockMismatch" for r in eth1)
    code, ev = annotated["eval"]
    assert code == 0 and ev["pools"][0]["requests"][0]["keys"] == {"subnet": "subnet-b"}
    code, val = annotated["validate"]
    assert code == 0 and val["errors"] == 0


BAD_ANNOTATIONS = [
    ("[{not json", "not JSON"),
    ('[{"name": "subnet", "expression": "object.subnetID +"}]', "expression"),
    ('[{"name": "subnet", "expression": "1"}]', "string"),
    ('{"name": "subnet"}', "must be a JSON list"),
    ('[{"name": "subnet", "expression": "\\"x\\"", "extra": 1}]', "unknown field"),
    ("[]", "at least one extractor"),
]


def _with_annotation(text: str) -> list[dict[str, Any]]:
    docs = _docs()
    for d in docs:
        if d["metadata"]["name"] == "node-1-meta":
            d["metadata"]["annotations"][SHARING_AFFINITY_ANNOTATION] = text
    return docs


@pytest.mark.parametrize(("text", "says"), BAD_ANNOTATIONS)
def test_a_bad_annotation_is_one_error_everywhere(tmp_path: Path, text: str, says: str) -> None:
    docs = _with_annotation(text)
    scenario = write(tmp_path / "s.yaml", [*docs, {**SCENARIO, "spec": {"steps": [{"schedule": "a1"}]}}])
    # validate: an error naming the slice and the annotation, exit 1
    code, val = run("validate", scenario, "-o", "json")
    assert code == 1 and val["errors"] == 1, val
    (finding,) = val["findings"]
    assert finding["object"] == 'ResourceSlice "node-1-meta"'
    assert finding["field"].startswith(f"metadata.annotations[{SHARING_AFFINITY_ANNOTATION}]")
    assert says in finding["message"]
    # the live reading: the same errors, as the problem that makes the pool invalid
    raw = next(d for d in docs if d["metadata"]["name"] == "node-1-meta")
    conv = to_model("ResourceSlice", raw)
    assert conv.problem is not None and finding["message"] in conv.problem
    # simulate: node-1's pool fails closed (AffinityInvalidPool), the pod goes to node-2
    code, sim = run("simulate", scenario, "-o", "json")
    assert code == 0
    assert sim["steps"][0]["node"] == "node-2"
    code, exp = run("explain", scenario, "--pod", "a1", "--at-step", "0", "-o", "json")
    node1 = next(n for n in exp["nodes"] if n["node"] == "node-1")
    assert {r["verdict"] for r in node1["devices"]} == {"AffinityInvalidPool"}
    assert finding["message"] in node1["devices"][0]["message"]
    # eval: the pool is reported with the problem, not refused as having no extractors
    slices = write(tmp_path / "slices.yaml", [d for d in docs if d["kind"] == "ResourceSlice"])
    claims = write(tmp_path / "claims.yaml", [d for d in docs if d["kind"] == "ResourceClaimTemplate"])
    code, ev = run("eval", "--slice", slices, "--claim", claims, "-o", "json")
    assert code == 1
    pool = next(p for p in ev["pools"] if p["pool"] == "node-1")
    assert pool["problem"]["code"] == "AffinityInvalidPool"
    assert pool["metadataSlices"] == ["node-1-meta"]


def test_field_and_annotation_disagreeing_fail_closed(tmp_path: Path) -> None:
    docs = _docs()
    meta = next(d for d in docs if d["metadata"]["name"] == "node-1-meta")
    meta["spec"]["sharingAffinity"] = [{"name": "vlan", "expression": '"x"'}]
    code, val = run("validate", write(tmp_path / "s.yaml", docs), "-o", "json")
    assert code == 1 and "disagrees with spec.sharingAffinity" in val["findings"][0]["message"]
    # equal content in both places is the move from annotation to field: fine
    meta["spec"]["sharingAffinity"] = json.loads(meta["metadata"]["annotations"][SHARING_AFFINITY_ANNOTATION])
    code, val = run("validate", write(tmp_path / "s.yaml", docs), "-o", "json")
    assert code == 0, val


def _slice(name: str, annotation: str | None = None) -> ResourceSlice:
    data: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {"driver": "d.example.com", "nodeName": "n", "pool": {"name": "p", "generation": 1,
                                                                    "resourceSliceCount": 1}}}
    if annotation is not None:
        data["metadata"]["annotations"] = {SHARING_AFFINITY_ANNOTATION: annotation}
    return ResourceSlice.model_validate(data)


def test_reading_keeps_the_object_when_nothing_changes_and_reuses_the_memo() -> None:
    plain = _slice("plain")
    read = slice_extractors(plain)
    assert read.slice is plain and read.source == "none" and read.problem is None
    ann = _slice("ann", '[{"name": "k", "expression": "\\"v\\""}]')
    read = slice_extractors(ann)
    assert read.source == "annotation" and read.slice is not ann
    assert [(e.name, e.expression) for e in read.slice.spec.sharing_affinity or []] == [("k", '"v"')]
    assert ann.spec.sharing_affinity is None  # the stored object is never changed
    first, memo = effective_slices([plain, ann])
    again, memo2 = effective_slices([plain, ann], memo)
    assert again.slices[1] is first.slices[1]  # the same object: not read again
    fresh, _ = effective_slices([plain, _slice("ann", "[")], memo2)
    assert "ann" in fresh.problems and "not JSON" in fresh.problems["ann"]
