"""Quantities written as YAML numbers: what reading gives must survive the canonical
round trip that making a claim from a template performs (fuzzing seed 946)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from dra_affinity.api.io import read_documents
from dra_affinity.api.quantity import Quantity
from dra_affinity.cli import main


@pytest.mark.parametrize("text", ["1.0e+300", "-1.0e+300", "1" + "0" * 200, "1.5", "4", "0x10"])
def test_numeric_quantity_read_from_yaml_round_trips(text: str) -> None:
    [doc] = read_documents(f"q: {text}\n", "q.yaml")
    q = Quantity.parse(doc.data["q"])
    assert Quantity.parse(q.canonical()) == q


def test_scenario_with_a_huge_numeric_capacity_request_does_not_crash(tmp_path: Path) -> None:
    scenario = Path(__file__).parents[1] / "scenarios" / "capacity-interaction.yaml"
    text = scenario.read_text()
    request = "networking.example.com/slots: '1'"
    assert request in text
    f = tmp_path / "s.yaml"
    f.write_text(text.replace(request, "networking.example.com/slots: 1.0e+300", 1))
    for command in ("simulate", "metrics"):
        res = CliRunner().invoke(main, [command, str(f)], catch_exceptions=False)
        assert res.exit_code in (0, 1, 2), res.output
        assert "Traceback" not in res.output
