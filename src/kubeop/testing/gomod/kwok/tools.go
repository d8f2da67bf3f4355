//go:build tools

// Package tools pins kwok, built for kubeop's local control plane.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
