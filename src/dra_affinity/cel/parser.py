"""Parse CEL text into the engine's AST.

Parsing uses cel-python's CEL grammar (``celpy/cel.lark``) with the same LALR
lark parser settings as ``celpy.celparser.CELParser`` (a private instance, so
token positions survive); this module only converts lark's concrete tree into :mod:`.ast` nodes,
decodes literals, expands macros and enforces the nesting limit. Nothing of
cel-python's evaluator is used.

Deep input is refused with a :class:`CELCompileError` rather than a
``RecursionError``: the converter walks unit-production chains iteratively and
counts real nesting (operators, calls, selections, literals, parentheses);
chains of ``&&`` / ``||`` are balanced (as cel-go does), so long disjunctions
stay shallow.
"""

from __future__ import annotations

import math
import re
import threading
from pathlib import Path
from typing import Final

from lark import Lark, Token, Tree
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedEOF, UnexpectedToken

from dra_affinity.api.numbers import INT64_MAX, INT64_MIN, UINT64_MAX

from . import ast
from .errors import CELCompileError
from .lib_lists import expand_sort_by
from .library_ext import NAMESPACES
from .libs import LIB_NAMESPACES
from .optionals import OPT_INDEX, OPT_NAMESPACES, OPT_SELECT
from .values import UInt

# Nesting limit. cel-go's parser defaults to 250; ours is lower because every
# later stage (checker, cost estimator, evaluator) recurses over the tree in
# Python. No practical extractor or selector is anywhere near it.
MAX_NESTING_DEPTH: Final = 100
# Absolute size limit, checked before parsing (cel-go's default code point limit
# is 100,000). Admission separately enforces the much lower 10 Ki.
MAX_EXPRESSION_LENGTH: Final = 100 * 1024

RESERVED: Final = frozenset(
    {
        "as", "break", "const", "continue", "else", "for", "function", "if", "import",
        "in", "let", "loop", "namespace", "package", "return", "var", "void", "while",
    }
)  # fmt: skip

MACROS: Final = {
    ("all", 2): ast.ALL,
    ("exists", 2): ast.EXISTS,
    ("exists_one", 2): ast.EXISTS_ONE,
    ("map", 2): ast.MAP,
    ("map", 3): ast.MAP_FILTER,
    ("filter", 2): ast.FILTER,
}
# Two-variable macros: (kind, whether the third argument is a filter when four are given).
MACROS2: Final = {
    ("all", 3): ast.ALL,
    ("exists", 3): ast.EXISTS,
    ("existsOne", 3): ast.EXISTS_ONE,
    ("exists_one", 3): ast.EXISTS_ONE,
    ("transformList", 3): ast.MAP,
    ("transformList", 4): ast.MAP_FILTER,
    ("transformMap", 3): ast.TRANSFORM_MAP,
    ("transformMap", 4): ast.TRANSFORM_MAP,
    ("transformMapEntry", 3): ast.TRANSFORM_MAP_ENTRY,
    ("transformMapEntry", 4): ast.TRANSFORM_MAP_ENTRY,
}

_UNIT: Final = frozenset(
    {
        "expr",
        "conditionalor",
        "conditionaland",
        "relation",
        "addition",
        "multiplication",
        "unary",
        "member",
        "primary",
    }
)
_REL_OPS: Final = {
    "relation_lt": "<",
    "relation_le": "<=",
    "relation_gt": ">",
    "relation_ge": ">=",
    "relation_eq": "==",
    "relation_ne": "!=",
    "relation_in": "in",
}
_ADD_OPS: Final = {"addition_add": "+", "addition_sub": "-"}
_MUL_OPS: Final = {"multiplication_mul": "*", "multiplication_div": "/", "multiplication_mod": "%"}

_lock = threading.Lock()
_parser: Lark | None = None


