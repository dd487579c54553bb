"""`simulate --output json` is byte-identical to the recorded outputs.

The files under ``tests/golden/`` were written by the CLI before the core was
restructured; a refactor must not change one byte of them. A deliberate change
of behaviour rewrites the affected file in the same commit, with the reason.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from dra_affinity.cli import main

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).parent / "golden"

CASES = (
    [("examples", p, []) for p in sorted((ROOT / "examples").glob("*.yaml"))]
    + [("affinity", p, ["--scoring", "affinity"]) for p in sorted((ROOT / "examples").glob("*.yaml"))]
    + [("scenarios", p, []) for p in sorted((ROOT / "tests" / "scenarios").glob("*.yaml"))]
)


@pytest.mark.parametrize(("group", "path", "extra"), CASES,
                         ids=[f"{g}/{p.stem}" for g, p, _ in CASES])
def test_simulate_json_is_byte_identical(group: str, path: Path, extra: list[str]) -> None:
    want = (GOLDEN / group / f"{path.stem}.json").read_text()
    res = CliRunner().invoke(main, ["simulate", str(path), "--output", "json", *extra])
    assert res.output == want
