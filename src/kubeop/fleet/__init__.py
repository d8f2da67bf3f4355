"""Several clusters, one operator: controllers declared once, run against every engaged cluster.

    fleet = Fleet(Kubeconfigs({"east": "east.yaml", "west": "west.yaml"}), name="widget-operator")
    fleet.add(Controller.for_(Widget).owns(ConfigMap).reconcile(reconcile))
    fleet.run()

A reconcile's request names its cluster (``req.cluster``) and its context is that cluster's
(``ctx.client``, ``ctx.recorder``); :meth:`Fleet.cluster` reaches another engaged cluster by name.
Cluster providers engage and disengage clusters while the fleet runs: :class:`Kubeconfigs` (a fixed
list), :class:`KubeconfigSecrets` (Secrets in a hub cluster, Cluster API's convention).
"""

from kubeop.fleet.fleet import Fleet
from kubeop.fleet.provider import ClusterProvider, Engagement, Kubeconfigs
from kubeop.fleet.secrets import KubeconfigSecrets, kubeconfig_from_secret
from kubeop.fleet.sharding import ClusterSharding

__all__ = [
    "ClusterProvider",
    "ClusterSharding",
    "Engagement",
    "Fleet",
    "KubeconfigSecrets",
    "Kubeconfigs",
    "kubeconfig_from_secret",
]
