#!/usr/bin/env bash
# The device check of the CUDA backend: build with CUDA, run the backend tests (the GPU ones
# included), calibrate, validate; logs, calibration.json and the validation CSVs go to OUTDIR.
# Budget: 8 minutes on one H200 including the build (only collsim and test_backend are built).
#
#   tools/gpu-check.sh OUTDIR
#
# Environment:
#   JOBS=16                   parallel build jobs
#   COLLSIM_DEPS_DEBS=DIR     a folder of Debian packages (.deb) to unpack under /tmp/collsim-deps
#                             first, for machines without the build dependencies installed
#                             (libboost-graph-dev and libboost1.74-dev, nlohmann-json3-dev,
#                             libcli11-dev, libspdlog-dev, libspdlog1.10, libfmt-dev, libfmt9,
#                             catch2)
#   CALIBRATE_SIZES           default 4KiB:256MiB:x4
set -euo pipefail
out=${1:?usage: tools/gpu-check.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=${JOBS:-16}
build=$root/build/gpu-check
start=$(date +%s)
summary=$out/summary.txt
: >"$summary"
say() { echo "gpu-check: $*" | tee -a "$summary"; }
elapsed() { echo $(($(date +%s) - start)); }

say "started $(date -u +%Y-%m-%dT%H:%M:%SZ) in $root"
{ nvidia-smi || echo "nvidia-smi not available"; } >"$out/nvidia-smi.txt" 2>&1
say "device: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo unknown)"

prefix_args=()
if [ -n "${COLLSIM_DEPS_DEBS:-}" ]; then
  deps=/tmp/collsim-deps
  mkdir -p "$deps"
  for deb in "$COLLSIM_DEPS_DEBS"/*.deb; do dpkg -x "$deb" "$deps"; done
  prefix_args=(-DCMAKE_PREFIX_PATH="$deps/usr" -DCMAKE_CXX_FLAGS="-isystem $deps/usr/include")
  export LD_LIBRARY_PATH="$deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
  say "unpacked build dependencies from $COLLSIM_DEPS_DEBS into $deps"
fi

for tool in cmake ninja nvcc; do
  command -v "$tool" >/dev/null || [ -x /usr/local/cuda/bin/$tool ] || {
    say "FAILED: $tool not found"
    exit 1
  }
done

# Only the architecture of the local GPU is compiled, which halves the CUDA build time.
arch=native
nvidia-smi -L >/dev/null 2>&1 || arch="75;90"
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
say "configure (CUDA ON, architectures $arch)"
if ! cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCOLLSIM_CUDA=ON \
  "-DCMAKE_CUDA_ARCHITECTURES=$arch" -DCOLLSIM_BUILD_BENCH=OFF "${launcher[@]}" "${prefix_args[@]}" \
  >"$out/configure.log" 2>&1; then
  say "FAILED: configure (see configure.log; missing libraries? set COLLSIM_DEPS_DEBS)"
  tail -20 "$out/configure.log"
  exit 1
fi
say "build collsim and test_backend with -j$jobs"
if ! cmake --build "$build" -j "$jobs" --target collsim test_backend >"$out/build.log" 2>&1; then
  say "FAILED: build (see build.log)"
  grep -m 20 -E "error|Error" "$out/build.log" || tail -20 "$out/build.log"
  exit 1
fi
say "built in $(elapsed) s"

collsim=$build/tools/collsim
status=0
say "backend tests (host and GPU)"
if timeout 180 "$build/tests/test_backend" --durations yes >"$out/test-backend.log" 2>&1; then
  say "backend tests passed: $(tail -1 "$out/test-backend.log")"
else
  status=1
  say "FAILED: backend tests: $(tail -1 "$out/test-backend.log")"
fi

say "calibrate"
if timeout 150 "$collsim" calibrate --backend cuda --sizes "${CALIBRATE_SIZES:-4KiB:256MiB:x4}" \
  --reps 5 --warmup 2 --out "$out/calibration.json" >"$out/calibrate.log" 2>&1; then
  cat "$out/calibrate.log" >>"$summary"
else
  status=1
  say "FAILED: calibrate"
  tail -20 "$out/calibrate.log" | tee -a "$summary"
fi

# The shipped config names a model; the copy takes whatever this device calls itself, so that
# the calibration applies to its virtual ranks.
device_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)
topology=$out/topology.json
if [ -n "$device_name" ]; then
  sed -E "s/\"model\": \"[^\"]*\"/\"model\": \"$device_name\"/" configs/one-gpu-4ranks.json >"$topology"
else
  cp configs/one-gpu-4ranks.json "$topology"
fi

if [ -f "$out/calibration.json" ]; then
  say "validate (calibrated)"
  if timeout 150 "$collsim" validate --backend cuda --topology "$topology" \
    --calibration "$out/calibration.json" --out "$out/validation.csv" \
    --nccl-csv "$out/nccl.csv" >"$out/validate.log" 2>&1; then
    cat "$out/validate.log" >>"$summary"
  else
    status=1
    say "FAILED: validate (calibrated)"
    tail -30 "$out/validate.log" | tee -a "$summary"
  fi
fi
say "validate (topology parameters only, no calibration)"
if timeout 100 "$collsim" validate --backend cuda --topology "$topology" \
  --out "$out/validation-uncalibrated.csv" >"$out/validate-uncalibrated.log" 2>&1; then
  tail -2 "$out/validate-uncalibrated.log" >>"$summary"
else
  status=1
  say "FAILED: validate (uncalibrated)"
  tail -30 "$out/validate-uncalibrated.log" | tee -a "$summary"
fi
say "finished in $(elapsed) s with status $status"
exit $status
