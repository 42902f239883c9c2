#!/usr/bin/env bash
# Build a kube-scheduler image for the chart's scheduler Deployment (values scheduler.image.*)
# where registry.k8s.io cannot be reached: the kube-scheduler binary of the local control plane
# (Kubernetes v1.37.2 built from the Go module proxy into ~/.cache/toposched, building it first
# if needed) on the same Debian bookworm base as scripts/build-image.sh, at
# /usr/local/bin/kube-scheduler as in registry.k8s.io/kube-scheduler, user 65532.
#
#   scripts/build-kube-scheduler-image.sh [IMAGE]    default IMAGE: localhost/kube-scheduler:v1.37.2
#
# Where registry.k8s.io is reachable (EKS), use registry.k8s.io/kube-scheduler:<the control
# plane's version> instead (docs/install.md).
set -euo pipefail
cd "$(dirname "$0")/.."

bin_dir=$(PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} python3 -c \
  'from scheduler.devcluster.binaries import ensure_k8s_binaries; print(ensure_k8s_binaries())')
version=$(cat "$bin_dir/VERSION")
image=${1:-localhost/kube-scheduler:$version}
# shellcheck source=scripts/image-base.sh
. scripts/image-base.sh

echo "build-kube-scheduler-image: building $image ($version) on $base_image" >&2
ctr=$(buildah from --pull=$pull "$base_image")
trap 'buildah rm "$ctr" >/dev/null 2>&1 || true' EXIT
buildah copy --quiet --chmod 0755 "$ctr" "$bin_dir/kube-scheduler" /usr/local/bin/kube-scheduler >/dev/null
buildah config --cmd "" "$ctr"
buildah config --user 65532:65532 --entrypoint '["/usr/local/bin/kube-scheduler"]' \
  --label "org.opencontainers.image.title=kube-scheduler" \
  --label "org.opencontainers.image.version=$version" "$ctr"
buildah commit --quiet --rm "$ctr" "$image" >/dev/null
trap - EXIT
echo "$image"
