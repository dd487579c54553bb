"""Editing metadata.finalizers in the protobuf encoding leaves every other byte as it was."""

from __future__ import annotations

import pytest

from dra_affinity.kube import protowire
from dra_affinity.kube.protowire import ProtobufError, finalizers, resource_version, with_finalizers


def field(number: int, payload: bytes) -> bytes:
    return protowire._len_field(number, payload)


def varint_field(number: int, value: int) -> bytes:
    return protowire._encode_varint(number << 3) + protowire._encode_varint(value)


def envelope(meta: bytes, spec: bytes = b'{"a": 1,  "b" : [ 2 ]}') -> bytes:
    raw = field(1, meta) + field(2, spec) + field(3, b"status-bytes")
    return protowire.MAGIC + field(1, b"\n\x12resource.k8s.io/v1") + field(2, raw) + \
        field(4, b"application/vnd.kubernetes.protobuf")


META = (field(1, b"claim") + field(3, b"ns") + field(6, b"1234") + varint_field(7, 300)
        + field(14, b"a/one") + field(14, b"b/two") + field(17, b"managed" * 40))


def test_reads_finalizers_and_resource_version() -> None:
    env = envelope(META)
    assert finalizers(env) == ["a/one", "b/two"]
    assert resource_version(env) == "1234"


@pytest.mark.parametrize("names", [[], ["a/one"], ["a/one", "b/two", "resource.kubernetes.io/x"]])
def test_only_the_finalizers_change(names: list[str]) -> None:
    env = envelope(META)
    out = with_finalizers(env, names)
    assert finalizers(out) == names and resource_version(out) == "1234"
    want_meta = (field(1, b"claim") + field(3, b"ns") + field(6, b"1234") + varint_field(7, 300)
                 + b"".join(field(14, n.encode()) for n in names) + field(17, b"managed" * 40))
    assert out == envelope(want_meta)  # spec, status, type meta and field order untouched


def test_finalizers_added_where_none_were() -> None:
    meta = field(1, b"claim") + field(6, b"7")
    out = with_finalizers(envelope(meta), ["f"])
    assert out == envelope(meta + field(14, b"f"))


@pytest.mark.parametrize("data", [b"{}", protowire.MAGIC + b"\x12\x05ab", protowire.MAGIC + b"\x0b"])
def test_malformed_input_is_an_error(data: bytes) -> None:
    with pytest.raises(ProtobufError):
        with_finalizers(data, ["f"])
