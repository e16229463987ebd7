#!/usr/bin/env python3
"""Table of bench/format_roofline.sh: per weight format, the median prefill tok/s, the GOPS it
is (2 x the linear weights a token multiplies, bench/llamacpp/roofline.py's info_ops) and its
fraction of the measured peak of the unit `densa --version` says that format's GEMMs run on.

Usage: format_roofline.py RAW INFO PEAK_JSON VERSION THREADS
  RAW: lines "round R FORMAT TOK_S"; INFO: `densa info` of the shape; PEAK_JSON: int8_peak_bench
  --benchmark_format=json; VERSION: `densa --version`; THREADS: the thread count of the runs.
"""
import collections
import json
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "llamacpp"))
from roofline import info_ops  # noqa: E402

NAMES = {"q4_0": "Q4_0 (GGUF)", "int4": "INT4 g32 (HF)", "q8_0": "Q8_0 (GGUF)", "fp8": "FP8 128x128 (HF)",
         "bf16": "BF16 (GGUF)", "q4_k": "Q4_K (GGUF, llama-quantize --pure)",
         "q6_k": "Q6_K (GGUF, llama-quantize --pure)", "iq4_xs": "IQ4_XS (GGUF, llama-quantize --pure)",
         "mxfp4": "MXFP4 (GGUF, llama-quantize --pure)"}
# The version line of each format's kernels.
AFFINE = "gguf k-quant / iq4 / mxfp4 weights"
LINE = {"q4_0": "int4 / q4_0 weights", "int4": "int4 / q4_0 weights", "q8_0": "int8 / q8_0 weights",
        "fp8": "fp8 weights", "bf16": "bf16 / f16 weights", "q4_k": AFFINE, "q6_k": AFFINE, "iq4_xs": AFFINE,
        "mxfp4": AFFINE}
PEAK_NAMES = {"amx-int8": "int8_peak/amx", "vnni": "int8_peak/vnni", "avx2": "int8_peak/avx2",
              "amx-bf16": "bf16_peak/amx", "vdpbf16ps": "bf16_peak/avx512", "fp32 fma": "fp32_peak/avx512"}


def unit_of(fmt, version):
    """The unit a prefill GEMM of this format runs on, from its `densa --version` line."""
    m = re.search(r"^\s*%s: (.*)$" % re.escape(LINE[fmt]), version, re.M)
    if not m:
        sys.exit("format_roofline: no '%s' line in densa --version" % LINE[fmt])
    line = m.group(1)
    if fmt == "bf16":
        return "amx-bf16" if line.startswith("AMX") else "fp32 fma"
    if fmt == "fp8":
        if line.startswith("AMX"):
            return "amx-bf16"
        return "vdpbf16ps" if "vdpbf16ps" in line else None
    if "GEMM on AMX-INT8" in line:
        return "amx-int8"
    if "VNNI" in line:
        return "vnni"
    return "avx2" if "AVX2" in line else None


def peaks(path, threads):
    out = {}
    for b in json.load(open(path))["benchmarks"]:
        if b.get("error_occurred"):
            continue
        m = re.match(r"(.*)/real_time/threads:(\d+)$", b["name"])
        if m and int(m.group(2)) == threads:
            out[m.group(1)] = b["GOPS"]
    return out


def main(raw, info, peak_json, version_path, threads):
    runs = collections.defaultdict(list)
    order = []
    for line in open(raw):
        _, _, fmt, tok_s = line.split()
        runs[fmt].append(float(tok_s))
        if fmt not in order:
            order.append(fmt)
    version = open(version_path).read()
    peak = peaks(peak_json, int(threads))
    ops = info_ops(info) / 1e9
    print("| format | tok/s per round | GOP / token | GOPS (median) | unit | % of its peak |")
    print("|---|---|---|---|---|---|")
    for fmt in sorted(order, key=list(NAMES).index):
        tok_s = statistics.median(runs[fmt])
        gops = tok_s * ops
        unit = unit_of(fmt, version)
        rounds = ", ".join("%.1f" % t for t in runs[fmt])
        if unit is None:
            print("| %s | %s | %.3f | %.0f | exact fallback | - |" % (NAMES[fmt], rounds, ops, gops))
            continue
        if PEAK_NAMES[unit] not in peak:  # e.g. fp32 FMAs below AVX-512: int8_peak_bench has no such loop
            print("| %s | %s | %.3f | %.0f | %s (no peak measured here) | - |" % (NAMES[fmt], rounds, ops, gops, unit))
            continue
        p = peak[PEAK_NAMES[unit]]
        print("| %s | %s | %.3f | %.0f | %s (%.0f GOPS) | %.1f%% |" % (NAMES[fmt], rounds, ops, gops, unit, p,
                                                                       100.0 * gops / p))


if __name__ == "__main__":
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    main(*sys.argv[1:])
