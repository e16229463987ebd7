#!/usr/bin/env bash
# Builds densa and serves the default model (the MoE fixture in models/) on
# http://127.0.0.1:8080 with an OpenAI-compatible API. Extra arguments replace the default
# subcommand, e.g. `scripts/run.sh info` or `scripts/run.sh serve --port 9000`.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDENSA_BUILD_TESTS=OFF -DDENSA_BUILD_BENCH=OFF >/dev/null
cmake --build build -j "$(nproc)" --target densa
if (($#)); then
  exec ./build/densa "$@"
fi
exec ./build/densa serve --host 127.0.0.1 --port 8080
