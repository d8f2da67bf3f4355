"""NamespaceUsage: an aggregated API whose objects are computed from the cluster, not stored.

``kubectl get namespaceusages`` lists one object per namespace with how many ConfigMaps,
Secrets and Pods it holds, counted from kubeop informers' caches; ``kubectl get -w`` sees an
object change as soon as a ConfigMap is created or deleted. Nothing is kept in etcd or on disk:
:class:`~examples.namespace_usage.usage.UsageStorage` is a read-only ``kubeop.apiserver.Storage``
over the caches (writes are 405). See docs/concepts/aggregation.md.

    python -m examples.namespace_usage --cert-dir certs/ --address 0.0.0.0:8443
"""
