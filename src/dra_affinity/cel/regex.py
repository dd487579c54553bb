"""Regular expressions as Kubernetes CEL has them: Go's RE2 syntax and limits, run on RE2.

Kubernetes' CEL compiles patterns with Go's ``regexp`` package. RE2 (``google-re2``)
has the same syntax and the same linear-time matching, with two differences this
module removes:

* **syntax**: RE2 accepts ``\\C`` (any byte), which Go refuses; :func:`shape` refuses
  it too. Go also refuses a pattern whose compiled form would exceed 128 MB
  ("expression too large") or whose tree nests more than 1,000 levels; :func:`shape`
  computes both as Go's parser does (sizes before Go's simplifications, so at the very
  edge it may refuse slightly earlier).
* **limits**: Go's limit is on instructions, one per character class however large,
  while RE2 expands a class into UTF-8 byte ranges (``\\pL`` is about 1,200
  instructions), so with its default memory budget RE2 refuses valid patterns such
  as ``\\pL{999}``. Here a pattern is compiled with a memory budget sized from its
  estimated program (:attr:`Shape.units`), so every pattern Go accepts compiles;
  what it costs to compile and to run is charged from that estimate (see
  :func:`compile_cost` and docs/cel.md, "Regular expressions").

:func:`shape` parses a pattern once (linear time, no recursion) and is cached;
:func:`compiled` caches programs by pattern in an LRU bounded by their total size.
Errors are :class:`RegexError` (a ``ValueError``) with Go's wording.
"""

from __future__ import annotations

import functools
import math
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Final

import re2

#: Go's repeat limit (``x{1001}`` is an error), also for nested repeats' product.
MAX_REPEAT: Final = 1000
#: Go's maxSize: instructions of a compiled program (128 MB of 40-byte instructions).
GO_MAX_SIZE: Final = (128 << 20) // 40
#: Go's maxHeight: nesting levels of the parsed tree.
GO_MAX_HEIGHT: Final = 1000
#: RE2 instructions of a program with no content (match, capture, prefix loop).
PROGRAM_OVERHEAD: Final = 4
#: Estimated units past which a pattern's program is not kept in the shared cache.
CACHE_MAX_UNITS: Final = 20_000
#: Total estimated units the cache keeps (about 20 MB of RE2 programs and state).
CACHE_TOTAL_UNITS: Final = 400_000
#: RE2 memory per instruction: the forward and reverse programs and their DFA state.
_BYTES_PER_UNIT: Final = 128
_DEFAULT_MAX_MEM: Final = 8 << 20

_PERL_CLASSES: Final = {"d": 1, "s": 3, "w": 3, "D": 8, "S": 10, "W": 11}
_POSIX_CLASSES: Final = frozenset({"alnum", "alpha", "ascii", "blank", "cntrl", "digit", "graph",
                                   "lower", "print", "punct", "space", "upper", "word", "xdigit"})
_SIMPLE_ESCAPES: Final = frozenset("afnrtv")
_EMPTY_WIDTH_ESCAPES: Final = frozenset("AbBz")
_NON_ASCII_RANGE_UNITS: Final = 12  # a non-ASCII range in UTF-8 byte ranges, at most


_LITERAL_RUN: Final = re.compile(r"[^\\\[()|*+?{.^$]+")


class RegexError(ValueError):
    """A pattern Go's ``regexp`` refuses; the message is Go's."""


@dataclass(frozen=True, slots=True)
class Shape:
    """What a valid pattern costs: ``units`` estimates its RE2 program's instructions
    (an upper bound in practice: see tests/cel/test_cel_regex.py), ``go_size`` is Go's
    count of its instructions."""

    units: int
    go_size: int


@dataclass(slots=True)
class _Node:
    units: int
    go_size: int
    height: int
    repeat_product: int  # the largest product of nested {n,m} counts below (1: none)
    is_repeat_target: bool = True  # False for empty-width and group markers


@dataclass(slots=True)
class _Frame:
    """One open group: its finished alternatives and the one being built."""

    flags: str
    capture: bool
    alternatives: list[list[_Node]]
    current: list[_Node]
    last_was_repeat: bool = False


def _err(code: str, text: str) -> RegexError:
    return RegexError(f"error parsing regexp: {code}: `{text}`")


@functools.lru_cache(maxsize=512)
def _class_units(text: str, fold: bool, dot_nl: bool) -> int:
    """RE2 instructions of one Unicode class (``\\pL``, ``.``...) compiled alone (there
    are few such names, so this is cached; unknown names are Go's error)."""
    flags = ("i" if fold else "") + ("s" if dot_nl else "")
    try:
        prog = re2.compile(f"(?{flags}){text}" if flags else text, options=_options(0))
    except re2.error:
        raise _err("invalid character class range", text) from None
    return max(1, int(prog.programsize) - PROGRAM_OVERHEAD)