def _bool_literal(tok: Token) -> Token:
    # The grammar lexes true/false as identifiers; re-type them as literals
    # while keeping their source positions (cel-python's callback drops them).
    if tok.value in ("true", "false"):
        return Token.new_borrow_pos("BOOL_LIT", tok.value, tok)
    return tok


def _cache_file(grammar: str) -> str | bool:
    """Where lark keeps the built LALR tables: building them takes most of a second,
    loading them a few milliseconds. A private per-user folder, never a shared /tmp
    (the cache is a pickle; a file planted by someone else must not be loaded)."""
    import hashlib
    import os

    import lark

    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    folder = os.path.join(base, "dra-affinity")
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        st = os.stat(folder)
        if st.st_uid != os.getuid() or st.st_mode & 0o022:
            return False
    except OSError:
        return False  # no cache: build the tables in memory every time
    digest = hashlib.sha256(f"{lark.__version__}\0{grammar}".encode()).hexdigest()[:16]
    return os.path.join(folder, f"cel-grammar-{digest}.lark")


# cel-go's grammar beyond cel-spec's: optional field selection (``a.?f``) and
# indexing (``a[?i]``), optional list elements (``[?x]``) and map entries
# (``{?k: v}``), and a trailing comma in list and map literals. Each edit
# replaces one rule of cel-python's grammar text; a grammar that no longer
# contains the rule fails loudly at first use rather than parsing differently.
_GRAMMAR_EDITS: Final = (
    (
        "member         : member_dot | member_dot_arg | member_index | member_object | primary",
        "member         : member_dot | member_dot_arg | member_index | member_object | primary\n"
        "               | member_opt_dot | member_opt_index\n"
        'member_opt_dot : member "." "?" IDENT\n'
        'member_opt_index : member "[" "?" expr "]"',
    ),
    (
        'list_lit       : "[" [exprlist] "]"',
        'list_lit       : "[" [listelems [","]] "]"\n'
        'listelems      : listelem | listelems "," listelem\n'
        "listelem       : expr | opt_elem\n"
        'opt_elem       : "?" expr',
    ),
    (
        'map_lit        : "{" [mapinits] "}"',
        'map_lit        : "{" [mapentries [","]] "}"\n'
        'mapentries     : mapentry | mapentries "," mapentry\n'
        'mapentry       : expr ":" expr | opt_entry\n'
        'opt_entry      : "?" expr ":" expr',
    ),
)


def _extend_grammar(grammar: str) -> str:
    for old, new in _GRAMMAR_EDITS:
        if old not in grammar:  # pragma: no cover - a changed cel-python grammar
            raise RuntimeError(f"CEL grammar rule not found: {old!r}")
        grammar = grammar.replace(old, new, 1)
    return grammar


def _lark() -> Lark:
    """cel-python's CEL grammar (celpy/cel.lark) with its LALR parser settings."""
    global _parser
    if _parser is None:
        import celpy

        grammar = _extend_grammar(
            (Path(celpy.__file__).parent / "cel.lark").read_text(encoding="utf-8")
        )
        _parser = Lark(
            grammar,
            cache=_cache_file(grammar),
            parser="lalr",
            start="expr",
            g_regex_flags=re.M,
            lexer_callbacks={"IDENT": _bool_literal},
            propagate_positions=True,
            maybe_placeholders=False,
            priority="invert",
        )
    return _parser


