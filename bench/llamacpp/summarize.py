#!/usr/bin/env python3
"""Summarizes bench/llamacpp/compare.sh's OUT_DIR into a markdown table.

For every row and configuration: the per-round tok/s, their median, and for densa's
configurations the per-round ratio against llama.cpp's reference configuration of the same
row (F16 KV), as a median with its range and the number of rounds densa was faster.
Decode rows compare decode tok/s, prefill rows prefill tok/s. Then a roofline of densa's decode
rows: bytes per step, achieved GB/s and their share of the membw reading in OUT_DIR/membw.txt.
"""
import glob
import json
import os
import statistics
import sys


def metric_of(row):
    return "prefill_tok_s" if "_prefill_" in row else "decode_tok_s"


def membw_2threads(out, size):
    """The two-thread reads of `size` (1GiB, 192MiB) in OUT_DIR/membw.txt (GB/s), or []."""
    try:
        with open(os.path.join(out, "membw.txt")) as fh:
            text = fh.read()
    except OSError:
        return []
    return [float(line.split("GB=")[1].split("/")[0]) for line in text.splitlines()
            if line.startswith("membw/read_%s/threads:2/" % size) and "GB=" in line]


def roofline(out, reports):
    """densa's decode rows: bytes per step, achieved GB/s, percent of the measured bandwidth."""
    # The reference is the larger of the 1 GiB and the 192 MiB read: models of 170-330 MB can
    # sit partly in a large L3, and the 192 MiB read is what such a footprint streams at.
    bw = {size: membw_2threads(out, size) for size in ("1GiB", "192MiB")}
    means = [statistics.mean(v) for v in bw.values() if v]
    ref = max(means) if means else 0.0
    print()
    print("densa decode rows (medians over rounds); bandwidth = membw, 2 threads: 1 GiB read %s GB/s, "
          "192 MiB read %s GB/s; %% of the larger mean (%.1f GB/s)" % (
              ", ".join("%.1f" % b for b in bw["1GiB"]) or "-", ", ".join("%.1f" % b for b in bw["192MiB"]) or "-",
              ref))
    print()
    print("| row | configuration | weight MB / step | KV MB / step | ms / step | weights GB/s | "
          "weights + KV GB/s | % of bandwidth |")
    print("|---|---|---|---|---|---|---|---|")
    for (row, config), by_round in reports.items():
        if not config.startswith("densa") or "_prefill_" in row:
            continue
        js = list(by_round.values())
        med = lambda key: statistics.median(j[key] for j in js)
        total = med("total_gbs")
        print("| %s | %s | %.1f | %.1f | %.2f | %.1f | %.1f | %s |" % (
            row, config[len("densa-"):], med("weight_bytes_per_step") / 1e6, med("kv_bytes_per_step") / 1e6,
            med("decode_step_ms"), med("weight_gbs"), total, "%.0f%%" % (100 * total / ref) if ref else "-"))


def paired_ratio(vals, ref):
    """densa / peer per round where both ran: median [min, max], rounds densa was faster."""
    pairs = [vals[r] / ref[r] for r in sorted(vals) if r in ref and ref[r] > 0]
    if not pairs:
        return ""
    faster = sum(p > 1 for p in pairs)
    return "%.2fx [%.2f, %.2f], %d of %d" % (statistics.median(pairs), min(pairs), max(pairs), faster, len(pairs))


def main(out):
    runs = {}  # (row, config) -> {round: value}
    reports = {}  # (row, config) -> {round: densa JSON}
    rounds = sorted(glob.glob(os.path.join(out, "round-*")), key=lambda d: int(d.rsplit("-", 1)[1]))
    for d in rounds:
        r = int(d.rsplit("-", 1)[1])
        for f in sorted(glob.glob(os.path.join(d, "*.json"))):
            row, config = os.path.basename(f)[:-5].split(".", 1)
            with open(f) as fh:
                j = json.load(fh)
            runs.setdefault((row, config), {})[r] = j[metric_of(row)]
            reports.setdefault((row, config), {})[r] = j
    if not runs:
        sys.exit("summarize: no results under " + out)
    with_ik = any(c == "ikllama" for (_, c) in runs)
    print("| row | engine, configuration | tok/s per round | median | densa / llama.cpp (F16 KV), paired: "
          "median [min, max], rounds faster |" + (" densa / ik_llama.cpp, paired |" if with_ik else ""))
    print("|---|---|---|---|---|" + ("---|" if with_ik else ""))
    order = {"llama": 0, "ikllama": 1, "densa": 2}
    for row in dict.fromkeys(k[0] for k in runs):
        refs = [runs.get((row, "llama-f16"), {})] + ([runs.get((row, "ikllama"), {})] if with_ik else [])
        configs = sorted((c for (r, c) in runs if r == row), key=lambda c: (order[c.split("-")[0]], c))
        for config in configs:
            vals = runs[(row, config)]
            per_round = ", ".join("%.1f" % vals[r] for r in sorted(vals))
            ratios = [paired_ratio(vals, ref) if config.startswith("densa") else "" for ref in refs]
            engine = config.replace("llama-", "llama.cpp, KV ").replace("densa-", "densa, ")
            engine = "ik_llama.cpp, KV f16, -fmoe 1" if config == "ikllama" else engine
            print("| %s (%s) | %s | %s | %.1f | %s |" % (row, metric_of(row).replace("_tok_s", ""), engine, per_round,
                                                       statistics.median(vals.values()), " | ".join(ratios)))
    roofline(out, reports)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: summarize.py OUT_DIR")
    main(sys.argv[1])
