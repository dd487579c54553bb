"""Property: mutated manifests are either rejected as malformed or validated, never crash.

Random insertions and replacements (dicts, lists, strings, huge and negative
ints, floats, None) anywhere in valid manifests go through
``api.io.parse_object`` and then ``validate_object`` / ``admit`` /
``gather_pools``. The only exception allowed is ``ManifestError`` from parsing.
"""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dra_affinity.api.io import FieldError, ManifestError
from dra_affinity.api.resource import ResourceSlice
from dra_affinity.features import Features
from dra_affinity.structured.pools import gather_pools
from dra_affinity.validation import admit, validate_object

from .manifests import (
    Manifest,
    claim_template,
    device_class,
    device_slice,
    meta_slice,
    node,
    parse,
    pod,
    resource_claim,
)

BASES: list[Manifest] = [
    meta_slice(),
    device_slice(),
    device_class(),
    resource_claim(),
    claim_template(),
    pod(),
    node(),
]

# Strings a CEL parser or a name check might choke on, and plain noise.
_TRICKY = st.sampled_from(
    [
        "",
        " ",
        "object.",
        "((((((((((",
        "[" * 200,
        '"unterminated',
        "object.subnetID",
        "device.driver",
        "size([1,2,3].map(x, x))",
        "a/b/c",
        "-",
        "é" * 40,
        "\x00",
        "1Gi",
        "-1",
        "1e400",
        "NaN",
    ]
)
_SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
    _TRICKY,
)
_VALUE = st.recursive(
    _SCALAR,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=10), _TRICKY), inner, max_size=4),
    ),
    max_leaves=8,
)


def _containers(data: Any, out: list[Any]) -> list[Any]:
    if isinstance(data, dict | list):
        out.append(data)
        for v in data.values() if isinstance(data, dict) else data:
            _containers(v, out)
    return out


@st.composite
def mutated_manifest(draw: st.DrawFn) -> Manifest:
    data = copy.deepcopy(draw(st.sampled_from(BASES)))
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        target = draw(st.sampled_from(_containers(data, [])))
        value = draw(_VALUE)
        if isinstance(target, dict):
            keys = list(target)
            use_existing = bool(keys) and draw(st.booleans())
            key = (
                draw(st.sampled_from(keys))
                if use_existing
                else draw(st.one_of(st.text(max_size=12), _TRICKY))
            )
            target[key] = value
        elif target and draw(st.booleans()):
            target[draw(st.integers(0, len(target) - 1))] = value
        else:
            target.insert(draw(st.integers(0, len(target))), value)
    return data


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_manifest(), st.booleans())
def test_mutations_never_crash(data: Manifest, gate: bool) -> None:
    try:
        obj = parse(data)
    except ManifestError:
        return
    errors = validate_object(obj)
    assert all(isinstance(e, FieldError) and isinstance(e.path, str) for e in errors)
    result = admit(obj, features=Features(apiserver_sharing_affinity=gate))
    assert (result.object is None) == bool(result.errors)
    # Update against the unmutated base of the same kind, both ways round.
    for base in BASES:
        if base["kind"] == data.get("kind"):
            old = parse(base)
            validate_object(obj, old)
            validate_object(old, obj)
            admit(obj, old, features=Features(apiserver_sharing_affinity=gate))
    if isinstance(obj, ResourceSlice):
        pools = gather_pools([obj, parse(meta_slice()), parse(device_slice())])
        for pool in pools.values():
            assert isinstance(pool.is_incomplete, bool)
