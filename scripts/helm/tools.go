//go:build tools

// Package tools pins the Helm release this wrapper module builds. Nothing here is compiled
// into toposched; `go build helm.sh/helm/v4/cmd/helm` in this module produces the helm binary
// the chart tests use to render deploy/helm/toposched (scheduler/devcluster/binaries.py).
package tools

import (
	_ "helm.sh/helm/v4/cmd/helm"
)
