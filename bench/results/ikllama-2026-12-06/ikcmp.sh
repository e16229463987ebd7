#!/bin/bash
# Interleaved ik_llama.cpp vs densa on the same GGUF files, prefill 512 and batch-1 decode.
IK=/tmp/ik_llama/build/bin/llama-bench
D=/work/main/build/densa
out=/tmp/ikcmp.txt; : > $out
for r in 1 2 3; do
  for m in moe-0-vocab-q4km dense-0-vocab-q4km moe-0-vocab-iq4xs; do
    f=/tmp/densa-perf-models/$m.gguf
    ik_pp() { v=$($IK -m $f -p 512 -n 0 -t 2 -r 2 -fmoe 1 -o json 2>/dev/null | python3 /work/main/bench/llamacpp/ikllama_json.py pp | python3 -c 'import json,sys;print(json.load(sys.stdin)["prefill_tok_s"])'); echo "round $r $m ik prefill $v" >> $out; }
    ik_tg() { v=$($IK -m $f -p 0 -n 64 -t 2 -r 2 -fmoe 1 -o json 2>/dev/null | python3 /work/main/bench/llamacpp/ikllama_json.py tg | python3 -c 'import json,sys;print(json.load(sys.stdin)["decode_tok_s"])'); echo "round $r $m ik decode $v" >> $out; }
    de_pp() { v=$($D bench offline -m $f --batch 1 --prompt-len 512 --gen-len 2 --repeats 2 --threads 2 2>/dev/null | grep '^prefill' | awk '{print $2}'); echo "round $r $m densa prefill $v" >> $out; }
    de_tg() { v=$($D bench offline -m $f --batch 1 --prompt-len 16 --gen-len 64 --repeats 2 --threads 2 2>/dev/null | grep '^decode' | awk '{print $2}'); echo "round $r $m densa decode $v" >> $out; }
    if (( r % 2 )); then ik_pp; de_pp; ik_tg; de_tg; else de_pp; ik_pp; de_tg; ik_tg; fi
  done
done
echo done >> $out
