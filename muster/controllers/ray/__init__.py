"""KubeRay's kinds as workloads: the RayCluster controller (a cluster is one gang of
``ray start`` pods admitted through the queues; its state and endpoints) and the RayJob
controller (a job's cluster, its submitter pod running the entrypoint, its status and its
clean-up). docs/ray.md, "KubeRay manifests", is the guide.
"""
