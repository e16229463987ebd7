#!/usr/bin/env python3
# Medians of a compare.sh log: decode tok/s and weight GB/s per (model, format, variant), and
# the weight GB/s as a percentage of the median 2-thread read of 1 GiB and of 192 MiB.
import re, statistics, sys
from collections import defaultdict
tok, gbs, bw = defaultdict(list), defaultdict(list), defaultdict(list)
for line in open(sys.argv[1]):
    f = [x.strip() for x in line.split('|')]
    if f[0].startswith('membw'):
        bw[f[0].split()[1]].append(float(re.search(r'GB=([\d.]+)', f[1]).group(1)))
        continue
    key = tuple(f[0].split())
    tok[key].append(float(re.search(r'decode:\s+([\d.]+)', f[2]).group(1)))
    gbs[key].append(float(re.search(r'weights ([\d.]+) GB/s', f[2]).group(1)))
for k, v in bw.items():
    print(f"membw {k}: {', '.join(f'{x:.1f}' for x in v)} (median {statistics.median(v):.1f} GB/s)")
b1, b2 = statistics.median(bw['1GiB']), statistics.median(bw['192MiB'])
print(f"{'model':18s} {'tok/s runs':34s} median  GB/s  %1GiB %192MiB")
for key in sorted(tok):
    t, g = tok[key], statistics.median(gbs[key])
    print(f"{' '.join(key):18s} {', '.join(f'{x:.0f}' for x in t):34s} {statistics.median(t):6.1f} {g:5.1f} "
          f"{100 * g / b1:5.0f} {100 * g / b2:6.0f}")
for m in ('dense', 'moe'):
    for fmt in ('int4', 'q4_0'):
        base, tiles, rows = (tok.get((m, fmt, v)) for v in ('base', 'tiles', 'rows'))
        if base and tiles and rows:
            print(f"{m} {fmt}: tiles/base {statistics.median(tiles) / statistics.median(base):.2f}x "
                  f"(faster in {sum(b > a for a, b in zip(base, tiles))} of {len(base)}), tiles/rows "
                  f"{statistics.median(tiles) / statistics.median(rows):.2f}x (faster in {sum(b > a for a, b in zip(rows, tiles))} of {len(rows)})")
