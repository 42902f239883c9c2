#!/usr/bin/env bash
# Build the toposched container image (deploy/image/Containerfile) with buildah, with no image
# registry: the base is a Debian bookworm root filesystem made from Debian's packages by
# mmdebstrap (cached as a tarball in $TOPOSCHED_CACHE/image/, imported once into buildah's store).
#
#   scripts/build-image.sh [IMAGE]        default IMAGE: localhost/toposched:<version>
#
# The image is labelled org.opencontainers.image.revision=$IMAGE_REVISION (default: the git
# commit), so two builds of one tree for different revisions are different images.
#
# Needs root (or a working rootless buildah), buildah and mmdebstrap (Debian: apt-get install
# buildah mmdebstrap). BASE_IMAGE=<image> skips mmdebstrap and builds on that image instead
# (e.g. docker.io/library/debian:bookworm-slim where a registry is reachable).
# Builds use chroot isolation (no nested user/network namespaces needed) and --layers, so a
# rebuild after a source change reuses the dependency layers.
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(python3 -c 'import tomllib; print(tomllib.load(open("pyproject.toml", "rb"))["project"]["version"])')
image=${1:-localhost/toposched:$version}
# shellcheck source=scripts/image-base.sh
. scripts/image-base.sh

# A TLS-intercepting proxy's CA (what pip on this host trusts) reaches pip in the build as a
# secret, never as a layer.
secret=()
ca_bundle=${PIP_CERT:-${SSL_CERT_FILE:-}}
if [ -n "$ca_bundle" ] && [ -f "$ca_bundle" ]; then
  secret=(--secret "id=ca-bundle,src=$ca_bundle")
fi

revision=${IMAGE_REVISION:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}

# The webhook's HTTPS front (Go, static): built into the cache as setup.sh does, copied into the context.
mkdir -p build/image
cp "$(CGO_ENABLED=0 python3 -c 'from admission.front import binary; print(binary())')" build/image/toposched-webfront

echo "build-image: building $image on $base_image" >&2
exec buildah bud --isolation chroot --layers --pull=$pull "${secret[@]}" \
  --label "org.opencontainers.image.revision=$revision" \
  --build-arg "BASE_IMAGE=$base_image" \
  -f deploy/image/Containerfile -t "$image" .
