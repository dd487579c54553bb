"""Field paths, ``kubectl``-style error messages and Kubernetes name rules.

Mirrors ``k8s.io/apimachinery/pkg/util/validation`` and ``.../field`` closely
enough that an error printed here reads like the one the API server returns:
``spec.sharingAffinity: Too many: 9: must have at most 8 items``.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from dra_affinity.api.io import FieldError

# Longest rendering of a value inside a message. The API server prints the
# whole value; a 10 Ki expression in every error line helps nobody, so long
# values are cut (the field path still says where it is).
_MAX_RENDERED = 80


class Path(tuple[Any, str]):
    """A Kubernetes field path: ``child`` adds ``.name``, ``index`` ``[i]``, ``key`` ``[k]``.

    Validation makes a path for every field it checks and renders one only for a field
    that is wrong, so a path is only its parent and its last segment (a pair, made in
    C: validating an object makes dozens) and renders when asked."""

    __slots__ = ()

    def __new__(cls, text: str = "") -> Path:
        return _pair(cls, (None, text))

    def child(self, *names: str) -> Path:
        p = self
        for name in names:
            p = _pair(Path, (p, name))
        return p

    def index(self, i: int) -> Path:  # type: ignore[override]  # a path, not tuple.index
        return _pair(Path, (self, f"[{i}]"))

    def key(self, k: str) -> Path:
        return _pair(Path, (self, f"[{k}]"))

    @property
    def text(self) -> str:
        parent, seg = self
        if parent is None:
            return seg
        head = parent.text
        return head + seg if seg.startswith("[") or not head else f"{head}.{seg}"

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"Path({self.text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Path) and self.text == other.text

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self.text)


_pair = tuple.__new__

#: ``at((path, "name"))`` is ``path.child("name")``, made without a Python call: the
#: form for the paths validation makes for every field of every object it admits.
at: Callable[[tuple[Path, str]], Path] = functools.partial(_pair, Path)
ROOT = Path()


def render(value: Any) -> str:
    """A value as Go's field errors print it: strings quoted, structs as JSON."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    if len(text) > _MAX_RENDERED:
        cut = text[: _MAX_RENDERED - 4]
        text = cut + '..."' if text.startswith('"') else cut + "..."
    return text


# ----------------------------------------------------------------- error kinds
def required(path: Path, detail: str = "") -> FieldError:
    return FieldError(str(path), "Required value" + (f": {detail}" if detail else ""))


def invalid(path: Path, value: Any, detail: str) -> FieldError:
    return FieldError(str(path), f"Invalid value: {render(value)}: {detail}")


def too_long(path: Path, limit: int) -> FieldError:
    return FieldError(str(path), f"Too long: may not be more than {limit} bytes")


def too_many(path: Path, actual: int, limit: int) -> FieldError:
    return FieldError(str(path), f"Too many: {actual}: must have at most {limit} items")


def duplicate(path: Path, value: Any) -> FieldError:
    return FieldError(str(path), f"Duplicate value: {render(value)}")


def forbidden(path: Path, detail: str) -> FieldError:
    return FieldError(str(path), f"Forbidden: {detail}")


def not_supported(path: Path, value: Any, supported: Iterable[str]) -> FieldError:
    values = ", ".join(json.dumps(s) for s in supported)
    return FieldError(str(path), f"Unsupported value: {render(value)}: supported values: {values}")


def immutable(path: Path, value: Any) -> FieldError:
    return invalid(path, value, "field is immutable")


# ----------------------------------------------------------------- name rules
# fullmatch everywhere: Python's ``$`` would accept a trailing newline.
_DNS_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_LABEL_RE = re.compile(_DNS_LABEL)
_DNS_SUBDOMAIN_RE = re.compile(rf"{_DNS_LABEL}(\.{_DNS_LABEL})*")
_C_IDENTIFIER_RE = re.compile("[A-Za-z_][A-Za-z0-9_]*")
_LABEL_NAME_RE = re.compile("([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
# semver.org 2.0.0, the regex Kubernetes uses for version attributes.
_SEMVER_RE = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?",
    re.ASCII,
)

DNS_LABEL_MAX = 63
DNS_SUBDOMAIN_MAX = 253
LABEL_VALUE_MAX = 63

DNS_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name', or '123-abc', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
DNS_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
    "'-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
