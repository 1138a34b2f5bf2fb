#!/usr/bin/env bash
# How the cost of generate + simulate grows with p, k and message size: ring allreduce on the
# uniform ring machine of bench_engine, three or more points per parameter, and the exponent b of
# a least-squares fit CPU seconds ~ a * x^b (and the same for events and peak RSS), for the run
# streamed as the command line does it (generated while simulated) and for the whole plan.
#
#   bench/scaling.sh [build-dir]        (default: build/release)
set -euo pipefail
build=${1:-build/release}
bench=$build/bench/bench_engine
[[ -x $bench ]] || { echo "scaling.sh: $bench not found" >&2; exit 2; }

run() {  # label x args... -> "label x events cpu_s wall_s peak_mib"
  local label=$1 x=$2
  shift 2
  "$bench" --case "$label" --repeat 1 "$@" |
    awk -F'|' -v l="$label" -v x="$x" '{split($6, w, " "); split($7, c, " ");
      printf "%s %s %s %s %s %s\n", l, x, $4, c[1], w[1], $8}'
}

{
  for mode in streamed whole; do
    extra=()
    [[ $mode == whole ]] && extra=(--whole)
    for p in 64 128 256 512 1024; do
      run "p/$mode" "$p" --gpus "$p" --size 1GiB --chunks 8 "${extra[@]}"
    done
    for k in 2 8 32; do run "k/$mode" "$k" --gpus 128 --size 1GiB --chunks "$k" "${extra[@]}"; done
    for s in 1 32 1024; do
      run "size_MiB/$mode" "$s" --gpus 128 --size "${s}MiB" --chunks 8 "${extra[@]}"
    done
  done
} | python3 -c '
import math, sys
rows = [l.split() for l in sys.stdin if l.strip()]
print("| parameter | value | events | CPU s | wall s | peak RSS MiB |")
print("|---|---:|---:|---:|---:|---:|")
for r in rows:
    print(f"| {r[0]} | {r[1]} | {int(r[2]):,} | {float(r[3]):.3f} | {float(r[4]):.3f} | {float(r[5]):.0f} |")
print()
print("| parameter | exponent of events | exponent of CPU s | exponent of peak RSS |")
print("|---|---:|---:|---:|")
def fit(xs, ys):
    lx = [math.log(x) for x in xs]; ly = [math.log(max(y, 1e-9)) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / sum((a - mx) ** 2 for a in lx)
for name in dict.fromkeys(r[0] for r in rows):
    sel = [r for r in rows if r[0] == name]
    xs = [float(r[1]) for r in sel]
    print(f"| {name} | {fit(xs, [float(r[2]) for r in sel]):.2f} | "
          f"{fit(xs, [float(r[3]) for r in sel]):.2f} | {fit(xs, [float(r[5]) for r in sel]):.2f} |")
'
