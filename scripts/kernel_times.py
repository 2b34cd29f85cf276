#!/usr/bin/env python3
"""Per-token kernel times of a decode step from two Nsight Compute runs.

scripts/gpu-check.sh kernels runs `memra bench` under ncu twice, generating N1 and N2 tokens;
everything outside the generated tokens (load, prefill, warm-up) is the same in both runs, so
the difference of the two runs' kernels, divided by N2 - N1, is one token's kernels. ncu's
gpu__time_duration is each kernel's own time, serialised: the gaps between kernels (launch
latency, PDL overlap) are not in it; the step's wall time minus this sum is what they cost.

Usage: kernel_times.py RUN1.csv N1 RUN2.csv N2 [--token-ms T]
"""
import csv
import sys
from collections import defaultdict


def without_parameters(name):
    """The kernel name without its trailing parameter list (template arguments may hold parentheses)."""
    name = name.strip()
    if not name.endswith(")"):
        return name
    depth = 0
    for i in range(len(name) - 1, -1, -1):
        depth += {")": 1, "(": -1}.get(name[i], 0)
        if depth == 0:
            return name[:i]
    return name


def load(path):
    per_name = defaultdict(lambda: [0, 0.0])  # name -> [count, total ns]
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]  # ncu prints its own log lines too
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(row["Metric Value"].replace(",", ""))
        unit = row.get("Metric Unit", "ns")
        scale = {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6}.get(unit, 1.0)
        # The kernel's name with its template arguments, without "void", namespaces or parameters,
        # and its grid: launches of one template on different matrices differ by grid.
        name = without_parameters(row["Kernel Name"]).replace("void ", "").replace("memra::cuda::", "").strip()
        name = f'{name} {row.get("Grid Size", "")}'.strip()
        per_name[name][0] += 1
        per_name[name][1] += value * scale
    return per_name


def main():
    args = sys.argv[1:]
    token_ms = None
    if "--token-ms" in args:
        i = args.index("--token-ms")
        token_ms = float(args[i + 1])
        del args[i:i + 2]
    if len(args) != 4:
        sys.exit(__doc__)
    a, n1, b, n2 = load(args[0]), int(args[1]), load(args[2]), int(args[3])
    tokens = n2 - n1
    if tokens <= 0:
        sys.exit("kernel_times: N2 must exceed N1")
    rows = []
    for name in set(a) | set(b):
        count = (b[name][0] - a[name][0]) / tokens
        us = (b[name][1] - a[name][1]) / tokens / 1e3
        if count > 0 or us > 0:
            rows.append((us, count, name))
    rows.sort(reverse=True)
    total = sum(r[0] for r in rows)
    launches = sum(r[1] for r in rows)
    print(f"| kernel | launches/token | us/token | share |")
    print(f"| --- | ---: | ---: | ---: |")
    for us, count, name in rows:
        print(f"| {name} | {count:.1f} | {us:.1f} | {100 * us / total:.1f}% |")
    print(f"| **sum** | {launches:.0f} | {total:.1f} | 100% |")
    if token_ms:
        print(f"\nstep wall time {token_ms * 1e3:.0f} us: kernels {total:.0f} us, "
              f"gaps {token_ms * 1e3 - total:.0f} us ({launches:.0f} launches)")


if __name__ == "__main__":
    main()
