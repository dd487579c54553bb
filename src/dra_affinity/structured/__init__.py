"""The structured core: a pure allocator over a snapshot, as upstream's
``k8s.io/dynamic-resource-allocation/structured`` is, with KEP-5981's sharing affinity.

* :mod:`.pools`: pools gathered from slices (newest generation, completeness,
  cross-slice validity), marked with reasons instead of raising;
* :mod:`.snapshot`: devices per node in the allocator's order;
* :mod:`.state`: ``AllocatedState`` with ``AffinityStates``;
* :mod:`.affinity`: the pool gate and the lock rule, written once;
* :mod:`.allocator`: the per-node allocator (stable semantics);
* :mod:`.experiments`: experiments as hooks the stable path does not know;
* :mod:`.extraction`: which opaque configs an extractor sees, memoised per cycle;
* :mod:`.capacity`, :mod:`.nodes`, :mod:`.model`, :mod:`.reasons`: what they say.

It imports only ``api``, ``cel`` and ``features`` (an import contract checks it).
"""
