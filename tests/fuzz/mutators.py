"""Deterministic input mutators for the CLI fuzzers (a seed in, the same bytes out).

Byte-level mutations work on any file; structure-aware ones parse a bundled
example, change one value somewhere (wrong type, YAML tag, huge integer,
control character, deep nesting, unusual Unicode) and write it back.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CORPUS = sorted([*ROOT.glob("examples/*.yaml"), *ROOT.glob("tests/scenarios/*.yaml")])

TOKENS = [
    b"\x00", b"\x01", b"\x7f", b"\x85", b"\xff", b"\xef\xbb\xbf", b"\xff\xfe", b"\xc3", b"\xed\xa0\x80",
    b"!!timestamp ", b"!!int ", b"!!float ", b"!!bool ", b"!!map ", b"!!seq ", b"!!binary ",
    b"!!null ", b"!!str ", b"!custom ", b"&a ", b"*a", b"<<: *a\n", b"[", b"]", b"{", b"}", b": ",
    b"\n- ", b"---\n", b"...\n", b"'", b'"', b"\t", b"#", b"|\n", b">-\n", b"? ", b"~", b".inf",
    b"0x", b"1e400", b"9" * 5000, b"2024-01-02", b"yes", b"y", b"on", b"1:", b"true:",
    b"\\ud800", "\u202e\u0301\U0001f600".encode(),
]

WEIRD_VALUES: list[Any] = [
    None, True, False, 0, -1, 2**63, 2**64 + 1, 10**30, 1.5, -0.0, 1e300, "", " ", "x" * 300,
    "\u202e\u0301\u2028", "\U0001f600" * 10, "\x01\x1b[31m", "[/bold]", "%s%n", "a/b/../c",
    [], {}, [1, "a", None], {"a": {"b": {"c": []}}}, "2024-01-02", "yes", "0x10",
]

# Raw-text values that no Python value dumps to: tags, anchors, huge literals.
RAW_VALUES = [
    "!!timestamp x", "!!int abc", "!!float abc", "!!bool maybe", "!!map x", "!!seq x",
    "!!binary aGk=", "!custom x", "9" * 5000, "-" + "9" * 5000, ".inf", ".nan", "~",
    "2024-01-02", "0o17", "0b101", "1_000", "&x [*x]", "*nope", "'\\x01'", '"\\ud800"',
    "[" * 120 + "]" * 120, "{a: 1, a: 2}", "{1: a, true: b}", "{? [a] : b}", "y", "n",
]


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out.extend(_paths(v, (*prefix, k)))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out.extend(_paths(v, (*prefix, i)))
    return out


def _set(root: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    parent = root
    for p in path[:-1]:
        parent = parent[p]
    parent[path[-1]] = value
    return root


def _deep(depth: int) -> Any:
    v: Any = "leaf"
    for _ in range(depth):
        v = {"n": v}
    return v


def mutate_bytes(data: bytes, rng: random.Random, other: bytes) -> bytes:
    """One to four byte-level edits."""
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(7)
        pos = rng.randint(0, len(buf))
        if op == 0 and buf:
            i = rng.randrange(len(buf))
            buf[i] ^= 1 << rng.randrange(8)
        elif op == 1:
            buf[pos:pos] = bytes([rng.randrange(256)])
        elif op == 2:
            buf[pos:pos] = rng.choice(TOKENS)
        elif op == 3 and buf:
            end = min(len(buf), pos + rng.randint(1, 64))
            del buf[pos:end]
        elif op == 4 and buf:
            end = min(len(buf), pos + rng.randint(1, 256))
            buf[pos:pos] = buf[pos:end] * rng.randint(1, 8)
        elif op == 5:
            del buf[pos:]
        else:
            cut = rng.randint(0, len(other))
            buf[pos:] = other[cut:]
    return bytes(buf)


def mutate_structure(text: str, rng: random.Random) -> bytes:
    """Change one value of one document, or splice in raw YAML no Python value dumps to."""
    docs = list(yaml.safe_load_all(text))
    if not docs:
        return text.encode()
    d = rng.randrange(len(docs))
    paths = _paths(docs[d])
    path = rng.choice(paths)
    op = rng.randrange(6)
    marker = "@@RAW@@"
    raw = None
    if op == 0:
        docs[d] = _set(docs[d], path, rng.choice(WEIRD_VALUES))
    elif op == 1:
        docs[d] = _set(docs[d], path, _deep(rng.choice([20, 60, 99, 101, 300])))
    elif op == 2 and path:
        parent = docs[d]
        for p in path[:-1]:
            parent = parent[p]
        if isinstance(parent, dict):
            parent.pop(path[-1], None)
            parent[rng.choice(["extra", "Kind", "apiversion", 1, True])] = rng.choice(WEIRD_VALUES)
        else:
            del parent[path[-1]]
    elif op == 3:
        docs[d] = _set(docs[d], path, [rng.choice(WEIRD_VALUES)] * rng.choice([1, 100, 5000]))
    else:
        docs[d] = _set(docs[d], path, marker)
        raw = rng.choice(RAW_VALUES)
    out = yaml.safe_dump_all(docs, sort_keys=False, allow_unicode=rng.random() < 0.5)
    if raw is not None:
        out = out.replace(marker, raw, 1)
    return out.encode("utf-8", "surrogatepass")


def mutate(seed: int) -> tuple[str, bytes]:
    """(name of the source file, mutated bytes) for one seed."""
    rng = random.Random(seed)
    src = rng.choice(CORPUS)
    data = src.read_bytes()
    if rng.random() < 0.5:
        return src.name, mutate_bytes(data, rng, rng.choice(CORPUS).read_bytes())
    return src.name, mutate_structure(data.decode(), rng)


def commands(path: str, seed: int) -> list[list[str]]:
    """The command lines one mutated file is run through (the seed picks a few)."""
    rng = random.Random(seed ^ 0x5EED)
    every = [
        ["simulate", path, "-o", "json"],
        ["simulate", path],
        ["validate", path],
        ["validate", "--together", "-o", "json", path],
        ["eval", "--slice", path, "--claim", path, "-o", "json"],
        ["eval", "--slice", path, "--claim", path],
        ["metrics", path],
        ["explain", path, "--pod", "pod-a", "--at-step", "1"],
        ["locks", path, "-o", "json"],
    ]
    return rng.sample(every, 3)
