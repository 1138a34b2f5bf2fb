#!/usr/bin/env bash
# The main job (docs/cli.md, "The main job"): naive against pipelined ring allreduce of
# ConvNeXt-Tiny's gradients on a 4xT4 PCIe box, then ring, tree and hierarchical allreduce of the
# same buffer on a 1024-GPU cluster. Prints the tables; CSV and PNGs go under results/.
#
#   COLLSIM=path/to/collsim   the binary (default: build/release/tools/collsim)
#   CLUSTER_CHUNKS=1,2,4,8,16 the chunk counts tried on the cluster (ring on 1024 GPUs costs
#                             about 0.6 s of CPU per unit of k; the job takes about 35 s on two
#                             cores with the default, 10 s with 1,2,4)
#   JOBS=N                    sweep threads (default: every core)
set -uo pipefail
cd "$(dirname "$0")/.."
collsim=${COLLSIM:-build/release/tools/collsim}
python=/usr/bin/python3
jobs=${JOBS:-$(nproc)}
cluster_chunks=${CLUSTER_CHUNKS:-1,2,4,8,16}
out=results
# ConvNeXt-Tiny has 28,589,128 parameters; their fp32 gradients take 4 bytes each.
size=114356512

if [ ! -x "$collsim" ]; then
  echo "main-job: $collsim is not built; run 'bash tools/setup.sh build' first" >&2
  exit 2
fi
mkdir -p "$out"
status=0
start=$(date +%s.%N)

# Runs one sweep, printing its table and writing its CSV and model terms; a failed point is
# reported by collsim and remembered here, and the job goes on.
sweep() {
  local name=$1
  shift
  "$collsim" sweep "$@" --dtype fp32 --jobs "$jobs" \
    --csv "$out/$name.csv" --terms "$out/$name.terms.csv"
  local rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "main-job: the $name sweep exited with status $rc (see above); going on" >&2
    [ "$rc" -gt "$status" ] && status=$rc
  fi
  echo
}

# Joins CSV files that share a header into one.
join_csv() {
  local target=$1
  shift
  for f in "$@"; do [ -f "$f" ] || return 0; done
  head -n 1 "$1" >"$target"
  for f in "$@"; do tail -n +2 "$f" >>"$target"; done
  rm -f "$@"
}

echo "== 1. 4 x T4 over PCIe, p = 4: naive (k = 1) against pipelined ring, ConvNeXt-Tiny gradients"
echo
t4=(--topology configs/t4x4-pcie.json --ranks 0-3)
sweep t4x4-naive "${t4[@]}" --size "$size" --algo naive --chunks 1
sweep t4x4-ring "${t4[@]}" --size "$size" --algo ring --chunks 1,2,4,8,16
# The same comparison over sizes, for the bandwidth-against-size plot; tables left out.
echo "(the same box from 64 KiB to 1 GiB, for the plots: $out/t4x4.csv)"
sweep t4x4-naive-sizes "${t4[@]}" --size 64KiB:1GiB:x4 --algo naive --chunks 1 \
  --format csv --out /dev/null
sweep t4x4-ring-sizes "${t4[@]}" --size 64KiB:1GiB:x4 --algo ring --chunks 1,2,4,8,16 \
  --format csv --out /dev/null
join_csv "$out/t4x4.csv" "$out"/t4x4-{naive,ring,naive-sizes,ring-sizes}.csv
join_csv "$out/t4x4.terms.csv" "$out"/t4x4-{naive,ring,naive-sizes,ring-sizes}.terms.csv

echo "== 2. 1024 GPUs (128 servers of 8): ring, tree and hierarchical, same buffer"
echo
sweep cluster-1024 --topology configs/cluster-1024.json --size "$size" --algo ring,tree,hier \
  --chunks "$cluster_chunks"

echo "== Summary (ConvNeXt-Tiny gradients, $size bytes)"
"$python" - "$out/t4x4.csv" "$out/cluster-1024.csv" "$size" <<'PY' || status=3
import csv, os, sys
size = sys.argv[3]
def points(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return [r for r in csv.DictReader(f) if r["time_us"] and r["size_bytes"] == size]
t4 = points(sys.argv[1])
naive = [r for r in t4 if r["algo"] == "naive"]
ring = sorted((r for r in t4 if r["algo"] == "ring"), key=lambda r: float(r["time_us"]))
if naive and ring:
    n, b = float(naive[0]["time_us"]), ring[0]
    print(f"4xT4: naive {n / 1e3:.2f} ms; pipelined ring is fastest at k = {b['chunks']}: "
          f"{float(b['time_us']) / 1e3:.2f} ms, {n / float(b['time_us']):.2f}x faster")
cluster = sorted(points(sys.argv[2]), key=lambda r: float(r["time_us"]))
if cluster:
    b = cluster[0]
    line = ", ".join(f"{r['algo']} k={r['chunks']} {float(r['time_us']) / 1e3:.2f} ms"
                     for r in cluster)
    print(f"1024 GPUs: fastest {b['algo']} with k = {b['chunks']} ({line})")
PY
echo

echo "== Plots"
for name in t4x4 cluster-1024; do
  if [ -s "$out/$name.csv" ]; then
    "$python" tools/plot.py "$out/$name.csv" --prefix "${name}_" || status=3
  fi
done

end=$(date +%s.%N)
echo
echo "main-job: results in $out/ ($(ls "$out" | tr '\n' ' ')); $(awk "BEGIN{printf \"%.1f\", $end - $start}") s"
if [ "$status" -ne 0 ]; then
  echo "main-job: some points failed (listed above); the other results are complete" >&2
fi
exit "$status"
