#!/usr/bin/env bash
# How the cost of generate + simulate grows with p, k and message size, with the exponent b of a
# least-squares fit y ~ a * x^b for events, CPU seconds and peak RSS, over all points of a
# parameter and between each pair of neighbouring points (growth that is not one power law,
# such as caches running out, shows there).
#
#   bench/scaling.sh [build-dir]              (default: build/release)
#   REPEAT=N bench/scaling.sh [build-dir]     runs per point, the median reported (3)
#   CLUSTER=1 bench/scaling.sh [build-dir]    also the cluster series: ECMP ring allreduce of
#                                             1 GiB at k = 1 on 1024-8192 GPUs, and tree at
#                                             k = 8 on 1024-16,384 GPUs (about 8 minutes)
#   CLUSTER=1 BIG=1 bench/scaling.sh          and the tree on 131,072 GPUs (about 3 GiB, 5 more
#                                             minutes)
#   WINDOW=1 bench/scaling.sh [build-dir]     also the streamed ring's window: ops held at most
#                                             and peak RSS of the ECMP ring allreduce of 1 GiB at
#                                             k = 1 on the cluster (512-4096 GPUs) and on the
#                                             mixed cluster (256-2048 GPUs), one run per point,
#                                             with fitted exponents (about 2 minutes)
#
# The uniform series run ring allreduce on bench_engine's uniform ring machine: p at 1 GiB and
# k = 8, k at 128 GPUs and 1 GiB, size at 128 GPUs and k = 8; each streamed, as the command line
# runs it, and with the whole plan (--whole).
set -euo pipefail
build=${1:-build/release}
bench=$build/bench/bench_engine
[[ -x $bench ]] || { echo "scaling.sh: $bench not found" >&2; exit 2; }
repeat=${REPEAT:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# shellcheck source=bench/cluster.sh
source "$(dirname "$0")/cluster.sh"

run() {  # label x args... -> "label x events cpu_s wall_s peak_mib"
  local label=$1 x=$2
  shift 2
  "$bench" --case "$label" --repeat "$repeat" "$@" |
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
  if [[ ${CLUSTER:-0} == 1 ]]; then
    for p in 1024 2048 4096 8192; do
      run "p/cluster-ring-k1" "$p" --topology "$(cluster "$p")" --size 1GiB --chunks 1
    done
    trees=(1024 4096 16384)
    [[ ${BIG:-0} == 1 ]] && trees+=(131072)
    for p in "${trees[@]}"; do
      run "p/cluster-tree-k8" "$p" --topology "$(cluster "$p")" --algorithm tree --size 1GiB \
        --chunks 8
    done
  fi
} | python3 "$(dirname "$0")/scaling_tables.py" growth

if [[ ${WINDOW:-0} == 1 ]]; then
  window() {  # fabric p topology -> "fabric p ops_held peak_mib"
    local out
    out=$("$bench" --case window --repeat 1 --stats --topology "$3" --size 1GiB --chunks 1 2>&1)
    printf '%s %s %s %s\n' "$1" "$2" "$(grep -o '[0-9]* ops held at most' <<<"$out" | cut -d' ' -f1)" \
      "$(awk -F'|' '$2 == " window " {print $8}' <<<"$out")"
  }
  {
    for p in 512 1024 2048 4096; do window cluster "$p" "$(cluster "$p")"; done
    for p in 256 512 1024 2048; do window mixed "$p" "$(mixed "$p")"; done
  } | python3 "$(dirname "$0")/scaling_tables.py" window
fi
