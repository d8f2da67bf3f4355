"""kubeop: a Python framework for writing Kubernetes operators."""

__version__ = "0.1.0"