C_IDENTIFIER_MSG = (
    "a valid C identifier must start with alphabetic character or '_', followed by a string "
    "of alphanumeric characters or '_' (e.g. 'my_name', or 'MY_NAME', or 'MyName', "
    "regex used for validation is '[A-Za-z_][A-Za-z0-9_]*')"
)
LABEL_NAME_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
    "end with an alphanumeric character (e.g. 'MyName', or 'my.name', or '123-abc', regex "
    "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)


#: Values at most this long have their problems remembered (names repeat across objects:
#: a class, a driver, a request name in every claim); longer ones are checked each time,
#: so the memo's size is bounded whatever an object holds.
_MEMO_MAX_LEN = 256
_MEMO_SIZE = 4096

_P = TypeVar("_P", bound=Callable[[str], tuple[str, ...]])


class _Memo(dict[str, tuple[str, ...]]):
    """A pure string check's problems by value: a hit is one lookup, in C (validation
    asks a dozen of these per object); a miss computes the check and remembers short
    values only, and a full memo starts afresh, so its size is bounded whatever
    objects hold."""

    def __init__(self, fn: Callable[[str], tuple[str, ...]]) -> None:
        super().__init__()
        self.fn = fn

    def __missing__(self, value: str) -> tuple[str, ...]:
        problems = self.fn(value)
        if len(value) <= _MEMO_MAX_LEN:
            if len(self) >= _MEMO_SIZE:
                self.clear()
            self[value] = problems
        return problems


def _memo(fn: _P) -> _P:
    """Remember a pure string check's problems for short values (see :class:`_Memo`);
    the check is the memo's ``__getitem__``, so its ``__self__`` is the memo."""
    return _Memo(fn).__getitem__  # type: ignore[return-value]


def max_len_error(limit: int) -> str:
    """Upstream's ``MaxLenError``: what is wrong with a value longer than ``limit`` bytes."""
    return f"must be no more than {limit} characters"


def nbytes(s: str) -> int:
    """Length as Go's ``len``: UTF-8 bytes (lone surrogates counted, not rejected)."""
    return len(s.encode("utf-8", "surrogatepass"))


@_memo
def dns_label_problems(value: str) -> tuple[str, ...]:
    """Problems with ``value`` as an RFC 1123 label (none: valid)."""
    out: list[str] = []
    if nbytes(value) > DNS_LABEL_MAX:
        out.append(max_len_error(DNS_LABEL_MAX))
    if not _DNS_LABEL_RE.fullmatch(value):
        out.append(DNS_LABEL_MSG)
    return tuple(out)


@_memo
def dns_subdomain_problems(value: str) -> tuple[str, ...]:
    """Problems with ``value`` as an RFC 1123 subdomain (none: valid)."""
    out: list[str] = []
    if nbytes(value) > DNS_SUBDOMAIN_MAX:
        out.append(max_len_error(DNS_SUBDOMAIN_MAX))
    if not _DNS_SUBDOMAIN_RE.fullmatch(value):
        out.append(DNS_SUBDOMAIN_MSG)
    return tuple(out)


@_memo
def c_identifier_problems(value: str) -> tuple[str, ...]:
    return () if _C_IDENTIFIER_RE.fullmatch(value) else (C_IDENTIFIER_MSG,)


def is_semver(value: str) -> bool:
    return _SEMVER_RE.fullmatch(value) is not None


@_memo
def qualified_label_key_problems(value: str) -> tuple[str, ...]:
    """Problems with a label key / taint key: ``[prefix/]name`` (``IsQualifiedName``)."""
    parts = value.split("/")
    if len(parts) == 1:
        prefix, name = "", parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            return ("prefix part must be non-empty",)
    else:
        return (
            "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must "
            "start and end with an alphanumeric character, with an optional DNS subdomain prefix "
            "and '/' (e.g. 'example.com/MyName')",
        )
    out: list[str] = []
    if prefix:
        out += [f"prefix part {p}" for p in dns_subdomain_problems(prefix)]
    if not name:
        out.append("name part must be non-empty")
    else:
        if nbytes(name) > DNS_LABEL_MAX:
            out.append("name part " + max_len_error(DNS_LABEL_MAX))
        if not _LABEL_NAME_RE.fullmatch(name):
            out.append(LABEL_NAME_MSG)
    return tuple(out)


@_memo
def label_value_problems(value: str) -> tuple[str, ...]:
    out: list[str] = []
    if nbytes(value) > LABEL_VALUE_MAX:
        out.append(max_len_error(LABEL_VALUE_MAX))
    if value and not _LABEL_NAME_RE.fullmatch(value):
        out.append(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', "
            "'_' or '.', and must start and end with an alphanumeric character"
        )
    return tuple(out)
