# Sourced by scripts/build-image.sh and scripts/build-kube-scheduler-image.sh: the base image.
# BASE_IMAGE=<image> uses that image (pulled if absent); by default a Debian bookworm root
# filesystem made from Debian's packages by mmdebstrap (cached as a tarball in
# $TOPOSCHED_CACHE/image/, imported once into buildah's store as localhost/toposched-base:bookworm),
# because no image registry is reachable where the tests run.
# Sets: base_image, pull (buildah's --pull value).
cache=${TOPOSCHED_CACHE:-$HOME/.cache/toposched}/image
base_image=${BASE_IMAGE:-}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org}

command -v buildah >/dev/null || { echo "$(basename "$0"): buildah is not installed (apt-get install buildah mmdebstrap)" >&2; exit 2; }
pull=false  # pull the base only if it is not in the store

if [ -z "$base_image" ]; then
  base_image=localhost/toposched-base:bookworm
  pull=never
  rootfs=$cache/debian-bookworm-minbase.tar
  if [ ! -s "$rootfs" ]; then
    command -v mmdebstrap >/dev/null || { echo "$(basename "$0"): mmdebstrap is not installed (apt-get install mmdebstrap)" >&2; exit 2; }
    mkdir -p "$cache"
    echo "$(basename "$0"): making a Debian bookworm base filesystem with mmdebstrap -> $rootfs" >&2
    mmdebstrap --quiet --variant=minbase --format=tar bookworm "$rootfs.partial" \
      "deb $mirror/debian bookworm main" \
      "deb $mirror/debian bookworm-updates main" \
      "deb $mirror/debian-security bookworm-security main"
    mv "$rootfs.partial" "$rootfs"
  fi
  if ! buildah inspect --type image "$base_image" >/dev/null 2>&1; then
    echo "$(basename "$0"): importing $rootfs as $base_image" >&2
    ctr=$(buildah from --pull=never scratch)
    trap 'buildah rm "$ctr" >/dev/null 2>&1 || true' EXIT
    buildah add --quiet "$ctr" "$rootfs" / >/dev/null
    buildah config --cmd /bin/bash "$ctr"
    buildah commit --quiet --rm "$ctr" "$base_image" >/dev/null
    trap - EXIT
  fi
fi
