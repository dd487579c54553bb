"""Node selection for slices, devices and claims (core/v1 NodeSelector semantics)."""

from __future__ import annotations

import functools
from collections.abc import Mapping

from dra_affinity.api.meta import NodeSelector, NodeSelectorRequirement, NodeSelectorTerm


def _requirement_matches(req: NodeSelectorRequirement, values: Mapping[str, str]) -> bool:
    present = req.key in values
    v = values.get(req.key)
    op = req.operator
    if op == "In":
        return present and v in req.values
    if op == "NotIn":
        return not present or v not in req.values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt"):
        if not present or len(req.values) != 1:
            return False
        try:
            have, want = int(v or ""), int(req.values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False  # unknown operators never match (fail closed)


def node_selector_matches(sel: NodeSelector, node_name: str, labels: Mapping[str, str]) -> bool:
    """Terms are ORed, requirements within a term ANDed; an empty term matches nothing."""
    return any(node_selector_term_matches(term, node_name, labels) for term in sel.node_selector_terms)


def node_selector_term_matches(term: NodeSelectorTerm, node_name: str, labels: Mapping[str, str]) -> bool:
    """One term: its requirements ANDed; an empty term matches nothing."""
    if not term.match_expressions and not term.match_fields:
        return False
    return all(_requirement_matches(r, labels) for r in term.match_expressions) and all(
        _requirement_matches(r, {"metadata.name": node_name}) for r in term.match_fields
    )


@functools.lru_cache(maxsize=65536)
def selector_for_node(node_name: str) -> NodeSelector:
    """The allocation-result node selector the Kubernetes allocator writes for node-local devices.

    Cached: objects are never mutated (every write makes a copy), so sharing one is safe."""
    return NodeSelector.model_validate(
        {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
            ]
        }
    )
