"""What a Python call adds over the C++ call: tessera.Runtime.gemm on a 64^3 (and 16^3) GEMM with `out=`, one thread,
against Runtime::gemm timed in C++ on the same arrays (medians of 7 repeats of 2,000 calls each, interleaved).

    PYTHONPATH=build/python /usr/bin/python3 bench/python_overhead.py
"""
import statistics
import time

import numpy as np

import tessera

rt = tessera.Runtime(threads=1)
for n in (16, 64):
    a = np.ones((n, n), dtype=np.float32)
    b = np.ones((n, n), dtype=np.float32)
    out = np.empty((n, n), dtype=np.float32)
    calls, cpp, py = 2000, [], []
    for _ in range(7):
        cpp.append(rt._time_gemm(a, b, out, calls))
        start = time.perf_counter()
        for _ in range(calls):
            rt.gemm(a, b, out=out, threads=1)
        py.append((time.perf_counter() - start) / calls)
    c, p = statistics.median(cpp) * 1e6, statistics.median(py) * 1e6
    print(f"{n}^3: C++ Runtime::gemm {c:.2f} us, Python Runtime.gemm {p:.2f} us, Python adds {p - c:.2f} us")
