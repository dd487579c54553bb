"""The in-memory cluster's object store: typed objects while in use, compact at rest.

A simulated cluster of thousands of nodes holds ~10^5 pods and claims. As pydantic
objects each pod and claim costs about 15 KB (a model's ``__dict__`` and its field set
for each of ~20 sub-objects, plus every empty list and ``None`` of the API types). Of
those, the scheduler and the controllers touch only a few at a time: the pod being
scheduled, its claims, the object being written. So a store keeps the most recently
used objects of a kind as they are (typed, returned as is) and the rest in a compact
form: the object's *shape* (model classes, field names, set fields, list lengths, dict
keys, where ``None`` stands), shared by every object of that shape, and a flat tuple of
its other leaf values. Reading a compact object materialises an equal typed object
(``==``, the same ``model_dump`` with ``exclude_unset``), and it becomes recently used.

Objects read from a store, typed or materialised, must not be mutated (as with an
informer's cache); writes replace whole objects. Decisions and figures:
``docs/decisions.md`` ("Cluster store: compact at rest").
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Callable, Iterator
from operator import itemgetter
from typing import Any, Final, Generic, TypeVar

from dra_affinity.api.meta import K8sModel
from dra_affinity.api.quantity import Quantity

T = TypeVar("T", bound=K8sModel)

#: Typed objects kept per store by default: far more than one scheduling cycle touches,
#: far fewer than a large cluster holds.
DEFAULT_HOT = 64

#: Shapes kept for sharing; past this many distinct shapes (only adversarial input has
#: that many: shapes hold no names or values) the table starts afresh, so it is bounded.
MAX_SHAPES = 1 << 16

_LEAF: Final = 0  # a value taken from the flat tuple
_NONE: Final = 1  # None, kept in the shape
_MODEL: Final = 2
_LIST: Final = 3
_DICT: Final = 4
_SCALARS = frozenset({str, int, float, bool, Quantity})
_EMPTY_LIST: Final = (_LIST, ())
_EMPTY_DICT: Final = (_DICT, (), ())


def _own_refs() -> int:
    """What ``sys.getrefcount`` says, inside ``_Codec._children``'s loop, of an item that only
    its container references: the container, the loop variable and the call's argument
    (measured the same way, so it holds on any interpreter version)."""
    for x in [object()]:
        return sys.getrefcount(x)
    raise AssertionError("unreachable")


def _field_refs() -> int:
    """The same for a matcher (``_compile``), which takes a part from a tuple of its
    container's values: the container, that tuple, the local and the argument."""
    d = {"part": object()}
    vals = tuple(d.values())
    x = vals[0]
    return sys.getrefcount(x)


#: References an unshared part of an object has while it is being encoded.
_OWN_REFS: Final = _own_refs()
_FIELD_REFS: Final = _field_refs()


class Compact:
    """An object at rest: its shared shape and its own leaf values."""

    __slots__ = ("shape", "values")

    def __init__(self, shape: tuple[Any, ...], values: tuple[Any, ...]) -> None:
        self.shape = shape
        self.values = values


