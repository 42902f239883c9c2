#!/usr/bin/env bash
# Build the toposched container image (deploy/image/Containerfile) with buildah, with no image
# registry: the base is a Debian bookworm root filesystem made from Debian's packages by
# mmdebstrap (cached as a tarball in $TOPOSCHED_CACHE/image/, imported once into buildah's store).
#
#   scripts/build-image.sh [IMAGE]        default IMAGE: localhost/toposched:<version>
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
cache=${TOPOSCHED_CACHE:-$HOME/.cache/toposched}/image
base_image=${BASE_IMAGE:-}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org}

command -v buildah >/dev/null || { echo "build-image: buildah is not installed (apt-get install buildah mmdebstrap)" >&2; exit 2; }
pull=false  # pull the base only if it is not in the store

if [ -z "$base_image" ]; then
  base_image=localhost/toposched-base:bookworm
  pull=never
  rootfs=$cache/debian-bookworm-minbase.tar
  if [ ! -s "$rootfs" ]; then
    command -v mmdebstrap >/dev/null || { echo "build-image: mmdebstrap is not installed (apt-get install mmdebstrap)" >&2; exit 2; }
    mkdir -p "$cache"
    echo "build-image: making a Debian bookworm base filesystem with mmdebstrap -> $rootfs" >&2
    mmdebstrap --quiet --variant=minbase --format=tar bookworm "$rootfs.partial" \
      "deb $mirror/debian bookworm main" \
      "deb $mirror/debian bookworm-updates main" \
      "deb $mirror/debian-security bookworm-security main"
    mv "$rootfs.partial" "$rootfs"
  fi
  if ! buildah inspect --type image "$base_image" >/dev/null 2>&1; then
    echo "build-image: importing $rootfs as $base_image" >&2
    ctr=$(buildah from --pull=never scratch)
    trap 'buildah rm "$ctr" >/dev/null 2>&1 || true' EXIT
    buildah add --quiet "$ctr" "$rootfs" / >/dev/null
    buildah config --cmd /bin/bash "$ctr"
    buildah commit --quiet --rm "$ctr" "$base_image" >/dev/null
    trap - EXIT
  fi
fi

# A TLS-intercepting proxy's CA (what pip on this host trusts) reaches pip in the build as a
# secret, never as a layer.
secret=()
ca_bundle=${PIP_CERT:-${SSL_CERT_FILE:-}}
if [ -n "$ca_bundle" ] && [ -f "$ca_bundle" ]; then
  secret=(--secret "id=ca-bundle,src=$ca_bundle")
fi

echo "build-image: building $image on $base_image" >&2
exec buildah bud --isolation chroot --layers --pull=$pull "${secret[@]}" \
  --build-arg "BASE_IMAGE=$base_image" \
  -f deploy/image/Containerfile -t "$image" .
