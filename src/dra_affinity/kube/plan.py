"""``dra-affinity plan``: what a driver's republish of pools would do, before it happens.

The cluster is listed once; two schedulers are started on it as a live one
starts (state rebuilt from the allocated claims): one on the slices as they
are, one with the pools of the new slices replaced by them (every slice of such
a pool, whatever its generation, gives way to the new ones) and the removed
pools gone. Nothing is written to the cluster.

Per device of a changed pool that is in use or locked, the report gives its
state before and after (Locked, Unreconstructable with the reason naming the
key whose holders no longer agree, Clean, or Removed) with its holders. A
device in use is *affected* when it is removed, becomes Unreconstructable, or
was Locked and loses its lock or one of its values; a renamed key (same values)
or an added key its holders agree on is not (the second is stricter for new
pods, which the pods that stop fitting show).
Unreconstructable devices after the change stay quarantined (nothing new is
placed on them) until the claims that hold them are deallocated: the report
names those claims. Pending pods of the scheduler are filtered on every node
under both states: those that start or stop fitting are listed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dra_affinity.api.resource import device_id
from dra_affinity.features import Features
from dra_affinity.scheduler.scheduler import Scheduler

from .api import Api
from .informer import REPLACE, SYNCED, Change, list_pages
from .locks import lock_rows, started_scheduler
from .view import WATCHED_KINDS, KubeView

__all__ = ["PoolId", "plan_republish"]

PoolId = tuple[str, str]  # (driver, pool)

REMOVED = "Removed"


@dataclass(frozen=True)
class _Side:
    scheduler: Scheduler
    rows: dict[str, dict[str, Any]]  # device -> lock row
    published: set[str]  # devices some slice lists


def plan_republish(api: Api, new_slices: Sequence[Mapping[str, Any]],
                   removed_pools: Iterable[PoolId] = (), *, scheduler_name: str = "dra-affinity",
                   namespace: str | None = None, features: Features | None = None
                   ) -> dict[str, Any]:
    """The report (JSON-ready). ``new_slices`` are ResourceSlices as a driver would
    publish them (JSON objects); ``removed_pools`` are pools it would delete."""
    listed = {kind: [it for page in list_pages(api, kind) for it in page.items]
              for kind in WATCHED_KINDS}
    replaced: set[PoolId] = {_pool_of(s) for s in new_slices}
    removed = set(removed_pools) - replaced
    changed = replaced | removed
    after_slices = [s for s in listed["ResourceSlice"] if _pool_of(s) not in changed]
    after_slices += [dict(s) for s in new_slices]
    before = _side(api, listed, listed["ResourceSlice"], features)
    after = _side(api, listed, after_slices, features)
    existing = {_pool_of(s) for s in listed["ResourceSlice"]}
    pools = [{"driver": d, "pool": p,
              "change": "removed" if (d, p) in removed else
              "replaced" if (d, p) in existing else "added"}
             for d, p in sorted(changed)]

    devices: list[dict[str, Any]] = []
    for did in _devices_of(before, after, changed):
        b = before.rows.get(did) if did in before.published else None
        a = after.rows.get(did) if did in after.published else None
        holders = sorted({h["claim"] for h in (b or a or {}).get("holders", [])})
        if namespace is not None and not any(h.startswith(f"{namespace}/") for h in holders):
            continue
        entry: dict[str, Any] = {"device": did, "before": _state(b), "after": _state(a),
                                 "holders": holders}
        entry["affected"] = bool(holders) and _affected(b, a)
        devices.append(entry)
    quarantined = [{"device": e["device"], "until": e["holders"]} for e in devices
                   if e["after"]["status"] == "Unreconstructable"]
    start, stop = _fitting(before, after, listed["Pod"], scheduler_name, namespace)
    return {"pools": pools, "devices": devices, "quarantined": quarantined,
            "pods": {"startFitting": start, "stopFitting": stop},
            "affected": sum(1 for e in devices if e["affected"])}


def _pool_of(raw: Mapping[str, Any]) -> PoolId:
    spec = raw.get("spec") or {}
    return str(spec.get("driver", "")), str((spec.get("pool") or {}).get("name", ""))


def _side(api: Api, listed: Mapping[str, list[dict[str, Any]]],
          slices: list[dict[str, Any]], features: Features | None) -> _Side:
    view = KubeView(api)
    for kind in WATCHED_KINDS:
        view.apply(Change(kind, REPLACE, objects=slices if kind == "ResourceSlice" else listed[kind]))
        view.apply(Change(kind, SYNCED))
    sched, _ = started_scheduler(view, features)
    published = {device_id(s.spec.driver, s.spec.pool.name, d.name)
                 for s in view.slices() for d in s.spec.devices}
    return _Side(sched, {r["device"]: r for r in lock_rows(sched)}, published)


def _devices_of(before: _Side, after: _Side, changed: set[PoolId]) -> list[str]:
    """Devices of the changed pools that are held or locked on either side, in order."""
    out: list[str] = []
    for rows in (before.rows, after.rows):
        for did, row in rows.items():
            driver, pool, _ = did.split("/", 2)
            if (driver, pool) in changed and did not in out and (
                    row["holders"] or row["status"] != "Clean"):
                out.append(did)
    return out


def _state(row: Mapping[str, Any] | None) -> dict[str, Any]:
    if row is None:
        return {"status": REMOVED}
    out: dict[str, Any] = {"status": row["status"]}
    if row["lock"]:
        out["lock"] = dict(sorted(row["lock"].items()))
    if row.get("reason"):
        out["reason"] = row["reason"]
    return out


def _affected(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> bool:
    """Whether a device in use changes in a way that breaks what its holders were given:
    removed, Unreconstructable, or Locked before and then unlocked or with a value gone
    (a renamed key keeps its value; an added key on which the holders agree is only
    stricter, which the pending pods' fitting shows)."""
    if after is None or after["status"] == "Unreconstructable":
        return True
    if before is None or before["status"] != "Locked":
        return False
    if after["status"] != "Locked":
        return True
    kept = sorted(after["lock"].values())
    return any(v not in kept for v in before["lock"].values())


def _fitting(before: _Side, after: _Side, pods: list[dict[str, Any]], scheduler_name: str,
             namespace: str | None) -> tuple[list[str], list[str]]:
    start: list[str] = []
    stop: list[str] = []
    for raw in pods:
        spec = raw.get("spec") or {}
        meta = raw.get("metadata") or {}
        ns = meta.get("namespace") or "default"
        if (spec.get("nodeName") or spec.get("schedulerName") != scheduler_name
                or not spec.get("resourceClaims") or meta.get("deletionTimestamp")
                or (namespace is not None and ns != namespace)):
            continue
        key = f"{ns}/{meta.get('name', '')}"
        was, will = _fits(before.scheduler, key), _fits(after.scheduler, key)
        if will and not was:
            start.append(key)
        elif was and not will:
            stop.append(key)
    return sorted(start), sorted(stop)


def _fits(sched: Scheduler, key: str) -> bool:
    from dra_affinity.structured.model import Abort

    try:
        return any(sched.fits_on(sched.state, key, node).ok for node in sched.snapshot().nodes)
    except (Abort, KeyError):
        return False
