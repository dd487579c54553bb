"""YAML to the JSON values ``kubectl`` would send, bounded in size, depth and aliases."""


from __future__ import annotations

import datetime
import decimal
import math
import re
import struct
from dataclasses import dataclass
from typing import Any

import yaml

from dra_affinity.api.errors import (
    MAX_DEPTH,
    MAX_INPUT_BYTES,
    MAX_NODES,
    Document,
    FieldError,
    ManifestError,
)
from dra_affinity.api.numbers import INT64_MAX, INT64_MIN, UINT64_MAX

# ------------------------------------------------------------------------- YAML
# Manifests are read the way ``kubectl`` turns YAML into the JSON it sends
# (sigs.k8s.io/yaml over go-yaml v2, YAML 1.1 scalars), then decoded the way
# the API server decodes JSON numbers. docs/decisions.md ("Reading manifests")
# states the rules; every deviation is a rejection with a clear error, never a
# silently different value.

_TAG = "tag:yaml.org,2002:"
_STR, _INT, _FLOAT, _BOOL, _NULL = (_TAG + t for t in ("str", "int", "float", "bool", "null"))
_TIMESTAMP, _BINARY, _MERGE = _TAG + "timestamp", _TAG + "binary", _TAG + "merge"
_MAP, _SEQ = _TAG + "map", _TAG + "seq"
_SCALAR_TAGS = frozenset({_STR, _INT, _FLOAT, _BOOL, _NULL, _TIMESTAMP})

# Plain scalars looked up by their exact text (YAML 1.1 as go-yaml v2 has it).
_WORDS: dict[str, tuple[str, Any]] = {
    **{w: (_BOOL, True) for w in ("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE",
                                  "on", "On", "ON")},
    **{w: (_BOOL, False) for w in ("n", "N", "no", "No", "NO", "false", "False", "FALSE",
                                   "off", "Off", "OFF")},
    **{w: (_NULL, None) for w in ("", "~", "null", "Null", "NULL")},
    **{w: (_FLOAT, math.nan) for w in (".nan", ".NaN", ".NAN")},
    **{w: (_FLOAT, math.inf) for w in (".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF")},
    **{w: (_FLOAT, -math.inf) for w in ("-.inf", "-.Inf", "-.INF")},
}
_NUMERIC_START = frozenset("+-0123456789")
_WORD_START = frozenset("yYnNtTfFoO~")
_YAML_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?")
_DOT_FLOAT = re.compile(r"\.[0-9]+(?:[eE][-+]?[0-9]+)?")
_DIGITS = {2: re.compile(r"[01]+"), 8: re.compile(r"[0-7]+"), 10: re.compile(r"[0-9]+"),
           16: re.compile(r"[0-9a-fA-F]+")}
_TIMESTAMP_RE = re.compile(
    r"(\d{4})-(\d{1,2})-(\d{1,2})"
    r"(?:(?P<t>[Tt])|(?P<sp> ))?"
    r"(?(t)(\d{1,2}):(\d{1,2}):(\d{1,2})(?:[.,]\d+)?(?:Z|[+-]\d{2}:\d{2})"
    r"|(?(sp)(\d{1,2}):(\d{1,2}):(\d{1,2})(?:[.,]\d+)?))"
)
# Longest digit string worth converting: 2**1024 (past the float range) needs
# 309 decimal or 1,025 binary digits, so anything longer is out of range
# without building the integer (Python refuses str->int past 4,300 digits).
_MAX_INT_DIGITS = 1100


class _YAMLValueError(Exception):
    """A value YAML can write but JSON (or the API server) cannot take."""

    def __init__(self, message: str, mark: Any) -> None:
        super().__init__(message)
        self.message = message
        self.mark = mark


def _short_text(text: str, limit: int = 40) -> str:
    r = repr(text)
    return r if len(r) <= limit else r[: limit - 4] + "...'"


def _go_int(text: str) -> int | None:
    """Go's ``strconv.ParseInt(text, 0, 64)`` syntax, without its range limit.

    The value is None when the digits are too many to be worth converting (out
    of every range). Raises ValueError when the text is not an integer literal.
    """
    sign, body = 1, text
    if body[:1] in ("+", "-"):
        sign, body = (-1 if body[0] == "-" else 1), body[1:]
    base, digits = 10, body
    if len(body) > 1 and body[0] == "0":
        prefix = body[1].lower()
        base, digits = {"x": (16, body[2:]), "o": (8, body[2:]), "b": (2, body[2:])}.get(
            prefix, (8, body[1:]))
    if not digits or not _DIGITS[base].fullmatch(digits):
        raise ValueError(text)
    significant = digits.lstrip("0")
    if len(significant) > _MAX_INT_DIGITS:
        return None
    return sign * int(significant or "0", base)


