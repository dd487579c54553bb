"""Numbers and strings of a manifest as a cluster reads them, against upstream.

Each case is a manifest (YAML, or JSON when it starts with ``{``) and an expression
over it. Upstream's side (``manifest`` in the oracle's ``cel`` request) reads the
manifest as kubectl sends it and the API server decodes it; ours reads it with
:func:`dra_affinity.api.io.read_documents`. Both evaluate the expression with the
document bound to ``object``: the values (and their CEL types) must be the same.
"""

from __future__ import annotations

import pytest
from ours import CelOutcome, cel_oracle_outcome, cel_ours

from dra_affinity.api.errors import ManifestError
from dra_affinity.api.io import read_documents
from oracle import Oracle

pytestmark = pytest.mark.oracle

NUMBERS = ("1e6", "1000000.0", "-0.0", "0.0", "9000.0", "1.5", "1e21", "1e20", "-1e6",
           "9.2e18", "9223372036854775807.0", "-9223372036854775808.0", "1e-7", "0.1",
           "12", "-0", "0x10", "0777", "089", "1_000.0", "1.", ".5", "-.5e1", "!!float 1",
           "9223372036854775808", "18446744073709551615", "1e300", "123456789012345678901",
           "1.0e+15", "4.5e15", "1152921504606846976.0", "1e18")
NUMBER_EXPRESSIONS = ("string(object.v)", "type(object.v) == int", "object.v + 1",
                      "object.v + 1.0", "object.v == 1000000")

JSON_STRINGS = (r'"\ud83d\ude00"', r'"a\ud83d\ude00b"', r'"\ud83d"', r'"\ude00x\ud83dy"',
                r'"\\ud83d\\ude00"', r'"\u00e9\u4e16"', r'"\uD83D\uDE00"')


def _cases() -> list[tuple[str, str]]:
    cases = [(f"v: {n}\n", e) for n in NUMBERS for e in NUMBER_EXPRESSIONS]
    cases += [(f'{{"v": {n}}}', e) for n in ("1e3", "1.0", "-0", "-0.0", "1E2", "2.5e-1",
                                              "18446744073709551615", "1e21")
              for e in NUMBER_EXPRESSIONS]
    cases += [(f'{{"v": {s}}}', e) for s in JSON_STRINGS
              for e in ("object.v", "size(object.v)")]
    cases.append(('v: "\\ud83d\\ude00"\n', "object.v"))  # YAML: refused on both sides
    return cases


def _ours(manifest: str, expression: str) -> CelOutcome:
    try:
        [doc] = read_documents(manifest, "m.yaml")
    except ManifestError as e:
        return CelOutcome("manifest", message=str(e))
    return cel_ours("object", expression, doc.data)


def test_manifest_numbers_and_strings_agree_with_upstream(oracle: Oracle) -> None:
    cases = _cases()
    answers = oracle.batch([{"op": "cel", "env": "object", "expression": e, "manifest": m}
                            for m, e in cases])
    wrong = []
    for (manifest, expression), answer in zip(cases, answers, strict=True):
        ours, up = _ours(manifest, expression), cel_oracle_outcome(answer)
        if ours.kind != up.kind or ours.value != up.value:
            wrong.append(f"{manifest!r} {expression}: ours {ours.kind} {ours.value} "
                         f"{ours.message[:120]}; upstream {up.kind} {up.value} {up.message[:120]}")
    assert not wrong, f"{len(wrong)} of {len(cases)} disagree:\n" + "\n".join(wrong)
