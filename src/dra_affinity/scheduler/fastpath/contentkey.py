"""Extraction outcomes shared across cycles by content: a fast path.

Extraction depends only on the extractor set and the content of the configs in
scope, never on the claim's name or the device. Pods stamped from one
ResourceClaimTemplate carry equal configs, so after the first, their
extractions cost one hash lookup. Successful outcomes are shared; outcomes that
carry a message naming the claim (errors, no keys) are not, so diagnostics stay
exact. Off (``FastPaths.extraction_cache=False``), every cycle evaluates.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from operator import itemgetter
from typing import Any, NamedTuple

from dra_affinity.api.resource import DeviceClass, ResourceClaim
from dra_affinity.cel import ExtractionResult, OutcomeKind
from dra_affinity.cel.extract import object_fields
from dra_affinity.structured.extraction import in_scope_configs
from dra_affinity.structured.model import PoolInfo


class ContentCache:
    """An :class:`~dra_affinity.structured.extraction.ExtractionCache` keyed by
    :func:`content_key`, bounded at :data:`SHARED_MAX` entries (oldest dropped first)."""

    def __init__(self) -> None:
        self.results: dict[Hashable, ExtractionResult] = {}

    @staticmethod
    def key(pool: PoolInfo, claim: ResourceClaim, request: str,
            device_class: DeviceClass | None) -> Hashable | None:
        return content_key(pool, claim, request, device_class)

    def cheap_get(self, pool: PoolInfo, claim: ResourceClaim, request: str,
                  device_class: DeviceClass | None) -> ExtractionResult | None:
        """The outcome when the pool's extractors read only named fields of ``object``
        (the key is then those fields' values, one C call per config) and it is known;
        None otherwise (unknown, or the key may walk whole configs)."""
        token = pool.extraction_token
        proj = _PROJECTIONS.get(token)
        if proj is None:
            proj = _projection(token, pool)
        if proj.fields is None:
            return None
        # (A None key, parameters too unusual to share, is never stored: get gives None.)
        return self.get(_content_key(pool.driver, token, proj, claim, request, device_class))

    def get(self, key: Hashable) -> ExtractionResult | None:
        return self.results.get(key)

    def put(self, key: Hashable, result: ExtractionResult) -> None:
        if result.kind is not OutcomeKind.OK:
            return
        results = self.results
        if len(results) >= SHARED_MAX:
            results.pop(next(iter(results)))
        results[key] = result


SHARED_MAX = 4096


def content_key(pool: PoolInfo, claim: ResourceClaim, request: str,
                device_class: DeviceClass | None) -> tuple[object, ...] | None:
    """The extractor set and the content of the configs in scope, as one hashable key
    (None: the parameters are unusual, nothing is shared).

    When the extractors only read named top-level fields of ``object``
    (:func:`object_fields`), a config's content is just those fields: configs that
    differ elsewhere (an MTU, a label) extract the same keys, and hashing a few
    strings is cheaper than the whole config. The configs are those
    :func:`~dra_affinity.structured.extraction.in_scope_configs` gives extraction (this
    runs for every scheduling cycle, the labelled configs only on a miss)."""
    token = pool.extraction_token
    proj = _PROJECTIONS.get(token)
    if proj is None:
        proj = _projection(token, pool)
    return _content_key(pool.driver, token, proj, claim, request, device_class)


def _content_key(driver: str, token: str, proj: _Projection, claim: ResourceClaim,
                 request: str, device_class: DeviceClass | None) -> tuple[object, ...] | None:
    """:func:`content_key` once the projection is known."""
    parts: list[object] = [token]
    try:
        parts += [_image(params, proj)
                  for _, _, params in in_scope_configs(claim, request, driver, device_class)]
    except (TypeError, RecursionError):
        return None
    return tuple(parts)


class _Projection(NamedTuple):
    """What of a config an extractor set reads: ``fields`` (None: all of it) and a
    C-level getter of their values (None when there are no fields)."""

    fields: tuple[str, ...] | None
    get: Callable[[dict[str, Any]], Any] | None  # a tuple when there are several fields


# By extraction token, worked out once per extractor set.
_PROJECTIONS: dict[str, _Projection] = {}
# Images under a projection: the fields' value when there is one field and it is a
# string, or the tuple of their values when there are several and all are strings
# (the common case: one C call to read them, a few string hashes); otherwise a tuple
# marked _PROJECTED (absent fields marked _ABSENT, other values frozen), or the whole
# content marked _WHOLE when the parameters are not a map. A marked tuple starts with
# a tuple and a plain one with a string, so the shapes never equal each other.
_PROJECTED = ("projected",)
_WHOLE = ("whole",)
_ABSENT = ("absent",)


def _projection(token: str, pool: PoolInfo) -> _Projection:
    """Work out (once per extractor set) and remember which fields the set reads."""
    fields = object_fields([e.expression for e in pool.extractors])
    proj = _Projection(fields, itemgetter(*fields) if fields else None)
    if len(_PROJECTIONS) >= SHARED_MAX:
        _PROJECTIONS.clear()
    _PROJECTIONS[token] = proj
    return proj


def _image(params: Any, proj: _Projection) -> Any:
    """What of ``params`` an extraction under this projection can depend on."""
    fields, get = proj
    if fields is None:
        return _freeze(params)
    if type(params) is not dict:
        return (_WHOLE, _freeze(params))
    if get is not None:
        try:
            img = get(params)  # KeyError: a field is absent
            if len(fields) > 1:
                "".join(img)  # TypeError unless every value is a string
                return img
            if type(img) is str:
                return img
        except (KeyError, TypeError):
            pass
    return (_PROJECTED, *(_freeze(params[f]) if f in params else _ABSENT for f in fields))


def _freeze(v: Any) -> Any:
    """A hashable image of parameters in which scalars carry their type (``1``, ``1.0``
    and ``true`` are equal in Python but not to an extractor, nor are ``0.0`` and
    ``-0.0``); object keys are sorted so key order does not matter. Strings stand for
    themselves, every other value is a tuple, so the image is unambiguous."""
    t = type(v)
    if t is str:
        return v
    if t is dict:
        items = []
        for k, x in v.items():
            if type(k) is not str:
                raise TypeError("non-string object key")
            # scalars inline: flat configs are the common case
            tx = type(x)
            if tx is str:
                items.append((k, x))
            elif tx is int or tx is bool or x is None:
                items.append((k, (tx, x)))
            else:
                items.append((k, _freeze(x)))
        items.sort()
        return (dict, tuple(items))
    if t is list:
        return (list, tuple([_freeze(x) for x in v]))
    if t is float:
        return (float, repr(v))  # repr keeps -0.0 apart from 0.0
    if t is int or t is bool or v is None:
        return (t, v)
    raise TypeError(f"unexpected {t.__name__} in parameters")
