"""Plain attribute reads for API models on CPython 3.11.

pydantic's ``BaseModel`` defines ``__getattr__``: a fallback for private attributes and
extra fields, which API models have neither of. Python calls a class's ``__getattr__``
only once normal lookup has failed, but on CPython 3.11 its mere presence puts a
wrapper in the type's attribute-lookup slot (``tp_getattro``), and the interpreter does
not specialise attribute reads on such types: every ``claim.spec`` walks the generic
path through the wrapper, about three times the cost of a specialised read
(``docs/decisions.md``, "Attribute reads of API
objects"). CPython 3.12 specialises these reads itself.

So on CPython before 3.12, each API model class gets the generic lookup back in its
slot, when it is safe: the class's ``__getattr__`` is pydantic's own fallback, it has
no private attributes and no extra fields. For such a class the fallback can only
raise ``AttributeError``, which the generic lookup raises itself. The slot's place in
the type object is checked on ``object`` and on a class with a ``__getattr__`` before
anything is written; where the check fails (another interpreter, a debug build), or
on 3.12 and later, nothing is changed.
"""

from __future__ import annotations

import ctypes
import sys

from pydantic import BaseModel

# PyTypeObject fields before tp_getattro, each pointer-sized: the object header
# (refcount, type, size), tp_name, tp_basicsize, tp_itemsize, tp_dealloc,
# tp_vectorcall_offset, tp_getattr, tp_setattr, tp_as_async, tp_repr, tp_as_number,
# tp_as_sequence, tp_as_mapping, tp_hash, tp_call, tp_str.
_FIELDS_BEFORE_GETATTRO = 18


def _slot(cls: type) -> ctypes.c_void_p:
    assert _OFFSET is not None
    return ctypes.c_void_p.from_address(id(cls) + _OFFSET)


def _locate() -> tuple[int, int] | None:
    """(offset of tp_getattro, address of the generic lookup), or None where this
    interpreter's type objects are not laid out as checked (then nothing is written)."""
    if sys.implementation.name != "cpython" or sys.version_info >= (3, 12):
        return None
    generic = ctypes.cast(ctypes.pythonapi.PyObject_GenericGetAttr, ctypes.c_void_p).value
    offset = _FIELDS_BEFORE_GETATTRO * ctypes.sizeof(ctypes.c_void_p)

    class _Hooked:
        def __getattr__(self, name: str) -> object:
            raise AttributeError(name)

    def at(cls: type) -> int | None:
        return ctypes.c_void_p.from_address(id(cls) + offset).value

    if generic is None or at(object) != generic or at(_Hooked) in (None, generic):
        return None
    return offset, generic


_LOCATED = _locate()
_OFFSET = _LOCATED[0] if _LOCATED is not None else None
_GENERIC = _LOCATED[1] if _LOCATED is not None else None
_FALLBACK = BaseModel.__dict__.get("__getattr__")


def plain_reads_possible() -> bool:
    """Whether this interpreter gets plain attribute reads from :func:`use_plain_reads`
    (CPython before 3.12, with the type layout checked)."""
    return _LOCATED is not None and _FALLBACK is not None


def has_plain_reads(cls: type) -> bool:
    """Whether ``cls`` reads attributes through the generic lookup, with no wrapper
    (False where the slot was not located)."""
    return _LOCATED is not None and _slot(cls).value == _GENERIC


def use_plain_reads(cls: type[BaseModel]) -> bool:
    """Give ``cls`` the generic attribute lookup when that changes nothing but speed;
    returns whether it did."""
    if not plain_reads_possible():
        return False
    if getattr(cls, "__getattr__", None) is not _FALLBACK:
        return False  # the class (or a base of ours) has a __getattr__ of its own
    if getattr(cls, "__private_attributes__", None) or cls.model_config.get("extra") == "allow":
        return False  # the fallback has work to do
    _slot(cls).value = _GENERIC
    ctypes.pythonapi.PyType_Modified(ctypes.py_object(cls))
    return True
