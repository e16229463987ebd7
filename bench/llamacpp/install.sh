#!/usr/bin/env bash
# Installs llama.cpp for the comparisons in this folder: node-llama-cpp's prebuilt CPU binaries
# (upstream llama.cpp with ggml's per-CPU variants) from the npm registry, at the versions
# package-lock.json pins, into bench/llamacpp/node_modules. Idempotent.
#
# Why `npm install --omit=optional` and not `npm ci`: node-llama-cpp lists one optional
# package per platform and GPU backend (CUDA alone is ~540 MB); the lock names only the Linux
# ones, so `npm ci` refuses it as out of sync. The x64 CPU binaries are a direct dependency
# in package.json, so omitting the optional ones keeps them and fetches ~85 MB.
set -euo pipefail
cd "$(dirname "$0")"
if [ "$(uname -m)" != x86_64 ]; then
  echo "bench/llamacpp/install.sh: package.json pins the x86-64 Linux binaries; this is $(uname -m)" >&2
  exit 2
fi
npm install --omit=optional --no-audit --no-fund --loglevel=error
node -e 'import("node-llama-cpp").then(() => console.log("node-llama-cpp: ok"))'
