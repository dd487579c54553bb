"""The DRA selector activation: ``device.attributes`` and ``device.capacity`` by domain.

Kubernetes' selector activation answers an *empty map* for a domain the
device does not publish (its mapper's ``Find`` never fails), so a selector
written for one driver, such as ``device.attributes['gpu.example.com'].model
== 'a100'``, is a missing-attribute error on another driver's device rather
than a missing-domain error, and ``has(device.attributes['x.com'].y)`` is
simply false. ``'x.com' in device.attributes`` still tests real membership.
:class:`DomainMap` gives a mapping exactly that behaviour; the selector
environment wraps plain mappings in it before evaluation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .values import CelMap

_EMPTY: Final = CelMap()
_EMPTY.freeze()


class DomainMap(dict):  # type: ignore[type-arg]
    """A domain -> (name -> value) map whose unknown domains read as an empty, read-only map."""

    __slots__ = ()

    def __missing__(self, key: object) -> Any:
        if type(key) is str:
            return _EMPTY
        raise KeyError(key)


def adapt_device(device: object) -> object:
    """``device`` with its ``attributes`` and ``capacity`` as :class:`DomainMap` (cheap when they are)."""
    if not isinstance(device, Mapping):
        return device
    attrs = device.get("attributes")
    caps = device.get("capacity")
    if type(attrs) is DomainMap and type(caps) is DomainMap:
        return device
    out = dict(device)
    if isinstance(attrs, Mapping) and type(attrs) is not DomainMap:
        out["attributes"] = DomainMap(attrs)
    if isinstance(caps, Mapping) and type(caps) is not DomainMap:
        out["capacity"] = DomainMap(caps)
    return out
