"""kubeop.cluster: one API server as everything running against it shares it (:class:`Cluster`)."""

from kubeop.cluster.cluster import Cluster

__all__ = ["Cluster"]
