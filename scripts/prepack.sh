#!/usr/bin/env bash
# `npm pack` / `npm publish` build what they ship (docs/releasing.md): dist/src compiled afresh
# from tsconfig.build.json (no source maps, nothing from a deleted file), and the addon's
# prebuilds (scripts/prebuild.sh). On a fresh clone the development dependencies (TypeScript,
# prebuildify, node-gyp) are installed first, at the lockfile's versions, saying so.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x node_modules/.bin/tsc ] || [ ! -x node_modules/.bin/prebuildify ] || [ ! -x node_modules/.bin/node-gyp ]; then
  echo "prepack: the development dependencies are not installed (a fresh clone?): npm ci --ignore-scripts" >&2
  npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >&2
fi
rm -rf dist/src
node_modules/.bin/tsc -p tsconfig.build.json
bash scripts/prebuild.sh
