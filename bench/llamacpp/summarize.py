#!/usr/bin/env python3
"""Summarizes bench/llamacpp/compare.sh's OUT_DIR into a markdown table.

For every row and configuration: the per-round tok/s, their median, and for densa's
configurations the per-round ratio against llama.cpp's reference configuration of the same
row (F16 KV), as a median with its range and the number of rounds densa was faster.
Decode rows compare decode tok/s, prefill rows prefill tok/s.
"""
import glob
import json
import os
import statistics
import sys


def metric_of(row):
    return "prefill_tok_s" if "_prefill_" in row else "decode_tok_s"


def main(out):
    runs = {}  # (row, config) -> {round: value}
    rounds = sorted(glob.glob(os.path.join(out, "round-*")), key=lambda d: int(d.rsplit("-", 1)[1]))
    for d in rounds:
        r = int(d.rsplit("-", 1)[1])
        for f in sorted(glob.glob(os.path.join(d, "*.json"))):
            row, config = os.path.basename(f)[:-5].split(".", 1)
            with open(f) as fh:
                runs.setdefault((row, config), {})[r] = json.load(fh)[metric_of(row)]
    if not runs:
        sys.exit("summarize: no results under " + out)
    print("| row | engine, configuration | tok/s per round | median | densa / llama.cpp (F16 KV), paired: "
          "median [min, max], rounds faster |")
    print("|---|---|---|---|---|")
    for row in dict.fromkeys(k[0] for k in runs):
        ref = runs.get((row, "llama-f16"), {})
        configs = sorted((c for (r, c) in runs if r == row), key=lambda c: (not c.startswith("llama"), c))
        for config in configs:
            vals = runs[(row, config)]
            per_round = ", ".join("%.1f" % vals[r] for r in sorted(vals))
            ratio = ""
            if config.startswith("densa"):
                pairs = [vals[r] / ref[r] for r in sorted(vals) if r in ref and ref[r] > 0]
                if pairs:
                    faster = sum(p > 1 for p in pairs)
                    ratio = "%.2fx [%.2f, %.2f], %d of %d" % (statistics.median(pairs), min(pairs), max(pairs),
                                                             faster, len(pairs))
            engine = config.replace("llama-", "llama.cpp, KV ").replace("densa-", "densa, ")
            print("| %s (%s) | %s | %s | %.1f | %s |" % (row, metric_of(row).replace("_tok_s", ""), engine, per_round,
                                                       statistics.median(vals.values()), ratio))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: summarize.py OUT_DIR")
    main(sys.argv[1])
