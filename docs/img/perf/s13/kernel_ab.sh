#!/usr/bin/env bash
# Builds kernel_ab (kernel_ab.cpp) against ./build's libraries, with OLD_AMX_CPP (an earlier
# commit's src/kernels/attention_amx.cpp, e.g. `git show REV:src/kernels/attention_amx.cpp`) as
# the old kernel in namespace attention_internal_old.
# usage (from the repository root, after `ninja -C build`): kernel_ab.sh OLD_AMX_CPP OUT_BINARY
set -eu
root=$(pwd)
old=$(realpath "$1") bin=$(realpath -m "$2")
tmp=$(mktemp -d)
flags="-I$root/src -O3 -DNDEBUG -std=c++20 -w"
c++ $flags -Dattention_internal=attention_internal_old -c "$old" -o "$tmp/old_amx.o"
c++ $flags -c "$root/docs/img/perf/s13/kernel_ab.cpp" -o "$tmp/kernel_ab.o"
cd "$root/build"
c++ -O3 "$tmp/kernel_ab.o" "$tmp/old_amx.o" -o "$bin" libdensa_kv.a libdensa_kernels.a libdensa_quant.a \
  libdensa_core.a -lpthread
rm -rf "$tmp"
