#!/usr/bin/env python3
"""One row of bench/run.sh's targets table: a `collsim sweep` on one thread and on N.

    sweep_speedup.py COLLSIM CASE THREADS SWEEP-ARGS...

Runs the sweep with --jobs 1 and --jobs THREADS (--format csv), checks that both CSVs agree but
for the wall_s column, and prints the row: points, events summed over them, events per CPU
second, wall seconds (with the single-thread time and the speed-up), CPU seconds and peak RSS of
the THREADS run, and whether the speed-up is close to the thread count (at least 0.8 of it).
Exit status 1 when the CSVs differ or a run fails.
"""
import csv
import io
import resource
import subprocess
import sys
import time

CLOSE = 0.8  # "close to the core count": at least this fraction of it


def run(command):
    """Runs `command`; returns stdout, wall s, CPU s and the peak RSS in MiB of that child."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        sys.exit(f"sweep_speedup.py: {' '.join(command)} exited with status {done.returncode}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    # ru_maxrss of RUSAGE_CHILDREN is the largest child so far: the single-thread run comes
    # first, and the parallel run holds at least as much.
    return done.stdout, wall, cpu, after.ru_maxrss / 1024


def without_wall(text):
    rows = list(csv.reader(io.StringIO(text)))
    wall = rows[0].index("wall_s")
    return [row[:wall] + row[wall + 1:] for row in rows], rows


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    collsim, case, threads, args = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
    command = [collsim, "sweep", *args, "--format", "csv"]
    one, one_wall, _, _ = run(command + ["--jobs", "1"])
    many, wall, cpu, peak = run(command + ["--jobs", str(threads)])
    one_rows, _ = without_wall(one)
    many_rows, rows = without_wall(many)
    if one_rows != many_rows:
        sys.exit(f"sweep_speedup.py: {case}: the CSV of --jobs {threads} differs from --jobs 1")
    events = sum(int(row[rows[0].index("events")] or 0) for row in rows[1:])
    speedup = one_wall / wall
    goal = f"speed-up ≥ {CLOSE * threads:g} ({CLOSE:g} × {threads} threads)"
    met = "**yes**" if speedup >= CLOSE * threads else f"no (speed-up {speedup:.2f})"
    print(f"| {case}, {threads} threads | {len(rows) - 1} | {events:,} | {events / cpu:.3g} | "
          f"{wall:.2f} (1 thread: {one_wall:.2f}; speed-up {speedup:.2f}) | {cpu:.2f} | "
          f"{peak:.0f} | {goal} | {met} |")


if __name__ == "__main__":
    main()
