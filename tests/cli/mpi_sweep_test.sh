#!/usr/bin/env bash
# The MPI mode of collsim sweep against the single-process run (registered by tests/CMakeLists.txt
# when MPI and mpirun were found):
#   mpi_sweep_test.sh MPIEXEC COLLSIM SOURCE_DIR
# The sweep includes points that fail (k larger than the element count); the CSV on stdout, the
# --out, --csv and --terms files, the error lines and the exit status must all be the same.
set -euo pipefail
mpiexec=$1
collsim=$(realpath "$2")
cd "$3"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Containers often forbid the cross-process memory reads (CMA) that Open MPI's shared-memory
# transport uses for large messages; copying through the shared segment works everywhere.
export OMPI_MCA_btl_vader_single_copy_mechanism=${OMPI_MCA_btl_vader_single_copy_mechanism:-none}
launch=("$mpiexec" --oversubscribe)
[ "$(id -u)" -ne 0 ] || launch+=(--allow-run-as-root)

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# 1 KiB of fp32 is 256 elements: k = 512 fails on every ring and tree point of that size.
sweep=(sweep --topology tests/cli/data/four-gpus-switch.json --algo ring,tree,auto
       --size 1KiB,64KiB,1MiB --chunks 1,512,4 --nranks 2,4 --format csv --no-wall)

# $1: a name; the rest: the command. Keeps stdout, stderr and the status under $tmp.
run() {
  local name=$1
  shift
  local status=0
  "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" </dev/null || status=$?
  echo "$status" >"$tmp/$name.status"
}

run one "$collsim" "${sweep[@]}" --jobs 1 --csv "$tmp/one.csv" --terms "$tmp/one.terms"
run two "${launch[@]}" -n 2 "$collsim" "${sweep[@]}" --csv "$tmp/two.csv" --terms "$tmp/two.terms"

[ "$(cat "$tmp/one.status")" = 2 ] || { cat "$tmp/one.err" >&2; fail "single process: status $(cat "$tmp/one.status"), expected 2"; }
[ "$(cat "$tmp/two.status")" = 2 ] || { cat "$tmp/two.err" >&2; fail "mpirun -n 2: status $(cat "$tmp/two.status"), expected 2"; }
cmp "$tmp/one.out" "$tmp/two.out" || fail "the CSV on stdout differs"
cmp "$tmp/one.csv" "$tmp/two.csv" || fail "the --csv file differs"
cmp "$tmp/one.terms" "$tmp/two.terms" || fail "the --terms file differs"
rows=$(wc -l <"$tmp/two.out")
# 3 algorithms x 2 rank counts x 3 sizes x 3 chunk counts, plus the header.
[ "$rows" = $((1 + 3 * 2 * 3 * 3)) ] || fail "$rows lines of CSV"
# The failed points are in the CSV, with their inputs and no numbers, and reported on stderr.
grep -q '^allreduce,ring,four-gpus-switch,2,1024,256,fp32,512,,,,,$' "$tmp/two.out" ||
  fail "the failed point ring k=512 is not in the CSV"
grep '^error: point' "$tmp/one.err" >"$tmp/one.errors"
grep '^error: point' "$tmp/two.err" >"$tmp/two.errors" || true
cmp "$tmp/one.errors" "$tmp/two.errors" || fail "the error lines differ"
grep -q 'element count' "$tmp/two.errors" || fail "no error names the element count"
grep -q '^error: sweep: 6 of 54 points failed' "$tmp/two.err" || fail "no summary of the failed points"

# More ranks than points: the ranks without a point still take part and end.
run few1 "$collsim" sweep --topology tests/cli/data/two-gpus.json --size 1KiB,4KiB --format csv \
  --no-wall
run few3 "${launch[@]}" -n 3 "$collsim" sweep --topology tests/cli/data/two-gpus.json \
  --size 1KiB,4KiB --format csv --no-wall
[ "$(cat "$tmp/few3.status")" = 0 ] || { cat "$tmp/few3.err" >&2; fail "mpirun -n 3: status $(cat "$tmp/few3.status")"; }
cmp "$tmp/few1.out" "$tmp/few3.out" || fail "the CSV of 2 points on 3 ranks differs"

