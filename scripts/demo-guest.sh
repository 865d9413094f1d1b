#!/usr/bin/env bash
# Runs inside the VM (see scripts/demo.sh): the built-in example.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "# ipvsync ipvs info"
node dist/src/cli/main.js ipvs info
