"""Bad input never crashes a command: exit status 2 and one clear error, for every command."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from dra_affinity.cli import main

EXAMPLE = Path(__file__).parent.parent / "examples" / "story-3-subnet.yaml"

# The classes of input that once ended in a traceback, and what the error must say.
BAD_INPUTS = {
    "integer-over-4300-digits": (b"a: " + b"9" * 5000 + b"\n", "integer out of range"),
    "raw-control-character": (b"a: 1\nb: x\x01y\n", "control characters are not allowed"),
    "timestamp-tag-on-text": (b"a: !!timestamp x\n", "as a !!timestamp"),
    "int-tag-on-text": (b"a: !!int abc\n", "as a !!int"),
    "float-tag-on-text": (b"a: !!float abc\n", "as a !!float"),
    "bool-tag-on-text": (b"a: !!bool maybe\n", "as a !!bool"),
    "map-tag-on-scalar": (b"a: !!map x\n", "tag !!map cannot be applied to a scalar"),
    "invalid-utf8": (b"a: \xff\xfe\xfa\n", "not UTF-8 text"),
    "binary-garbage": (bytes(range(256)) * 4, "not UTF-8 text"),
    "alias-bomb": (b"a: &a [x,x,x,x,x,x,x,x,x,x]\n" + b"".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n".encode()
        for i in range(9)), "alias bomb"),
    "deep-nesting": (b"[" * 150 + b"]" * 150, "nested deeper than"),
    "infinity": (b"a: .inf\n", "cannot be represented in JSON"),
}


def invoke(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(main, list(args), catch_exceptions=False)
    assert "Traceback" not in res.output
    return res.exit_code, res.output


def commands(path: str) -> dict[str, list[str]]:
    ok = str(EXAMPLE)
    return {
        "simulate": ["simulate", path],
        "simulate-json": ["simulate", path, "-o", "json"],
        "metrics": ["metrics", path],
        "explain": ["explain", path, "--pod", "pod-a"],
        "locks": ["locks", path],
        "validate": ["validate", path],
        "eval-slice": ["eval", "--slice", path, "--claim", ok],
        "eval-claim": ["eval", "--slice", ok, "--claim", path],
        "eval-class": ["eval", "--slice", ok, "--claim", ok, "--class", path],
    }


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_manifest_is_an_input_error_for_every_command(tmp_path: Path, case: str) -> None:
    raw, message = BAD_INPUTS[case]
    f = tmp_path / "bad.yaml"
    f.write_bytes(raw)
    for name, args in commands(str(f)).items():
        code, out = invoke(*args)
        assert code == 2, (name, out)
        assert message in out, (name, out)
        assert str(f) in out, (name, out)


def test_validate_folder_without_manifests_is_an_input_error(tmp_path: Path) -> None:
    (tmp_path / "README.txt").write_text("nothing here")
    code, out = invoke("validate", str(tmp_path))
    assert code == 2
    assert "no manifests (.yaml, .yml, .json) found in this folder" in out
    assert "0 error(s)" not in out


def test_validate_empty_files_is_an_input_error(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("# only a comment\n")
    code, out = invoke("validate", str(tmp_path))
    assert code == 2 and "no manifests found" in out


def test_validate_reports_every_bad_file_and_checks_the_good_ones(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_bytes(b"a: \x01\n")
    (tmp_path / "b.yaml").write_text("apiVersion: v1\nkind: Node\nmetadata: {name: n}\nspec: {x: 1}\n")
    code, out = invoke("validate", str(tmp_path))
    assert code == 2
    assert "a.yaml" in out and "control characters" in out
    assert "b.yaml" in out and "unknown field" in out


def test_validate_examples_still_pass() -> None:
    code, out = invoke("validate", str(EXAMPLE.parent))
    assert code == 0, out


def test_simulate_table_prints_markup_like_text_literally(tmp_path: Path) -> None:
    text = EXAMPLE.read_text()
    f = tmp_path / "s.yaml"
    f.write_text(text.replace("lock: {subnet: subnet-X}}", "lock: {subnet: 'subnet-[/x]'}}", 1))
    code, out = invoke("simulate", str(f))
    assert code == 1  # the changed expectation fails, and its message prints as written
    assert "subnet-[/x]" in out


def test_simulate_table_keeps_long_device_names_whole_when_piped(tmp_path: Path) -> None:
    driver = "nics-of-a-long-driver-name-that-fills-its-limit.example.com"
    f = tmp_path / "s.yaml"
    f.write_text(EXAMPLE.read_text().replace("networking.example.com", driver))
    code, out = invoke("simulate", str(f))
    assert code == 0, out
    lines = out.splitlines()
    # folded, a cell would show pieces of the name on consecutive lines
    pieces = [line for line in lines if "long-driver" in line or "example.com/" in line]
    assert pieces and all(f"{driver}/node-" in line for line in pieces), out
    assert max(len(line) for line in lines) > 160  # wider than the old fixed width
