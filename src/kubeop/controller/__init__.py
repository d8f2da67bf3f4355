"""kubeop.controller."""
