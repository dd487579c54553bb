"""Placement beside devices: the kube-scheduler's inter-pod, spread and port plugins.

What kube-scheduler's default profile (1.37) decides about a pod's node, other than
its devices and the four basic node filters of :mod:`..nodefit`:

* :mod:`.selectors`: ``metav1.LabelSelector`` with its nil/empty meanings;
* :mod:`.terms`: a pod's inter-pod affinity terms, topology spread constraints and
  host ports, parsed once per pod;
* :mod:`.index`: what the bound pods say about each topology domain, kept up to date
  from pod events (upstream's PreFilter state, made incremental across cycles);
* :mod:`.filters`: PreFilter and Filter of NodePorts, PodTopologySpread and
  InterPodAffinity;
* :mod:`.scores`: the default profile's score plugins.

What the API server writes into a pod at creation (``matchLabelKeys`` merged into
selectors) is :mod:`dra_affinity.validation.pod_strategy`, for the embedded cluster.

This package imports nothing at package level, so :mod:`..nodefit` may import
:mod:`.terms` without a cycle.
"""
