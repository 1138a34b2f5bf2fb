#!/usr/bin/env bash
# The main job on the default configuration. Results go under results/ (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/.."
collsim=build/release/tools/collsim
mkdir -p results
"$collsim" topo show configs/dgx-h100.json
