"""kubeop.cache."""
