#!/usr/bin/env bash
# The device check of the CUDA backend: build with CUDA, run the backend tests (the GPU ones
# included), calibrate, validate (naive and ring as recorded before, then every algorithm, other
# collectives, bf16, and staging through pageable and pinned host memory);
# logs, calibration.json and the validation CSVs go to OUTDIR.
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
#   COLLSIM_PREBUILT=DIR      use the build folder DIR (configured with -DCOLLSIM_CUDA=ON for this
#                             GPU's architecture) instead of building; its collsim and test_backend
#                             must exist. The folder keeps the source path it was configured with,
#                             which the backend tests read (configs/, the collsim binary)
#   CALIBRATE_SIZES           default 4KiB:256MiB:x4
#   ALGOS_SIZES               sizes of the every-algorithm validation on the mesh, default
#                             1MiB,4MiB,16MiB,114356512
set -euo pipefail
out=${1:?usage: tools/gpu-check.sh OUTDIR}
mkdir -p "$out"
out=$(cd "$out" && pwd)
cd "$(dirname "$0")/.."
root=$(pwd)
jobs=${JOBS:-16}
build=${COLLSIM_PREBUILT:-$root/build/gpu-check}
start=$(date +%s)
summary=$out/summary.txt
: >"$summary"
elapsed() { echo $(($(date +%s) - start)); }
say() { echo "gpu-check [$(elapsed) s]: $*" | tee -a "$summary"; }
# The CUDA executor asks for 32 hardware queues itself (CUDA_DEVICE_MAX_CONNECTIONS, unless set).

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

if [ -n "${COLLSIM_PREBUILT:-}" ]; then
  for binary in tools/collsim tests/test_backend; do
    [ -x "$build/$binary" ] || {
      say "FAILED: COLLSIM_PREBUILT=$build has no $binary"
      exit 1
    }
  done
  say "using the prebuilt folder $build (no build)"
else
  for tool in cmake ninja nvcc; do
    command -v "$tool" >/dev/null || [ -x /usr/local/cuda/bin/$tool ] || {
      say "FAILED: $tool not found"
      exit 1
    }
  done

  # Only the architecture of the local GPU is compiled, which halves the CUDA build time. Warnings
  # stay warnings: the device's compiler may be newer than the one CI holds the code to.
  arch=native
  nvidia-smi -L >/dev/null 2>&1 || arch="75;90"
  launcher=()
  if command -v ccache >/dev/null; then
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  fi
  say "configure (CUDA ON, architectures $arch)"
  if ! cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCOLLSIM_CUDA=ON \
    "-DCMAKE_CUDA_ARCHITECTURES=$arch" -DCOLLSIM_BUILD_BENCH=OFF -DCOLLSIM_WERROR=OFF \
    "${launcher[@]}" "${prefix_args[@]}" \
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
fi

collsim=$build/tools/collsim
status=0
say "backend tests (host and GPU)"
if timeout 180 "$build/tests/test_backend" --durations yes >"$out/test-backend.log" 2>&1; then
  say "backend tests passed: $(grep -E "^(All tests|test cases)" "$out/test-backend.log" | tail -1)"
else
  status=1
  say "FAILED: backend tests: $(grep -E "^(All tests|test cases)" "$out/test-backend.log" | tail -1)"
  grep -B5 -A15 -m 5 "FAILED" "$out/test-backend.log" | head -80 | tee -a "$summary"
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

# The shipped configs name a model; the copies take whatever this device calls itself, so that
# the calibration applies to their virtual ranks.
device_name=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)
for config in one-gpu-4ranks one-gpu-4ranks-mesh one-gpu-4ranks-staged; do
  if [ -n "$device_name" ]; then
    sed -E "s/\"model\": \"[^\"]*\"/\"model\": \"$device_name\"/" configs/$config.json >"$out/$config.json"
  else
    cp configs/$config.json "$out/$config.json"
  fi
done
topology=$out/one-gpu-4ranks.json

# validate_step LABEL NAME SECONDS ARGS...: `collsim validate --backend cuda ARGS`, its log in
# validate-NAME.log and its rows in validation-NAME.csv (no suffix for an empty NAME), the log
# added to the summary.
validate_step() {
  local label=$1 suffix=${2:+-$2} limit=$3
  shift 3
  say "validate $label"
  if timeout "$limit" "$collsim" validate --backend cuda "$@" \
    --out "$out/validation$suffix.csv" >"$out/validate$suffix.log" 2>&1; then
    grep -v "^note: no NCCL" "$out/validate$suffix.log" >>"$summary"
  else
    status=1
    say "FAILED: validate $label"
    tail -30 "$out/validate$suffix.log" | tee -a "$summary"
  fi
}

if [ -s "$out/calibration.json" ]; then
  calibrated=(--calibration "$out/calibration.json")
  mesh=(--topology "$out/one-gpu-4ranks-mesh.json")
  validate_step "(calibrated)" "" 150 --topology "$topology" "${calibrated[@]}" \
    --nccl-csv "$out/nccl.csv"
  # Every algorithm, on the fabric the emulation gives (a link per pair of ranks), then on the
  # switch of one-gpu-4ranks.json, where transfers to several peers at once share a rank's link
  # in the model but not on the device.
  validate_step "every algorithm on the mesh (calibrated)" algos-mesh 240 "${mesh[@]}" \
    --algos all --sizes "${ALGOS_SIZES:-1MiB,4MiB,16MiB,114356512}" --chunks 1,2,4,8,16 \
    "${calibrated[@]}"
  validate_step "every algorithm on the switch (calibrated)" algos-switch 240 \
    --topology "$topology" --algos all --sizes 4MiB,114356512 --chunks 1,4 "${calibrated[@]}"
  # Half precision: the calibration's reduce_bf16 fit sets what a bf16 reduction costs.
  validate_step "bf16 ring and naive on the mesh (calibrated)" bf16-mesh 120 "${mesh[@]}" \
    --dtype bf16 "${calibrated[@]}"
  # Other collectives, every algorithm that implements them.
  for collective in reduce_scatter allgather broadcast; do
    validate_step "$collective, every algorithm, on the mesh (calibrated)" "$collective-mesh" 120 \
      "${mesh[@]}" --collective "$collective" --algos all --sizes 4MiB,114356512 --chunks 1,4 \
      "${calibrated[@]}"
  done
  # Staging through pageable host memory, which the calibration's pageable fits set, against
  # the same staging through pinned memory.
  for memory in pageable pinned; do
    validate_step "ring and naive staged through $memory host memory (calibrated)" \
      "staged-$memory" 60 --topology "$out/one-gpu-4ranks-staged.json" --host-memory "$memory" \
      --sizes 1MiB,16MiB,114356512 --chunks 1,4 "${calibrated[@]}"
  done
fi
validate_step "(topology parameters only, no calibration)" uncalibrated 100 --topology "$topology"
say "finished in $(elapsed) s with status $status"
exit $status
