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

One scheduling attempt has one CEL budget (:data:`ATTEMPT_CEL_MAX_COST`) across
all its extractions, every request of every claim against every pool: each
extraction runs under what its own budget and the attempt's remainder both allow,
so the CEL an attempt runs is bounded whatever the pod's claims and the cluster's
slices hold (docs/decisions.md, "Runtime cost budget").
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from dra_affinity.api.keys import key_of
from dra_affinity.api.resource import SHARING_AFFINITY_CEL_MAX_COST, DeviceClass, ResourceClaim
from dra_affinity.cel import ConfigObject, ExtractionResult, Extractor, OutcomeKind, extract

__all__ = [
    "ATTEMPT_CEL_MAX_COST",
    "ExtractionCache",
    "ExtractionMemo",
    "ExtractionResult",
    "identity_key",
    "in_scope",
    "scoped_configs",
]
from dra_affinity.structured.claims import ClaimSpec, RequestSpec
from dra_affinity.structured.model import PoolInfo


def in_scope(config_requests: list[str], request: str) -> bool:
    if not config_requests:
        return True
    parent = request.split("/", 1)[0]
    return request in config_requests or parent in config_requests


def in_scope_configs(claim: ResourceClaim, request: str, driver: str,
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
            for from_class, i, params in in_scope_configs(claim, request, driver, device_class)]


class ExtractionCache(Protocol):
    """Outcomes remembered across cycles by what they depend on (the extractor set and
    the content of the configs in scope), so a new claim with known content costs no
    CEL evaluation."""

    def key(self, pool: PoolInfo, claim: ResourceClaim, request: str,
            device_class: DeviceClass | None) -> Hashable | None:
        """The content key, or None when the parameters are unusual (not cached)."""
        ...

    def get(self, key: Hashable) -> ExtractionResult | None: ...

    def put(self, key: Hashable, result: ExtractionResult) -> None: ...

    def cheap_get(self, pool: PoolInfo, claim: ResourceClaim, request: str,
                  device_class: DeviceClass | None) -> ExtractionResult | None:
        """The outcome when :meth:`key` costs a few lookups for this pool's extractors
        whatever the claim holds, and is known (tried before the lookup by claim
        identity: the common case is a new claim with a known content); None otherwise,
        also when the key may walk the claim's data."""
        ...


#: What the CEL of one scheduling attempt may cost in all, across every extraction:
#: the budget one extraction has (the KEP's ``SharingAffinityCELMaxCost``), once per
#: attempt. A unit is about 0.1-1 us of CPU (benchmarks/cel_unit_cost.py), so an
#: attempt spends well under a second on CEL.
ATTEMPT_CEL_MAX_COST: Final = SHARING_AFFINITY_CEL_MAX_COST


@dataclass
class ExtractionMemo:
    """Per-cycle memo of extraction results; counts real CEL evaluations and charges
    them to the attempt's budget."""

    claims: Mapping[str, ResourceClaim]
    classes: Mapping[str, DeviceClass]
    results: dict[tuple[str, str, str], ExtractionResult] = field(default_factory=dict)
    evaluations: int = 0
    # A cross-cycle cache of extraction outcomes by content (a fast path), or None.
    shared: ExtractionCache | None = None
    # Every outcome (errors and no-keys included) by claim identity, across attempts:
    # a claim's spec is immutable, so a hostile claim costs its CEL budget once, not on
    # every retry. Owned by the scheduler; None for one-off evaluations.
    remembered: dict[Hashable, ExtractionResult] | None = None
    # What the attempt's CEL may still cost (see ATTEMPT_CEL_MAX_COST).
    budget: int = ATTEMPT_CEL_MAX_COST

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
            hit = self.results[key] = self._extract(pool.preferred_extractors, configs)[0]
        return hit.keys if hit.kind is OutcomeKind.OK and hit.keys else None

    def evaluate(self, claim: ResourceClaim, request: str, class_name: str,
                 pool: PoolInfo) -> ExtractionResult:
        device_class = self.classes.get(class_name)
        # A cache by content (a fast path) may know the outcome already: pods stamped
        # from one template extract the same keys. When its key is cheap whatever the
        # claim holds, it goes first (the common case: a new claim, a known content).
        shared = self.shared
        if shared is not None:
            hit = shared.cheap_get(pool, claim, request, device_class)
            if hit is not None:
                return hit
        return self._evaluate(claim, request, device_class, pool)

    def _evaluate(self, claim: ResourceClaim, request: str, device_class: DeviceClass | None,
                  pool: PoolInfo) -> ExtractionResult:
        """:meth:`evaluate` past the cheap content lookup (which a miss repeats below: a
        miss evaluates CEL, next to which the lookup costs nothing)."""
        shared = self.shared
        # This claim's outcome from an earlier attempt: by identity, before anything that
        # walks the claim's data (a retry of a hostile claim costs a lookup).
        remembered = self.remembered
        rkey: Hashable = None
        if remembered is not None:
            rkey = identity_key(pool, claim, request, device_class)
            hit = remembered.get(rkey)
            if hit is not None:
                return hit
        ckey: Hashable = None
        if shared is not None:
            ckey = shared.key(pool, claim, request, device_class)
            if ckey is not None:
                hit = shared.get(ckey)
                if hit is not None:
                    # Not remembered by identity as well: a content hit cost no CEL
                    # budget, and the next attempt finds it the same way.
                    return hit
        res, attempt_bound = self._extract(
            pool.extractors, scoped_configs(claim, request, pool.driver, device_class))
        if ckey is not None and shared is not None and not attempt_bound:
            shared.put(ckey, res)  # not an outcome of this attempt's budget: of the content
        if remembered is not None:
            _remember(remembered, rkey, res)
        return res

    def _extract(self, extractors: Sequence[Extractor],
                 configs: Sequence[ConfigObject]) -> tuple[ExtractionResult, bool]:
        """:func:`cel.extract` under its own budget or the attempt's remainder, whichever
        is smaller, charged to the attempt; and whether the attempt's remainder is what
        ran out (the outcome, ``COST_EXCEEDED``, then names the attempt's bound and is
        not an outcome of the content alone)."""
        budget = min(SHARING_AFFINITY_CEL_MAX_COST, self.budget)
        res = extract(extractors, configs, budget=budget)
        self.evaluations += res.evaluations
        self.budget = max(0, self.budget - res.cost)
        attempt_bound = (res.kind is OutcomeKind.COST_EXCEEDED
                         and budget < SHARING_AFFINITY_CEL_MAX_COST)
        if attempt_bound:
            res = dataclasses.replace(res, message=(
                f"{res.message}; the scheduling attempt's CEL budget of "
                f"{ATTEMPT_CEL_MAX_COST} across all requests, pools and configs is spent"))
        return res, attempt_bound


REMEMBERED_MAX = 16384


def _remember(remembered: dict[Hashable, ExtractionResult], key: Hashable,
              result: ExtractionResult) -> None:
    if len(remembered) >= REMEMBERED_MAX:
        remembered.pop(next(iter(remembered)))  # oldest first
    remembered[key] = result


def identity_key(pool: PoolInfo, claim: ResourceClaim, request: str,
                 device_class: DeviceClass | None) -> Hashable:
    """What an outcome depends on, by identity: the claim (uid and generation: its spec
    is immutable), the request, the pool's extractor set, and the class whose configs
    are in scope (uid and generation: a class's config may change)."""
    meta = claim.metadata
    cls = (device_class.metadata.uid, device_class.metadata.generation, device_class.name) \
        if device_class is not None else None
    return (meta.uid or key_of(claim), meta.generation, request,
            pool.extraction_token, cls)
