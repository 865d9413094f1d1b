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

# test/host/package.test.ts installs the packed tarball with the Kubernetes client at the lowest
# and highest versions of its peer range, in a network namespace without a network: what those
# installs resolve (ipvsync's dependencies by their ranges, each client's tree, the types 2.x
# needs) and the Node.js 22.19 it runs 2.x on must be in npm's cache. Filled here, where the
# network is (quick once it is there); without a network the test says what it missed.
fill_npm_cache() {
  local dir=$1 client=$2 extra=$3
  mkdir -p "$dir"
  node -e '
    const [dir, client, extra] = process.argv.slice(1);
    const m = require(process.cwd() + "/package.json");
    const deps = { ...m.dependencies, "@kubernetes/client-node": client, ...(extra ? { [extra.split("@^")[0]]: "^" + extra.split("@^")[1] } : {}) };
    require("fs").writeFileSync(dir + "/package.json", JSON.stringify({ name: "cache-fill", private: true, dependencies: deps }));
  ' "$dir" "$client" "$extra"
  (cd "$dir" && npm install --prefer-offline --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
}
cache_dir=$(mktemp -d)
if ! { fill_npm_cache "$cache_dir/c1" 1.0.0 "" && fill_npm_cache "$cache_dir/c2" 2.0.1 "@types/ws@^8.18.1" &&
  (cd "$cache_dir" && npm pack --prefer-offline --loglevel=error "node-linux-$(node -p process.arch)@22.19.0" >/dev/null); }; then
  echo "setup: npm's cache could not be filled for the package test (no network?)" >&2
fi
rm -rf "$cache_dir"
