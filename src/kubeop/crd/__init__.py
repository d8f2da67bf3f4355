"""kubeop.crd."""
