# shellcheck shell=bash disable=SC2154  # tmp is set by the caller
# Sourced by bench/run.sh and bench/scaling.sh: `cluster N` writes configs/cluster-1024.json
# scaled to N GPUs (same servers and rail-optimised fabric, N/8 servers in racks of 4) into
# $tmp and prints its path; `mixed N` does the same with
# tests/reliability/inputs/topology/mixed-256.json (half of the servers with 12 GB/s PCIe links,
# after the other half in ring order). The caller sets tmp to a directory it removes.
cluster() {
  python3 - "$1" "$tmp/cluster-$1.json" <<'PY'
import json, sys
n, out = int(sys.argv[1]), sys.argv[2]
d = json.load(open("configs/cluster-1024.json"))
d["name"] = f"cluster-{n}"
d["servers"][0]["count"] = n // 8
d["racks"][0]["count"] = max(1, n // 32)
json.dump(d, open(out, "w"))
PY
  echo "$tmp/cluster-$1.json"
}

mixed() {
  python3 - "$1" "$tmp/mixed-$1.json" <<'PY'
import json, sys
n, out = int(sys.argv[1]), sys.argv[2]
d = json.load(open("tests/reliability/inputs/topology/mixed-256.json"))
d["name"] = f"mixed-{n}"
for group in d["servers"]:
    group["count"] = n // 16
for group in d["racks"]:
    group["count"] = max(1, n // 64)
json.dump(d, open(out, "w"))
PY
  echo "$tmp/mixed-$1.json"
}
