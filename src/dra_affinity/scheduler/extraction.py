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

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from dra_affinity.allocator.allocator import ClaimSpec, RequestSpec
from dra_affinity.allocator.model import PoolInfo
from dra_affinity.api.resource import DeviceClass, ResourceClaim
from dra_affinity.cel import ConfigObject, ExtractionResult, OutcomeKind, extract
from dra_affinity.cel.extract import object_fields


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
    fields = _PROJECTIONS.get(token, _UNKNOWN)
    if fields is _UNKNOWN:
        fields = _projection(token, pool)
    parts: list[object] = [token]
    try:
        if device_class is not None:
            for cfg in device_class.spec.config:
                op = cfg.opaque
                if op is not None and op.driver == driver:
                    parts.append(_image(op.parameters, fields))
        for ccfg in claim.spec.devices.config:
            op = ccfg.opaque
            if op is None or op.driver != driver:
                continue
            reqs = ccfg.requests
            if reqs and request not in reqs and not ("/" in request and in_scope(reqs, request)):
                continue
            parts.append(_image(op.parameters, fields))
    except (TypeError, RecursionError):
        return None
    return tuple(parts)


# Fields the extractor set reads, by extraction token (None: the whole config counts).
_PROJECTIONS: dict[str, tuple[str, ...] | None] = {}
# Images under a projection: the fields' values joined by _SEP when all are strings
# without it (one string to hash and compare), else a tuple marked _PROJECTED, or
# the whole content marked _WHOLE when the parameters are not a map. The three
# shapes never equal each other.
_SEP = "\x00"
_PROJECTED = ("projected",)
_WHOLE = ("whole",)
_ABSENT = ("absent",)
_UNKNOWN: Any = object()


def _projection(token: str, pool: PoolInfo) -> tuple[str, ...] | None:
    """Work out (once per extractor set) and remember which fields the set reads."""
    fields = object_fields([e.expression for e in pool.extractors])
    if len(_PROJECTIONS) >= SHARED_MAX:
        _PROJECTIONS.clear()
    _PROJECTIONS[token] = fields
    return fields


def _image(params: Any, fields: tuple[str, ...] | None) -> Any:
    """What of ``params`` an extraction with these ``fields`` can depend on."""
    if fields is None:
        return _freeze(params)
    if type(params) is not dict:
        return (_WHOLE, _freeze(params))
    # The common case: every field a string, joined (join raises on an absent or
    # non-string field; a value holding the separator itself is not joined).
    get: Any = params.get
    try:
        joined = _SEP.join(map(get, fields))
    except TypeError:
        pass
    else:
        if fields and joined.count(_SEP) == len(fields) - 1:
            return joined
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
