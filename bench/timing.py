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


def best_seconds(fn, batch=200, batches=25, warmup=200):
    """Per-call time of the fastest of `batches` runs of `batch` back-to-back calls.

    For calls of a few microseconds the median of single timed calls moves with whatever else the VM does; the best
    batch is the repeatable figure (what the call costs when nothing interrupts it), as timeit's documentation advises.
    """
    for _ in range(warmup):
        fn()
    best = float("inf")
    for _ in range(batches):
        start = time.perf_counter()
        for _ in range(batch):
            fn()
        best = min(best, (time.perf_counter() - start) / batch)
    return best
