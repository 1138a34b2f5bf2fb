"""Tables of bench/scaling.sh, read from its rows on stdin, with power-law exponents.

    scaling_tables.py growth   rows "parameter value events cpu_s wall_s peak_mib"
    scaling_tables.py window   rows "fabric gpus ops_held peak_mib"

Each exponent is b of a least-squares fit y ~ a * x^b over the points of one parameter (growth:
also between each pair of neighbouring points, where growth that is not one power law shows).
"""
import math
import sys


def fit(xs, ys):
    lx = [math.log(x) for x in xs]
    ly = [math.log(max(y, 1e-9)) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)


def series(rows):
    """The rows of each parameter, in the order the parameters first appear."""
    for name in dict.fromkeys(r[0] for r in rows):
        sel = [r for r in rows if r[0] == name]
        yield name, sel, [float(r[1]) for r in sel]


def column(sel, i):
    return [float(r[i]) for r in sel]


def growth(rows):
    print("| parameter | value | events | CPU s | wall s | peak RSS MiB |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {int(r[2]):,} | {float(r[3]):.3f} | {float(r[4]):.3f} "
              f"| {float(r[5]):.0f} |")
    print()
    print("| parameter | exponent of events | exponent of CPU s | exponent of peak RSS "
          "| CPU s exponent between neighbours |")
    print("|---|---:|---:|---:|---|")
    for name, sel, xs in series(rows):
        cpu = column(sel, 3)
        local = ", ".join(f"{sel[i][1]}-{sel[i + 1][1]}: {fit(xs[i:i + 2], cpu[i:i + 2]):.2f}"
                          for i in range(len(sel) - 1))
        print(f"| {name} | {fit(xs, column(sel, 2)):.2f} | {fit(xs, cpu):.2f} | "
              f"{fit(xs, column(sel, 5)):.2f} | {local} |")


def window(rows):
    print()
    print("| fabric | GPUs | ops held at most | peak RSS MiB |")
    print("|---|---:|---:|---:|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {int(r[2]):,} | {float(r[3]):.0f} |")
    print()
    print("| fabric | exponent of ops held | exponent of peak RSS |")
    print("|---|---:|---:|")
    for name, sel, xs in series(rows):
        print(f"| {name} | {fit(xs, column(sel, 2)):.2f} | {fit(xs, column(sel, 3)):.2f} |")


if __name__ == "__main__":
    table = {"growth": growth, "window": window}.get(sys.argv[1] if len(sys.argv) > 1 else "")
    if table is None:
        sys.exit("usage: scaling_tables.py growth|window < rows")
    table([line.split() for line in sys.stdin if line.strip()])
