"""Differential tests: our engine, cel-python and (if installed) two native CEL bindings.

The corpus (benchmarks/cel_corpus.py) states cel-go's result for each
expression. Our engine must agree on every case. The other implementations
must agree with us except on documented, intentional differences -- all of
them gaps or bugs of that implementation, listed below with the reason.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import cel_compare
from cel_corpus import CORPUS, Case

K8S_LIBRARIES = {
    "'abc123'.find('[0-9]+')",
    "'a1b2'.findAll('[0-9]')",
    "[1, 2, 3].isSorted()",
    "[1, 2, 3].sum()",
    "[3, 1, 2].max()",
    "quantity('1Gi').isGreaterThan(quantity('1000Mi'))",
    "quantity('200M').compareTo(quantity('0.2G'))",
    "semver('1.10.0').isGreaterThan(semver('1.9.0'))",
    "isQuantity('1,3G')",
}
STRINGS_EXTENSION = {
    "'AbC'.lowerAscii()",
    "'a,b'.split(',')",
    "'hello'.substring(1, 3)",
    "'  x  '.trim()",
    "['a', 'b'].join('-')",
    "'hello'.indexOf('l')",
    "'a-b'.replace('-', '_')",
}
# Expressions on which each implementation is known to differ from cel-go.
KNOWN_DIFFERENCES: dict[str, set[str]] = {
    # cel-python 0.5: no heterogeneous equality (dyn(1) == 1.0 is an error), no strings
    # extension, no 3-argument map(), no Kubernetes libraries.
    "cel-python": K8S_LIBRARIES
    | STRINGS_EXTENSION
    | {"dyn(1) == 1.0", "dyn(1u) == 1", "dyn(1) == true", "dyn('1') == 1", "object.nums.map(n, n > 1, n + 1)"},
    # common-expression-language 0.10: size() counts UTF-8 bytes, errors are not absorbed
    # inside exists(), no strings extension, no Kubernetes libraries.
    "common-expression-language": K8S_LIBRARIES
    | STRINGS_EXTENSION
    | {"size('héllo')", "[0, 1].exists(x, 1 / x == 1)"},
    # cel-expr-python (cel-cpp): only the Kubernetes libraries are missing.
    "cel-expr-python": K8S_LIBRARIES,
}

IMPLS = {impl.name: impl for impl in cel_compare.available()}


def _ids(cases: tuple[Case, ...]) -> list[str]:
    return [c.expr[:60] for c in cases]


@pytest.mark.parametrize("case", CORPUS, ids=_ids(CORPUS))
def test_ours_matches_cel_go(case: Case) -> None:
    got = cel_compare.outcome(IMPLS["dra_affinity.cel"], case.expr, case.obj)
    assert cel_compare.agrees(got, case.expect), f"{got!r} != {case.expect!r}"


@pytest.mark.parametrize("name", ["cel-python", "common-expression-language", "cel-expr-python"])
def test_other_implementations_agree_except_documented(name: str) -> None:
    impl = IMPLS.get(name)
    if impl is None:
        pytest.skip(f"{name} is not installed")
    ours = IMPLS["dra_affinity.cel"]
    unexpected = []
    for case in CORPUS:
        if case.expr in KNOWN_DIFFERENCES[name]:
            continue
        theirs = cel_compare.outcome(impl, case.expr, case.obj)
        mine = cel_compare.outcome(ours, case.expr, case.obj)
        if not cel_compare.agrees(theirs, mine):
            unexpected.append(f"{case.expr}: {name} {theirs!r}, ours {mine!r}")
    assert not unexpected, "\n".join(unexpected)


def test_corpus_is_large_enough() -> None:
    assert len(CORPUS) >= 60
    assert any(c.expect is cel_compare.ERROR for c in CORPUS)
