"""kubeop.core."""
