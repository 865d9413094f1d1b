#!/usr/bin/env bash
# `npm run image:test`: proves the node image (scripts/image.sh, rebuilt here from its cached
# layers so the tree under test is the image under test) serves traffic as the DaemonSet runs
# it: test/image/daemonset.test.ts under podman, as root inside private network and mount
# namespaces (this machine's networking is never touched). Ends with one line saying what it
# did.
#
# podman runs the container with runc and cgroupfs, and a containers.conf without default
# ulimits: crun refuses this machine's hybrid cgroup layout ("cgroups in hybrid mode not
# supported, drop all controllers from cgroupv2"), and without CAP_SYS_RESOURCE neither runtime
# may set podman's default RLIMIT_NOFILE/NPROC ("setrlimit `RLIMIT_NOFILE`: Operation not
# permitted"). docs/releasing.md#the-node-image.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$SECONDS
if [ "$(id -u)" != 0 ]; then
  echo "image-test: needs root (namespaces, podman's storage)" >&2
  exit 1
fi
if [ ! -f dist/test/image/daemonset.test.js ]; then
  echo "image-test: no compiled test in dist/test/image (run npm run build:ts)" >&2
  exit 1
fi
image=${IPVSYNC_IMAGE:-localhost/ipvsync:dev}
export IPVSYNC_IMAGE=$image

bash scripts/image.sh

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
printf '[containers]\ndefault_ulimits = []\n' >"$work/containers.conf"
export CONTAINERS_CONF=$work/containers.conf
export IPVSYNC_PODMAN_FLAGS='--runtime runc --cgroup-manager cgroupfs'
export IPVSYNC_IMAGE_TEST_REPORT=$work/report

if ! unshare --mount --net --propagation private -- bash -c '
  set -e
  ip link set lo up
  mkdir -p /run/netns && mount -t tmpfs ipvsync-netns /run/netns
  exec node --test --test-concurrency=1 --test-reporter=spec dist/test/image/
'; then
  echo "image-test: FAILED: $image as deploy/daemonset.yaml runs it (test/image/daemonset.test.ts above), in $((SECONDS - t0)) s" >&2
  exit 1
fi
id=$(podman image inspect --format '{{.Id}}' "$image")
size=$(podman images --format '{{.Size}}' "$image" | head -n 1)
echo "image-test: $image (id ${id:0:12}, $size) under podman (runc) as deploy/daemonset.yaml runs it with deploy/config-nftables.yaml: $(cat "$work/report"); contents checked; in $((SECONDS - t0)) s"