class _Codec:
    """Encodes objects into :class:`Compact` form and back; shares equal shapes."""

    def __init__(self) -> None:
        self._shapes: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        # By kind: the last shape made, and its matcher once it was made twice in a row.
        self._last: dict[type, tuple[tuple[Any, ...], _Fits | None]] = {}

    def _intern(self, shape: tuple[Any, ...]) -> tuple[Any, ...]:
        got = self._shapes.get(shape)
        if got is not None:
            return got
        if len(self._shapes) >= MAX_SHAPES:
            self._shapes.clear()
        self._shapes[shape] = shape
        return shape

    def encode(self, obj: K8sModel) -> Compact:
        values: list[Any] = []
        # Objects of a kind mostly have the shape the one before had. A shape made twice
        # in a row gets a matcher (see _compile) that checks an object has it while
        # taking its values, mostly in C, and makes no shape.
        last = self._last.get(type(obj))
        if last is not None:
            shape, fits = last
            if fits is not None:
                if fits(obj, values):
                    return Compact(shape, tuple(values))
                values.clear()
        # Only the whole shape is interned: it is hashed once, in C, where interning each
        # part would hash every part again at every level above it.
        new = self._intern(self._shape(obj, values))
        if last is None or last[0] is not new:
            self._last[type(obj)] = (new, None)
        elif last[1] is None:
            self._last[type(obj)] = (new, _compile(new, obj))
        return Compact(new, tuple(values))

    def _shape(self, v: Any, values: list[Any]) -> Any:
        t = type(v)
        if t is list:
            return (_LIST, self._children(v, values)) if v else _EMPTY_LIST
        if t is dict:
            if not v:
                return _EMPTY_DICT
            return (_DICT, tuple(v), self._children(v.values(), values))
        if isinstance(v, K8sModel):
            d = v.__dict__
            return (_MODEL, t, tuple(d), frozenset(v.model_fields_set),
                    self._children(d.values(), values))
        # A scalar, or anything else an API type might hold one day: kept whole, as a leaf
        # (it must be immutable: every leaf of a stored object is shared with readers).
        values.append(v)
        return _LEAF

    def _children(self, items: Any, values: list[Any]) -> tuple[Any, ...]:
        """Shapes of a container's items; scalars, None and empty containers inline
        (most fields of an API object are one of those). A part that something else
        references too (another stored object made copy on write, the prototype a
        client copied it from, a reader) is kept as it is, as one leaf: encoding it would
        cost time and save no memory, since the other holder keeps it alive anyway."""
        out: list[Any] = []
        add = out.append
        for x in items:
            if x is None:
                add(_NONE)
            elif type(x) in _SCALARS:
                values.append(x)
                add(_LEAF)
            elif not x and type(x) is list:
                add(_EMPTY_LIST)
            elif sys.getrefcount(x) > _OWN_REFS:
                values.append(x)
                add(_LEAF)
            else:
                add(self._shape(x, values))
        return tuple(out)

    def decode(self, c: Compact) -> Any:
        return _build(c.shape, iter(c.values))


# ------------------------------------------------------------------ shape matchers
#: ``fits(obj, values)``: whether ``obj`` has the matcher's shape, exactly as
#: ``_Codec._shape`` would make it; if so its leaf values are appended to ``values`` in
#: the order ``_shape`` appends them (if not, ``values`` holds some of them).
_Fits = Callable[[Any, list[Any]], bool]
_Run = Callable[[tuple[Any, ...]], tuple[Any, ...]]

_SHARED = 0  # a part kept whole (a leaf that is not a scalar): it must still be shared
_FIXED = 1  # the empty list: the same shape whoever else holds it


def _run(positions: list[int]) -> _Run | None:
    """What takes the values at ``positions`` of a tuple, as a tuple, in C."""
    if not positions:
        return None
    if positions[-1] - positions[0] == len(positions) - 1:
        return itemgetter(slice(positions[0], positions[-1] + 1))
    return itemgetter(*positions)  # two or more positions: a tuple as well


def _compile(shape: Any, exemplar: Any) -> _Fits:
    """A matcher for ``shape`` (a model's, a list's or a dict's), made from an object of
    that shape: which leaves are scalars (taken in runs, type-checked in C) and which are
    parts kept whole (checked one by one for still being shared) follows from it."""
    tag = shape[0]
    if tag == _MODEL:
        _, cls, keys, fields_set, children = shape
        return _compile_fields(children, tuple(exemplar.__dict__.values()), cls, keys, fields_set)
    if tag == _LIST:
        return _compile_fields(shape[1], tuple(exemplar), list, None, None)
    return _compile_fields(shape[2], tuple(exemplar.values()), dict, shape[1], None)


