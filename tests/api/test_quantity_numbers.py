"""Quantities written as YAML numbers obey the same bounds as quantities written as text."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from dra_affinity.api.quantity import Quantity
from dra_affinity.cli import main


@pytest.mark.parametrize("number", [1e300, -1e300, 10**200])
def test_number_whose_canonical_form_cannot_parse_is_out_of_range(number: float) -> None:
    with pytest.raises(ValueError, match="out of range"):
        Quantity.parse(number)


@pytest.mark.parametrize(("number", "text"), [(4, "4"), (1.5, "1500m"), (1e30, "1e30")])
def test_numbers_in_range_parse_to_the_text_quantity(number: float, text: str) -> None:
    assert Quantity.parse(number) == Quantity.parse(text)


def test_scenario_with_a_huge_numeric_capacity_request_is_an_input_error(tmp_path: Path) -> None:
    scenario = Path(__file__).parents[1] / "scenarios" / "capacity-interaction.yaml"
    text = scenario.read_text()
    request = "networking.example.com/slots: '1'"
    assert request in text
    f = tmp_path / "s.yaml"
    f.write_text(text.replace(request, "networking.example.com/slots: 1.0e+300", 1))
    res = CliRunner().invoke(main, ["simulate", str(f)], catch_exceptions=False)
    assert res.exit_code == 2, res.output
    assert "out of range" in res.output
