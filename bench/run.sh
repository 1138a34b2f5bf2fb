#!/usr/bin/env bash
# Engine benchmark table for docs/performance.md: ring allreduce of 1 GiB, k = 8, on 8, 64 and
# 1024 GPUs, one process per configuration so that peak RSS is that configuration's own.
#
#   bench/run.sh [build-dir]     (default: build/release)
set -euo pipefail
build=${1:-build/release}
bench=$build/bench/bench_engine
if [[ ! -x $bench ]]; then
  echo "run.sh: $bench not found; build it with: cmake --build $build --target bench_engine" >&2
  exit 2
fi
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(uname -m) $(nproc) cores, $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
"$bench" --gpus 8 --size 1GiB --chunks 8 --repeat 5 --header
"$bench" --gpus 64 --size 1GiB --chunks 8 --repeat 5
"$bench" --gpus 1024 --size 1GiB --chunks 8 --repeat ${REPEAT_1024:-3}
# The same collective on the shipped 1024-GPU cluster: multi-hop routes through NVSwitches, NICs
# and network switches, links of several speeds (no closed form here).
"$bench" --topology configs/cluster-1024.json --size 1GiB --chunks 8 --repeat ${REPEAT_1024:-3}
