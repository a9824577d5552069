"""Pareto plot of `bench` results: generation throughput against memory per sample.

    python3 bench/pareto_plot.py OUT_PREFIX bench1.csv [bench2.csv ...]

Reads the CSVs that `bt-run bench` / `./model bench --csv` write (docs/bench.md, "Metrics"; one
per model, bt and torch rows) and writes, for the generation settings (prefill-heavy,
decode-heavy), one panel each:
  x = memory per sample (MiB): kv_bytes_per_sample, the KV-cache bytes per sequence the
      implementation allocated (the paper's memory argument, §3.2; the weights are shared by the
      batch and not per sample);
  y = throughput (generated tokens per second, tokens_per_s; the paper's Fig. 3 metric);
one point per (model, implementation, batch), labelled "model impl B", the planned max batch
marked "*", and the Pareto frontier (no other point has at least the throughput with at most
the memory) of all points of the panel as a line. The paper's Pareto plots put language-model
loss on the other axis; the benchmark's models are randomly initialized, so memory per sample
stands in for it.

Outputs: OUT_PREFIX.svg (always: written here without any plotting package) and OUT_PREFIX.png
(with matplotlib when it imports, else with gnuplot when it is on PATH; otherwise no PNG, and the
script says so on stderr). Prints the written files, one per line. Exit 2 on unreadable input
or no generation row.
"""

import csv
import math
import os
import shutil
import subprocess
import sys

SETTINGS = ("prefill-heavy", "decode-heavy")


def read_points(paths):
    """{setting: [(model, impl, batch, max_batch, mib_per_sample, tok_per_s)]}"""
    points = {s: [] for s in SETTINGS}
    for path in paths:
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                s = row.get("setting")
                if s not in points or not row.get("kv_bytes_per_sample"):
                    continue
                points[s].append((row["model"], row["impl"], int(row["batch"]),
                                  row.get("max_batch") == "1",
                                  float(row["kv_bytes_per_sample"]) / 2**20,
                                  float(row["tokens_per_s"])))
    return points


def frontier(pts):
    """The Pareto-optimal points (min memory, max throughput), by increasing memory."""
    best = []
    for p in sorted(pts, key=lambda p: (p[4], -p[5])):
        if not best or p[5] > best[-1][5]:
            best.append(p)
    return best


def label(p):
    return f"{p[0]} {p[1]} B={p[2]}{'*' if p[3] else ''}"


def write_svg(path, points):
    w, h, m = 560, 420, 60
    panels = [s for s in SETTINGS if points[s]]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w * len(panels)}" height="{h}" '
           'font-family="sans-serif" font-size="10">']
    for i, s in enumerate(panels):
        pts = points[s]
        xs = [math.log10(max(p[4], 1e-6)) for p in pts]
        ys = [math.log10(max(p[5], 1e-6)) for p in pts]
        x0, x1 = min(xs) - 0.1, max(xs) + 0.1
        y0, y1 = min(ys) - 0.1, max(ys) + 0.1

        def px(x, y):
            return (i * w + m + (x - x0) / (x1 - x0) * (w - 2 * m),
                    h - m - (y - y0) / (y1 - y0) * (h - 2 * m))

        ox, oy = i * w + m, h - m
        out.append(f'<text x="{i * w + w / 2}" y="20" text-anchor="middle" font-size="13">{s}</text>')
        out.append(f'<line x1="{ox}" y1="{oy}" x2="{i * w + w - m}" y2="{oy}" stroke="black"/>')
        out.append(f'<line x1="{ox}" y1="{oy}" x2="{ox}" y2="{m}" stroke="black"/>')
        out.append(f'<text x="{i * w + w / 2}" y="{h - 20}" text-anchor="middle">'
                   'memory per sample (MiB, KV cache; log scale)</text>')
        out.append(f'<text x="{i * w + 15}" y="{h / 2}" transform="rotate(-90 {i * w + 15} {h / 2})" '
                   'text-anchor="middle">generated tokens / s (log scale)</text>')
        for k in range(math.floor(x0), math.ceil(x1) + 1):
            if x0 <= k <= x1:
                x, _ = px(k, y0)
                out.append(f'<text x="{x}" y="{oy + 14}" text-anchor="middle">{10.0 ** k:g}</text>')
        for k in range(math.floor(y0), math.ceil(y1) + 1):
            if y0 <= k <= y1:
                _, y = px(x0, k)
                out.append(f'<text x="{ox - 4}" y="{y + 3}" text-anchor="end">{10.0 ** k:g}</text>')
        f = frontier(pts)
        line = " ".join("%.1f,%.1f" % px(math.log10(max(p[4], 1e-6)), math.log10(max(p[5], 1e-6)))
                        for p in f)
        out.append(f'<polyline points="{line}" fill="none" stroke="gray" stroke-dasharray="4 3"/>')
        for p, x, y in zip(pts, xs, ys):
            cx, cy = px(x, y)
            color = "#1f77b4" if p[1] == "bt" else "#d62728"
            out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="4" fill="{color}"/>')
            out.append(f'<text x="{cx + 6:.1f}" y="{cy - 4:.1f}">{label(p)}</text>')
    out.append("</svg>")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(out) + "\n")
    os.replace(tmp, path)


