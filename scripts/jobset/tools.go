//go:build tools

// Package tools pins the JobSet controller this wrapper module builds. Nothing here is
// compiled into toposched; `go build sigs.k8s.io/jobset` in this module produces the JobSet
// controller the JobSet end-to-end tests run (scheduler/devcluster/jobset.py).
package tools

import (
	_ "sigs.k8s.io/jobset"
)
