//go:build tools

// Package tools pins the Kubeflow Trainer v2 controller manager this wrapper module builds.
// Nothing here is compiled into toposched; `go build .../cmd/trainer-controller-manager` in this
// module produces the TrainJob controller the TrainJob end-to-end tests and `toposched dev up
// --trainjob` run (scheduler/devcluster/trainer.py). v2.2.0 is the release Kueue v0.17.0's go.mod
// requires.
package tools

import (
	_ "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager"
)
