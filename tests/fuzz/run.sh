#!/usr/bin/env bash
# Runs every fuzz target for a bounded time with its seed corpus (tests/fuzz/corpus/<name>, plus
# configs/ and tests/reliability/inputs/ for the loaders). Exit status is non-zero on any
# finding; the crashing input is kept under build/fuzz/findings/ to become a regression test.
#   tests/fuzz/run.sh [seconds per target, default 60]
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-60}
bin=build/fuzz/tests/fuzz
findings=build/fuzz/findings
mkdir -p "$findings"
status=0
for target in "$bin"/fuzz_*; do
  [ -x "$target" ] || continue
  name=$(basename "$target")
  area=${name#fuzz_}
  work=$(mktemp -d)
  seeds=()
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
  echo "fuzz: $name for ${seconds}s"
  if ! "$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
      -artifact_prefix="$findings/$name-" "$work" "${seeds[@]}" >"$findings/$name.log" 2>&1; then
    echo "fuzz: $name found a problem; see $findings/$name.log" >&2
    tail -n 30 "$findings/$name.log" >&2
    status=1
  else
    grep -E '^Done|^#[0-9]+.*DONE' "$findings/$name.log" | tail -n 1 || true
  fi
  rm -rf "$work"
done
exit $status
