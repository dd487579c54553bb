"""Manifest reading: YAML as kubectl turns it into JSON, and every bad input a ManifestError.

Each class of input that once crashed the reader has a named test here.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dra_affinity.api import _yaml, io
from dra_affinity.api.io import ManifestError, read_documents, read_paths, read_text


def data(text: str) -> object:
    docs = read_documents(text, "m.yaml")
    assert len(docs) == 1
    return docs[0].data


def error(text: str) -> str:
    with pytest.raises(ManifestError) as exc:
        read_documents(text, "m.yaml")
    rendered = str(exc.value)
    assert rendered.startswith("m.yaml")
    return rendered


# ---------------------------------------------------------------- scalars
@pytest.mark.parametrize(("text", "value"), [
    ("yes", True), ("Yes", True), ("y", True), ("Y", True), ("on", True), ("ON", True),
    ("True", True), ("no", False), ("n", False), ("off", False), ("FALSE", False),
    ("~", None), ("null", None), ("", None), ("NULL", None),
    ("12", 12), ("+12", 12), ("-12", -12), ("1_000", 1000), ("0x1F", 31), ("0o17", 15),
    ("0b101", 5), ("0777", 511), ("089", 89), ("1e3", 1000), ("1.", 1), (".5", 0.5),
    ("-.5e1", -5), ("-.5e-1", -0.05), ("9223372036854775807", 9223372036854775807),
    ("9223372036854775808", 9223372036854775808.0), ("18446744073709551616", 2.0**64),
    ("yES", "yES"), ("1:30", "1:30"), ("0x", "0x"), ("1e400", "1e400"), ("_1", "_1"),
    ("2001-12-14", "2001-12-14"), ("2001-12-14t21:59:43.10-05:00", "2001-12-14t21:59:43.10-05:00"),
])
def test_plain_scalars_resolve_as_go_yaml_v2(text: str, value: object) -> None:
    got = data(f"v: {text}\n")
    assert got == {"v": value}
    assert type(got["v"]) is type(value)  # type: ignore[index]


def test_unquoted_date_in_opaque_parameters_stays_a_string() -> None:
    assert data("parameters:\n  since: 2024-01-02\n  at: 2024-01-02 10:00:00\n") == {
        "parameters": {"since": "2024-01-02", "at": "2024-01-02 10:00:00"}}


def test_quoted_and_block_scalars_are_strings() -> None:
    assert data("a: 'yes'\nb: \"12\"\nc: |\n  on\n") == {"a": "yes", "b": "12", "c": "on\n"}


# ---------------------------------------------------------------- tags
@pytest.mark.parametrize(("text", "value"), [
    ("!!str 12", "12"), ("!!int '12'", 12), ("!!float 1", 1), ("!!float 1.5", 1.5),
    ("!!bool yes", True),
    ("!!null ''", None), ("!!timestamp 2001-01-02", "2001-01-02"), ("! 12", "12"),
])
def test_explicit_tags_that_fit_their_value(text: str, value: object) -> None:
    assert data(f"v: {text}\n") == {"v": value}


@pytest.mark.parametrize(("text", "message"), [
    ("!!timestamp x", "cannot decode !!str 'x' as a !!timestamp"),
    ("!!timestamp 2001-02-30", "as a !!timestamp"),
    ("!!int abc", "cannot decode !!str 'abc' as a !!int"),
    ("!!int 1.5", "cannot decode !!float '1.5' as a !!int"),
    ("!!float abc", "cannot decode !!str 'abc' as a !!float"),
    ("!!bool maybe", "cannot decode !!str 'maybe' as a !!bool"),
    ("!!null x", "as a !!null"),
    ("!!map x", "tag !!map cannot be applied to a scalar"),
    ("!!seq x", "tag !!seq cannot be applied to a scalar"),
    ("!custom x", "tag !custom cannot be applied to a scalar"),
    ("!!binary aGk=", "!!binary is not supported"),
    ("!!seq {a: 1}", "cannot be applied to a mapping"),
    ("!!map [1]", "cannot be applied to a sequence"),
    ("!!set {a: 1}", "cannot be applied to a mapping"),
])
def test_yaml_tags_on_the_wrong_value_are_input_errors(text: str, message: str) -> None:
    msg = error(f"kind: X\nv: {text}\n")
    assert message in msg
    assert "line 2, column 4" in msg


# ---------------------------------------------------------------- numbers as kubectl sends them
@pytest.mark.parametrize(("text", "value"), [
    ("1e6", 1000000), ("1000000.0", 1000000), ("-0.0", 0), ("9000.0", 9000), ("1e20", 1e20),
    ("1e21", 1e21), ("-9223372036854775808.0", -9223372036854775808.0),
    ("1152921504606846976.0", 1152921504606847000), ("1e-7", 1e-7), ("1.5", 1.5),
])
def test_integral_floats_arrive_as_the_integers_kubectl_writes(text: str, value: object) -> None:
    """sigs.k8s.io/yaml writes a float with Go's encoding/json (shortest digits, plain
    decimal below 1e21); the API server decodes what parses as an int64 as an int."""
    got = data(f"v: {text}\n")["v"]  # type: ignore[index]
    assert got == value
    assert type(got) is type(value)


def test_integral_float_reaches_cel_as_an_int() -> None:
    from dra_affinity.cel import EXTRACTOR_ENV

    obj = data("vlan: 1e6\nmtu: 9000.0\nz: -0.0\n")
    for expression, want in [("string(object.vlan)", "1000000"), ("object.mtu + 1", 9001),
                             ("string(object.z)", "0")]:
        assert EXTRACTOR_ENV.compile(expression).evaluate({"object": obj}, 100)[0] == want


@pytest.mark.parametrize(("text", "value"), [
    (r'{"v": "\ud83d\ude00"}', "\U0001F600"), (r'{"v": "a\uD83D\uDE00b"}', "a\U0001F600b"),
    (r'{"v": "\ud83d"}', "\ufffd"), (r'{"v": "\ude00x\ud83dy"}', "\ufffdx\ufffdy"),
    (r'{"v": "\\ud83d"}', "\\ud83d"), (r'  {"v": "\u00e9"}', "\u00e9"), ('{"v": 1e3}', 1000),
])
def test_json_streams_decode_surrogate_escapes_as_kubectl(text: str, value: object) -> None:
    """A stream starting with '{' is JSON to kubectl: an escaped surrogate pair is the
    character (what Python's json.dumps writes), a lone surrogate U+FFFD."""
    assert data(text) == {"v": value}


# ---------------------------------------------------------------- numbers JSON cannot hold
def test_integer_literal_over_4300_digits_is_an_input_error() -> None:
    assert "integer out of range" in error("v: " + "9" * 5000 + "\n")
    assert "integer out of range" in error("v: 0x" + "f" * 300 + "\n")


def test_negative_integer_past_every_range_stays_text_as_in_go_yaml() -> None:
    assert data("v: -" + "9" * 5000) == {"v": "-" + "9" * 5000}


def test_integer_leading_zeros_do_not_count_against_the_range() -> None:
    assert data("v: " + "0" * 5000 + "7") == {"v": 7}


@pytest.mark.parametrize("text", [".inf", "-.Inf", ".NaN", "!!float .nan"])
def test_infinity_and_nan_are_input_errors(text: str) -> None:
    assert "cannot be represented in JSON" in error(f"v: {text}\n")


# ---------------------------------------------------------------- keys
def test_non_string_keys_become_their_json_text() -> None:
    assert data("1: a\ntrue: b\n1.5: c\n1e6: d\n0x10: e\n2001-01-01: f\n") == {
        "1": "a", "true": "b", "1.5": "c", "1e+06": "d", "16": "e", "2001-01-01": "f"}


def test_yaml_1_1_boolean_words_as_keys_become_true_and_false() -> None:
    # kubectl sends {"true": 1, "false": 2} for this: quote such keys.
    assert data("y: 1\nn: 2\n") == {"true": 1, "false": 2}


def test_keys_1_and_true_are_different_json_keys() -> None:
    assert data("1: a\ntrue: b\n") == {"1": "a", "true": "b"}


def test_duplicate_json_key_names_both_spellings() -> None:
    msg = error("'true': a\nyes: b\n")
    assert "duplicate key 'true' (from 'yes')" in msg
    assert "line 2" in msg
    assert "duplicate key 'a'" in error("a: 1\na: 2\n")


@pytest.mark.parametrize(("text", "message"), [
    ("~: 1", "unsupported mapping key '~' (a null)"),
    ("18446744073709551615: 1", "unsupported mapping key"),
    ("? [a]\n: 1", "a mapping key must be a scalar"),
    ("? {a: 1}\n: 1", "a mapping key must be a scalar"),
])
def test_keys_json_cannot_have_are_input_errors(text: str, message: str) -> None:
    assert message in error(text)


def test_merge_keys_explicit_wins_then_first_merged() -> None:
    text = "a: &a {p: 1, q: 1}\nb: &b {q: 2, r: 2}\nc:\n  <<: [*a, *b]\n  p: 3\n"
    assert data(text) == {"a": {"p": 1, "q": 1}, "b": {"q": 2, "r": 2},
                          "c": {"p": 3, "q": 1, "r": 2}}
    assert "merge key" in error("a: 1\nc:\n  <<: 5\n")


def test_aliases_are_copies_not_shared_values() -> None:
    got = data("a: &x {k: [1]}\nb: *x\n")
    assert got == {"a": {"k": [1]}, "b": {"k": [1]}}
    assert got["a"] is not got["b"]  # type: ignore[index]


# ---------------------------------------------------------------- hostile input
def test_raw_control_character_is_an_input_error_with_its_line() -> None:
    msg = error("a: 1\nb: x\x01y\n")
    assert "control characters are not allowed" in msg and "U+0001" in msg
    assert "line 2" in msg


def test_escaped_control_character_is_text() -> None:
    assert data('a: "x\\x01y"\n') == {"a": "x\x01y"}


def test_surrogate_escape_is_an_input_error() -> None:
    """In YAML (go-yaml, hence kubectl, refuses it too; JSON streams decode it)."""
    assert "invalid Unicode character escape" in error('a: "\\ud800"\n')
    assert "invalid Unicode character escape" in error('a: "\\ud83d\\ude00"\n')


def test_alias_bomb_is_bounded() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    assert "alias bomb" in error("\n".join(lines))


def test_recursive_alias_is_an_input_error() -> None:
    assert "unknown anchor 'a'" in error("a: &a [1, *a]\n")


@pytest.mark.parametrize("text", ["[" * 150 + "]" * 150, "a:\n" + "".join(
    "  " * i + f"k{i}:\n" for i in range(1, 200)) + "  " * 200 + "v\n", "- " * 150 + "x"])
def test_deep_nesting_is_bounded(text: str) -> None:
    assert f"nested deeper than {io.MAX_DEPTH} levels" in error(text)


def test_very_deep_flow_nesting_stops_in_the_parser() -> None:
    assert "nesting depth" in error("[" * 100_000 + "]" * 100_000)


def test_alias_cannot_smuggle_depth_past_the_bound() -> None:
    deep = "[" * 60 + "x" + "]" * 60
    assert "nested deeper than" in error(f"a: &a {deep}\nb: [[[[[[[[[[" + "[" * 40 + "*a"
                                         + "]" * 50 + "\n")


def test_input_larger_than_the_bound_is_refused_before_parsing() -> None:
    assert "input larger than" in error("a: " + "x" * io.MAX_INPUT_BYTES)


def test_ten_megabyte_scalar_is_read() -> None:
    big = "x" * 10_000_000
    assert data(f"a: {big}\n") == {"a": big}


def test_malformed_yaml_names_line_and_column() -> None:
    msg = error("a: [1,\nb: 2\n")
    assert "malformed YAML" in msg and "line" in msg and "column" in msg


def test_documents_keep_their_index_and_line() -> None:
    docs = read_documents("---\n---\na: 1\n---\nb: 2\n", "s.yaml")
    assert [(d.index, d.line, d.data) for d in docs] == [(2, 2, {"a": 1}), (3, 4, {"b": 2})]


def test_same_text_same_result() -> None:
    text = "b: 1\na: [yes, 0x10, 2001-01-01]\n1.5: x\n"
    assert repr(data(text)) == repr(data(text))


# ---------------------------------------------------------------- files and bytes
@pytest.mark.parametrize(("raw", "value"), [
    (b"\xef\xbb\xbfa: 1\n", {"a": 1}),
    ("a: é\n".encode("utf-16"), {"a": "é"}),
    ("a: é\n".encode("utf-16-be").join([b"\xfe\xff", b""]), {"a": "é"}),
])
def test_byte_order_marks(tmp_path: Path, raw: bytes, value: object) -> None:
    f = tmp_path / "m.yaml"
    f.write_bytes(raw)
    assert [d.data for d in read_paths([str(f)])] == [value]


@pytest.mark.parametrize(("raw", "message"), [
    (b"a: \xff\xfe\xfa\n", "not UTF-8 text: byte 0xff at line 1"),
    (b"a: 1\nb: \xc3\n", "not UTF-8 text: byte 0xc3 at line 2"),
    (b"\x00\x00\xfe\xffa", "UTF-32 text is not supported"),
    (b"\xff\xfea\x00\x00\xd8", "not UTF-16 text"),
    (b"\x00\x01\x02garbage\x7f", "control characters are not allowed"),
])
def test_binary_and_invalid_text_are_input_errors(tmp_path: Path, raw: bytes, message: str) -> None:
    f = tmp_path / "m.yaml"
    f.write_bytes(raw)
    with pytest.raises(ManifestError) as exc:
        read_paths([str(f)])
    assert message in str(exc.value)
    assert str(exc.value).startswith(str(f))


def test_huge_file_is_refused_without_reading_it_all(tmp_path: Path) -> None:
    f = tmp_path / "big.yaml"
    with open(f, "wb") as fh:
        fh.truncate(io.MAX_INPUT_BYTES + 10)
    with pytest.raises(ManifestError, match="file larger than"):
        read_text(str(f))


def test_missing_file_and_folder_as_file(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="cannot read: No such file"):
        read_text(str(tmp_path / "nope.yaml"))
    with pytest.raises(ManifestError, match="cannot read"):
        read_text(str(tmp_path))


def test_folder_is_walked_in_sorted_order_for_manifest_suffixes(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "x.yml").write_text("v: 3\n")
    (tmp_path / "a.json").write_text('{"v": 1}')
    (tmp_path / "c.yaml").write_text("v: 2\n")
    (tmp_path / "notes.txt").write_text("v: 9\n")
    assert [d.data for d in read_paths([str(tmp_path)])] == [{"v": 1}, {"v": 2}, {"v": 3}]


def test_folder_without_manifests_is_an_input_error(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("v: 9\n")
    with pytest.raises(ManifestError, match="no manifests"):
        read_paths([str(tmp_path)])


def test_only_empty_files_is_an_input_error(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("# nothing\n---\n")
    with pytest.raises(ManifestError, match="no manifests found"):
        read_paths([str(tmp_path)])


def test_errors_are_collected_when_asked(tmp_path: Path) -> None:
    good, bad = tmp_path / "a.yaml", tmp_path / "b.yaml"
    good.write_text("v: 1\n")
    bad.write_bytes(b"v: \x01\n")
    errors: list[ManifestError] = []
    docs = read_paths([str(good), str(bad), str(tmp_path / "missing.yaml")], errors)
    assert [d.data for d in docs] == [{"v": 1}]
    assert [os.path.basename(e.source) for e in errors] == ["b.yaml", "missing.yaml"]


def test_go_float32_key_text() -> None:
    # strconv.FormatFloat(f, 'g', -1, 32) for the keys sigs.k8s.io/yaml converts
    cases = {0.1: "0.1", 1.5: "1.5", 1e6: "1e+06", 123456.0: "123456", 1e-5: "1e-05",
             0.0001: "0.0001", -0.0: "-0", 3.4e39: ".inf", 16777217.0: "1.6777216e+07"}
    for f, text in cases.items():
        assert _yaml._go_float32(f) == text, f
