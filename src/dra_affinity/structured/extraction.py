"""Which opaque configs are in scope for a request, and memoised extraction.

Scoping follows ``DeviceClaimConfiguration.requests``: no list means the
whole claim; a subrequest ``req/sub`` is in scope of a config naming ``req``
or ``req/sub``. DeviceClass configs of the request's class are in scope too
(the Kubernetes allocator hands them to the driver as ``FromClass``), first,
then the claim's (``FromClaim``). Configs for another driver are skipped: an
extractor describes its own driver's schema.

Extraction depends only on (claim, request, driver, extractor set), never on
the device, so it is evaluated once per scheduling cycle for each distinct
extractor set, however many devices and pools share that set.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, NamedTuple

from dra_affinity.api.resource import DeviceClass, ResourceClaim
from dra_affinity.cel import ConfigObject, ExtractionResult, OutcomeKind, extract
from dra_affinity.cel.extract import object_fields
from dra_affinity.structured.allocator import ClaimSpec, RequestSpec
from dra_affinity.structured.model import PoolInfo


def in_scope(config_requests: list[str], request: str) -> bool:
    if not config_requests:
        return True
    parent = request.split("/", 1)[0]
    return request in config_requests or parent in config_requests


def _in_scope_configs(claim: ResourceClaim, request: str, driver: str,
                     device_class: DeviceClass | None) -> Iterator[tuple[bool, int, Any]]:
    """(from the class?, index, parameters) of each opaque config in scope, class first."""
    if device_class is not None:
        for i, cfg in enumerate(device_class.spec.config):
            if cfg.opaque is not None and cfg.opaque.driver == driver:
                yield True, i, cfg.opaque.parameters
    for i, ccfg in enumerate(claim.spec.devices.config):
        op = ccfg.opaque
        if op is not None and op.driver == driver and in_scope(ccfg.requests, request):
            yield False, i, op.parameters


def scoped_configs(
    claim: ResourceClaim,
    request: str,
    driver: str,
    device_class: DeviceClass | None,
) -> list[ConfigObject]:
    """The opaque-config objects an extractor sees for this (sub)request and driver."""
    of_class = f"DeviceClass {device_class.name} spec.config" if device_class is not None else ""
    of_claim = f"ResourceClaim {claim.namespace}/{claim.name} spec.devices.config"
    return [ConfigObject(f"{of_class if from_class else of_claim}[{i}]", params)
            for from_class, i, params in _in_scope_configs(claim, request, driver, device_class)]


@dataclass
class ExtractionMemo:
    """Per-cycle memo of extraction results; counts real CEL evaluations."""

    claims: Mapping[str, ResourceClaim]
    classes: Mapping[str, DeviceClass]
    results: dict[tuple[str, str, str], ExtractionResult] = field(default_factory=dict)
    evaluations: int = 0
    # The scheduler's cross-cycle cache of successful extractions by content (or None).
    shared: dict[tuple[object, ...], ExtractionResult] | None = None

    def __call__(self, claim: ClaimSpec, alt: RequestSpec, pool: PoolInfo) -> ExtractionResult:
        key = (claim.key, alt.name, pool.extraction_token)
        res = self.results.get(key)
        if res is None:
            res = self.results[key] = self.evaluate(self.claims[claim.key], alt.name,
                                                    alt.class_name, pool)
        return res

    def preferred(self, claim: ClaimSpec, alt: RequestSpec,
                  pool: PoolInfo) -> tuple[tuple[str, str], ...] | None:
        """Values of the pool's preferred keys for this request (None: none extracted)."""
        key = (claim.key, alt.name, "preferred" + repr(
            (pool.driver, tuple((e.name, e.expression) for e in pool.preferred_extractors))))
        hit = self.results.get(key)
        if hit is None:
            configs = scoped_configs(self.claims[claim.key], alt.name, pool.driver,
                                     self.classes.get(alt.class_name))
            hit = extract(pool.preferred_extractors, configs)
            self.evaluations += hit.evaluations
            self.results[key] = hit
        return hit.keys if hit.kind is OutcomeKind.OK and hit.keys else None

    def evaluate(self, claim: ResourceClaim, request: str, class_name: str,
                 pool: PoolInfo) -> ExtractionResult:
        device_class = self.classes.get(class_name)
        # Successful extractions depend only on the extractors and the configs' content:
        # pods stamped from one template share them across cycles. Outcomes that carry
        # a message naming the claim (errors, no keys) are never shared.
        shared = self.shared
        ckey = content_key(pool, claim, request, device_class) if shared is not None else None
        if ckey is not None:
            hit = shared.get(ckey)  # type: ignore[union-attr]
            if hit is not None:
                return hit
        res = extract(pool.extractors, scoped_configs(claim, request, pool.driver, device_class))
        self.evaluations += res.evaluations
        if ckey is not None and shared is not None and res.kind is OutcomeKind.OK:
            if len(shared) >= SHARED_MAX:
                shared.pop(next(iter(shared)))
            shared[ckey] = res
        return res


SHARED_MAX = 4096


def content_key(pool: PoolInfo, claim: ResourceClaim, request: str,
                device_class: DeviceClass | None) -> tuple[object, ...] | None:
    """The extractor set and the content of the configs in scope, as one hashable key
    (None: the parameters are unusual, nothing is shared).

    When the extractors only read named top-level fields of ``object``
    (:func:`object_fields`), a config's content is just those fields: configs that
    differ elsewhere (an MTU, a label) extract the same keys, and hashing a few
    strings is cheaper than the whole config. The same walk as
    :func:`_in_scope_configs`, written out: this runs for every scheduling cycle,
    the labelled configs only on a miss."""
    driver = pool.driver
    token = pool.extraction_token
    proj = _PROJECTIONS.get(token)
    if proj is None:
        proj = _projection(token, pool)
    parts: list[object] = [token]
    try:
        if device_class is not None:
            for cfg in device_class.spec.config:
                op = cfg.opaque
                if op is not None and op.driver == driver:
                    parts.append(_image(op.parameters, proj))
        for ccfg in claim.spec.devices.config:
            op = ccfg.opaque
            if op is None or op.driver != driver:
                continue
            reqs = ccfg.requests
            if reqs and request not in reqs and not ("/" in request and in_scope(reqs, request)):
                continue
            parts.append(_image(op.parameters, proj))
    except (TypeError, RecursionError):
        return None
    return tuple(parts)


class _Projection(NamedTuple):
    """What of a config an extractor set reads: ``fields`` (None: all of it) and a
    C-level getter of their values (None when there are no fields)."""

    fields: tuple[str, ...] | None
    get: Callable[[dict[str, Any]], Any] | None


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
