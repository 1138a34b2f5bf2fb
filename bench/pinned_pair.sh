#!/usr/bin/env bash
# Compares two bench_engine binaries on one case, robust to the two CPUs of a shared machine
# running at different speeds (docs/performance-history.md, change 73): each pair runs at once,
# one binary pinned to each CPU, then again with the CPUs swapped, and the ratio is that of the
# four wall times summed (below 1: the first binary is faster).
#
#   bench/pinned_pair.sh NEW OLD PAIRS -- BENCH_ENGINE_ARGS...
#
# Example, the tree on the shipped 1024-GPU cluster (larger ones: bench/cluster.sh):
#   bench/pinned_pair.sh ./new/bench_engine build/release/bench/bench_engine 3 -- \
#     --topology configs/cluster-1024.json --algorithm tree --size 1GiB --chunks 8 --repeat 1
set -euo pipefail
if (($# < 4)) || [[ $4 != -- ]]; then
  sed -n '2,11p' "$0" >&2
  exit 2
fi
new=$1 old=$2 pairs=$3
shift 4
for b in "$new" "$old"; do
  if [[ ! -x $b ]]; then
    echo "pinned_pair.sh: $b is not an executable bench_engine" >&2
    exit 2
  fi
done
if (($(nproc) < 2)); then
  echo "pinned_pair.sh: needs two CPUs" >&2
  exit 2
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The wall seconds of one run: the fifth column of bench_engine's --case row, before its split.
wall() {
  taskset -c "$1" "$2" --case x "${@:3}" | awk -F'|' '{ split($6, w, " "); print w[1] }'
}
for ((i = 1; i <= pairs; ++i)); do
  wall 0 "$new" "$@" >"$tmp/a" &
  wall 1 "$old" "$@" >"$tmp/b"
  wait
  wall 1 "$new" "$@" >"$tmp/c" &
  wall 0 "$old" "$@" >"$tmp/d"
  wait
  a=$(<"$tmp/a") b=$(<"$tmp/b") c=$(<"$tmp/c") d=$(<"$tmp/d")
  if [[ -z $a || -z $b || -z $c || -z $d ]]; then
    echo "pinned_pair.sh: a run printed no time (its error is above)" >&2
    exit 1
  fi
  awk -v a="$a" -v b="$b" -v c="$c" -v d="$d" -v i="$i" 'BEGIN {
    printf "pair %d: new %s s (CPU 0) and %s s (CPU 1), old %s s (CPU 1) and %s s (CPU 0): ratio %.3f\n",
      i, a, c, b, d, (a + c) / (b + d) }'
done
