#!/usr/bin/env bash
# Builds ik_llama.cpp's llama-bench outside this repository, for compare.sh's second peer
# (IK_LLAMA_BENCH). The source is a checkout of https://github.com/ikawrakow/ik_llama.cpp
# (its commit goes in the performance docs beside the numbers); native CPU code
# (-DGGML_NATIVE=ON), Release, no server, no tests, no CURL.
# Usage: bench/llamacpp/build_ik_llama.sh SRC_DIR [BUILD_DIR] [JOBS]
#   BUILD_DIR default SRC_DIR/build, JOBS default nproc. Prints the llama-bench path.
set -euo pipefail
src=$(realpath "$1")
build=${2:-$src/build}
jobs=${3:-$(nproc)}
cmake -S "$src" -B "$build" -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DCMAKE_BUILD_TYPE=Release \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF >&2
cmake --build "$build" -j "$jobs" --target llama-bench >&2
bin=$(find "$build" -name llama-bench -type f -perm -u+x | head -1)
[ -n "$bin" ] || { echo "build_ik_llama: no llama-bench under $build" >&2; exit 1; }
echo "$bin"
