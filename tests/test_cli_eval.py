"""``eval`` says what the scheduler would decide: gathered pools, one shared budget per
config, the first slice error stops evaluation."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from dra_affinity import cel
from dra_affinity.cli import main
from validation.manifests import DRIVER, SUBNET_EXPR, device_slice, meta_slice, resource_claim

QUADRATIC = 'object.l.all(a, object.l.all(b, a + b >= 0)) ? "x" : ""'


@functools.cache
def list_over_half_the_budget() -> list[int]:
    """A list on which QUADRATIC costs more than half the budget but less than all of it."""
    prog = cel.EXTRACTOR_ENV.compile(QUADRATIC)
    for n in range(10, 2000, 5):
        _, cost = prog.evaluate({"object": {"l": list(range(n))}}, 10**9)
        if cost > cel.SHARING_AFFINITY_CEL_MAX_COST // 2:
            assert cost < cel.SHARING_AFFINITY_CEL_MAX_COST
            return list(range(n))
    raise AssertionError("no list length costs over half the budget")


def write(path: Path, *docs: dict[str, Any]) -> str:
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return str(path)


def run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert "Traceback" not in res.output
    return res.exit_code, res.output


def eval_json(tmp_path: Path, slices: list[dict[str, Any]], claim: dict[str, Any],
              *extra: str) -> tuple[int, dict[str, Any]]:
    s = write(tmp_path / "slices.yaml", *slices)
    c = write(tmp_path / "claim.yaml", claim)
    code, out = run("eval", "--slice", s, "--claim", c, "--request", "nic", "-o", "json", *extra)
    return code, json.loads(out)


def claim_with(params: dict[str, Any]) -> dict[str, Any]:
    claim = resource_claim()
    claim["spec"]["devices"]["config"][0]["opaque"]["parameters"] = params
    return claim


def nic_params(subnet: str = "subnet-a") -> dict[str, Any]:
    return {"apiVersion": "networking.example.com/v1", "kind": "NicConfig", "subnetID": subnet}


def test_complete_pool_extracts_keys(tmp_path: Path) -> None:
    code, out = eval_json(tmp_path, [meta_slice(), device_slice()], resource_claim())
    assert code == 0
    [pool] = out["pools"]
    assert pool["problem"] is None and pool["generation"] == 1
    [req] = pool["requests"]
    assert req["outcome"] == "OK" and req["keys"] == {"subnet": "subnet-a"}
    assert [(r["key"], r["value"]) for r in req["evaluations"]] == [("subnet", "subnet-a")]


def test_only_the_newest_generation_counts(tmp_path: Path) -> None:
    old = meta_slice("old-meta", generation=1, extractors=[("subnet", SUBNET_EXPR)])
    new = meta_slice("new-meta", generation=2, extractors=[("zone", '"z1"')])
    code, out = eval_json(tmp_path, [old, new, device_slice(generation=2)], resource_claim())
    assert code == 0
    [pool] = out["pools"]
    assert pool["generation"] == 2 and pool["metadataSlices"] == ["new-meta"]
    [req] = pool["requests"]
    assert req["keys"] == {"zone": "z1"}  # the generation-1 extractor is not run
    assert [r["key"] for r in req["evaluations"]] == ["zone"]


def test_newest_generation_without_sharing_affinity_is_not_gated(tmp_path: Path) -> None:
    code, out = eval_json(tmp_path, [meta_slice(generation=1), device_slice(generation=2, count=1)],
                          resource_claim())
    assert code == 1
    [req] = out["pools"][0]["requests"]
    assert req["outcome"] == "NotDeclared" and req["evaluations"] == []


def test_incomplete_pool_is_what_the_scheduler_refuses(tmp_path: Path) -> None:
    code, out = eval_json(tmp_path, [meta_slice(count=2)], resource_claim())
    assert code == 1
    [pool] = out["pools"]
    assert pool["problem"]["code"] == "AffinityPoolIncomplete"
    [req] = pool["requests"]
    assert req["outcome"] == "AffinityPoolIncomplete" and req["keys"] == {}
    # what it would extract once complete is still shown
    assert req["extraction"] == {"outcome": "OK", "keys": {"subnet": "subnet-a"},
                                 "message": "extracted subnet=subnet-a"}


def test_affinity_invalid_pool(tmp_path: Path) -> None:
    a = meta_slice("meta-a", count=3)
    b = meta_slice("meta-b", count=3)  # the same key in two slices
    code, out = eval_json(tmp_path, [a, b, device_slice(count=3)], resource_claim())
    assert code == 1
    [req] = out["pools"][0]["requests"]
    assert req["outcome"] == "AffinityInvalidPool"
    assert "duplicate sharingAffinity key 'subnet'" in req["message"]


def test_configs_share_the_one_budget_of_the_extraction(tmp_path: Path) -> None:
    params = {**nic_params(), "l": list_over_half_the_budget()}
    claim = claim_with(params)
    claim["spec"]["devices"]["config"].append(
        {"requests": ["nic"], "opaque": {"driver": DRIVER, "parameters": params}})
    meta = meta_slice(extractors=[("k1", QUADRATIC)])
    code, out = eval_json(tmp_path, [meta, device_slice()], claim)
    assert code == 1
    [req] = out["pools"][0]["requests"]
    assert req["outcome"] == "CostExceeded"
    assert [("error" in r) for r in req["evaluations"]] == [False, True]


def test_extractors_share_one_budget(tmp_path: Path) -> None:
    params = {**nic_params(), "l": list_over_half_the_budget()}
    meta = meta_slice(extractors=[("k1", QUADRATIC), ("k2", QUADRATIC)])
    code, out = eval_json(tmp_path, [meta, device_slice()], claim_with(params))
    assert code == 1
    [req] = out["pools"][0]["requests"]
    assert req["outcome"] == "CostExceeded"
    rows = req["evaluations"]
    assert [r["key"] for r in rows] == ["k1", "k2"]
    assert rows[0]["value"] == "x" and "error" not in rows[0]
    assert rows[1]["error"].startswith("CostExceeded")
    # alone, each extractor fits the budget: only the shared budget runs out
    one = meta_slice(extractors=[("k1", QUADRATIC)])
    code, out = eval_json(tmp_path, [one, device_slice()], claim_with(params))
    assert code == 0


def test_evaluation_stops_at_the_first_slice_error(tmp_path: Path) -> None:
    meta = meta_slice(extractors=[("bad", "object.missing"), ("subnet", SUBNET_EXPR)])
    claim = claim_with(nic_params())
    claim["spec"]["devices"]["config"].append(
        {"requests": ["nic"], "opaque": {"driver": DRIVER, "parameters": nic_params()}})
    code, out = eval_json(tmp_path, [meta, device_slice()], claim)
    assert code == 1
    [req] = out["pools"][0]["requests"]
    assert req["outcome"] == "MissingField"
    assert len(req["evaluations"]) == 1  # not the second extractor, not the second config
    assert req["evaluations"][0]["error"].startswith("MissingField")


def test_table_output_prints_manifest_text_literally(tmp_path: Path) -> None:
    meta = meta_slice(extractors=[("subnet", '"[/bold] [red]x"')])
    s = write(tmp_path / "s.yaml", meta, device_slice())
    c = write(tmp_path / "c.yaml", resource_claim())
    code, out = run("eval", "--slice", s, "--claim", c, "--request", "nic")
    assert code == 0
    assert "[/bold] [red]x" in out


@pytest.mark.parametrize(("args", "message"), [
    (["--request", "nope"], "has no request 'nope'"),
    (["--claim-name", "nope"], "no ResourceClaim or ResourceClaimTemplate named 'nope'"),
])
def test_eval_input_errors(tmp_path: Path, args: list[str], message: str) -> None:
    s = write(tmp_path / "s.yaml", meta_slice(), device_slice())
    c = write(tmp_path / "c.yaml", resource_claim())
    code, out = run("eval", "--slice", s, "--claim", c, *args)
    assert code == 2 and message in out


def test_eval_without_sharing_affinity_is_an_input_error(tmp_path: Path) -> None:
    s = write(tmp_path / "s.yaml", device_slice())
    c = write(tmp_path / "c.yaml", resource_claim())
    code, out = run("eval", "--slice", s, "--claim", c)
    assert code == 2 and "no ResourceSlice declares sharing affinity" in out


def test_unquoted_date_in_opaque_parameters_evaluates_and_validates(tmp_path: Path) -> None:
    params = {**nic_params(), "since": "DATE"}
    s = write(tmp_path / "s.yaml", meta_slice(), device_slice())
    c = tmp_path / "c.yaml"
    c.write_text(yaml.safe_dump(claim_with(params)).replace("DATE", "2024-01-02"))
    code, out = run("eval", "--slice", s, "--claim", str(c), "--request", "nic")
    assert code == 0, out
    code, out = run("validate", str(c))
    assert code == 0, out


def test_claim_admission_refuses_is_an_input_error(tmp_path: Path) -> None:
    """A claim the API server would refuse never reaches a scheduler: eval says why, by
    file, object and field, instead of evaluating it. Here YAML aliases expand one small
    list into parameters far over the size limit."""
    s = write(tmp_path / "slices.yaml", meta_slice(), device_slice())
    row = "x" * 1000
    text = (
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\n"
        "metadata: {name: big, namespace: default}\n"
        "spec:\n  devices:\n"
        "    requests: [{name: nic, exactly: {deviceClassName: shared-nic}}]\n"
        "    config:\n    - opaque:\n        driver: " + DRIVER + "\n"
        "        parameters:\n"
        f"          a: &a [{row}, {row}, {row}, {row}]\n"
        "          b: [*a, *a, *a, *a, *a, *a, *a, *a]\n"
        "          subnetID: s\n"
    )
    c = tmp_path / "claim.yaml"
    c.write_text(text)
    code, out = run("eval", "--slice", s, "--claim", str(c))
    assert code == 2
    assert "claim.yaml" in out and 'ResourceClaim "big"' in out
    assert "spec.devices.config[0].opaque.parameters" in out
