//go:build tools

// Package tools pins the Kubeflow mpi-operator this wrapper module builds. Nothing here is
// compiled into toposched; `go build github.com/kubeflow/mpi-operator/cmd/mpi-operator` in this
// module produces the MPIJob (v2beta1) controller the MPIJob end-to-end tests run
// (scheduler/devcluster/mpioperator.py).
package tools

import (
	_ "github.com/kubeflow/mpi-operator/cmd/mpi-operator"
)