def _char_units(c: str, fold: bool) -> int:
    n = len(c.encode("utf-8", "surrogatepass"))
    if fold and c.lower() != c.upper():
        return n + 1 if c.isascii() else n + 3  # its other cases (k: K and the Kelvin sign)
    return n


def _options(units: int) -> re2.Options:
    opts = re2.Options()
    opts.log_errors = False
    opts.max_mem = max(_DEFAULT_MAX_MEM, units * _BYTES_PER_UNIT)
    return opts


class _Parser:
    """Go's Perl-flavoured syntax, tokenised enough to check Go's limits and size it."""

    def __init__(self, pattern: str) -> None:
        self.p = pattern
        self.i = 0
        self.stack = [_Frame("", False, [], [])]

    @property
    def top(self) -> _Frame:
        return self.stack[-1]

    def leaf(self, units: int, go_size: int = 1, *, repeatable: bool = True) -> None:
        self.top.current.append(_Node(units, go_size, 1, 1, repeatable))
        self.top.last_was_repeat = False

    def parse(self) -> Shape:
        p, n = self.p, len(self.p)
        while self.i < n:
            c = p[self.i]
            fold = "i" in self.top.flags
            if c == "\\":
                self.escape(fold)
            elif c == "[":
                self.char_class(fold)
            elif c == "(":
                self.open_group()
            elif c == ")":
                self.close_group()
            elif c == "|":
                top = self.top
                top.alternatives.append(top.current)
                top.current = []
                top.last_was_repeat = False
                self.i += 1
            elif c in "*+?":
                self.repeat_op(c)
            elif c == "{" and self.try_counted_repeat():
                pass
            elif (run := _LITERAL_RUN.match(p, self.i)) is not None:
                self.literals(run.group(0), fold)
            elif c == ".":
                self.leaf(_class_units(".", False, "s" in self.top.flags))
                self.i += 1
            elif c in "^$":
                self.leaf(1, repeatable=True)
                self.i += 1
            else:
                self.leaf(_char_units(c, fold))
                self.i += 1
        if len(self.stack) > 1:
            raise _err("missing closing )", p)
        node = self.finish(self.top)
        if node.go_size > GO_MAX_SIZE:
            raise _err("expression too large", p)
        return Shape(node.units + PROGRAM_OVERHEAD, node.go_size)

    def literals(self, run: str, fold: bool) -> None:
        """A run of plain characters, as one node (the last one alone when a repetition
        operator follows: it applies to that character only)."""
        end = self.i + len(run)
        if len(run) > 1 and end < len(self.p) and self.p[end] in "*+?{":
            run = run[:-1]
        units = sum(_char_units(ch, True) for ch in run) if fold else \
            len(run.encode("utf-8", "surrogatepass"))
        self.leaf(units, len(run))
        self.i += len(run)

    # -- groups --------------------------------------------------------------
    def open_group(self) -> None:
        p, start = self.p, self.i
        flags = self.top.flags
        if p.startswith("(?", start):
            if p.startswith(("(?P<", "(?<"), start) and not p.startswith(("(?<=", "(?<!"), start):
                head = start + (4 if p[start + 2] == "P" else 3)
                end = p.find(">", head)
                name = p[head:end] if end >= 0 else ""
                if end < 0 or not name or not all(ch.isalnum() or ch == "_" for ch in name) \
                        or not name.isascii():
                    raise _err("invalid named capture", p[start:end + 1 if end >= 0 else len(p)])
                self.push(flags, capture=True)
                self.i = end + 1
                return
            j = start + 2
            on, negate, seen = flags, False, False
            while j < len(p) and p[j] not in ":)":
                ch = p[j]
                if ch == "-" and not negate:
                    negate, seen = True, False
                elif ch in "imsU":
                    seen = True
                    on = on.replace(ch, "") if negate else (on if ch in on else on + ch)
                else:
                    raise _err("invalid or unsupported Perl syntax", p[start:j + 1])
                j += 1
            if j >= len(p) or (negate and not seen):
                raise _err("invalid or unsupported Perl syntax", p[start:j + 1])
            if p[j] == ")":  # (?flags): for the rest of the group
                self.top.flags = on
                self.i = j + 1
                return
            self.push(on, capture=False)
            self.i = j + 1
            return
        self.push(flags, capture=True)
        self.i += 1

    def push(self, flags: str, *, capture: bool) -> None:
        self.top.last_was_repeat = False
        self.stack.append(_Frame(flags, capture, [], []))

    def close_group(self) -> None:
        if len(self.stack) == 1:
            raise _err("unexpected )", self.p)
        frame = self.stack.pop()
        node = self.finish(frame)
        if frame.capture:
            node = _Node(node.units + 2, node.go_size + 2, node.height + 1, node.repeat_product)
            self.check_height(node)
        self.top.current.append(node)
        self.top.last_was_repeat = False
        self.i += 1

    def finish(self, frame: _Frame) -> _Node:
        alts = [*frame.alternatives, frame.current]
        nodes = [self.concat(a) for a in alts]
        if len(nodes) == 1:
            return nodes[0]
        k = len(nodes) - 1
        node = _Node(sum(x.units for x in nodes) + k, sum(x.go_size for x in nodes) + k,
                     1 + max(x.height for x in nodes), max(x.repeat_product for x in nodes))
        self.check_height(node)
        return node

    def concat(self, items: list[_Node]) -> _Node:
        if not items:
            return _Node(0, 1, 1, 1)
        if len(items) == 1:
            return items[0]
        node = _Node(sum(x.units for x in items), sum(x.go_size for x in items),
                     1 + max(x.height for x in items), max(x.repeat_product for x in items))
        self.check_height(node)
        return node

    def check_height(self, node: _Node) -> None:
        if node.height > GO_MAX_HEIGHT:
            raise _err("expression nests too deeply", self.p)
        if node.go_size > GO_MAX_SIZE:
            raise _err("expression too large", self.p)

    # -- repetition ----------------------------------------------------------
    def repeat_op(self, op: str) -> None:
        start = self.i
        self.i += 1
        if self.i < len(self.p) and self.p[self.i] == "?":
            self.i += 1
        self.apply_repeat(op, 0 if op != "+" else 1, -1 if op != "?" else 1, start)

    def try_counted_repeat(self) -> bool:
        p, start = self.p, self.i
        j = start + 1
        lo_start = j
        while j < len(p) and p[j].isdigit() and p[j].isascii():
            j += 1
        if j == lo_start or j >= len(p):
            return False
        lo_text = p[lo_start:j]
        hi_text: str | None = lo_text
        if p[j] == ",":
            j += 1
            hi_start = j
            while j < len(p) and p[j].isdigit() and p[j].isascii():
                j += 1
            hi_text = p[hi_start:j] if j > hi_start else None
        if j >= len(p) or p[j] != "}":
            return False
        j += 1
        if j < len(p) and p[j] == "?":
            j += 1
        lo = int(lo_text) if len(lo_text) <= 8 else MAX_REPEAT + 1
        hi = -1 if hi_text is None else (int(hi_text) if len(hi_text) <= 8 else MAX_REPEAT + 1)
        if lo > MAX_REPEAT or hi > MAX_REPEAT or (hi >= 0 and lo > hi):
            raise _err("invalid repeat count", p[start:j])
        self.i = j
        self.apply_repeat("{", lo, hi, start)
        return True

    def apply_repeat(self, op: str, lo: int, hi: int, start: int) -> None:
        top = self.top
        text = self.p[start:self.i]
        if top.last_was_repeat:
            raise _err("invalid nested repetition operator", text)
        if not top.current or not top.current[-1].is_repeat_target:
            raise _err("missing argument to repetition operator", text)
        sub = top.current.pop()
        if op == "*":
            units, go_size, product = sub.units + 2, sub.go_size + 2, sub.repeat_product
        elif op in "+?":
            units, go_size, product = sub.units + 1, sub.go_size + 1, sub.repeat_product
        else:
            m = hi if hi >= 0 else lo
            product = 1 if m == 0 else m * sub.repeat_product
            if (lo >= 2 or hi >= 2) and product > MAX_REPEAT:
                raise _err("invalid repeat count", text)
            if hi < 0:
                units = (2 if lo == 0 else 1) + max(lo, 1) * sub.units
                go_size = (2 + sub.go_size) if lo == 0 else 1 + lo * sub.go_size
            else:
                units = hi * sub.units + (hi - lo)
                go_size = hi * sub.go_size + (hi - lo)
        node = _Node(units, max(1, go_size), sub.height + 1, product)
        self.check_height(node)
        top.current.append(node)
        top.last_was_repeat = True

    # -- escapes and classes -------------------------------------------------
    def escape(self, fold: bool) -> None:
        p, start = self.p, self.i
        if start + 1 >= len(p):
            raise _err("trailing backslash at end of expression", "")
        c = p[start + 1]
        if c == "Q":
            end = p.find("\\E", start + 2)
            literal = p[start + 2:] if end < 0 else p[start + 2:end]
            for ch in literal:
                self.leaf(_char_units(ch, fold))
            self.i = len(p) if end < 0 else end + 2
            return
        if c in _EMPTY_WIDTH_ESCAPES:
            self.leaf(1)
            self.i = start + 2
            return
        units, self.i = self.class_escape(start, fold)
        if units is None:
            units = self.char_escape_units(start, fold)
        self.leaf(units)

    def class_escape(self, start: int, fold: bool) -> tuple[int | None, int]:
        """(units, next index) of ``\\d``-like or ``\\p`` classes; (None, start) otherwise."""
        p = self.p
        c = p[start + 1]
        if c in _PERL_CLASSES:
            return _PERL_CLASSES[c], start + 2
        if c in "pP":
            if start + 2 >= len(p):
                raise _err("invalid character class range", p[start:])
            if p[start + 2] == "{":
                end = p.find("}", start + 3)
                if end < 0:
                    raise _err("invalid character class range", p[start:])
                text = p[start:end + 1]
                return _class_units(text, fold, False), end + 1
            return _class_units(p[start:start + 3], fold, False), start + 3
        return None, start

    def char_escape_units(self, start: int, fold: bool) -> int:
        """Units of an escaped single character; advances past it (Go's escapes only)."""
        p = self.p
        c = p[start + 1]
        if c in "01234567":
            j = start + 2
            if c != "0" and (j >= len(p) or not "0" <= p[j] <= "7"):
                raise _err("invalid escape sequence", p[start:start + 2])  # a backreference
            while j < len(p) and j < start + 4 and "0" <= p[j] <= "7":
                j += 1
            self.i = j
            return 1
        if c == "x":
            if start + 2 < len(p) and p[start + 2] == "{":
                end = p.find("}", start + 3)
                digits = p[start + 3:end] if end >= 0 else ""
                if end < 0 or not digits or not all(ch in "0123456789abcdefABCDEF" for ch in digits) \
                        or int(digits[-8:] if len(digits) > 8 else digits, 16) > 0x10FFFF \
                        or len(digits.lstrip("0")) > 6:
                    raise _err("invalid escape sequence", p[start:end + 1 if end >= 0 else len(p)])
                self.i = end + 1
                return _char_units(chr(int(digits, 16)), fold)
            hex2 = p[start + 2:start + 4]
            if len(hex2) != 2 or not all(ch in "0123456789abcdefABCDEF" for ch in hex2):
                raise _err("invalid escape sequence", p[start:start + 4])
            self.i = start + 4
            return _char_units(chr(int(hex2, 16)), fold)
        self.i = start + 2
        if c in _SIMPLE_ESCAPES or (c.isascii() and not c.isalnum()):
            return 1
        raise _err("invalid escape sequence", p[start:start + 2])

    def char_class(self, fold: bool) -> None:
        p, start = self.p, self.i
        j = start + 1
        negated = j < len(p) and p[j] == "^"
        if negated:
            j += 1
        units = 0
        first = True
        while True:
            if j >= len(p):
                raise _err("missing closing ]", p[start:])
            c = p[j]
            if c == "]" and not first:
                j += 1
                break
            first = False
            if c == "[" and p.startswith("[:", j):
                end = p.find(":]", j + 2)
                name = p[j + 2:end].lstrip("^") if end >= 0 else ""
                if end >= 0 and name in _POSIX_CLASSES:
                    units += 4 if not p[j + 2:end].startswith("^") else 10
                    j = end + 2
                    continue
            if c == "\\":
                if j + 1 >= len(p):
                    raise _err("missing closing ]", p[start:])
                cls_units, nxt = self.class_escape(j, fold)
                if cls_units is not None:
                    units += cls_units
                    j = nxt
                    continue
            lo, j = self.class_char(j)
            hi = lo
            if j + 1 < len(p) and p[j] == "-" and p[j + 1] != "]":
                hi, j = self.class_char(j + 1)
                if hi < lo:
                    raise _err("invalid character class range", p[start:j])
            wide = hi >= 0x80
            units += (_NON_ASCII_RANGE_UNITS if wide else 1) * (2 if fold else 1)
        self.i = j
        self.leaf(max(1, units) + (_NON_ASCII_RANGE_UNITS if negated else 0))

    def class_char(self, j: int) -> tuple[int, int]:
        """(code point, next index) of one character of a class, escapes included."""
        p = self.p
        if p[j] != "\\":
            return ord(p[j]), j + 1
        saved = self.i
        self.i = j
        c = p[j + 1]
        if c in _SIMPLE_ESCAPES:
            code = ord({"a": "\a", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}[c])
            self.i = j + 2
        elif c == "x" or c in "01234567":
            self.char_escape_units(j, False)
            code = self._escaped_code(j)
        else:
            self.char_escape_units(j, False)
            code = ord(c)
        nxt, self.i = self.i, saved
        return code, nxt

    def _escaped_code(self, j: int) -> int:
        p = self.p
        if p[j + 1] == "x":
            if p[j + 2] == "{":
                return int(p[j + 3:p.find("}", j + 3)], 16)
            return int(p[j + 2:j + 4], 16)
        k = j + 1
        while k < len(p) and k < j + 4 and "0" <= p[k] <= "7":
            k += 1
        return int(p[j + 1:k], 8)