def _is_timestamp(text: str) -> bool:
    """One of go-yaml v2's four timestamp forms, with a real calendar date and time."""
    m = _TIMESTAMP_RE.fullmatch(text)
    if m is None:
        return False
    g = [x for x in m.groups() if x is not None and x not in ("T", "t", " ")]
    year, month, day = int(g[0]), int(g[1]), int(g[2])
    try:
        datetime.date(year, month, day)
    except ValueError:
        return False
    if len(g) > 3:
        hour, minute, second = int(g[3]), int(g[4]), int(g[5])
        if hour > 23 or minute > 59 or second > 59:
            return False
    return True


def _resolve(text: str, tag: str | None) -> tuple[str, Any]:
    """(tag, value) of a scalar: plain text when ``tag`` is None, else the explicit tag.

    go-yaml v2's rules, in its order: exact words (booleans, nulls, .inf/.nan),
    then for text starting with a digit or sign: timestamp (kept as text),
    integer (``_`` ignored, base prefixes 0x/0o/0b, leading 0 octal), then
    float. Unsigned integers past uint64 that a float cannot hold stay
    (big) integers; signed ones past int64 that no float holds stay text.
    """
    if text != "" and text[0] not in _NUMERIC_START and text[0] not in _WORD_START \
            and text[0] != ".":
        return _STR, text
    word = _WORDS.get(text)
    if word is not None:
        return word
    first = text[0]
    if first == ".":
        if _DOT_FLOAT.fullmatch(text) and not math.isinf(f := float(text)):
            return _FLOAT, f
        return _STR, text
    if first not in _NUMERIC_START:
        return _STR, text
    if tag in (None, _TIMESTAMP) and _is_timestamp(text):
        return _TIMESTAMP, text
    plain = text.replace("_", "")
    try:
        value = _go_int(plain)
        is_int = True
    except ValueError:
        value, is_int = None, False
    unsigned = plain[:1] not in ("+", "-")
    if value is not None and (INT64_MIN <= value <= INT64_MAX or
                              (unsigned and 0 <= value <= UINT64_MAX)):
        return _INT, value
    if _YAML_FLOAT.fullmatch(plain) and not math.isinf(f := float(plain)):
        return _FLOAT, f
    if is_int and unsigned:
        return _INT, value  # a big integer (None: too long to be worth converting)
    return _STR, text


def _scalar(ev: Any) -> tuple[str, Any]:
    """Resolve one scalar event, honouring an explicit tag (or rejecting it)."""
    tag = ev.tag
    if tag == "!" or (tag is None and not ev.implicit[0]):
        return _STR, ev.value  # quoted, block, or the non-specific tag: always a string
    if tag is None:
        return _resolve(ev.value, None)
    if tag == _STR:
        return _STR, ev.value
    short = "!!" + tag[len(_TAG):] if tag.startswith(_TAG) else tag
    if tag == _BINARY:
        raise _YAMLValueError("!!binary is not supported: write the base64 text without the "
                              "tag (Kubernetes does not decode it)", ev.start_mark)
    if tag not in _SCALAR_TAGS:
        raise _YAMLValueError(f"tag {short} cannot be applied to a scalar "
                              f"({_short_text(ev.value)})", ev.start_mark)
    rtag, value = _resolve(ev.value, tag)
    if rtag == tag:
        return rtag, value
    if tag == _FLOAT and rtag == _INT and value is not None and INT64_MIN <= value <= INT64_MAX:
        return _FLOAT, float(value)
    got = "!!" + rtag[len(_TAG):]
    raise _YAMLValueError(f"cannot decode {got} {_short_text(ev.value)} as a {short}",
                          ev.start_mark)


def _json_value(rtag: str, value: Any, mark: Any) -> Any:
    """The JSON value the API server would decode (numbers past int64 become floats)."""
    if rtag == _INT:
        if value is not None and INT64_MIN <= value <= INT64_MAX:
            return value
        try:
            if value is None:
                raise OverflowError
            return float(value)
        except OverflowError:
            raise _YAMLValueError("integer out of range (beyond a 64-bit float)", mark) from None
    if rtag == _FLOAT:
        if math.isnan(value) or math.isinf(value):
            raise _YAMLValueError(f"{value} cannot be represented in JSON", mark)
        return json_number(value)
    return value  # _STR and _TIMESTAMP text, bool, None


