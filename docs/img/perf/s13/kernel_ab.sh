#!/usr/bin/env bash
# Builds kernel_ab (kernel_ab.cpp) against ./build's libraries, with the attention kernels of
# commit OLD_REV (src/kernels/attention.cpp, attention_avx512.cpp, attention_amx.cpp) as "old":
# compiled with their namespace and public names renamed so that they link beside the tree's.
# usage (from the repository root, after `ninja -C build`): kernel_ab.sh OLD_REV OUT_BINARY
set -eu
root=$(pwd)
rev=$1 bin=$(realpath -m "$2")
tmp=$(mktemp -d)
flags="-I$root/src -O3 -DNDEBUG -std=c++20 -w"
rename="-Dattention_internal=attention_internal_old -Dkv_store=kv_store_old -Dpaged_attention=paged_attention_old
  -Dpaged_attention_prefetch=paged_attention_prefetch_old"
objs=""
for f in attention attention_avx512 attention_amx; do
  git show "$rev:src/kernels/$f.cpp" > "$tmp/$f.cpp"
  c++ $flags $rename -c "$tmp/$f.cpp" -o "$tmp/$f.o"
  objs="$objs $tmp/$f.o"
done
c++ $flags -c "$root/docs/img/perf/s13/kernel_ab.cpp" -o "$tmp/kernel_ab.o"
cd "$root/build"
c++ -O3 "$tmp/kernel_ab.o" $objs -o "$bin" libdensa_kv.a libdensa_kernels.a libdensa_quant.a libdensa_core.a -lpthread
rm -rf "$tmp"
