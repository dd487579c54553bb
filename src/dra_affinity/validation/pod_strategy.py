"""What the API server writes into a pod's placement fields when it is created (the pod
strategy's ``PrepareForCreate``, applied by :func:`dra_affinity.validation.apiserver.admit`).

Since 1.33 (MatchLabelKeysInPodAffinity, GA) and 1.34
(MatchLabelKeysInPodTopologySpreadSelectorMerge, on by default) the API server
turns ``matchLabelKeys`` into ``key In (value)`` and ``mismatchLabelKeys`` into
``key NotIn (value)`` requirements of the term's ``labelSelector``, with the
values of the pod's own labels at creation (keys the pod does not carry are
skipped; a term without ``labelSelector`` is left alone). The scheduler reads
the merged selector only. A real cluster's pods arrive merged; the embedded
cluster's pods are merged by ``admit`` on create.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from dra_affinity.api.core import Pod

_TERM_LISTS = ("requiredDuringSchedulingIgnoredDuringExecution",
               "preferredDuringSchedulingIgnoredDuringExecution")


def _merge(term: Any, labels: Mapping[str, str], keys_op: tuple[tuple[str, str], ...]) -> bool:
    """Append the requirements to ``term['labelSelector']``; whether anything changed."""
    if not isinstance(term, dict) or not isinstance(term.get("labelSelector"), dict):
        return False
    sel = term["labelSelector"]
    changed = False
    for field, op in keys_op:
        keys = term.get(field)
        if not isinstance(keys, list):
            continue
        for k in keys:
            if isinstance(k, str) and k in labels:
                exprs = sel.setdefault("matchExpressions", [])
                if isinstance(exprs, list):
                    exprs.append({"key": k, "operator": op, "values": [labels[k]]})
                    changed = True
    return changed


def merge_label_keys(pod: Pod) -> Pod:
    """The pod as the API server stores it on create (the same object when nothing
    changes; never mutates ``pod``)."""
    spec = pod.spec
    aff, spread = spec.affinity, spec.topology_spread_constraints
    if not spread and not (isinstance(aff, Mapping) and ("podAffinity" in aff or "podAntiAffinity" in aff)):
        return pod
    labels = pod.metadata.labels
    new_aff = copy.deepcopy(aff) if isinstance(aff, Mapping) else aff
    new_spread = copy.deepcopy(spread)
    changed = False
    if isinstance(new_aff, dict):
        for kind in ("podAffinity", "podAntiAffinity"):
            part = new_aff.get(kind)
            if not isinstance(part, dict):
                continue
            for lst in _TERM_LISTS:
                for t in part.get(lst) or ():
                    term = t.get("podAffinityTerm") if lst.startswith("preferred") and isinstance(t, dict) else t
                    changed |= _merge(term, labels, (("matchLabelKeys", "In"), ("mismatchLabelKeys", "NotIn")))
    for c in new_spread:
        changed |= _merge(c, labels, (("matchLabelKeys", "In"),))
    if not changed:
        return pod
    return pod.model_copy(update={"spec": spec.model_copy(
        update={"affinity": new_aff, "topology_spread_constraints": new_spread})})
