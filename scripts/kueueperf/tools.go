//go:build tools

// Package tools pins Kueue's scheduler performance runner and checker, which
// scripts/bench/kueue_perf.py builds from the sigs.k8s.io/kueue module in the Go module
// cache (`go build .../runner`, `go test -c .../checker`). Nothing here is compiled into
// toposched and no Kueue code is copied: this module only records the versions.
package tools

import (
	_ "sigs.k8s.io/kueue/test/performance/scheduler/checker"
	_ "sigs.k8s.io/kueue/test/performance/scheduler/runner"
)
