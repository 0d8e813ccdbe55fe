"""Shared timing helper: the median of repeated calls, after a warm-up."""
import statistics
import time


def median_seconds(fn, repeat=None, min_time=0.3, warmup=2):
    for _ in range(warmup):
        fn()
    if repeat is None:
        start = time.perf_counter()
        fn()
        one = max(time.perf_counter() - start, 1e-7)
        repeat = max(5, min(2000, int(min_time / one)))
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)
