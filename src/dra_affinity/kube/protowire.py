"""Edit ``metadata.finalizers`` of an object in the API server's protobuf encoding.

Why: the API server (1.37) keeps a claim's opaque ``parameters`` as the bytes its
creator sent. A JSON-encoded write of the claim (update, or any patch, even of
``metadata.finalizers`` alone) is decoded and compared with what is stored; for a
claim created with spaced JSON (``json.dumps`` defaults, as the official Python
client sends) the parameters come back compacted and the server refuses the
write: ``422 spec: Invalid value: null: field is immutable`` (docs/cluster.md,
"Observed server behaviour"). The protobuf encoding carries the parameters as
opaque bytes, so an object read as protobuf and written back as protobuf keeps
them byte for byte, as kube-scheduler's own writes (protobuf) do.

Nothing is generated from the ``.proto`` files: the envelope (``runtime.Unknown``
after the ``k8s\\x00`` magic) and the object are walked at the wire level, and only
``ObjectMeta.finalizers`` (field 14 of ``metadata``, field 1 of every top-level
object) is replaced; every other byte, ``resourceVersion`` (the write's
precondition) and the spec included, goes back as it came.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

__all__ = ["CONTENT_TYPE", "ProtobufError", "finalizers", "resource_version", "with_finalizers"]

CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"
_LEN = 2  # wire type of length-delimited fields
# runtime.Unknown: raw = 2; metav1 objects: metadata = 1; ObjectMeta: resourceVersion = 6,
# finalizers = 14.
_UNKNOWN_RAW, _OBJECT_METADATA, _META_RESOURCE_VERSION, _META_FINALIZERS = 2, 1, 6, 14


class ProtobufError(ValueError):
    """The bytes are not a Kubernetes protobuf object as expected."""


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise ProtobufError("truncated varint")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _fields(data: bytes) -> Iterator[tuple[int, int, bytes, bytes]]:
    """(field number, wire type, the whole field as encoded, its payload) in order."""
    pos = 0
    while pos < len(data):
        start = pos
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            _, pos = _varint(data, pos)
            payload = b""
        elif wire == 1:
            pos += 8
            payload = b""
        elif wire == _LEN:
            size, pos = _varint(data, pos)
            payload = data[pos:pos + size]
            pos += size
        elif wire == 5:
            pos += 4
            payload = b""
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
        if pos > len(data):
            raise ProtobufError("truncated field")
        yield number, wire, data[start:pos], payload


def _len_field(number: int, payload: bytes) -> bytes:
    return _encode_varint(number << 3 | _LEN) + _encode_varint(len(payload)) + payload


def _replace(data: bytes, number: int, edit: bytes) -> bytes:
    """``data`` with the (single) length-delimited field ``number`` replaced by ``edit``."""
    out, found = bytearray(), False
    for n, wire, whole, _payload in _fields(data):
        if n == number and wire == _LEN and not found:
            out += _len_field(number, edit)
            found = True
        else:
            out += whole
    if not found:
        raise ProtobufError(f"field {number} not found")
    return bytes(out)


def _get(data: bytes, number: int) -> bytes:
    for n, wire, _whole, payload in _fields(data):
        if n == number and wire == _LEN:
            return payload
    raise ProtobufError(f"field {number} not found")


def _metadata(envelope: bytes) -> bytes:
    if not envelope.startswith(MAGIC):
        raise ProtobufError("no k8s protobuf magic")
    return _get(_get(envelope[len(MAGIC):], _UNKNOWN_RAW), _OBJECT_METADATA)


def finalizers(envelope: bytes) -> list[str]:
    return [p.decode() for n, w, _whole, p in _fields(_metadata(envelope))
            if n == _META_FINALIZERS and w == _LEN]


def resource_version(envelope: bytes) -> str:
    for n, w, _whole, p in _fields(_metadata(envelope)):
        if n == _META_RESOURCE_VERSION and w == _LEN:
            return p.decode()
    return ""


def with_finalizers(envelope: bytes, names: Iterable[str]) -> bytes:
    """The same object with ``metadata.finalizers`` set to ``names`` (in that order),
    every other byte as it was."""
    unknown = envelope[len(MAGIC):]
    raw = _get(unknown, _UNKNOWN_RAW) if envelope.startswith(MAGIC) else b""
    meta = _metadata(envelope)
    new = [_len_field(_META_FINALIZERS, n.encode()) for n in names]
    out, placed = bytearray(), False
    for n, _w, whole, _p in _fields(meta):
        if n == _META_FINALIZERS:
            continue
        if n > _META_FINALIZERS and not placed:  # field order, as Go's marshaller writes it
            out += b"".join(new)
            placed = True
        out += whole
    if not placed:
        out += b"".join(new)
    raw = _replace(raw, _OBJECT_METADATA, bytes(out))
    return MAGIC + _replace(unknown, _UNKNOWN_RAW, raw)
