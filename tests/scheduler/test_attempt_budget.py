"""One CEL budget per scheduling attempt, across every request, pool and config.

Each extraction (one request against one pool's extractor set) has the KEP's budget;
the attempt as a whole has one more bound, ``ATTEMPT_CEL_MAX_COST``, so a pod whose
claims carry many requests cannot multiply what an admitted slice's extractors cost."""

from __future__ import annotations

from typing import Any

from builders import Env, device_slice, meta_slice, nic_class, nic_params
from dra_affinity.cel import EXTRACTOR_ENV
from dra_affinity.observe.metrics import EVALUATIONS
from dra_affinity.structured import reasons
from dra_affinity.structured.extraction import ATTEMPT_CEL_MAX_COST
from dra_affinity.structured.model import Result

# Costs in proportion to the square of object.l's size, then extracts the subnet.
HEAVY = 'object.l.all(x, object.l.all(y, x + y >= 0)) ? object.subnetID : ""'


def params(i: int) -> dict[str, Any]:
    """Distinct content per request in what the extractor reads (equal contents share one
    evaluation)."""
    return nic_params(l=list(range(i, i + 200)))


def heavy_cost() -> int:
    return EXTRACTOR_ENV.compile(HEAVY).evaluate({"object": params(0)}, ATTEMPT_CEL_MAX_COST)[1]


def requests_and_configs(n: int, first: int = 0) -> dict[str, Any]:
    """``n`` requests, each with a config of its own: contents ``first`` to ``first + n - 1``."""
    names = [f"r{i}" for i in range(first, first + n)]
    return {
        "requests": [{"name": r, "exactly": {"deviceClassName": "shared-nic",
                                             "capacity": {"requests": {
                                                 "networking.example.com/slots": "1"}}}}
                     for r in names],
        "config": [{"requests": [r], "opaque": {"driver": "networking.example.com",
                                                "parameters": params(int(r[1:]))}}
                   for r in names],
    }


def env() -> Env:
    return Env(nic_class(), meta_slice("node-1", {"subnet": HEAVY}),
               device_slice("node-1", [f"eth{i}" for i in range(8)]))


def test_one_request_within_its_budget_schedules() -> None:
    cost = heavy_cost()
    assert ATTEMPT_CEL_MAX_COST // 4 < cost < ATTEMPT_CEL_MAX_COST // 3
    e = env()
    e.add_pod("a", **requests_and_configs(3))  # three extractions fit in one attempt
    a = e.schedule("a")
    assert a.result is Result.SCHEDULED, a.message


def test_requests_together_over_the_attempts_budget_fail_closed() -> None:
    """Four requests, each well within its own budget, spend more than one attempt may:
    the attempt ends with AffinityCostExceeded and a FailedScheduling event."""
    e = env()
    e.add_pod("a", **requests_and_configs(4))
    first = e.schedule("a")
    assert first.result is Result.ERROR
    assert [r.code for r in first.reasons] == [reasons.AFFINITY_COST_EXCEEDED]
    assert "scheduling attempt's CEL budget" in first.message
    events = [ev for ev in e.scheduler.recorder.events if ev.reason == "FailedScheduling"]
    assert events and "scheduling attempt's CEL budget" in events[-1].message
    # what the attempt evaluated: at most its budget, then nothing on a retry
    spent = e.metric(EVALUATIONS)
    again = e.schedule("a")
    assert again.reasons == first.reasons
    assert e.metric(EVALUATIONS) == spent


def test_an_outcome_of_the_attempts_budget_is_not_one_of_the_content() -> None:
    """The request the attempt's budget cut off would succeed alone: another claim with
    the same content is evaluated afresh, not refused from the cache by content."""
    e = env()
    e.add_pod("a", **requests_and_configs(4))
    assert e.schedule("a").result is Result.ERROR
    e.add_pod("b", **requests_and_configs(1, first=3))  # a's fourth content
    b = e.schedule("b")
    assert b.result is Result.SCHEDULED, b.message
