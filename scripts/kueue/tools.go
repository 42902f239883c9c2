//go:build tools

// Package tools pins the Kueue controller this wrapper module builds. Nothing here is
// compiled into toposched; `go build sigs.k8s.io/kueue/cmd/kueue` in this module produces
// the peer Kueue controller used by tests/conformance and scripts/bench/vs_kueue.py.
package tools

import (
	_ "sigs.k8s.io/kueue/cmd/kueue"
)