# Go's encoding/json writes a float64 without an exponent below this magnitude.
_GO_JSON_PLAIN_LIMIT = 1e21


def json_number(f: float) -> int | float:
    """A finite float as the API server decodes it after kubectl sent it.

    kubectl converts YAML to JSON with Go's encoding/json, which writes a float
    below 1e21 as its shortest round-trip digits in plain decimal (``1e6`` and
    ``1000000.0`` as ``1000000``, ``-0.0`` as ``-0``, 2**60 as
    ``1152921504606847000``), and the API server decodes a JSON number that
    parses as an int64 as an integer: so such a float arrives as the int those
    digits spell when it fits int64 (``-0.0`` as 0), anything else as a float.
    """
    if not f.is_integer() or abs(f) >= _GO_JSON_PLAIN_LIMIT:
        return f
    i = int(decimal.Decimal(repr(f)))  # Python's repr: the same shortest digits as Go's
    return i if INT64_MIN <= i <= INT64_MAX else f


_JSON_ESCAPE = re.compile(
    r"\\\\|\\u([dD][89abAB][0-9a-fA-F]{2})(?:\\u([dD][c-fC-F][0-9a-fA-F]{2}))?"
    r"|\\u[dD][c-fC-F][0-9a-fA-F]{2}")


def _surrogate_escape(m: re.Match[str]) -> str:
    text = m.group(0)
    if text == "\\\\":
        return text  # an escaped backslash: what follows it is not an escape
    high, low = m.group(1), m.group(2)
    if high is None or low is None:
        return "\\uFFFD"  # a lone surrogate: Go's decoder reads U+FFFD
    code = 0x10000 + ((int(high, 16) - 0xD800) << 10) + (int(low, 16) - 0xDC00)
    return f"\\U{code:08X}"


def json_escapes(text: str) -> str:
    """A JSON stream's UTF-16 surrogate escapes as YAML can read them.

    kubectl reads a stream that starts with ``{`` as JSON (Go's decoder): an
    escaped surrogate pair (``"\\ud83d\\ude00"``, what Python's ``json.dumps``
    writes) is the character it encodes and a lone surrogate is U+FFFD, where
    YAML refuses any surrogate escape (as go-yaml does for a YAML file). Outside
    strings JSON has no backslash, so rewriting every escape is exact.
    """
    return _JSON_ESCAPE.sub(_surrogate_escape, text) if "\\u" in text else text


def _go_float32(f: float) -> str:
    """Go's ``strconv.FormatFloat(f, 'g', -1, 32)``: how a float map key becomes text."""
    if math.isnan(f):
        return ".nan"
    try:
        f32 = struct.unpack("f", struct.pack("f", f))[0]
    except OverflowError:
        f32 = math.copysign(math.inf, f)
    if math.isinf(f32):
        return ".inf" if f32 > 0 else "-.inf"
    neg = math.copysign(1.0, f32) < 0
    a = abs(f32)
    if a == 0:
        return "-0" if neg else "0"
    for prec in range(1, 10):  # shortest digits that read back as the same float32
        text = f"{a:.{prec - 1}e}"
        if struct.unpack("f", struct.pack("f", float(text)))[0] == a:
            break
    mant, exp_text = text.split("e")
    digits = mant.replace(".", "").rstrip("0") or "0"
    exp = int(exp_text)
    if exp < -4 or exp >= 6:
        out = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        out += f"e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    elif exp < 0:
        out = "0." + "0" * (-exp - 1) + digits
    else:
        whole = digits[: exp + 1].ljust(exp + 1, "0")
        frac = digits[exp + 1:]
        out = whole + ("." + frac if frac else "")
    return ("-" if neg else "") + out


def _json_key(rtag: str, value: Any, text: str, mark: Any) -> str:
    """A mapping key as JSON text: sigs.k8s.io/yaml's conversion of non-string keys."""
    if rtag in (_STR, _TIMESTAMP):
        return str(value)
    if rtag == _BOOL:
        return "true" if value else "false"
    if rtag == _INT and value is not None and INT64_MIN <= value <= INT64_MAX:
        return str(value)
    if rtag == _FLOAT:
        return _go_float32(value)
    raise _YAMLValueError(f"unsupported mapping key {_short_text(text)} (a "
                          f"{'null' if rtag == _NULL else 'number out of int64 range'})", mark)


