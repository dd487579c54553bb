"""``dra-affinity snapshot``: a cluster's DRA state written as a scenario file.

What is read, one paginated list per kind (never Secrets, ConfigMaps or anything
else): Nodes, DeviceClasses, ResourceSlices, ResourceClaimTemplates,
ResourceClaims, Pods. What is written is only what placement reads:

- Nodes: name, labels, ``spec.unschedulable``, ``spec.taints``, ``status.allocatable``;
- DeviceClasses, ResourceSlices (annotations included: the sharing-affinity
  bridge annotation travels as the server stores it), ResourceClaimTemplates and
  ResourceClaims (with ``status``) as the project's models read them;
- Pods that use claims, and pods bound to a node (they count against its
  allocatable), with their containers reduced to name and ``resources`` (no
  images, commands or environment) and their status to ``phase``. A pod entry made
  from a template whose claim the resourceclaim controller already made (as its
  ``status.resourceClaimStatuses`` records) is written as that claim's
  ``resourceClaimName``, so replaying the file makes no second claim.

Server bookkeeping (``resourceVersion``, ``generation``, ``managedFields``) is
dropped. Objects are written as each page arrives, so memory holds one page of
pods; slices, claims and classes are also kept, since the lock state is computed
from them at the end.

The last document is the Scenario. Its first step, ``restart: {}``, makes the
simulated scheduler rebuild its state from the allocated claims, as the live
scheduler does when it starts; then one ``expectDevice`` per device that is
Locked or Unreconstructable on the cluster (so ``simulate`` fails if the file
does not reproduce the live state); then one ``schedule`` step per pending pod
of the scheduler, in the order its queue takes them (priority, then age).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from dra_affinity.api.io import dump_documents
from dra_affinity.api.podclaims import recorded_claim_names
from dra_affinity.features import Features

from .api import Api
from .convert import API_VERSIONS, ConversionError, object_key, to_model
from .informer import REPLACE, SYNCED, Change, list_pages
from .locks import view_locks
from .view import KubeView

__all__ = ["SNAPSHOT_KINDS", "Snapshot", "write_snapshot"]

#: What ``snapshot`` lists, in the order it writes them (objects before their users).
SNAPSHOT_KINDS = ("Node", "DeviceClass", "ResourceSlice", "ResourceClaimTemplate",
                  "ResourceClaim", "Pod")

#: Kinds whose objects are kept to rebuild the lock state at the end.
_KEPT_FOR_LOCKS = ("Node", "DeviceClass", "ResourceSlice", "ResourceClaim", "Pod")

_POD_SPEC_FIELDS = ("nodeName", "nodeSelector", "priority", "priorityClassName", "schedulerName",
                    "resourceClaims", "tolerations", "affinity", "topologySpreadConstraints",
                    "overhead", "resources", "schedulingGates")
_METADATA_FIELDS = ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp",
                    "labels", "annotations", "finalizers", "ownerReferences")
_TERMINAL = ("Succeeded", "Failed")

#: ``progress(kind, listed, total)``: total is None while the server has not said.
Progress = Callable[[str, int, "int | None"], None]


@dataclass
class Snapshot:
    """What was written: objects per kind, the lock states expected, the pods to schedule,
    and the objects left out because the project cannot read them."""

    counts: dict[str, int] = field(default_factory=dict)
    expected_devices: int = 0
    pending: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)


def write_snapshot(api: Api, out: TextIO, *, scheduler_name: str = "dra-affinity",
                   features: Features | None = None, name: str = "snapshot",
                   namespace: str | None = None,
                   page_size: int = 500, progress: Progress | None = None) -> Snapshot:
    """List the cluster's DRA objects and write them to ``out`` as a scenario file.

    The whole cluster is always read (claims anywhere lock devices); ``namespace``
    only narrows which pending pods become schedule steps."""
    result = Snapshot()
    kept: dict[str, list[dict[str, Any]]] = {k: [] for k in _KEPT_FOR_LOCKS}
    pending: list[tuple[int, str, str]] = []  # (-priority, creationTimestamp, key)
    out.write(f"# dra-affinity snapshot: the cluster's DRA objects and a Scenario ({name})\n")
    for kind in SNAPSHOT_KINDS:
        listed = written = 0
        for page in list_pages(api, kind, page_size=page_size):
            for raw in page.items:
                listed += 1
                data = _written(kind, raw)
                if data is None:
                    continue
                try:
                    to_model(kind, data)
                except ConversionError as e:
                    result.skipped.append(f"{kind} {object_key(kind, raw)}: {e}")
                    continue
                _emit(out, data)
                written += 1
                if kind == "Pod":
                    if _pending(data, scheduler_name) and namespace in (
                            None, data["metadata"].get("namespace") or "default"):
                        pending.append(_queue_order(data))
                    if not data["spec"].get("resourceClaims"):
                        continue  # counted by node fit only: not needed for locks
                if kind in kept:
                    kept[kind].append(data)
            if progress is not None:
                total = listed + page.remaining if page.remaining is not None else None
                progress(kind, listed, total)
        result.counts[kind] = written
    rows = _lock_rows(api, kept, features)
    steps: list[dict[str, Any]] = [{"restart": {}}]
    for row in rows:
        if row["status"] == "Locked":
            steps.append({"expectDevice": {"device": row["device"], "status": "Locked",
                                           "lock": dict(sorted(row["lock"].items()))}})
        elif row["status"] == "Unreconstructable":
            steps.append({"expectDevice": {"device": row["device"],
                                           "status": "Unreconstructable"}})
    result.expected_devices = len(steps) - 1
    result.pending = [key for _, _, key in sorted(pending)]
    steps += [{"schedule": key} for key in result.pending]
    gates = (features or Features()).gates("scheduler")
    scenario: dict[str, Any] = {
        "apiVersion": "simulation.dra-affinity.io/v1alpha1", "kind": "Scenario",
        "metadata": {"name": name},
        "spec": {"featureGates": {"scheduler": gates},
                 "steps": steps}}
    _emit(out, scenario)
    return result


def _lock_rows(api: Api, kept: Mapping[str, list[dict[str, Any]]],
               features: Features | None) -> list[dict[str, Any]]:
    view = KubeView(api)
    for kind, objects in kept.items():
        view.apply(Change(kind, REPLACE, objects=objects))
        view.apply(Change(kind, SYNCED))
    rows, _ = view_locks(view, features)
    return rows


def _emit(out: TextIO, data: Mapping[str, Any]) -> None:
    out.write(dump_documents([data], explicit_start=True))


# ---------------------------------------------------------------------------- reduction
def _written(kind: str, raw: Mapping[str, Any]) -> dict[str, Any] | None:
    """The part of ``raw`` that placement reads (None: the object is not written)."""
    meta = _metadata(raw.get("metadata") or {})
    head = {"apiVersion": raw.get("apiVersion") or API_VERSIONS[kind], "kind": kind,
            "metadata": meta}
    if kind == "Node":
        spec = raw.get("spec") or {}
        status = raw.get("status") or {}
        meta.pop("annotations", None)
        node: dict[str, Any] = {**head, "spec": _pick(spec, ("unschedulable", "taints"))}
        if status.get("allocatable"):
            node["status"] = {"allocatable": status["allocatable"]}
        return node
    if kind == "Pod":
        return _pod(head, raw)
    data = {**head, **{k: v for k, v in raw.items() if k not in ("apiVersion", "kind", "metadata")}}
    return data


def _pod(head: dict[str, Any], raw: Mapping[str, Any]) -> dict[str, Any] | None:
    spec = raw.get("spec") or {}
    status = raw.get("status") or {}
    uses_claims = bool(spec.get("resourceClaims"))
    if not uses_claims and (not spec.get("nodeName") or status.get("phase") in _TERMINAL):
        return None  # neither a claim user nor counted against a node
    reduced = _pick(spec, _POD_SPEC_FIELDS)
    reduced["containers"] = [_container(c) for c in spec.get("containers") or ()]
    if spec.get("initContainers"):
        reduced["initContainers"] = [_container(c) for c in spec["initContainers"]]
    made = recorded_claim_names(status)
    if made:
        reduced["resourceClaims"] = [_as_made(e, made) for e in reduced.get("resourceClaims") or ()]
    pod: dict[str, Any] = {**head, "spec": reduced}
    kept_status = _pick(status, ("phase",))
    if kept_status:
        pod["status"] = kept_status
    return pod


def _as_made(entry: Any, made: Mapping[str, str]) -> Any:
    """A template entry whose claim was made (``made``: entry name -> claim) as an entry
    naming that claim; any other entry as it is."""
    name = entry.get("name") if isinstance(entry, Mapping) else None
    if isinstance(name, str) and name in made and entry.get("resourceClaimTemplateName"):
        return {"name": name, "resourceClaimName": made[name]}
    return entry


def _container(c: Any) -> Any:
    if not isinstance(c, Mapping):
        return c
    return _pick(c, ("name", "resources", "restartPolicy"))


def _metadata(meta: Mapping[str, Any]) -> dict[str, Any]:
    out = _pick(meta, _METADATA_FIELDS)
    annotations = out.get("annotations")
    if isinstance(annotations, Mapping):  # kubectl's copy of the last applied object
        out["annotations"] = {k: v for k, v in annotations.items()
                              if k != "kubectl.kubernetes.io/last-applied-configuration"}
        if not out["annotations"]:
            del out["annotations"]
    return out


def _pick(data: Mapping[str, Any], keys: Iterable[str]) -> dict[str, Any]:
    return {k: data[k] for k in keys if data.get(k) not in (None, [], {}, "")}


def _pending(pod: Mapping[str, Any], scheduler_name: str) -> bool:
    spec = pod["spec"]
    return (not spec.get("nodeName") and spec.get("schedulerName") == scheduler_name
            and not spec.get("schedulingGates") and not pod["metadata"].get("deletionTimestamp")
            and (pod.get("status") or {}).get("phase") not in _TERMINAL)


def _queue_order(pod: Mapping[str, Any]) -> tuple[int, str, str]:
    meta = pod["metadata"]
    priority = pod["spec"].get("priority")
    return (-(priority if isinstance(priority, int) else 0), str(meta.get("creationTimestamp", "")),
            f"{meta.get('namespace') or 'default'}/{meta.get('name', '')}")