def write_png_matplotlib(path, points):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    panels = [s for s in SETTINGS if points[s]]
    fig, axes = plt.subplots(1, len(panels), figsize=(7 * len(panels), 5), squeeze=False)
    for ax, s in zip(axes[0], panels):
        for p in points[s]:
            ax.scatter(p[4], p[5], color="tab:blue" if p[1] == "bt" else "tab:red")
            ax.annotate(label(p), (p[4], p[5]), fontsize=7, xytext=(4, 4), textcoords="offset points")
        f = frontier(points[s])
        ax.plot([p[4] for p in f], [p[5] for p in f], "--", color="gray", label="Pareto frontier")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(s)
        ax.set_xlabel("memory per sample (MiB, KV cache)")
        ax.set_ylabel("generated tokens / s")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path + ".tmp.png", dpi=120)
    os.replace(path + ".tmp.png", path)


def write_png_gnuplot(path, points):
    panels = [s for s in SETTINGS if points[s]]
    data = path + ".dat"
    with open(data, "w") as f:
        for s in panels:
            for p in points[s]:
                f.write(f'{p[4]} {p[5]} "{label(p)}" {1 if p[1] == "bt" else 2}\n')
            f.write("\n\n")
            for p in frontier(points[s]):
                f.write(f"{p[4]} {p[5]}\n")
            f.write("\n\n")
    script = [f'set terminal pngcairo noenhanced size {700 * len(panels)},500 font ",9"',
              f'set output "{path}.tmp.png"',
              f"set multiplot layout 1,{len(panels)}",
              "set logscale xy", "set key off", "set offsets graph 0.1, graph 0.3, graph 0.1, graph 0.1",
              'set xlabel "memory per sample (MiB, KV cache)"',
              'set ylabel "generated tokens / s"']
    for i, s in enumerate(panels):
        script += [f'set title "{s}"',
                   f'plot "{data}" index {2 * i} using 1:2:4 with points pt 7 lc variable, '
                   f'"" index {2 * i} using 1:2:3 with labels offset 1,0.5 left font ",7", '
                   f'"" index {2 * i + 1} using 1:2 with lines dt 2 lc rgb "gray"']
    script.append("unset multiplot")
    try:
        subprocess.run(["gnuplot"], input="\n".join(script) + "\n", text=True, check=True,
                       capture_output=True)
    finally:
        os.remove(data)
    os.replace(path + ".tmp.png", path)


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    prefix, paths = argv[1], argv[2:]
    try:
        points = read_points(paths)
    except (OSError, KeyError, ValueError) as e:
        print(f"pareto_plot: {e}", file=sys.stderr)
        return 2
    if not any(points.values()):
        print("pareto_plot: no generation row (prefill-heavy / decode-heavy) with a KV column in "
              + ", ".join(paths), file=sys.stderr)
        return 2
    write_svg(prefix + ".svg", points)
    print(prefix + ".svg")
    try:
        write_png_matplotlib(prefix + ".png", points)
        print(prefix + ".png")
        return 0
    except ImportError:
        pass
    if shutil.which("gnuplot"):
        write_png_gnuplot(prefix + ".png", points)
        print(prefix + ".png")
    else:
        print("pareto_plot: no PNG (neither matplotlib nor gnuplot); the SVG has the plot",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
