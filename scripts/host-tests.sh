#!/usr/bin/env bash
# Runs the host-kernel suite (rtnetlink, nftables, ipset, conntrack, generic netlink) as root
# inside private network and mount namespaces, so it never touches the machine's networking
# and `ip netns add` bind mounts vanish with the run.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
  echo "host-tests: needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN for namespaces)" >&2
  exit 1
fi
files=$(ls dist/test/host/*.test.js 2>/dev/null || true)
if [ -z "$files" ]; then
  echo "host-tests: no compiled tests in dist/test/host (run npm run build:ts)" >&2
  exit 1
fi
exec unshare --mount --net --propagation private -- bash -c '
  set -e
  ip link set lo up
  mkdir -p /run/netns && mount -t tmpfs ipvsync-netns /run/netns
  exec node --test --test-concurrency=1 --test-reporter=spec "$@"
' host-tests $files
