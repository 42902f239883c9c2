//go:build tools

// Package tools pins the KubeRay ray-operator this wrapper module builds. Nothing here is
// compiled into toposched; `go build github.com/ray-project/kuberay/ray-operator` in this module
// produces the RayJob/RayCluster/RayService controller the Ray end-to-end tests and `toposched dev
// up --ray` run (scheduler/devcluster/kuberay.py). v1.6.0 is the release Kueue v0.17.0's go.mod
// requires.
package tools

import (
	_ "github.com/ray-project/kuberay/ray-operator"
)
