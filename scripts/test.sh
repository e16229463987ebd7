#!/usr/bin/env bash
# Builds densa (Release, -O3) and runs every test. This is the README's test command and what
# CI runs; warnings are errors (DENSA_WERROR). The tests read the fixture models from
# ../shared/models (DENSA_MODELS_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DDENSA_WERROR=ON
cmake --build build -j "$(nproc)"
ctest --test-dir build --output-on-failure -j "$(nproc)" "$@"
