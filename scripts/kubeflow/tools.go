//go:build tools

// Package tools pins the Kubeflow training-operator this wrapper module builds. Nothing here
// is compiled into toposched; `go build .../cmd/training-operator.v1` in this module produces
// the PyTorchJob controller the PyTorchJob end-to-end tests run (scheduler/devcluster/kubeflow.py).
package tools

import (
	_ "github.com/kubeflow/training-operator/cmd/training-operator.v1"
)