def parse(text: str) -> ast.Expr:
    """Parse ``text``; raise :class:`CELCompileError` on any syntax problem."""
    if not isinstance(text, str):
        raise CELCompileError(f"expression must be a string, not {type(text).__name__}")
    if len(text) > MAX_EXPRESSION_LENGTH:
        raise CELCompileError(
            f"expression too long: {len(text)} characters (limit {MAX_EXPRESSION_LENGTH})", 0
        )
    if not text.strip():
        raise CELCompileError("syntax error: empty expression", 0)
    try:
        with _lock:
            tree = _lark().parse(text)
    except UnexpectedCharacters as e:
        pos = e.pos_in_stream if isinstance(e.pos_in_stream, int) else None
        ch = text[pos] if pos is not None and pos < len(text) else "?"
        raise CELCompileError(f"syntax error: unexpected character {ch!r}", pos) from None
    except UnexpectedEOF:
        raise CELCompileError("syntax error: unexpected end of expression", len(text)) from None
    except UnexpectedToken as e:
        tok = e.token
        if tok.type == "$END":
            raise CELCompileError("syntax error: unexpected end of expression", len(text)) from None
        pos = tok.start_pos if isinstance(tok.start_pos, int) else None
        raise CELCompileError(f"syntax error: unexpected {tok.value!r}", pos) from None
    except LarkError as e:
        raise CELCompileError(
            f"syntax error: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
        ) from None
    except RecursionError:
        raise CELCompileError(f"expression nesting too deep (limit {MAX_NESTING_DEPTH})") from None
    except Exception as e:  # the parser must never leak anything else
        raise CELCompileError(f"syntax error: {type(e).__name__}") from None
    try:
        return _Converter(text).conv(tree, 1)
    except RecursionError:
        raise CELCompileError(f"expression nesting too deep (limit {MAX_NESTING_DEPTH})") from None


def _numeric_literal(node: Tree[Token] | Token) -> Token | None:
    """The int or double literal token ``node`` is, if it is one (signed or not)."""
    while isinstance(node, Tree) and node.data in _UNIT and len(node.children) == 1:
        node = node.children[0]
    if isinstance(node, Tree) and node.data == "literal":
        tok = node.children[0]
        if (
            isinstance(tok, Token)
            and tok.type in ("INT_LIT", "FLOAT_LIT")
        ):
            return tok
    return None


def _items(children: list[Tree[Token] | Token]) -> list[Tree[Token] | Token]:
    """The element nodes of a list or map literal (its one child, if any, holds them)."""
    if not children:
        return []
    out: list[Tree[Token] | Token] = []
    node = children[0]
    # left-recursive: listelems -> listelems listelem | listelem (iteratively)
    while isinstance(node, Tree) and node.data in ("listelems", "mapentries"):
        kids = node.children
        out.append(kids[-1])
        if len(kids) == 1:
            break
        node = kids[0]
    out.reverse()
    return out


def _pos(node: Tree[Token] | Token) -> int:
    if isinstance(node, Token):
        return node.start_pos if isinstance(node.start_pos, int) else 0
    start = getattr(node.meta, "start_pos", None)
    return start if isinstance(start, int) else 0


def _end(node: Tree[Token] | Token) -> int:
    if isinstance(node, Token):
        return node.end_pos if isinstance(node.end_pos, int) else 0
    end = getattr(node.meta, "end_pos", None)
    return end if isinstance(end, int) else 0


