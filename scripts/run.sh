#!/usr/bin/env bash
# Builds densa and runs it on the default model (the MoE fixture in models/). Extra
# arguments replace the default subcommand, e.g. `scripts/run.sh info`.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDENSA_BUILD_TESTS=OFF -DDENSA_BUILD_BENCH=OFF >/dev/null
cmake --build build -j "$(nproc)" --target densa
if (($#)); then
  exec ./build/densa "$@"
fi
exec ./build/densa generate -p "Once upon a time, there was a little girl named Lily." -n 48
