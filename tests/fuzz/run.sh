#!/usr/bin/env bash
# Runs every fuzz target for a bounded time with its seed corpus (tests/fuzz/corpus/<name>, plus
# configs/ and tests/reliability/inputs/ for the loaders), as many at once as there are cores
# (each target fuzzes on one). Exit status is non-zero on any finding; the crashing input is kept
# under build/fuzz/findings/ to become a regression test.
#   tests/fuzz/run.sh [seconds per target, default 60]
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-60}
jobs=${COLLSIM_FUZZ_JOBS:-$(nproc)}
bin=build/fuzz/tests/fuzz
findings=build/fuzz/findings
mkdir -p "$findings"

# One target; prints its summary when it ends, so that targets running at once do not mix lines.
fuzz_one() {
  local target=$1 name area work
  name=$(basename "$target")
  area=${name#fuzz_}
  work=$(mktemp -d)
  local seeds=()
  [ -d "tests/fuzz/corpus/$area" ] && seeds+=("tests/fuzz/corpus/$area")
  # Shipped files and the reliability catalogue's hostile inputs seed the loaders.
  case "$area" in
    topology) seeds+=(configs tests/reliability/inputs/topology) ;;
    calibration) seeds+=(tests/reliability/inputs/calibration) ;;
    plan) [ -d tests/reliability/inputs/plan ] && seeds+=(tests/reliability/inputs/plan) ;;
    simulate) seeds+=(tests/fuzz/corpus/plan tests/reliability/inputs/plan) ;;
    msccl)
      seeds+=(configs/msccl)
      [ -d tests/reliability/inputs/msccl ] && seeds+=(tests/reliability/inputs/msccl)
      ;;
  esac
  local status=0
  "$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -artifact_prefix="$findings/$name-" "$work" "${seeds[@]}" >"$findings/$name.log" 2>&1 || status=1
  rm -rf "$work"
  if ((status)); then
    { echo "fuzz: $name for ${seconds}s found a problem; see $findings/$name.log"
      tail -n 30 "$findings/$name.log"; } >&2
    return 1
  fi
  echo "fuzz: $name for ${seconds}s: $(grep -E '^Done|^#[0-9]+.*DONE' "$findings/$name.log" | tail -n 1)"
}

status=0
running=0
for target in "$bin"/fuzz_*; do
  [ -x "$target" ] || continue
  if ((running >= jobs)); then
    wait -n || status=1
    running=$((running - 1))
  fi
  fuzz_one "$target" &
  running=$((running + 1))
done
while ((running > 0)); do
  wait -n || status=1
  running=$((running - 1))
done
exit $status