class _Converter:
    def __init__(self, text: str) -> None:
        self.text = text

    def _too_deep(self, node: Tree[Token] | Token) -> CELCompileError:
        return CELCompileError(
            f"expression nesting too deep (limit {MAX_NESTING_DEPTH})", _pos(node)
        )

    def _op_pos(self, op: str, left: Tree[Token] | Token, right: Tree[Token] | Token) -> int:
        start = _end(left)
        found = self.text.find(op, start, _pos(right))
        return found if found >= 0 else start

    def conv(self, t: Tree[Token] | Token, depth: int) -> ast.Expr:
        # Walk unit productions (expr -> conditionalor -> ... -> primary) in a
        # loop: they are lark structure, not CEL nesting.
        while isinstance(t, Tree) and t.data in _UNIT and len(t.children) == 1:
            t = t.children[0]
        if depth > MAX_NESTING_DEPTH:
            raise self._too_deep(t)
        if isinstance(t, Token):  # pragma: no cover - grammar always wraps tokens
            raise CELCompileError(f"syntax error: unexpected token {t.value!r}", _pos(t))
        data = str(t.data)
        ch = t.children
        d = depth + 1
        if data == "expr":  # ternary
            return ast.Cond(
                self._op_pos("?", ch[0], ch[1]),
                self.conv(ch[0], d),
                self.conv(ch[1], d),
                self.conv(ch[2], d),
            )
        if data in ("conditionalor", "conditionaland"):
            return self._logical(t, data, depth)
        if data == "relation":
            op_tree, right = ch
            assert isinstance(op_tree, Tree)
            op = _REL_OPS[str(op_tree.data)]
            left = op_tree.children[0]
            return ast.Binary(
                self._op_pos(op, left, right), op, self.conv(left, d), self.conv(right, d)
            )
        if data in ("addition", "multiplication"):
            op_tree, right = ch
            assert isinstance(op_tree, Tree)
            op = (_ADD_OPS if data == "addition" else _MUL_OPS)[str(op_tree.data)]
            left = op_tree.children[0]
            return ast.Binary(
                self._op_pos(op, left, right), op, self.conv(left, d), self.conv(right, d)
            )
        if data == "unary":
            return self._unary(t, d)
        if data == "member_dot":
            operand, name = ch
            assert isinstance(name, Token)
            return ast.Select(_pos(name) - 1, self.conv(operand, d), str(name))
        if data == "member_dot_arg":
            operand, name = ch[0], ch[1]
            assert isinstance(name, Token)
            args = self._args(ch[2] if len(ch) > 2 else None, d)
            return self._member_call(_pos(name), self.conv(operand, d), str(name), args, name)
        if data == "member_index":
            return ast.Index(
                self._op_pos("[", ch[0], ch[1]), self.conv(ch[0], d), self.conv(ch[1], d)
            )
        if data == "member_object":
            raise CELCompileError("message construction is not supported", _pos(t))
        if data == "literal":
            tok = ch[0]
            assert isinstance(tok, Token)
            return ast.Const(_pos(tok), _literal(tok))
        if data in ("ident", "dot_ident"):
            tok = ch[0]
            assert isinstance(tok, Token)
            ident = str(tok)
            if ident in RESERVED:
                raise CELCompileError(f"reserved identifier: {ident}", _pos(tok))
            return ast.Ident(_pos(tok), ident)
        if data in ("ident_arg", "dot_ident_arg"):
            tok = ch[0]
            assert isinstance(tok, Token)
            fname = str(tok)
            if fname in RESERVED:
                raise CELCompileError(f"reserved identifier: {fname}", _pos(tok))
            args = self._args(ch[1] if len(ch) > 1 else None, d)
            if fname == "has" and data == "ident_arg":
                if len(args) != 1 or not isinstance(args[0], ast.Select) or args[0].test_only:
                    raise CELCompileError("invalid argument to has() macro", _pos(tok))
                sel = args[0]
                return ast.Select(_pos(tok), sel.operand, sel.field, True)
            return ast.Call(_pos(tok), fname, None, args)
        if data == "paren_expr":
            return self.conv(ch[0], d)
        if data == "list_lit":
            elems: list[ast.Expr] = []
            optional: list[int] = []
            for el in _items(ch):
                assert isinstance(el, Tree)
                inner = el.children[0]
                if isinstance(inner, Tree) and inner.data == "opt_elem":
                    optional.append(len(elems))
                    inner = inner.children[0]
                elems.append(self.conv(inner, d))
            return ast.ListLit(_pos(t), tuple(elems), tuple(optional))
        if data == "map_lit":
            entries: list[tuple[ast.Expr, ast.Expr]] = []
            opt_keys: list[int] = []
            for en in _items(ch):
                assert isinstance(en, Tree)
                kv = en.children
                if len(kv) == 1:  # an optional entry
                    assert isinstance(kv[0], Tree)
                    opt_keys.append(len(entries))
                    kv = kv[0].children
                entries.append((self.conv(kv[0], d), self.conv(kv[1], d)))
            return ast.MapLit(_pos(t), tuple(entries), tuple(opt_keys))
        if data == "member_opt_dot":
            operand, name = ch
            assert isinstance(name, Token)
            return ast.Call(
                _pos(name) - 2, OPT_SELECT, None,
                (self.conv(operand, d), ast.Const(_pos(name), str(name))),
            )
        if data == "member_opt_index":
            return ast.Call(
                self._op_pos("[", ch[0], ch[1]), OPT_INDEX, None,
                (self.conv(ch[0], d), self.conv(ch[1], d)),
            )
        raise CELCompileError(
            f"syntax error: unsupported construct {data}", _pos(t)
        )  # pragma: no cover

    def _unary(self, t: Tree[Token], depth: int) -> ast.Expr:
        """A run of ``!`` or of ``-`` as cel-go reads it: an even run cancels out (``!!x``
        is ``x``), an odd run is one operator; a single ``-`` before a number is the
        literal's sign (``-5``, ``- 5``). The lexer may have put the last minus of a run
        into the literal (``--5`` is ``-`` and ``-5``): it counts as part of the run, and
        the literal's own range then applies (``--9223372036854775808`` is invalid)."""
        op_tree = t.children[0]
        assert isinstance(op_tree, Tree)
        kind = op_tree.data
        op = "!" if kind == "unary_not" else "-"
        run = 0
        node: Tree[Token] | Token = t
        while (
            isinstance(node, Tree)
            and node.data == "unary"
            and len(node.children) == 2
            and isinstance(node.children[0], Tree)
            and node.children[0].data == kind
        ):
            run += 1
            node = node.children[1]
        if depth + 1 > MAX_NESTING_DEPTH:
            raise self._too_deep(t)
        if op == "-":
            lit = _numeric_literal(node)
            if lit is not None:
                text = str(lit)
                if text.startswith("-"):  # the lexer's sign: one more minus in the run
                    run += 1
                    text = text[1:]
                if run == 1:  # a negative literal
                    signed = Token.new_borrow_pos(lit.type, "-" + text, lit)
                    return ast.Const(_pos(t), _literal(signed))
                body = Token.new_borrow_pos(lit.type, text, lit)
                body.start_pos = _pos(lit) + len(str(lit)) - len(text)
                inner: ast.Expr = ast.Const(body.start_pos, _literal(body))
                return inner if run % 2 == 0 else ast.Unary(_pos(t), "-", inner)
        inner = self.conv(node, depth + 1)
        return inner if run % 2 == 0 else ast.Unary(_pos(t), op, inner)

    def _args(self, exprlist: Tree[Token] | Token | None, depth: int) -> tuple[ast.Expr, ...]:
        if exprlist is None:
            return ()
        assert isinstance(exprlist, Tree)
        return tuple(self.conv(c, depth) for c in exprlist.children)

    def _logical(self, t: Tree[Token], data: str, depth: int) -> ast.Expr:
        # Left-recursive chain a || b || c: collect the operands iteratively,
        # then build a balanced tree so nesting grows with log2(n).
        terms: list[Tree[Token] | Token] = []
        node: Tree[Token] | Token = t
        while isinstance(node, Tree) and node.data == data and len(node.children) == 2:
            terms.append(node.children[1])
            node = node.children[0]
        terms.append(node)
        terms.reverse()
        levels = math.ceil(math.log2(len(terms)))
        if depth + levels > MAX_NESTING_DEPTH:
            raise self._too_deep(t)
        sub = depth + levels + 1
        conv_terms = [self.conv(x, sub) for x in terms]
        positions = [
            self._op_pos("||" if data == "conditionalor" else "&&", terms[i], terms[i + 1])
            for i in range(len(terms) - 1)
        ]
        node_cls = ast.Or if data == "conditionalor" else ast.And

        def build(lo: int, hi: int) -> ast.Expr:
            # terms[lo..hi] inclusive; same split as cel-go's balancer
            if lo == hi:
                return conv_terms[lo]
            mid = (lo + hi + 1) // 2  # operator between terms[mid-1] and terms[mid]
            return node_cls(positions[mid - 1], build(lo, mid - 1), build(mid, hi))

        return build(0, len(conv_terms) - 1)

    def _member_call(
        self, pos: int, target: ast.Expr, name: str, args: tuple[ast.Expr, ...], tok: Token
    ) -> ast.Expr:
        if isinstance(target, ast.Ident) and target.name == "cel" and name == "bind":
            return self._bind(pos, args)
        macro2 = MACROS2.get((name, len(args)))
        if macro2 is not None:
            return self._two_var(pos, target, name, macro2, args)
        if name == "sortBy" and len(args) == 2:
            return expand_sort_by(pos, target, args)
        macro = MACROS.get((name, len(args)))
        if macro is None:
            if isinstance(target, ast.Ident) and (
                target.name in NAMESPACES | LIB_NAMESPACES or target.name in OPT_NAMESPACES
            ):
                # a namespaced function of an extension library: sets.contains(a, b)
                return ast.Call(pos, f"{target.name}.{name}", None, args)
            return ast.Call(pos, name, target, args)
        var = args[0]
        if not isinstance(var, ast.Ident):
            raise CELCompileError(f"{name}() macro: argument must be a simple name", var.pos)
        if macro == ast.MAP:
            return ast.Comprehension(pos, macro, target, var.name, None, args[1])
        if macro == ast.MAP_FILTER:
            return ast.Comprehension(pos, macro, target, var.name, args[1], args[2])
        return ast.Comprehension(pos, macro, target, var.name, args[1], None)

    @staticmethod
    def _bind(pos: int, args: tuple[ast.Expr, ...]) -> ast.Expr:
        """``cel.bind(v, init, expr)``: ``expr`` with ``v`` bound to ``init``, evaluated once."""
        if len(args) != 3:
            raise CELCompileError("cel.bind() macro: expects 3 arguments", pos)
        var = args[0]
        if not isinstance(var, ast.Ident):
            raise CELCompileError("cel.bind() macro: argument must be a simple name", var.pos)
        return ast.Comprehension(pos, ast.BIND, args[1], var.name, None, args[2])

    @staticmethod
    def _two_var(
        pos: int, target: ast.Expr, name: str, macro: str, args: tuple[ast.Expr, ...]
    ) -> ast.Expr:
        v1, v2 = args[0], args[1]
        for v in (v1, v2):
            if not isinstance(v, ast.Ident):
                raise CELCompileError(f"{name}() macro: argument must be a simple name", v.pos)
        assert isinstance(v1, ast.Ident) and isinstance(v2, ast.Ident)
        if v1.name == v2.name:
            raise CELCompileError(
                f"{name}() macro: duplicate variable name '{v1.name}'", v2.pos
            )
        if macro in (ast.ALL, ast.EXISTS, ast.EXISTS_ONE):
            pred, transform = args[2], None
        elif len(args) == 4:
            pred, transform = args[2], args[3]
        else:
            pred, transform = None, args[2]
        return ast.Comprehension(pos, macro, target, v1.name, pred, transform, v2.name)


