"""The scheduler: the DynamicResources plugin's phases over a ``ClusterView`` port.

See :mod:`.scheduler` for the phases and :mod:`.view` for the port.
"""
