"""Why a pod does or does not fit each device on each node, now.

Diagnostics over the scheduler's live cache, without changing it (no locks,
no metrics): PreFilter, then every node's whole verdict (the filter plugin that
rejects it and its FitError reasons; when no node fits, the FitError message the
pod's FailedScheduling event carries), then every device
against every (sub)request on its own with
:meth:`~dra_affinity.structured.allocator.NodeAllocator.check_device`.
"""

from __future__ import annotations

from typing import Any

from dra_affinity.structured.allocator import Counters, NodeAllocator
from dra_affinity.structured.model import Abort, Reason

from .filter import explain_node, fit_error_message
from .scheduler import Scheduler


def explain_pod(sched: Scheduler, pod_key: str) -> dict[str, Any]:
    """The explanation as a JSON-ready dict; raises KeyError when the pod does not exist."""
    pod = sched.view.pod(pod_key)
    if pod is None:
        raise KeyError(pod_key)
    out: dict[str, Any] = {"pod": pod_key, "nodes": []}
    if pod.spec.node_name:
        out["boundTo"] = pod.spec.node_name
        return out
    try:
        cyc = sched.prefilter(pod)
    except Abort as a:
        out["result"] = a.result.value
        out["reason"] = a.reason.as_dict()
        return out
    cache = sched.cache
    snap = cache.snapshot()
    why: list[Reason] = []
    for node in snap.nodes:
        node_out: dict[str, Any] = {"node": node, "devices": []}
        whole, node_reasons = explain_node(cache, cyc, node, snap, sched.scoring)
        why += node_reasons
        node_out["fits"] = whole["fits"]
        for k in ("plugin", "fitReasons", "reasons"):
            if whole.get(k):
                node_out[k] = whole[k]
        for claim in cyc.to_allocate:
            for req in claim.requests:
                for alt in req.alternatives:
                    for d in snap.by_node.get(node, []):
                        alloc = NodeAllocator(node, [d], cache.state,
                                              affinity_enabled=cache.features.sharing_affinity,
                                              extract=cyc.memo, selector_matches=cache.selector_matches,
                                              counters=Counters(), hooks=cyc.hooks)
                        row: dict[str, Any] = {"claim": claim.key, "request": alt.name, "device": d.id}
                        try:
                            share, reason = alloc.check_device(d, claim, alt)
                            if reason is not None:
                                row.update(verdict=reason.code, message=reason.message)
                            elif share is not None:
                                row.update(verdict="Fits", message="device is viable" + (
                                    f"; affinity {dict(share.keys)}" if share.keys else ""))
                                if share.keys is not None:
                                    row["keys"] = dict(share.keys)
                        except Abort as a:
                            row.update(verdict=a.reason.code, message=a.reason.message,
                                       result=a.result.value)
                        node_out["devices"].append(row)
        out["nodes"].append(node_out)
    if not any(n["fits"] for n in out["nodes"]):
        out["summary"] = fit_error_message(len(snap.nodes), why)
    return out