def _compile_fields(children: tuple[Any, ...], example: tuple[Any, ...], cls: Any,
                    keys: tuple[str, ...] | None, fields_set: frozenset[str] | None) -> _Fits:
    nones: list[int] = []
    steps: list[tuple[_Run | None, int, Any]] = []
    run: list[int] = []
    for pos, (part, x) in enumerate(zip(children, example, strict=True)):
        if part is _NONE:
            nones.append(pos)
        elif part is _LEAF and type(x) in _SCALARS:
            run.append(pos)
        else:
            sub = _SHARED if part is _LEAF else _FIXED if part is _EMPTY_LIST else (
                part, _compile(part, x) if part is not _EMPTY_DICT else None)
            steps.append((_run(run), pos, sub))
            run = []
    tail = _run(run)
    none_at = _run(nones)
    n = len(children)
    is_model = cls is not list and cls is not dict
    refs = _FIELD_REFS

    def fits(obj: Any, values: list[Any]) -> bool:
        if type(obj) is not cls:
            return False
        if is_model:
            d = obj.__dict__
            if tuple(d) != keys or obj.model_fields_set != fields_set:
                return False
            vals = tuple(d.values())
        elif keys is None:
            if len(obj) != n:
                return False
            vals = tuple(obj)
        else:
            if tuple(obj) != keys:
                return False
            vals = tuple(obj.values())
        if none_at is not None and none_at(vals).count(None) != len(nones):
            return False
        extend = values.extend
        for get, pos, sub in steps:
            if get is not None:
                got = get(vals)
                if not _SCALARS.issuperset(map(type, got)):
                    return False
                extend(got)
            x = vals[pos]
            if sub is _SHARED:
                if x is None or (type(x) is list and not x) or (
                        type(x) not in _SCALARS and sys.getrefcount(x) <= refs):
                    return False
                values.append(x)
            elif sub is _FIXED:
                if type(x) is not list or x:
                    return False
            else:
                if x is None or type(x) in _SCALARS or sys.getrefcount(x) > refs:
                    return False  # not a part, or shared: a leaf in a new shape
                _, match = sub
                if match is None:  # the empty dict
                    if type(x) is not dict or x:
                        return False
                elif not match(x, values):
                    return False
        if tail is not None:
            got = tail(vals)
            if not _SCALARS.issuperset(map(type, got)):
                return False
            extend(got)
        return True

    return fits


def _build(shape: Any, values: Iterator[Any]) -> Any:
    if shape == _LEAF:
        return next(values)
    if shape == _NONE:
        return None
    tag = shape[0]
    if tag == _MODEL:
        _, cls, keys, fields_set, children = shape
        return cls.model_construct(set(fields_set), **{
            k: _build(s, values) for k, s in zip(keys, children, strict=True)})
    if tag == _LIST:
        return [_build(s, values) for s in shape[1]]
    return {k: _build(s, values) for k, s in zip(shape[1], shape[2], strict=True)}


class ObjectStore(Generic[T]):
    """Objects of one kind by key, in insertion order (an update keeps the position).

    The ``hot`` most recently used are kept typed; older ones are compact until read.
    ``hot=None`` keeps every object typed (nothing is ever encoded)."""

    def __init__(self, hot: int | None = DEFAULT_HOT, codec: _Codec | None = None) -> None:
        if hot is not None and hot < 1:
            raise ValueError(f"hot must be at least 1 (or None), got {hot}")
        self._hot = hot
        self._codec = codec or _Codec()
        self._objects: dict[str, T | Compact] = {}
        self._recent: OrderedDict[str, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._objects)

    def __contains__(self, key: object) -> bool:
        return key in self._objects

    def compact_count(self) -> int:
        """How many objects are at rest in compact form (for tests and figures)."""
        return len(self._objects) - len(self._recent) if self._hot is not None else 0

    def get(self, key: str) -> T | None:
        v = self._objects.get(key)
        if v is None:
            return None
        if type(v) is Compact:
            obj: T = self._codec.decode(v)
            self._objects[key] = obj
            self._used(key)
            return obj
        if self._hot is not None:
            self._recent.move_to_end(key)
        return v  # type: ignore[return-value]

    def put(self, key: str, obj: T) -> None:
        self._objects[key] = obj
        self._used(key)

    def pop(self, key: str) -> T | None:
        v = self._objects.pop(key, None)
        if v is None:
            return None
        if self._hot is not None:
            self._recent.pop(key, None)
        return self._codec.decode(v) if type(v) is Compact else v  # type: ignore[return-value]

    def keys(self) -> Iterator[str]:
        return iter(list(self._objects))

    def items(self) -> Iterator[tuple[str, T]]:
        """Every object in insertion order; compact ones are materialised for the
        caller without becoming recently used (a full listing must not flush the
        objects in use)."""
        decode = self._codec.decode
        for k, v in list(self._objects.items()):
            yield k, (decode(v) if type(v) is Compact else v)  # type: ignore[misc]

    def values(self) -> Iterator[T]:
        for _, v in self.items():
            yield v

    def _used(self, key: str) -> None:
        if self._hot is None:
            return
        recent = self._recent
        recent[key] = None
        recent.move_to_end(key)
        while len(recent) > self._hot:
            old, _ = recent.popitem(last=False)
            v = self._objects[old]
            if type(v) is not Compact:
                self._objects[old] = self._codec.encode(v)  # type: ignore[arg-type]
