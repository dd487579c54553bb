"""The embedded in-memory cluster and scenario runner behind ``dra-affinity simulate``."""