# -- literals -------------------------------------------------------------

_SIMPLE_ESCAPES: Final = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "`": "`",
    "?": "?",
}
_HEX: Final = frozenset("0123456789abcdefABCDEF")


def _literal(tok: Token) -> object:
    kind = tok.type
    text = str(tok)
    pos = _pos(tok)
    if kind == "BOOL_LIT":
        return text == "true"
    if kind == "NULL_LIT":
        return None
    if kind == "INT_LIT":
        value = _parse_int(text)
        if not INT64_MIN <= value <= INT64_MAX:
            raise CELCompileError(f"invalid int literal: {text} is out of range", pos)
        return value
    if kind == "UINT_LIT":
        body = text[:-1]
        value = _parse_int(body)
        if body.startswith("-") or not 0 <= value <= UINT64_MAX:
            raise CELCompileError(f"invalid uint literal: {text}", pos)
        return UInt(value)
    if kind == "FLOAT_LIT":
        dot = text.find(".")
        if dot >= 0 and (dot + 1 >= len(text) or not text[dot + 1].isdigit()):
            raise CELCompileError(f"invalid double literal: {text}", pos)
        value_f = float(text)
        if math.isinf(value_f):
            raise CELCompileError(f"invalid double literal: {text} is out of range", pos)
        return value_f
    if kind in ("STRING_LIT", "MLSTRING_LIT"):
        return _decode_string(text, pos, as_bytes=False)
    if kind == "BYTES_LIT":
        return _decode_string(text[1:], pos + 1, as_bytes=True)
    raise CELCompileError(f"syntax error: unknown literal {text!r}", pos)  # pragma: no cover


