#!/usr/bin/python3
"""Turns a `collsim sweep --format csv` file into PNG plots (docs/cli.md, "Plots").

    tools/plot.py results/sweep.csv [--terms results/sweep.terms.csv] [--out-dir results] [--prefix t4]

For every (collective, dtype, rank count) in the CSV it writes:

  <prefix>latency_vs_k_<group>.png   one panel per algorithm: simulated time against the chunk
                                     count k, one line per size; a star marks the best k of each
                                     size, hollow markers the points that are memory-copy dominated.
  <prefix>busbw_vs_size_<group>.png  one panel per algorithm: bus bandwidth against size, a thin
                                     line per k and a thick line through the best k of each size
                                     (labelled with that k); grey bands shade the sizes whose
                                     best-k point is memory-copy dominated.

A group with a single size gets one latency panel instead, a line per algorithm, and no
bandwidth plot.

A point is memory-copy dominated when its copy term exceeds its link term. Both come from the
companion CSV written by `collsim sweep --terms FILE`: for each rank, the bytes it copies over the
bandwidth of each copy's path, and the bytes it sends over the bottleneck bandwidth of each
route, maximum over ranks. Without that file nothing is shaded. Failed points (empty time) are
skipped. Uses only the Python standard library and matplotlib (Debian's python3-matplotlib).
"""
import argparse
import csv
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FuncFormatter  # noqa: E402

REQUIRED = ["collective", "algo", "ranks", "size_bytes", "dtype", "chunks", "time_us",
            "busbw_GBps"]


def fail(message):
    print(f"plot.py: error: {message}", file=sys.stderr)
    sys.exit(2)


def read_csv(path, required):
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        fail(f"{path}: cannot read ({e.strerror}); give the CSV written by collsim sweep "
             f"--format csv --out FILE")
    if rows:
        missing = [c for c in required if c not in rows[0]]
        if missing:
            fail(f"{path}: missing columns {', '.join(missing)}; expected the CSV of "
                 f"collsim sweep --format csv")
    return rows


def key(row):
    return (row["collective"], row["algo"], row["ranks"], row["size_bytes"], row["dtype"],
            row["chunks"])


def size_label(b):
    for factor, unit in ((1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")):
        if b >= factor:
            v = b / factor
            return f"{v:.0f} {unit}" if v == int(v) else f"{v:.4g} {unit}"
    return f"{b} B"


def copy_dominated(terms, row):
    t = terms.get(key(row))
    return t is not None and t[0] > t[1]


def panels(n):
    cols = min(n, 3)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.2 * cols, 4.0 * rows), squeeze=False)
    flat = [a for line in axes for a in line]
    for a in flat[n:]:
        a.set_visible(False)
    return fig, flat


