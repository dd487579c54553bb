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
from collections.abc import Iterator
from typing import Any, Final, Generic, TypeVar

from dra_affinity.api.meta import K8sModel, assemble
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


_refcount = sys.getrefcount


def _own_refs() -> int:
    """What ``_refcount`` says, inside ``_Codec._children``'s loop, of an item that only
    its container references: the container, the loop variable and the call's argument
    (measured the same way, so it holds on any interpreter version)."""
    for x in [object()]:
        return _refcount(x)
    raise AssertionError("unreachable")


#: References an unshared part of an object has while it is being encoded.
_OWN_REFS: Final = _own_refs()


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
        # Only the whole shape is interned: it is hashed once, in C, where interning each
        # part would hash every part again at every level above it.
        return Compact(self._intern(self._shape(obj, values)), tuple(values))

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
            return (_MODEL, t, tuple(d), frozenset(v.__pydantic_fields_set__),
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
            elif _refcount(x) > _OWN_REFS:
                values.append(x)
                add(_LEAF)
            else:
                add(self._shape(x, values))
        return tuple(out)

    def decode(self, c: Compact) -> Any:
        return _build(c.shape, iter(c.values))


def _build(shape: Any, values: Iterator[Any]) -> Any:
    if shape == _LEAF:
        return next(values)
    if shape == _NONE:
        return None
    tag = shape[0]
    if tag == _MODEL:
        _, cls, keys, fields_set, children = shape
        return assemble(cls, {k: _build(s, values) for k, s in zip(keys, children, strict=True)},
                        set(fields_set))
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
