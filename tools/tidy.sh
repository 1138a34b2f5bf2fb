#!/usr/bin/env bash
# clang-tidy over every project .cpp file (topology/ sim/ schedules/ cuda_backend/ tools/) with
# the repository's .clang-tidy, in parallel. Exits non-zero on any finding and says how long it
# took. Tests, benchmarks and fuzz targets are not checked; .cu files are not in
# compile_commands.json and are skipped.
#
#   tools/tidy.sh [build-dir]     default build/rel; configured (Release, no CUDA) if it has no
#                                 compile_commands.json yet
#
# CLANG_TIDY selects the binary (default clang-tidy-14, else clang-tidy); JOBS the parallelism
# (default nproc).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-build/rel}"
case "$build" in /*) ;; *) build="$root/$build" ;; esac
tidy="${CLANG_TIDY:-$(command -v clang-tidy-14 || command -v clang-tidy || true)}"
jobs="${JOBS:-$(nproc)}"
if [ -z "$tidy" ]; then
  echo "tidy: clang-tidy not found; install clang-tidy-14 or set CLANG_TIDY" >&2
  exit 2
fi

start=$(date +%s)
if [ ! -f "$build/compile_commands.json" ]; then
  echo "tidy: configuring $build"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCOLLSIM_CUDA=OFF \
    -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >/dev/null
fi

# The project's translation units, as the build compiles them.
mapfile -t files < <(python3 - "$build/compile_commands.json" "$root" <<'EOF'
import json, os, sys
root = os.path.realpath(sys.argv[2])
dirs = ("topology", "sim", "schedules", "cuda_backend", "tools")
seen = set()
for entry in json.load(open(sys.argv[1])):
    path = os.path.realpath(os.path.join(entry["directory"], entry["file"]))
    rel = os.path.relpath(path, root)
    if rel.split(os.sep)[0] in dirs and rel.endswith(".cpp") and rel not in seen:
        seen.add(rel)
        print(path)
EOF
)
if [ "${#files[@]}" -eq 0 ]; then
  echo "tidy: no project files in $build/compile_commands.json" >&2
  exit 2
fi

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
# GCC's warning flags that clang does not know are not findings.
status=0
printf '%s\n' "${files[@]}" |
  xargs -P "$jobs" -n 1 "$tidy" -p "$build" --quiet --warnings-as-errors='*' \
    --extra-arg=-Wno-unknown-warning-option >"$log" 2>&1 || status=$?

# A finding in a header is reported by every file that includes it: count each once.
findings=$({ grep -E '^[^ ].*:[0-9]+:[0-9]+: (warning|error):' "$log" || true; } | sort -u | wc -l)
elapsed=$(($(date +%s) - start))
if [ "$status" -ne 0 ] || [ "$findings" -ne 0 ]; then
  grep -vE '^[0-9]+ warnings? (and [0-9]+ errors? )?generated\.$' "$log" || true
  echo "tidy: $findings finding(s) in ${#files[@]} files, ${elapsed}s with $jobs jobs" >&2
  exit 1
fi
echo "tidy: clean, ${#files[@]} files, ${elapsed}s with $jobs jobs"