def plot_one_size(name, title, points, algos, terms, out_dir, prefix, written):
    """One size only: every algorithm on one panel, time against k, a line per algorithm."""
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    size = int(points[0]["size_bytes"])
    for algo in algos:
        line = sorted((p for p in points if p["algo"] == algo), key=lambda p: int(p["chunks"]))
        ks = [int(p["chunks"]) for p in line]
        ts = [float(p["time_us"]) for p in line]
        if len(line) == 1 and len(algos) > 1:
            ax.axhline(ts[0], linestyle="--", linewidth=1, label=f"{algo} (k={ks[0]})",
                       color="grey")
            continue
        (drawn,) = ax.plot(ks, ts, "-", linewidth=1.5, label=algo)
        for p, k, t in zip(line, ks, ts):
            hollow = copy_dominated(terms, p)
            ax.plot([k], [t], "o", color=drawn.get_color(), markersize=5,
                    markerfacecolor="none" if hollow else drawn.get_color())
        best = min(range(len(ts)), key=lambda j: (ts[j], ks[j]))
        ax.plot([ks[best]], [ts[best]], "*", color="crimson", markersize=12, zorder=5)
    all_ks = sorted({int(p["chunks"]) for p in points})
    ax.set_xscale("log", base=2)
    ax.set_xticks(all_ks)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_yscale("log")
    ax.set_xlabel("chunks k")
    ax.set_ylabel("simulated time (µs)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(f"latency against k — {title}, {size_label(size)}\n"
                 "(★ best k per algorithm, ○ memory-copy dominated)", fontsize=10)
    fig.tight_layout()
    path = os.path.join(out_dir, f"{prefix}latency_vs_k_{name}.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)
    print(f"plot.py: {name}: one size only, no bandwidth-against-size plot", file=sys.stderr)


def plot_group(name, points, terms, out_dir, prefix, written):
    algos = list(dict.fromkeys(p["algo"] for p in points))
    title = name.replace("_", " ")
    # An algorithm simulated only at k = 1 (the naive baseline) gets no panel of its own in the
    # latency plot: it is drawn as a dashed level in the panels of the pipelined algorithms.
    swept = [a for a in algos if any(p["algo"] == a and p["chunks"] != "1" for p in points)]
    baselines = [a for a in algos if a not in swept] if swept else []
    latency_algos = swept or algos

    if len({p["size_bytes"] for p in points}) == 1:
        plot_one_size(name, title, points, algos, terms, out_dir, prefix, written)
        return

    # Latency against k, a line per size.
    fig, axes = panels(len(latency_algos))
    for ax, algo in zip(axes, latency_algos):
        mine = [p for p in points if p["algo"] == algo]
        sizes = sorted({int(p["size_bytes"]) for p in mine})
        cmap = plt.get_cmap("viridis", max(len(sizes), 2))
        for i, s in enumerate(sizes):
            line = sorted((p for p in mine if int(p["size_bytes"]) == s), key=lambda p: int(p["chunks"]))
            ks = [int(p["chunks"]) for p in line]
            ts = [float(p["time_us"]) for p in line]
            color = cmap(i)
            ax.plot(ks, ts, "-", color=color, label=size_label(s), linewidth=1.2)
            for p, k, t in zip(line, ks, ts):
                hollow = copy_dominated(terms, p)
                ax.plot([k], [t], "o", color=color, markersize=4,
                        markerfacecolor="none" if hollow else color)
            best = min(range(len(ts)), key=lambda j: (ts[j], ks[j]))
            ax.plot([ks[best]], [ts[best]], "*", color="crimson", markersize=11, zorder=5)
            for b, style in zip(baselines, ("--", ":", "-.")):
                level = [float(p["time_us"]) for p in points
                         if p["algo"] == b and int(p["size_bytes"]) == s]
                if level:
                    ax.axhline(level[0], color=color, linestyle=style, linewidth=1)
        for b, style in zip(baselines, ("--", ":", "-.")):
            ax.plot([], [], color="grey", linestyle=style, label=f"{b} (k=1)")
        ax.set_xscale("log", base=2)
        all_ks = sorted({int(p["chunks"]) for p in mine})
        ax.set_xticks(all_ks)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_yscale("log")
        ax.set_xlabel("chunks k")
        ax.set_ylabel("simulated time (µs)")
        ax.set_title(algo)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, title="size", title_fontsize=7, loc="upper left",
                  bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(f"latency against k — {title}\n(★ best k per size, ○ memory-copy dominated"
                 + (f", dashed: {', '.join(baselines)} at k=1)" if baselines else ")"),
                 fontsize=10)
    fig.tight_layout()
    path = os.path.join(out_dir, f"{prefix}latency_vs_k_{name}.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)

    # Bus bandwidth against size, a thin line per k, a thick one through the best k.
    fig, axes = panels(len(algos))
    for ax, algo in zip(axes, algos):
        mine = [p for p in points if p["algo"] == algo]
        ks = sorted({int(p["chunks"]) for p in mine})
        for k in ks:
            line = sorted((p for p in mine if int(p["chunks"]) == k), key=lambda p: int(p["size_bytes"]))
            ax.plot([int(p["size_bytes"]) for p in line], [float(p["busbw_GBps"]) for p in line],
                    "-", linewidth=0.8, alpha=0.5, label=f"k={k}")
        sizes = sorted({int(p["size_bytes"]) for p in mine})
        best = []
        for s in sizes:
            at = [p for p in mine if int(p["size_bytes"]) == s]
            best.append(min(at, key=lambda p: (float(p["time_us"]), int(p["chunks"]))))
        xs = [int(p["size_bytes"]) for p in best]
        ys = [float(p["busbw_GBps"]) for p in best]
        ax.plot(xs, ys, "o-", color="black", linewidth=2, markersize=4, label="best k")
        for p, x, y in zip(best, xs, ys):
            ax.annotate(p["chunks"], (x, y), textcoords="offset points", xytext=(0, 5),
                        fontsize=7, ha="center")
        # Shade half-way to the neighbours on a log axis, so that each point owns a band.
        shaded = False
        for i, p in enumerate(best):
            if not copy_dominated(terms, p):
                continue
            x = xs[i]
            lo = math.sqrt(xs[i - 1] * x) if i > 0 else x / 1.5
            hi = math.sqrt(xs[i + 1] * x) if i + 1 < len(xs) else x * 1.5
            ax.axvspan(lo, hi, color="grey", alpha=0.2, linewidth=0,
                       label=None if shaded else "memory-copy dominated")
            shaded = True
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: size_label(int(round(v)))))
        ax.tick_params(axis="x", labelsize=7)
        ax.set_xlabel("size")
        ax.set_ylabel("bus bandwidth (GB/s)")
        ax.set_title(algo)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"bus bandwidth against size — {title}", fontsize=10)
    fig.tight_layout()
    path = os.path.join(out_dir, f"{prefix}busbw_vs_size_{name}.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)


def main():
    parser = argparse.ArgumentParser(description="Plot a collsim sweep CSV.")
    parser.add_argument("csv", help="CSV from collsim sweep --format csv")
    parser.add_argument("--terms", help="companion CSV from collsim sweep --terms "
                        "(default: <csv without .csv>.terms.csv if it exists)")
    parser.add_argument("--out-dir", default=None, help="folder for the PNGs (default: the CSV's)")
    parser.add_argument("--prefix", default="", help="prefix of the PNG file names")
    args = parser.parse_args()

    rows = [r for r in read_csv(args.csv, REQUIRED) if r["time_us"] != ""]
    if not rows:
        fail(f"{args.csv}: no successful points to plot")
    terms_path = args.terms
    if terms_path is None:
        guess = (args.csv[:-4] if args.csv.endswith(".csv") else args.csv) + ".terms.csv"
        terms_path = guess if os.path.exists(guess) else None
    terms = {}
    if terms_path:
        for t in read_csv(terms_path, REQUIRED[:6] + ["copy_term_us", "link_term_us"]):
            terms[key(t)] = (float(t["copy_term_us"]), float(t["link_term_us"]))

    out_dir = args.out_dir or os.path.dirname(os.path.abspath(args.csv))
    os.makedirs(out_dir, exist_ok=True)
    groups = {}
    for r in rows:
        groups.setdefault((r["collective"], r["dtype"], r["ranks"]), []).append(r)
    written = []
    for (collective, dtype, ranks), points in groups.items():
        name = f"{collective}_{dtype}_p{ranks}"
        plot_group(name, points, terms, out_dir, args.prefix, written)
    for path in written:
        print(path)


if __name__ == "__main__":
    main()