# An input error on every rank ends the job with one message and status 2; nothing waits.
run bad "${launch[@]}" -n 2 "$collsim" sweep --topology tests/cli/data/missing.json --size 1KiB
[ "$(cat "$tmp/bad.status")" = 2 ] || { cat "$tmp/bad.err" >&2; fail "missing topology: status $(cat "$tmp/bad.status")"; }
[ "$(grep -c '^error:' "$tmp/bad.err")" = 1 ] || { cat "$tmp/bad.err" >&2; fail "the error is not said once"; }
[ ! -s "$tmp/bad.out" ] || fail "a failed start wrote to stdout"

# An input error on one rank only (rank 1 starts in another folder, where the relative path does
# not exist): rank 1 says why, rank 0 names it, the status is 2 and nothing waits.
small=(sweep --topology tests/cli/data/two-gpus.json --size 1KiB --format csv)
run one_bad "${launch[@]}" -n 1 "$collsim" "${small[@]}" : -n 1 --wdir "$tmp" "$collsim" "${small[@]}"
[ "$(cat "$tmp/one_bad.status")" = 2 ] || { cat "$tmp/one_bad.err" >&2; fail "rank 1 failing alone: status $(cat "$tmp/one_bad.status")"; }
grep -q '^rank 1: error: .*file not found' "$tmp/one_bad.err" || { cat "$tmp/one_bad.err" >&2; fail "rank 1 did not say why"; }
grep -q '^error: sweep: MPI rank 1 of 2 could not start' "$tmp/one_bad.err" || fail "rank 0 did not name rank 1"
[ ! -s "$tmp/one_bad.out" ] || fail "a failed start wrote to stdout"

# SIGINT to rank 1 alone, while it runs a point: that point stops, rank 1 asks for no more, and
# rank 0 runs the rest (docs/cli.md, Ctrl-C). Three points of 2.3 s each in a Release build
# (13 s under ASan), of which starting takes 0.01 s; the signal goes once rank 1 has used 1 s of
# CPU, which only a point takes. Rank 0 then runs up to two points, so they are kept short.
long=(sweep --topology configs/cluster-1024.json --algo ring --size 1MiB,2MiB,4MiB --chunks 3
      --format csv --no-wall)
"${launch[@]}" -n 2 "$collsim" "${long[@]}" >"$tmp/int.out" 2>"$tmp/int.err" </dev/null &
job=$!
rank1=""
for _ in $(seq 600); do
  for pid in $(pgrep -f "$collsim sweep" || true); do
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1' && rank1=$pid
  done
  if [ -n "$rank1" ] && [ -r "/proc/$rank1/stat" ]; then
    ticks=$(awk '{print $14}' "/proc/$rank1/stat")
    [ "$ticks" -lt "$(getconf CLK_TCK)" ] || break
  fi
  sleep 0.1
done
[ -n "$rank1" ] || fail "rank 1 of the interrupted sweep never started"
kill -INT "$rank1"
status=0
wait "$job" || status=$?
[ "$status" = 130 ] || { cat "$tmp/int.err" >&2; fail "SIGINT to rank 1: status $status, expected 130"; }
grep -q '^collsim: interrupted (Ctrl-C): 2 of 3 points finished, 0 failed, 1 stopped' "$tmp/int.err" ||
  { cat "$tmp/int.err" >&2; fail "SIGINT to rank 1: not 2 points finished and 1 stopped"; }
[ "$(grep -c ',ring,cluster-1024,1024,[0-9]*,[0-9]*,fp32,3,,,,,$' "$tmp/int.out")" = 1 ] ||
  { cat "$tmp/int.out" >&2; fail "SIGINT to rank 1: not exactly one row without numbers"; }

# The mpirun examples in docs/cli.md run, from a folder that sees configs/ and tests/.
mkdir "$tmp/docs"
ln -s "$PWD/configs" "$PWD/tests" "$tmp/docs/"
examples=0
while IFS= read -r line; do
  read -ra words <<<"${line#\$ mpirun }"
  command=("${launch[@]}")
  for w in "${words[@]}"; do
    case $w in
      --oversubscribe) ;;
      collsim) command+=("$collsim") ;;
      *) command+=("$w") ;;
    esac
  done
  (cd "$tmp/docs" && "${command[@]}" >/dev/null 2>"$tmp/docs.err") ||
    { cat "$tmp/docs.err" >&2; fail "docs/cli.md example failed: $line"; }
  examples=$((examples + 1))
done < <(grep '^\$ mpirun ' docs/cli.md)
[ "$examples" -gt 0 ] || fail "no mpirun example found in docs/cli.md"

echo "mpirun -n 2 and -n 3 sweeps match the single-process output; SIGINT to rank 1 left the rest to rank 0; $examples docs example(s) ran"
