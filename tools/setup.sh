#!/usr/bin/env bash
# Installs what is missing (Debian 12 packages only), builds the release preset, then:
#   tools/setup.sh run    runs the main job on the shipped configurations (tools/main-job.sh)
#   tools/setup.sh test   runs the whole test suite with ctest
#   tools/setup.sh build  stops after the build
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-build}
case "$mode" in run|test|build) ;; *) echo "usage: tools/setup.sh run|test|build" >&2; exit 2;; esac

packages=(cmake ninja-build g++ pkg-config libboost-graph-dev nlohmann-json3-dev libcli11-dev
          libspdlog-dev catch2 python3 python3-matplotlib libopenmpi-dev openmpi-bin)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

jobs=$(nproc)
cmake --preset release >/dev/null
cmake --build --preset release -j "$jobs"

case "$mode" in
  run) exec bash tools/main-job.sh ;;
  test) exec ctest --preset release -j "$jobs" ;;
  build) ;;
esac
