#!/usr/bin/env python3
"""Folds an `ncu --csv --metrics gpu__time_duration.sum` report (as written
by scripts/gpu_profile.sh) per kernel: launches, total and mean GPU time,
share of the total; grouped by the entry point the kernel belongs to (bt's
kernels are named <entry>_kernel[_N]; cuBLAS's by their own names).

  scripts/ncu_summary.py REPORT.csv [--top N] [--per-step STEPS]

--per-step divides the decode entry points' times (decode_tokens,
decode_block and cuBLAS calls outside prefill) by STEPS (generated tokens per
row) to give microseconds per decode step. Standard library only."""
import argparse
import collections
import csv
import re
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("report")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--per-step", type=int, default=0)
    args = ap.parse_args()
    rows = []
    with open(args.report, newline="") as f:
        lines = [l for l in f if l.startswith('"')]
    for r in csv.DictReader(lines):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        ns = float(r["Metric Value"].replace(",", ""))
        unit = r["Metric Unit"]
        ns *= {"ns": 1, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6}.get(unit, 1)
        rows.append((int(r["ID"]), r["Kernel Name"], r["Grid Size"], r["Block Size"], ns))
    if not rows:
        sys.exit(f"{args.report}: no gpu__time_duration.sum rows")
    # Phase: the entry point of the last bt kernel seen (cuBLAS calls run
    # inside the entry point that issued them).
    phase = "?"
    by_kernel = collections.defaultdict(lambda: [0, 0.0, "", ""])
    by_phase = collections.defaultdict(lambda: [0, 0.0])
    for _, name, grid, block, ns in rows:
        m = re.match(r"(prefill|decode_tokens|decode_block|eval|decode_step|"
                     r"eval_loss|grad|train_step)_kernel", name)
        if m:
            phase = m.group(1)
        # bt's own kernels: <entry>_kernel[_N] and the runtime's bt_*.
        ours = m is not None or name.startswith("bt_")
        key = f"{name} [{phase}]" if ours else f"[cuBLAS/{phase}] {name[:60]}"
        k = by_kernel[key]
        k[0] += 1
        k[1] += ns
        k[2], k[3] = grid, block
        by_phase[phase][0] += 1
        by_phase[phase][1] += ns
    total = sum(v[1] for v in by_kernel.values())
    print(f"{len(rows)} launches, {total / 1e6:.3f} ms of GPU time")
    print(f"{'phase':<16}{'launches':>9}{'ms':>10}")
    for p, (n, ns) in sorted(by_phase.items(), key=lambda x: -x[1][1]):
        print(f"{p:<16}{n:>9}{ns / 1e6:>10.3f}")
    if args.per_step:
        dec = sum(v[1] for p, v in by_phase.items() if p != "prefill")
        n = sum(v[0] for p, v in by_phase.items() if p != "prefill")
        print(f"decode: {dec / 1e3 / args.per_step:.1f} us of GPU time and "
              f"{n / args.per_step:.1f} launches per step")
    print(f"\n{'kernel':<64}{'n':>6}{'total us':>11}{'mean us':>9}{'share':>7}  grid / block (last)")
    for key, (n, ns, grid, block) in sorted(by_kernel.items(), key=lambda x: -x[1][1])[: args.top]:
        print(f"{key[:63]:<64}{n:>6}{ns / 1e3:>11.1f}{ns / n / 1e3:>9.2f}{100 * ns / total:>6.1f}%  {grid} / {block}")


if __name__ == "__main__":
    main()
