"""Reason codes (SCENARIO.md ``reasons[].code``).

The sharing-affinity codes are fixed by the public interface; the rest are
this project's names for the ordinary DRA filter outcomes.
"""

from __future__ import annotations

# KEP-5981 / SCENARIO.md
AFFINITY_LOCK_MISMATCH = "AffinityLockMismatch"
AFFINITY_NO_KEYS = "AffinityNoKeys"
AFFINITY_UNRECONSTRUCTABLE = "AffinityUnreconstructable"
AFFINITY_SELF_INCONSISTENT = "AffinitySelfInconsistent"
# An affinity value over the length bound (a claim authoring error).
AFFINITY_VALUE_TOO_LONG = "AffinityValueTooLong"
AFFINITY_CEL_ERROR = "AffinityCELError"
AFFINITY_COST_EXCEEDED = "AffinityCostExceeded"
AFFINITY_INVALID_POOL = "AffinityInvalidPool"
AFFINITY_POOL_INCOMPLETE = "AffinityPoolIncomplete"
AFFINITY_FEATURE_DISABLED = "AffinityFeatureDisabled"
RESERVE_CONFLICT = "ReserveConflict"
BIND_FAILED = "BindFailed"
# Experiment: NeverSetLock claims do not take clean devices
AFFINITY_NEVER_SET_LOCK = "AffinityNeverSetLock"

# Ordinary DRA outcomes
INSUFFICIENT_CAPACITY = "InsufficientCapacity"
DEVICE_ALLOCATED = "DeviceAllocated"
SELECTOR_MISMATCH = "SelectorMismatch"
SELECTOR_ERROR = "SelectorError"
CONSTRAINT_MISMATCH = "ConstraintMismatch"
NODE_SELECTOR_MISMATCH = "NodeSelectorMismatch"
DEVICE_CLASS_NOT_FOUND = "DeviceClassNotFound"
CLAIM_NOT_FOUND = "ClaimNotFound"
CLAIM_IN_USE = "ClaimReservedElsewhere"
CLAIM_ALLOCATED_ELSEWHERE = "ClaimAllocatedElsewhere"
INVALID_CAPACITY_REQUEST = "InvalidCapacityRequest"
POOL_INVALID = "PoolInvalid"
POOL_INCOMPLETE = "PoolIncomplete"
NO_DEVICES = "NoMatchingDevices"
NO_NODES = "NoNodes"
SEARCH_LIMIT = "AllocationSearchLimit"
POD_NOT_FOUND = "PodNotFound"

AFFINITY_CODES = frozenset({
    AFFINITY_LOCK_MISMATCH, AFFINITY_NO_KEYS, AFFINITY_UNRECONSTRUCTABLE,
    AFFINITY_SELF_INCONSISTENT, AFFINITY_VALUE_TOO_LONG, AFFINITY_CEL_ERROR, AFFINITY_COST_EXCEEDED,
    AFFINITY_INVALID_POOL, AFFINITY_POOL_INCOMPLETE, AFFINITY_FEATURE_DISABLED,
})

# The kube-scheduler's node filters outside DRA (scheduler/nodefit.py)
NODE_UNSCHEDULABLE = "NodeUnschedulable"
TAINT_NOT_TOLERATED = "TaintNotTolerated"
NODE_AFFINITY_MISMATCH = "NodeAffinityMismatch"
INSUFFICIENT_NODE_RESOURCES = "InsufficientNodeResources"
HOST_PORT_CONFLICT = "HostPortConflict"
# The plugins that count other pods (scheduler/placement/filters.py)
TOPOLOGY_SPREAD_MISSING_LABEL = "TopologySpreadMissingLabel"
TOPOLOGY_SPREAD_SKEW = "TopologySpreadSkew"
POD_AFFINITY_MISMATCH = "PodAffinityMismatch"
POD_ANTI_AFFINITY_MISMATCH = "PodAntiAffinityMismatch"
EXISTING_POD_ANTI_AFFINITY = "ExistingPodAntiAffinity"
# Malformed tolerations, node affinity or resource quantities (unresolvable).
INVALID_POD_SPEC = "InvalidPodSpec"
# Hard placement constraints this scheduler does not evaluate (scheduler/unsupported.py).
UNSUPPORTED_PLACEMENT = "UnsupportedPlacement"
