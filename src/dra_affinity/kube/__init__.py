"""The scheduler core on a real Kubernetes cluster: ``dra-affinity scheduler`` and
``dra-affinity locks --kubeconfig`` (informers, a ClusterView over them, the
DynamicResources plugin's writes, leader election, metrics)."""
