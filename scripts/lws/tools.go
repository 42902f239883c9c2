//go:build tools

// Package tools pins the LeaderWorkerSet controller this wrapper module builds. Nothing here is
// compiled into toposched; `go build sigs.k8s.io/lws/cmd` in this module produces the LWS
// controller the LeaderWorkerSet end-to-end tests run (scheduler/devcluster/lws.py).
package tools

import (
	_ "sigs.k8s.io/lws/cmd"
)
