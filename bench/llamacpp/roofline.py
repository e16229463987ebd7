#!/usr/bin/env python3
"""Compute roofline of peers.sh's prefill rows: per row and engine, the int8 operations a prefill
token costs in the linear layers (2 x the weights a token multiplies: attention projections, the
router, the dense or the routed experts' FFN; not the embeddings, and not the output projection,
which prefill runs for the last position only; attention scores and values add a few percent at
512 tokens and are left out, so the fractions are slight underestimates), times the measured
tok/s, as GOPS and as a fraction of the measured int8 peak of the unit the engine runs on
(int8_peak_bench: AVX-512 VNNI, and AMX-INT8 where it is granted; on a CPU without AVX-512,
AVX2's vpmaddubsw, which every engine's int8 kernels run there).

Usage: roofline.py RAW INFO_DIR PEAK_JSON > roofline.md
  RAW: peers.sh's raw.txt; INFO_DIR: its info-SHAPE.txt (`densa info` of each shape's file);
  PEAK_JSON: int8_peak_bench --benchmark_format=json (the runs at the THREADS peers.sh used).
"""
import collections
import json
import re
import statistics
import sys

NAMES = {"ik": "ik_llama.cpp", "llama": "llama.cpp", "densa": "densa", "densa_noamx": "densa, DENSA_AMX=0"}
# The unit each engine's int8 GEMMs run on here (llama.cpp's prebuilt binaries repack Q4_0 / Q8_0
# for AMX-INT8 where the CPU has it; ik_llama.cpp's CPU kernels are AVX-512 VNNI).
UNIT = {"ik": "vnni", "llama": "amx", "densa": "amx", "densa_noamx": "vnni"}


def info_ops(path):
    """2 x the linear weights one token multiplies, from `densa info`."""
    text = open(path).read()
    num = lambda key: int(re.search(r"^%s:\s+(\d+)" % key, text, re.M).group(1))
    heads = re.search(r"^heads:\s+(\d+) \(kv heads (\d+), head_dim (\d+)\)", text, re.M)
    h, kv, d = (int(g) for g in heads.groups())
    layers, hidden = num("layers"), num("hidden")
    attn = hidden * h * d * 2 + hidden * kv * d * 2  # q, o; k, v
    experts = re.search(r"^experts:\s+(\d+) \(top-(\d+) per token.*width (\d+)", text, re.M)
    if experts:
        n, k, width = (int(g) for g in experts.groups())
        ffn = k * 3 * hidden * width + n * hidden  # the routed experts and the router
    else:
        ffn = 3 * hidden * int(re.search(r"^ffn:\s+(\d+)", text, re.M).group(1))
    return 2 * layers * (attn + ffn)


def peaks(path, threads):
    out = {}
    for b in json.load(open(path))["benchmarks"]:
        m = re.match(r"int8_peak/(vnni|amx|avx2)/real_time/threads:(\d+)$", b["name"])
        if b.get("error_occurred"):  # skipped: the unit is missing here
            continue
        if m and int(m.group(2)) == threads:
            out[m.group(1)] = b["GOPS"]  # google-benchmark reports the rate counter in GOP/s
    return out


def main(raw, info_dir, peak_json, threads=2):
    runs = collections.defaultdict(list)
    order = []
    for line in open(raw):
        _, _, row, engine, tok_s = line.split()
        if "_prefill_" not in row:
            continue
        runs[(row, engine)].append(float(tok_s))
        if row not in order:
            order.append(row)
    peak = peaks(peak_json, threads)
    print("| row | engine | tok/s (median) | GOP / token | GOPS | unit | % of its int8 peak |")
    print("|---|---|---|---|---|---|---|")
    for row in order:
        ops = info_ops("%s/info-%s.txt" % (info_dir, row.split("_")[0])) / 1e9
        for engine in ("ik", "llama", "densa", "densa_noamx"):
            if (row, engine) not in runs:
                continue
            tok_s = statistics.median(runs[(row, engine)])
            unit = UNIT[engine]
            if unit == "amx" and "amx" not in peak:
                unit = "vnni"
            if unit == "vnni" and "vnni" not in peak:
                unit = "avx2"
            gops = tok_s * ops
            print("| %s | %s | %.1f | %.3f | %.0f | %s (%.0f GOPS) | %.1f%% |" %
                  (row, NAMES[engine], tok_s, ops, gops, unit, peak[unit], 100.0 * gops / peak[unit]))


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
