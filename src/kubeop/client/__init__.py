"""kubeop.client."""