@dataclass
class _Node:
    """A finished value with what it costs to use again through an alias."""

    value: Any
    size: int  # values in it, counting each alias expansion
    height: int  # nesting levels in it
    key: tuple[str, Any, str] | None = None  # (tag, value, text) when a scalar


def _copy(value: Any) -> Any:
    """An alias is expanded into its own copy: no two places share a mutable value."""
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


class _Builder:
    """JSON values from a YAML event stream, with bounded depth, size and aliasing."""

    def __init__(self, events: Any) -> None:
        self.events = events
        self.anchors: dict[str, _Node] = {}
        self.size = 0

    def next(self) -> Any:
        return self.events.get_event()

    def count(self, n: int, mark: Any) -> None:
        self.size += n
        if self.size > MAX_NODES:
            raise _YAMLValueError(f"more than {MAX_NODES:,} values (after alias expansion: a "
                                  "YAML alias bomb?)", mark)

    def node(self, depth: int) -> _Node:
        ev = self.next()
        mark = ev.start_mark
        if isinstance(ev, yaml.AliasEvent):
            found = self.anchors.get(ev.anchor or "")
            if found is None:
                raise _YAMLValueError(f"unknown anchor {ev.anchor!r} (an alias must follow the "
                                      "end of its anchored value)", mark)
            if depth + found.height - 1 > MAX_DEPTH:
                raise _YAMLValueError(f"nested deeper than {MAX_DEPTH} levels", mark)
            self.count(found.size, mark)
            return _Node(_copy(found.value), found.size, found.height, found.key)
        if depth > MAX_DEPTH:
            raise _YAMLValueError(f"nested deeper than {MAX_DEPTH} levels", mark)
        self.count(1, mark)
        if isinstance(ev, yaml.ScalarEvent):
            rtag, value = _scalar(ev)
            out = _Node(_json_value(rtag, value, mark), 1, 1, (rtag, value, ev.value))
        elif isinstance(ev, yaml.SequenceStartEvent):
            if ev.tag not in (None, "!", _SEQ):
                raise _YAMLValueError(f"tag {ev.tag} cannot be applied to a sequence", mark)
            out = self.sequence(depth)
        elif isinstance(ev, yaml.MappingStartEvent):
            if ev.tag not in (None, "!", _MAP):
                raise _YAMLValueError(f"tag {ev.tag} cannot be applied to a mapping", mark)
            out = self.mapping(depth, mark)
        else:  # pragma: no cover - the parser only produces the events above here
            raise _YAMLValueError(f"unexpected {type(ev).__name__}", mark)
        if ev.anchor is not None:
            self.anchors[ev.anchor] = out
        return out

    def sequence(self, depth: int) -> _Node:
        items: list[Any] = []
        size, height = 1, 1
        while not self.events.check_event(yaml.SequenceEndEvent):
            child = self.node(depth + 1)
            items.append(child.value)
            size += child.size
            height = max(height, child.height + 1)
        self.next()
        return _Node(items, size, height)

    def mapping(self, depth: int, start: Any) -> _Node:
        explicit: dict[str, Any] = {}
        merged: list[dict[str, Any]] = []
        size, height = 1, 1
        while not self.events.check_event(yaml.MappingEndEvent):
            kev = self.events.peek_event()
            is_merge = (isinstance(kev, yaml.ScalarEvent) and kev.value == "<<" and
                        ((kev.tag is None and kev.implicit[0]) or kev.tag == _MERGE))
            key = self.node(depth + 1)
            value = self.node(depth + 1)
            size += key.size + value.size
            height = max(height, value.height + 1)
            if is_merge:
                sources = value.value if isinstance(value.value, list) else [value.value]
                if not all(isinstance(m, dict) for m in sources):
                    raise _YAMLValueError("a merge key (<<) takes a mapping or a list of "
                                          "mappings", kev.start_mark)
                merged.extend(sources)
                continue
            if key.key is None:
                raise _YAMLValueError("a mapping key must be a scalar (JSON keys are strings)",
                                      kev.start_mark)
            name = _json_key(*key.key, kev.start_mark)
            if name in explicit:
                text = key.key[2]
                same = "" if text == name else f" (from {_short_text(text)})"
                raise _YAMLValueError(f"duplicate key {name!r}{same}", kev.start_mark)
            explicit[name] = value.value
        self.next()
        out = dict(explicit)
        for m in merged:  # explicit keys win; of the merged mappings, the first wins
            for k, v in m.items():
                out.setdefault(k, v)
        return _Node(out, size, height)


