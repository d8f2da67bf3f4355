//go:build tools

// Package tools pins helm, built for kubeop's local control plane.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
