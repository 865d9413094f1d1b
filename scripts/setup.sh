#!/usr/bin/env bash
# Installs and builds everything ipvsync's tests and demo need on a fresh Debian machine:
# apt packages (python3 for node-gyp and a host test, the cross-check tools, clang for the
# fuzzer, the arm64 cross compiler for the prebuilds `npm pack` makes), npm dependencies, the
# native addon (node-gyp, incremental) and the TypeScript build. Idempotent and quiet when done.
# The VM kernels' packages are installed by scripts/vm-deps.sh when a VM suite first runs, the
# container tools by scripts/image-base.sh when the node image is first built.
set -euo pipefail
cd "$(dirname "$0")/.."

apt_pkgs=(python3 iproute2 ipset nftables conntrack ipvsadm iptables strace clang libclang-rt-14-dev kmod openssl g++-aarch64-linux-gnu)
missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "setup: missing apt packages (${missing[*]}) and not root to install them" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# npm dependencies (offline-capable: node-gyp builds against the machine's Node headers).
if [ ! -d node_modules/node-addon-api ] || [ package.json -nt node_modules/.package-lock.json ]; then
  echo "setup: npm install"
  npm install --no-audit --no-fund --ignore-scripts --loglevel=error
fi

# Build against the machine's own Node headers (offline). npm passes its `nodedir` setting in
# the environment; when this script runs outside npm, find the headers ourselves.
if [ -z "${npm_config_nodedir:-}" ]; then
  nodedir=$(npm config get nodedir 2>/dev/null || true)
  if [ -z "$nodedir" ] || [ "$nodedir" = undefined ] || [ "$nodedir" = null ]; then
    nodedir=$(dirname "$(dirname "$(command -v node)")")
  fi
  [ -f "$nodedir/include/node/node_api.h" ] && export npm_config_nodedir="$nodedir"
fi

# The addon: configure every time (binding.gyp lists native/**/*.cc at configure time, so a new
# source file is picked up), then an incremental build.
echo "setup: building the addon"
./node_modules/.bin/node-gyp configure --loglevel=error >/dev/null
./node_modules/.bin/node-gyp build -j "$(nproc)" --loglevel=error >/dev/null

echo "setup: compiling TypeScript"
./node_modules/.bin/tsc -p tsconfig.json
chmod +x dist/src/cli/main.js
