"""kubeop.manager."""