class _PyEvents(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser):
    """The pure-Python event parser, when PyYAML was built without libyaml."""

    def __init__(self, text: str) -> None:
        yaml.reader.Reader.__init__(self, text)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)


def _events(text: str) -> Any:
    try:
        from yaml._yaml import CParser
    except ImportError:  # pragma: no cover - PyYAML wheels ship libyaml
        return _PyEvents(text)
    return CParser(text)


def _line_of(text: str, position: int) -> int:
    return text.count("\n", 0, max(0, position)) + 1


def _yaml_error(e: yaml.YAMLError, text: str, source: str) -> ManifestError:
    """A parser error as a ManifestError naming the line (never a traceback)."""
    if isinstance(e, yaml.reader.ReaderError):
        line = _line_of(text, e.position)
        char = e.character
        what = f"character U+{char:04X}" if isinstance(char, int) else f"byte {char!r}"
        msg = (f"malformed YAML: {e.reason}: {what} at line {line} (write it as an escape "
               "in a double-quoted string)")
        return ManifestError(source, [FieldError("", msg)], line=line)
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    at = mark.line + 1 if mark is not None else None
    problem = getattr(e, "problem", None) or str(e)
    context = getattr(e, "context", None)
    msg = f"malformed YAML: {problem}" + (f" ({context})" if context else "")
    if mark is not None:
        msg += f" at line {mark.line + 1}, column {mark.column + 1}"
    return ManifestError(source, [FieldError("", msg)], line=at)


def read_documents(text: str, source: str) -> list[Document]:
    """Split a YAML (or JSON) stream into documents of JSON values.

    Never raises anything but :class:`ManifestError` (naming the source,
    document and line), whatever the text: size, nesting depth and alias
    expansion are bounded before the values are used.
    """
    if len(text) > MAX_INPUT_BYTES:
        raise ManifestError(source, [FieldError("", f"input larger than {MAX_INPUT_BYTES:,} "
                                                    "bytes")])
    if text.startswith("\ufeff"):
        text = text[1:]
    if text.lstrip()[:1] == "{":  # a JSON stream, as kubectl tells one
        text = json_escapes(text)
    docs: list[Document] = []
    index, line = 0, None
    try:
        events = _events(text)
        builder = _Builder(events)
        events.get_event()  # stream start
        while not events.check_event(yaml.StreamEndEvent):
            start = events.get_event()  # document start
            index += 1
            line = start.start_mark.line + 1
            builder.anchors = {}
            node = builder.node(1)
            events.get_event()  # document end
            if node.value is not None:
                docs.append(Document(source, index, line, node.value))
    except _YAMLValueError as e:
        at = e.mark.line + 1 if e.mark is not None else line
        where = f" at line {at}, column {e.mark.column + 1}" if e.mark is not None else ""
        raise ManifestError(source, [FieldError("", f"{e.message}{where}")], index or None,
                            line) from None
    except yaml.YAMLError as e:
        raise _yaml_error(e, text, source) from None
    except (UnicodeError, RecursionError, MemoryError) as e:  # text that is not UTF-8-able
        raise ManifestError(source, [FieldError("", f"unreadable YAML: {type(e).__name__}")],
                            index or None, line) from None
    return docs


# ------------------------------------------------------------------------- files


# ------------------------------------------------------------------------- writing
class _Dumper(yaml.SafeDumper):
    """PyYAML's safe dumper, quoting every string that the reader above (kubectl's YAML
    1.1) would read as something else: ``y``, ``on``, ``0x1F``, ``1_000``, ``2001-01-01``."""


def _represent_str(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    node = dumper.represent_str(text)
    if node.style is None and text and _resolve(text, None)[0] != _STR:
        node.style = "'"
    return node


_Dumper.add_representer(str, _represent_str)


def dump_documents(documents: Any, *, explicit_start: bool = False) -> str:
    """YAML documents that read back as the same JSON values (keys in their order)."""
    return yaml.dump_all(documents, Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                         allow_unicode=True, explicit_start=explicit_start)