#: Patterns up to this long have their shape remembered (longer ones are parsed again).
SHAPE_CACHE_MAX_LENGTH: Final = 1024


def _parse(pattern: str) -> Shape | RegexError:
    try:
        return _Parser(pattern).parse()
    except RegexError as e:
        return e


_short_shape: Final = functools.lru_cache(maxsize=4096)(_parse)  # errors are remembered too


def shape(pattern: str) -> Shape:
    """Check ``pattern`` against Go's syntax and limits and estimate its size; raises
    :class:`RegexError`. Linear in the pattern's length."""
    got = _short_shape(pattern) if len(pattern) <= SHAPE_CACHE_MAX_LENGTH else _parse(pattern)
    if isinstance(got, RegexError):
        raise got.with_traceback(None)
    return got


def parse_cost(length: int) -> int:
    """What checking a pattern's syntax costs (:func:`shape`, in Python, up to about
    1.5 us per character of dense syntax): two per character, charged before the check."""
    return 2 * length


def compile_cost(s: Shape) -> int:
    """What compiling a pattern of this shape costs: RE2 builds two programs of about
    ``units`` instructions each (a Unicode class's instructions take the longest)."""
    return COMPILE_BASE_COST + math.ceil(COMPILE_COST_PER_UNIT * s.units)


