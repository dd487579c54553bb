"""dra-affinity: Kubernetes DRA with Sharing Affinity (KEP-5981).

Typed ``resource.k8s.io/v1`` objects, admission and pool validation, the CEL
extraction engine, a structured-parameters allocator with consumable capacity
and a scheduler core with affinity locks, plus a simulator and benchmarks.
"""

__version__ = "0.1.0"
