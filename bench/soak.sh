#!/usr/bin/env bash
# Soak: N minutes of mixed load against densa processes it starts itself, one verdict line.
# What it does and judges: the header of bench/soak.mjs; results: docs/performance/soak.md.
#   bench/soak.sh --minutes 2 --mode both          # the CI size (about 3 minutes in all)
#   bench/soak.sh --minutes 30 --mode both --out build/soak-30
# Needs build/densa (or --densa PATH) and node (Node 18+, built-in modules only).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v node >/dev/null || { echo "bench/soak.sh: node is not installed" >&2; exit 2; }
exec node bench/soak.mjs "$@"
