"""CEL differential suite: our engine against upstream's (cel-go in Kubernetes' environments).

Every case is compiled and evaluated on both sides with the same input and
the same runtime cost limit. Compared: the outcome (value, or the error
class compile / runtime / cost), the value with its type, the static cost
range and the actual runtime cost. Disagreements are grouped into a report
(``out/oracle/cel-report.md``); the test fails on any disagreement that the
allow-list in known_differences.py does not explain, and on any allow-list
entry that explains nothing.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from cel_gen import ATOMS, CelCase, generate
from differential import Finding, failure_message, judge, render, write_report
from known_differences import CEL_KNOWN
from ours import CelOutcome, cel_oracle_outcome, cel_ours, tag_ours

from oracle import Oracle, report_dir

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from cel_corpus import CORPUS, ERROR

pytestmark = pytest.mark.oracle

SEED = 20260
N_OBJECT = 5000
N_DEVICE = 600


def corpus_cases() -> list[CelCase]:
    return [CelCase("corpus", "object", c.expr, c.obj) for c in CORPUS]


def regex_dialect_cases() -> list[CelCase]:
    """Every Go-dialect pattern of the generator, literal and computed, on one text."""
    data = {"name": "h\u00e9llo abc 123 aaaa", "tags": ["x", "\u00e9"]}
    cases = [CelCase("regex.go", "object", template.format(p), data)
             for p in ATOMS["goregex"]
             for template in ("object.name.matches({})", "object.name.matches({} + '')",
                              "object.name.findAll({}, 2)")]
    # Go's nesting limit (1,000 levels, non-capturing groups not counted) and long patterns
    deep = ["(" * n + "a" + ")" * n for n in (998, 999, 1000)]
    deep += ["(?:" * n + "a" + ")" * n for n in (1001, 2500)]
    deep += ["a" + "|a" * 3000, "(?:a|" * 500 + "b" + ")" * 500, "(?:a{2}" * 9 + ")" * 9,
             "x*" * 2000, "[a-z]{1000}" * 3, "\\d{100}" * 40]
    cases += [CelCase("regex.go", "object", "object.name.matches(object.p)", {**data, "p": p})
              for p in deep]
    return cases


def all_cases() -> list[CelCase]:
    return corpus_cases() + regex_dialect_cases() + generate(SEED, N_OBJECT, N_DEVICE)


def request(case: CelCase) -> dict[str, object]:
    req: dict[str, object] = {"op": "cel", "env": case.env, "expression": case.expression}
    if case.env == "device":
        req["device"] = case.data
        req["consumableCapacity"] = True
    else:
        req["object"] = case.data
    return req


def _show(o: CelOutcome) -> str:
    if o.kind == "value":
        return f"value {json.dumps(o.value, ensure_ascii=False)[:300]}"
    return f"{o.kind} error: {o.message[:300]}"


def _order_free(v: object) -> object:
    """A tagged value with every list's elements sorted (at any depth)."""
    if isinstance(v, tuple) and len(v) == 2 and v[0] == "list":
        return ("list", tuple(sorted((_order_free(x) for x in v[1]), key=repr)))
    if isinstance(v, tuple):
        return tuple(_order_free(x) for x in v)
    return v


def _same_up_to_map_order(case: CelCase, ours: CelOutcome, up: CelOutcome) -> bool:
    """CEL leaves map iteration order unspecified (Go's is random): a list built by a
    macro over a map may then differ in element order only (also nested)."""
    if not re.search(r"\.(map|filter|transformList)\(", case.expression):
        return False
    a, b = ours.value, up.value
    if a is not None and b is not None and a[0] == b[0] == "string":
        # e.g. the keys of a map joined into one string: same characters, another order
        return sorted(a[1]) == sorted(b[1])
    if a is None or b is None or a[0] != "list" or b[0] != "list":
        return False
    return _order_free(a) == _order_free(b)


