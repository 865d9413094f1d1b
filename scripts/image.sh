#!/usr/bin/env bash
# `npm run image`: builds the repository's Dockerfile here, where there is no Docker daemon and
# no registry — on the local base image of scripts/image-base.sh (NODE_IMAGE), with buildah,
# cached layers kept between runs. Tags $IPVSYNC_IMAGE (default localhost/ipvsync:dev).
# Ends with one line saying what it did. A Docker user builds the same file with
# `docker build .` (docs/releasing.md#the-node-image).
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$SECONDS

image=${IPVSYNC_IMAGE:-localhost/ipvsync:dev}
base=${IPVSYNC_NODE_IMAGE:-localhost/ipvsync-node:20-bookworm-slim}

bash scripts/image-base.sh

log=$(mktemp)
etc=$(mktemp -d)
trap 'rm -rf "$log" "$etc"' EXIT
# The build's npm trusts what this machine's npm trusts (a TLS-intercepting egress proxy's CA
# among them): a directory holding its CA file and a global npmrc naming it is mounted over the
# image's (empty) /usr/local/etc for the RUN steps only. A directory over one that exists leaves
# no mount point behind: nothing of this machine lands in the image.
ca=$(npm config get cafile 2>/dev/null || true)
case $ca in ''|null|undefined) ca=/etc/ssl/certs/ca-certificates.crt ;; esac
mounts=()
if [ -f "$ca" ]; then
  cp "$ca" "$etc/build-ca.crt"
  echo 'cafile=/usr/local/etc/build-ca.crt' >"$etc/npmrc"
  chmod -R a+rX "$etc"
  mounts=(--volume "$etc:/usr/local/etc:ro")
fi

# --network host: apt and npm inside the build reach their mirrors as this machine does (no
# bridge to set up). --isolation chroot: RUN steps need no OCI runtime (crun refuses this
# machine's hybrid cgroup layout, "cgroups in hybrid mode not supported"; runc would do, chroot
# is simpler). --layers: each step is cached, so a rebuild redoes only what its inputs changed.
if ! buildah bud --quiet --layers --force-rm --pull=never --network host --isolation chroot \
  "${mounts[@]}" --build-arg NODE_IMAGE="$base" -t "$image" -f Dockerfile . >"$log" 2>&1; then
  cat "$log" >&2
  echo "image: buildah bud failed" >&2
  exit 1
fi
# Cached layers of builds from earlier trees pile up (~100 MB a build): untagged ones older than
# three days go; a step then rebuilds once at most.
podman image prune --force --filter until=72h >/dev/null 2>&1 || true
id=$(buildah inspect --type image --format '{{.FromImageID}}' "$image")
size=$(buildah images --format '{{.Size}}' "$image" | head -n 1)
echo "image: built $image on $base (id ${id:0:12}, $size) in $((SECONDS - t0)) s"