#: A compile through the Python wrapper, however small the pattern (~10 us).
COMPILE_BASE_COST: Final = 40
#: Per estimated instruction (measured: 0.5-1.3 us per instruction, the latter for
#: Unicode classes; see benchmarks/cel_unit_cost.py).
COMPILE_COST_PER_UNIT: Final = 4


class _ProgramCache:
    """Compiled programs by pattern, least recently used first out, bounded by units."""

    def __init__(self) -> None:
        self._programs: OrderedDict[str, tuple[re2._Regexp | RegexError, int]] = OrderedDict()
        self._units = 0
        self._lock = threading.Lock()

    def get(self, pattern: str, s: Shape) -> re2._Regexp:
        with self._lock:
            hit = self._programs.get(pattern)
            if hit is not None:
                self._programs.move_to_end(pattern)
        if hit is None:
            prog: re2._Regexp | RegexError = _compile(pattern, s)
            self._put(pattern, s, prog)
        else:
            prog = hit[0]
        if isinstance(prog, RegexError):
            raise prog.with_traceback(None)
        return prog

    def _put(self, pattern: str, s: Shape, prog: re2._Regexp | RegexError) -> None:
        if s.units <= CACHE_MAX_UNITS:
            with self._lock:
                if pattern not in self._programs:
                    self._programs[pattern] = (prog, s.units)
                    self._units += s.units
                while self._units > CACHE_TOTAL_UNITS:
                    _, (_, units) = self._programs.popitem(last=False)
                    self._units -= units


def _compile(pattern: str, s: Shape) -> re2._Regexp | RegexError:
    """RE2's program, or its refusal of a pattern the Go-syntax check let through."""
    try:
        return re2.compile(pattern.encode("utf-8", "surrogatepass"), options=_options(s.units))
    except re2.error as e:
        msg = e.args[0].decode("utf-8", "replace") if e.args and isinstance(e.args[0], bytes) \
            else str(e)
        return RegexError(f"error parsing regexp: {msg}")


_CACHE: Final = _ProgramCache()


def compiled(pattern: str) -> tuple[re2._Regexp, Shape]:
    """The RE2 program of a valid pattern (matching UTF-8 bytes) and its shape; raises
    :class:`RegexError`. Compiles at most once while the program stays cached."""
    s = shape(pattern)
    return _CACHE.get(pattern, s), s