def compare(case: CelCase, ours: CelOutcome, up: CelOutcome) -> list[Finding]:
    """The findings for one case (empty when both sides agree on everything compared)."""
    data = json.dumps(case.data, sort_keys=True, ensure_ascii=False)
    subject = case.expression
    size = len(case.expression) * 4 + len(data)
    base = f"input: {data[:400]}\nours: {_show(ours)}\nupstream: {_show(up)}"

    def finding(kind: str, extra: str = "", **attrs: object) -> Finding:
        detail = base + (f"\n{extra}" if extra else "")
        return Finding(case.family, kind, subject, detail, size,
                       {"ours": ours, "upstream": up, "env": case.env, **attrs})

    out: list[Finding] = []
    if ours.kind != up.kind:
        out.append(finding(f"outcome:{ours.kind}->{up.kind}"))
        return out
    if ours.kind == "value" and ours.value != up.value and not _same_up_to_map_order(case, ours, up):
        assert ours.value is not None and up.value is not None
        kind = "type" if ours.value[0] != up.value[0] else "value"
        out.append(finding(kind))
    if ours.estimate is not None and up.estimate is not None:
        (omin, omax), (umin, umax) = ours.estimate, up.estimate
        if umin is not None and omin != umin:
            out.append(finding("estimate.min", f"estimate: ours {ours.estimate} upstream {up.estimate}"))
        if omax != umax:
            out.append(finding("estimate.max", f"estimate: ours {ours.estimate} upstream {up.estimate}"))
    if ours.kind == "value" and ours.cost != up.cost:
        out.append(finding("cost", f"runtime cost: ours {ours.cost} upstream {up.cost}"))
    return out


@pytest.fixture(scope="module")
def outcomes(oracle: Oracle) -> list[tuple[CelCase, CelOutcome, CelOutcome]]:
    cases = all_cases()
    answers = oracle.batch([request(c) for c in cases])
    return [(c, cel_ours(c.env, c.expression, c.data), cel_oracle_outcome(a))
            for c, a in zip(cases, answers, strict=True)]


def test_generator_is_deterministic_and_large_enough() -> None:
    a, b = generate(SEED, 200, 50), generate(SEED, 200, 50)
    assert a == b
    assert generate(SEED + 1, 200, 50) != a
    assert len(all_cases()) >= 5000
    families = {c.family for c in generate(SEED, N_OBJECT, N_DEVICE)}
    assert {"optional", "two_var", "time", "library.ip", "ill_typed", "syntax", "cost",
            "typing", "folding"} <= families


def test_corpus_expectations_agree_with_upstream(
    outcomes: list[tuple[CelCase, CelOutcome, CelOutcome]],
) -> None:
    """The corpus states cel-go's result for each case: check it against the real cel-go."""
    wrong = []
    for c, (case, _, up) in zip(CORPUS, outcomes, strict=False):
        assert case.family == "corpus" and case.expression == c.expr
        if c.expect is ERROR:
            if up.kind == "value":
                wrong.append(f"{c.expr!r}: corpus says error, upstream gives {up.value}")
        elif up.kind != "value" or up.value != tag_ours(c.expect):
            wrong.append(f"{c.expr!r}: corpus says {c.expect!r}, upstream gives {_show(up)}")
    assert not wrong, "\n".join(wrong)


def test_outcomes_cover_every_error_class(
    outcomes: list[tuple[CelCase, CelOutcome, CelOutcome]],
) -> None:
    """The generator reaches values and every upstream error class, in both environments."""
    seen = {(case.env, up.kind) for case, _, up in outcomes}
    for want in [("object", "value"), ("object", "compile"), ("object", "runtime"),
                 ("object", "cost"), ("device", "value"), ("device", "compile"),
                 ("device", "runtime")]:
        assert want in seen, f"no case with upstream outcome {want}"


def test_cel_differential(outcomes: list[tuple[CelCase, CelOutcome, CelOutcome]]) -> None:
    findings = [f for case, ours, up in outcomes for f in compare(case, ours, up)]
    verdict = judge(findings, CEL_KNOWN)
    path = report_dir() / "cel-report.md"
    write_report(path, render("CEL: dra-affinity vs upstream (cel-go, Kubernetes 1.37)",
                              len(outcomes), verdict, CEL_KNOWN), findings)
    assert not verdict.unexplained and not verdict.unused, failure_message(verdict, path)
