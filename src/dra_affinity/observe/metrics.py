"""KEP-5981's metrics, and the scheduler's own, on a registry per scheduler (not the global one).

A registry per instance keeps tests and simulations independent; the CLI
prints its exposition text and a server can serve it as is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.metrics_core import Metric

# The six metrics named in the KEP (Monitoring Requirements).
LOCKED = "sharing_affinity_locked_devices"
UNRECONSTRUCTABLE = "sharing_affinity_unreconstructable_devices"
EVALUATIONS = "sharing_affinity_extractor_evaluations_total"
LOCK_CONFLICT = "sharing_affinity_lock_conflict_total"
NO_KEYS = "sharing_affinity_no_keys_extracted_total"
COMPATIBLE_REUSE = "sharing_affinity_compatible_reuse_total"

KEP_METRICS = (LOCKED, UNRECONSTRUCTABLE, EVALUATIONS, LOCK_CONFLICT, NO_KEYS, COMPATIBLE_REUSE)

# The scheduler's own: the Filter verdicts it keeps across cycles (scheduler/fastpath/verdicts.py).
VERDICTS = "dra_affinity_filter_verdicts_total"
#: Tallies of :data:`VERDICTS` by outcome, keyed by series in ``SchedulerMetrics.pending``.
VERDICTS_REUSED = f'{VERDICTS}{{outcome="reused"}}'
VERDICTS_COMPUTED = f'{VERDICTS}{{outcome="computed"}}'
STALE_VERDICTS = "dra_affinity_filter_stale_verdicts_total"
VERDICT_SIGNATURES = "dra_affinity_filter_verdict_signatures"


class GaugeValues(NamedTuple):
    """What the gauges are set from when the metrics are read."""

    locked: int
    unreconstructable: int
    per_pool: dict[tuple[str, str], tuple[int, int]]  # (driver, pool) -> (locked, unreconstructable)
    verdict_signatures: int


class SchedulerMetrics:
    """Counters survive scheduler restarts in a simulation: they describe the run."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.locked = Gauge(LOCKED, "Devices currently holding an affinity lock.", registry=r)
        self.unreconstructable = Gauge(
            UNRECONSTRUCTABLE,
            "Devices in conservative quarantine: affinity of active claims cannot be reconstructed.",
            registry=r)
        # prometheus_client appends _total to counters itself.
        self.evaluations = Counter(EVALUATIONS.removesuffix("_total"),
                                   "CEL extractor evaluations performed.", registry=r)
        self.lock_conflict = Counter(LOCK_CONFLICT.removesuffix("_total"),
                                     "Candidate devices filtered for an incompatible lock.", registry=r)
        self.no_keys = Counter(NO_KEYS.removesuffix("_total"),
                               "Candidate devices filtered by strict gating (no keys).", registry=r)
        self.compatible_reuse = Counter(COMPATIBLE_REUSE.removesuffix("_total"),
                                        "Placements onto an already-locked device with matching keys.",
                                        registry=r)
        self.filter_seconds = Histogram(
            "sharing_affinity_filter_duration_seconds",
            "Time spent in Filter (all nodes) per scheduling attempt.",
            buckets=(0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                     0.5, 1.0, 2.5),
            registry=r)
        self.pool_locked = Gauge("sharing_affinity_pool_locked_devices",
                                 "Locked devices per pool.", ["driver", "pool"], registry=r)
        self.pool_unreconstructable = Gauge(
            "sharing_affinity_pool_unreconstructable_devices",
            "Unreconstructable devices per pool.", ["driver", "pool"], registry=r)
        # Both outcomes' series are made with ``_counters`` below, so they exist at 0 from
        # the start: a ratio or an alert needs the series before the first increment.
        self.verdicts = Counter(VERDICTS.removesuffix("_total"),
                                "Filter verdicts on a node (on a device, for a pod that needs one "
                                "device), by outcome: reused from an earlier cycle, or computed.",
                                ["outcome"], registry=r)
        self.stale_verdicts = Counter(
            STALE_VERDICTS.removesuffix("_total"),
            "Scheduling cycles in which a kept Filter verdict disagreed with a fresh one (a missed "
            "invalidation: the cycle filtered every node again without kept verdicts).", registry=r)
        self.verdict_signatures = Gauge(VERDICT_SIGNATURES,
                                        "Pod signatures with Filter verdicts kept.", registry=r)
        # Hot-path increments are tallied here as plain ints and folded into the counters
        # whenever the metrics are read (values, exposition, a scrape): Counter.inc takes
        # a lock, and a scheduling cycle would otherwise pay for it several times.
        self._counters = {EVALUATIONS: self.evaluations, LOCK_CONFLICT: self.lock_conflict,
                          NO_KEYS: self.no_keys, COMPATIBLE_REUSE: self.compatible_reuse,
                          VERDICTS_REUSED: self.verdicts.labels("reused"),
                          VERDICTS_COMPUTED: self.verdicts.labels("computed"),
                          STALE_VERDICTS: self.stale_verdicts}
        self.pending: dict[str, int] = dict.fromkeys(self._counters, 0)
        self._state_source: Callable[[], GaugeValues] | None = None
        self._pools_seen: set[tuple[str, str]] = set()

    def refresh(self, locked: int, unrec: int,
                per_pool: dict[tuple[str, str], tuple[int, int]], verdict_signatures: int) -> None:
        self.locked.set(locked)
        self.verdict_signatures.set(verdict_signatures)
        self.unreconstructable.set(unrec)
        for pid in sorted(self._pools_seen | set(per_pool)):
            lk, ur = per_pool.get(pid, (0, 0))
            self.pool_locked.labels(*pid).set(lk)
            self.pool_unreconstructable.labels(*pid).set(ur)
        self._pools_seen |= set(per_pool)

    def bind_state(self, source: Callable[[], GaugeValues]) -> None:
        """Where the gauges come from (the current scheduler's cache); read on collection."""
        self._state_source = source

    def flush(self) -> None:
        """Fold the pending tallies into the Prometheus counters."""
        pending = self.pending
        for name, n in pending.items():
            if n:
                self._counters[name].inc(n)
                pending[name] = 0

    def _collect_state(self) -> None:
        self.flush()
        if self._state_source is not None:
            self.refresh(*self._state_source())

    def values(self) -> dict[str, int]:
        """The six KEP metrics as plain integers (for JSON output)."""
        self._collect_state()
        def get(name: str) -> int:
            v = self.registry.get_sample_value(name)
            return int(v) if v is not None else 0
        return {name: get(name) for name in KEP_METRICS}

    def wsgi_app(self) -> Any:
        """A WSGI app serving this registry at any path (mount it in a scheduler's server)."""
        from prometheus_client import make_wsgi_app

        inner = make_wsgi_app(self.registry)

        def app(environ: Any, start_response: Any) -> Any:
            self._collect_state()
            return inner(environ, start_response)

        return app

    def exposition(self) -> str:
        """The text format, without ``*_created`` samples (see :class:`_WithoutCreated`)."""
        self._collect_state()
        return generate_latest(_WithoutCreated(self.registry)).decode("utf-8")


class _WithoutCreated(CollectorRegistry):
    """A registry's metrics without their ``*_created`` samples: those carry the wall-clock
    time a series was made, and would make the same run print different text. Only this
    exposition leaves them out (prometheus_client's own setting for it is process-wide)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        super().__init__(auto_describe=False)
        self._source = registry

    def collect(self) -> Iterator[Metric]:
        for metric in self._source.collect():
            # collect() makes new Metric objects on every call: filtering them is private.
            metric.samples = [s for s in metric.samples if not s.name.endswith("_created")]
            yield metric
