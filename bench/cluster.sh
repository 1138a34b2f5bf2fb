# Sourced by bench/run.sh and bench/scaling.sh: `cluster N` writes configs/cluster-1024.json
# scaled to N GPUs (same servers and rail-optimised fabric, N/8 servers in racks of 4) into
# $tmp and prints its path. The caller sets tmp to a directory it removes.
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
