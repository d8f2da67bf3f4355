"""kubeop.queue."""
