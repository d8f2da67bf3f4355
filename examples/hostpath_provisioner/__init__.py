"""A dynamic volume provisioner written with kubeop: hostPath PersistentVolumes for the claims of
StorageClasses whose provisioner is ``kubeop.dev/hostpath`` (a cluster-scoped operator)."""