def _parse_int(text: str) -> int:
    neg = text.startswith("-")
    body = text[1:] if neg else text
    value = int(body[2:], 16) if body[:2].lower() == "0x" else int(body, 10)
    return -value if neg else value


def _decode_string(text: str, pos: int, *, as_bytes: bool) -> str | bytes:
    raw = text[0] in "rR"
    if raw:
        text = text[1:]
        pos += 1
    quote = text[:3] if text[:3] in ('"""', "'''") else text[0]
    body = text[len(quote) : len(text) - len(quote)]
    body_pos = pos + len(quote)
    if raw:
        return body.encode("utf-8") if as_bytes else body
    out_s: list[str] = []
    out_b = bytearray()
    i = 0
    n = len(body)

    def emit_char(c: str) -> None:
        if as_bytes:
            out_b.extend(c.encode("utf-8", "surrogatepass"))
        else:
            out_s.append(c)

    def emit_code(code: int) -> None:
        """A \\x or octal escape: one byte in a bytes literal, that code point in a string."""
        if as_bytes:
            out_b.append(code)
        else:
            out_s.append(chr(code))

    while i < n:
        c = body[i]
        if c != "\\":
            emit_char(c)
            i += 1
            continue
        if i + 1 >= n:
            raise CELCompileError("invalid escape sequence at end of string", body_pos + i)
        e = body[i + 1]
        if e in _SIMPLE_ESCAPES:
            emit_char(_SIMPLE_ESCAPES[e])
            i += 2
            continue
        if e in "xX":
            digits = body[i + 2 : i + 4]
            if len(digits) != 2 or not set(digits) <= _HEX:
                raise CELCompileError("invalid \\x escape sequence", body_pos + i)
            emit_code(int(digits, 16))
            i += 4
            continue
        if e in "uU":
            width = 4 if e == "u" else 8
            digits = body[i + 2 : i + 2 + width]
            if as_bytes:
                raise CELCompileError(
                    f"\\{e} escapes are not allowed in bytes literals", body_pos + i
                )
            if len(digits) != width or not set(digits) <= _HEX:
                raise CELCompileError(f"invalid \\{e} escape sequence", body_pos + i)
            code = int(digits, 16)
            if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
                raise CELCompileError(
                    f"invalid unicode code point in escape: {digits}", body_pos + i
                )
            out_s.append(chr(code))
            i += 2 + width
            continue
        if e in "0123":
            digits = body[i + 1 : i + 4]
            if len(digits) != 3 or not set(digits) <= set("01234567"):
                raise CELCompileError("invalid octal escape sequence", body_pos + i)
            emit_code(int(digits, 8))
            i += 4
            continue
        raise CELCompileError(f"invalid escape sequence \\{e}", body_pos + i)
    if as_bytes:
        return bytes(out_b)
    return "".join(out_s)
