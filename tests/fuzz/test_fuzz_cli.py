"""Fuzzing: hostile and malformed input never crashes reading, admission or any command.

CI-sized by default (a few seconds per fuzzer); ``DRA_FUZZ_EXAMPLES=N`` raises
the number of inputs per fuzzer, and ``benchmarks/fuzz_cli.py --count N`` runs
the long, counted campaign (docs/fuzzing.md).
"""

from __future__ import annotations

import json
import os
import random
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dra_affinity.api.io import ManifestError, parse_object, read_documents, read_paths
from dra_affinity.validation import admit
from fuzz.harness import run
from fuzz.mutators import CORPUS, RAW_VALUES, commands, mutate, mutate_structure

EXAMPLES = int(os.environ.get("DRA_FUZZ_EXAMPLES", "0"))
FUZZ = settings(max_examples=EXAMPLES or 60, deadline=None, derandomize=not EXAMPLES,
                suppress_health_check=list(HealthCheck), database=None)
CLI = settings(FUZZ, max_examples=EXAMPLES or 25)


@FUZZ
@given(st.binary(max_size=2048))
def test_reading_arbitrary_bytes(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "in.yaml"
        f.write_bytes(data)
        try:
            read_paths([str(f)])
        except ManifestError as e:
            assert str(e).startswith(str(f))


@FUZZ
@given(st.text(max_size=512), st.sampled_from(RAW_VALUES))
def test_reading_arbitrary_text_and_raw_yaml(text: str, raw: str) -> None:
    for candidate in (text, f"a: {raw}\n", f"- {raw}\n{text}"):
        try:
            docs = read_documents(candidate, "t.yaml")
        except ManifestError as e:
            assert str(e).startswith("t.yaml")
            continue
        for doc in docs:
            json.dumps(doc.data, allow_nan=False)


@FUZZ
@given(st.integers(min_value=0, max_value=2**32))
def test_reading_mutated_examples(seed: int) -> None:
    _, data = mutate(seed)
    try:
        docs = read_documents(data.decode("utf-8", "replace"), "m.yaml")
    except ManifestError:
        return
    for doc in docs:  # what is read is JSON, as kubectl would send it
        json.dumps(doc.data, allow_nan=False)


@FUZZ
@given(st.integers(min_value=0, max_value=2**32))
def test_admission_of_mutated_objects(seed: int) -> None:
    rng = random.Random(seed)
    text = rng.choice(CORPUS).read_text()
    try:
        docs = read_documents(mutate_structure(text, rng).decode("utf-8", "replace"), "m.yaml")
    except ManifestError:
        return
    for doc in docs:
        if isinstance(doc.data, dict) and doc.data.get("kind") == "Scenario":
            continue
        try:
            obj = parse_object(doc)
        except ManifestError:
            continue
        result = admit(obj)
        assert isinstance(result.errors, list)


@CLI
@given(st.integers(min_value=0, max_value=2**32))
def test_cli_on_mutated_examples(seed: int) -> None:
    name, data = mutate(seed)
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / name
        f.write_bytes(data)
        for args in commands(str(f), seed):
            crash = run(args)
            assert crash is None, f"seed {seed}: {crash}"
