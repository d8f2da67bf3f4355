//go:build tools

// Package tools pins etcd, built for kubeop's local control plane.
package tools

import _ "go.etcd.io/etcd/server/v3"
