//go:build tools

// Package tools pins the Kubernetes control-plane commands this wrapper module builds.
// Nothing here is compiled into toposched; `go build` of these paths produces the
// kube-apiserver, kube-scheduler and kube-controller-manager used by tests and the demo.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
