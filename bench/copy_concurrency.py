#!/usr/bin/env python3
"""How many device-to-device copies on one GPU overlap when issued on separate streams.

collsim validate runs every transfer between virtual ranks as cudaMemcpyAsync on one device. The
model overlaps transfers that the plan overlaps; this measures whether the device does. For s
streams, each holding `per` copies (optionally each behind a short spin kernel, as the executor's
synthetic link wait), all streams are held at a gate until everything is enqueued, then timed
from the gate's end to the last stream's end. Needs CuPy and a GPU:

    python3 bench/copy_concurrency.py
"""
import statistics

import cupy as cp

SPIN = cp.RawKernel(
    r"""
extern "C" __global__ void spin(long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {}
}""",
    "spin",
)
CLOCK_HZ = cp.cuda.runtime.deviceGetAttribute(cp.cuda.runtime.cudaDevAttrClockRate, 0) * 1e3


def spin(seconds, stream):
    with stream:
        SPIN((1,), (1,), (cp.int64(int(seconds * CLOCK_HZ)),))


def timed(streams_n, per, nbytes, wait_s):
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(streams_n)]
    src = [cp.ones(nbytes, dtype=cp.uint8) for _ in range(streams_n)]
    dst = [cp.empty(nbytes, dtype=cp.uint8) for _ in range(streams_n)]
    gate = cp.cuda.Stream(non_blocking=True)
    cp.cuda.Device().synchronize()
    spin(0.02, gate)  # holds every stream until all work is enqueued
    start = cp.cuda.Event()
    start.record(gate)
    for s in streams:
        s.wait_event(start)
    for _ in range(per):
        for i, s in enumerate(streams):
            if wait_s > 0:
                spin(wait_s, s)
            cp.cuda.runtime.memcpyAsync(dst[i].data.ptr, src[i].data.ptr, nbytes,
                                        cp.cuda.runtime.memcpyDeviceToDevice, s.ptr)
    ends = []
    for s in streams:
        e = cp.cuda.Event()
        e.record(s)
        ends.append(e)
    cp.cuda.Device().synchronize()
    return max(cp.cuda.get_elapsed_time(start, e) for e in ends) * 1e-3


def main():
    props = cp.cuda.runtime.getDeviceProperties(0)
    name = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
    print(f"device {name}, asyncEngineCount {props.get('asyncEngineCount', '?')}, "
          f"clock {CLOCK_HZ / 1e9:.2f} GHz")
    print(f"{'bytes':>8} {'wait_us':>7} {'streams':>7} {'copies':>6} {'total_us':>9} "
          f"{'us/copy':>8} {'overlap':>7}")
    per = 16
    for nbytes in (65536, 1 << 20):
        for wait_s in (0.0, 4e-6):
            base = None
            for streams_n in (1, 2, 4, 8, 12, 24):
                t = statistics.median(timed(streams_n, per, nbytes, wait_s) for _ in range(5))
                copies = streams_n * per
                base = base or t
                # overlap: streams_n when the streams run fully in parallel, 1 when serialised
                print(f"{nbytes:>8} {wait_s * 1e6:>7.1f} {streams_n:>7} {copies:>6} "
                      f"{t * 1e6:>9.1f} {t * 1e6 / copies:>8.2f} {streams_n * base / t:>7.2f}")


if __name__ == "__main__":
    main()
