#!/usr/bin/env bash
# The README's demo command (`npm run demo`): builds everything, boots an IPVS-capable kernel
# (user-mode-linux; this machine's own kernel may lack IPVS) and runs the built-in example in it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec node dist/test/vm/cli.js -- bash scripts/demo-guest.sh
